package conversion_test

import (
	"bytes"
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"

	"github.com/onsi/ginkgo/v2"
	"github.com/onsi/gomega"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"

	tsapi "github.com/kueue-timeshare/kueue-timeshare/apis/kueue/v1beta2"
	"github.com/kueue-timeshare/kueue-timeshare/pkg/controlplane"
)

// kubectlCmd returns a runner of bin/kubectl as the control plane's admin.
func kubectlCmd() func(args ...string) (string, error) {
	ginkgo.GinkgoHelper()
	kubectl := filepath.Join(env.ControlPlane.Root, controlplane.BinDir, "kubectl")
	_, err := os.Stat(kubectl)
	gomega.Expect(err).NotTo(gomega.HaveOccurred(), "%s is missing: run `make kubectl`", kubectl)
	kubeconfig := filepath.Join(ginkgo.GinkgoT().TempDir(), "kubeconfig")
	gomega.Expect(env.ControlPlane.WriteAdminKubeconfig(kubeconfig)).To(gomega.Succeed())
	// Standard output only: kubectl warns on stderr that v1beta1 is deprecated.
	return func(args ...string) (string, error) {
		var stderr bytes.Buffer
		cmd := exec.Command(kubectl, append([]string{"--kubeconfig", kubeconfig}, args...)...)
		cmd.Stderr = &stderr
		out, err := cmd.Output()
		if err != nil {
			err = fmt.Errorf("%w: %s", err, stderr.String())
		}
		return string(out), err
	}
}

// table reads kubectl get's output for one object: column header to value.
func table(out string) map[string]string {
	ginkgo.GinkgoHelper()
	lines := strings.Split(strings.TrimSpace(out), "\n")
	gomega.Expect(lines).To(gomega.HaveLen(2), out)
	// Headers may hold single spaces; columns are at least two spaces apart, and a value starts
	// where its header does.
	header := lines[0]
	starts := []int{0}
	for i := 1; i < len(header); i++ {
		if header[i] != ' ' && header[i-1] == ' ' && i >= 2 && header[i-2] == ' ' {
			starts = append(starts, i)
		}
	}
	row := map[string]string{}
	for i, start := range starts {
		end := len(header)
		if i+1 < len(starts) {
			end = starts[i+1]
		}
		value := ""
		if start < len(lines[1]) {
			value = lines[1][start:min(end, len(lines[1]))]
		}
		row[strings.TrimSpace(header[start:end])] = strings.TrimSpace(value)
	}
	return row
}

var _ = ginkgo.Describe("kubectl", func() {
	ctx := context.Background()

	ginkgo.It("shows the fields in columns of kubectl get, in both versions", func() {
		kubectl := kubectlCmd()
		cq := newObject("ClusterQueue", v1beta2, "columns", samples["ClusterQueue"])
		gomega.Expect(env.Client.Create(ctx, cq)).To(gomega.Succeed())
		deleteLater(ctx, cq)
		cohort := newObject("Cohort", v1beta1, "columns", samples["Cohort"])
		gomega.Expect(unstructured.SetNestedField(cohort.Object, "org", "spec", "parentName")).To(gomega.Succeed())
		gomega.Expect(env.Client.Create(ctx, cohort)).To(gomega.Succeed())
		deleteLater(ctx, cohort)

		for _, version := range []string{v1beta1, v1beta2} {
			out, err := kubectl("get", "clusterqueues."+version+"."+group, "columns")
			gomega.Expect(err).NotTo(gomega.HaveOccurred(), out)
			gomega.Expect(table(out)).To(gomega.HaveKeyWithValue("MIN ADMIT DURATION", "5m"), out)
			out, err = kubectl("get", "clusterqueues."+version+"."+group, "columns", "-o", "wide")
			gomega.Expect(err).NotTo(gomega.HaveOccurred(), out)
			gomega.Expect(table(out)).To(gomega.And(
				gomega.HaveKeyWithValue("COHORT", "research"),
				gomega.HaveKeyWithValue("MIN ADMIT DURATION", "5m"),
				gomega.HaveKeyWithValue("PREEMPT MIN RUNTIME", "2m"),
				gomega.HaveKeyWithValue("RECLAIM MIN RUNTIME", "0s"),
			), out)

			out, err = kubectl("get", "cohorts."+version+"."+group, "columns")
			gomega.Expect(err).NotTo(gomega.HaveOccurred(), out)
			gomega.Expect(table(out)).To(gomega.Equal(map[string]string{
				"NAME": "columns", "PARENT": "org", "PREEMPT MIN RUNTIME": "30m", "RECLAIM MIN RUNTIME": "1h",
			}), out)
		}
	})

	ginkgo.It("explain describes every field in both versions", func() {
		kubectl := kubectlCmd()
		for _, version := range []string{v1beta1, v1beta2} {
			for kind, fields := range tsapi.Fields() {
				for _, f := range fields {
					resource := strings.ToLower(kind) + "s." + f.String()
					out, err := kubectl("explain", resource, "--api-version", group+"/"+version)
					gomega.Expect(err).NotTo(gomega.HaveOccurred(), "%s %s: %s", resource, version, out)
					// kubectl wraps descriptions: compare words.
					gomega.Expect(strings.Join(strings.Fields(out), " ")).To(
						gomega.ContainSubstring(strings.Join(strings.Fields(f.Schema.Description), " ")), "%s %s", resource, version)
					gomega.Expect(out).To(gomega.ContainSubstring("VERSION:    "+version), resource)
				}
			}
		}
	})
})
