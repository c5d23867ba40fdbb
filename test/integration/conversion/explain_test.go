package conversion_test

import (
	"os"
	"os/exec"
	"path/filepath"
	"strings"

	"github.com/onsi/ginkgo/v2"
	"github.com/onsi/gomega"

	tsapi "github.com/kueue-timeshare/kueue-timeshare/apis/kueue/v1beta2"
	"github.com/kueue-timeshare/kueue-timeshare/pkg/controlplane"
)

var _ = ginkgo.Describe("kubectl explain", func() {
	ginkgo.It("describes every field in both versions", func() {
		kubectl := filepath.Join(env.ControlPlane.Root, controlplane.BinDir, "kubectl")
		_, err := os.Stat(kubectl)
		gomega.Expect(err).NotTo(gomega.HaveOccurred(), "%s is missing: run `make kubectl`", kubectl)
		kubeconfig := filepath.Join(ginkgo.GinkgoT().TempDir(), "kubeconfig")
		gomega.Expect(env.ControlPlane.WriteAdminKubeconfig(kubeconfig)).To(gomega.Succeed())

		for _, version := range []string{v1beta1, v1beta2} {
			for kind, fields := range tsapi.Fields() {
				for _, f := range fields {
					resource := strings.ToLower(kind) + "s." + f.String()
					out, err := exec.Command(kubectl, "--kubeconfig", kubeconfig, "explain", resource,
						"--api-version", group+"/"+version).CombinedOutput()
					gomega.Expect(err).NotTo(gomega.HaveOccurred(), "%s %s: %s", resource, version, out)
					// kubectl wraps descriptions: compare words.
					gomega.Expect(strings.Join(strings.Fields(string(out)), " ")).To(
						gomega.ContainSubstring(strings.Join(strings.Fields(f.Schema.Description), " ")), "%s %s", resource, version)
					gomega.Expect(string(out)).To(gomega.ContainSubstring("VERSION:    "+version), resource)
				}
			}
		}
	})
})
