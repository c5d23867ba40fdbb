package plugin_test

import (
	"bytes"
	"context"
	"os"
	"os/exec"
	"path/filepath"

	"github.com/onsi/ginkgo/v2"
	"github.com/onsi/gomega"
	rbacv1 "k8s.io/api/rbac/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/rest"
	"sigs.k8s.io/yaml"

	"github.com/kueue-timeshare/kueue-timeshare/cmd/kubectl-timeshare/app"
	"github.com/kueue-timeshare/kueue-timeshare/pkg/controlplane"
	"github.com/kueue-timeshare/kueue-timeshare/test/util"
)

var _ = ginkgo.Describe("kubectl timeshare with the chart's read-only ClusterRole", ginkgo.Ordered, func() {
	ctx := context.Background()
	const user = "plugin-viewer"

	// asUser runs the plugin as user, through the API server's RBAC.
	asUser := func(args ...string) (int, string, string) {
		cfg := rest.CopyConfig(env.ControlPlane.Config)
		cfg.Impersonate = rest.ImpersonationConfig{UserName: user}
		var out, errOut bytes.Buffer
		code := app.Run(ctx, args, app.Streams{Out: &out, ErrOut: &errOut}, app.Options{Config: cfg, Now: clk.Now})
		return code, out.String(), errOut.String()
	}

	ginkgo.It("is refused without it, naming what it may not read", func() {
		code, _, errOut := asUser("queues")
		gomega.Expect(code).To(gomega.Equal(1))
		gomega.Expect(errOut).To(gomega.ContainSubstring(`cannot list resource "clusterqueues"`))
	})

	ginkgo.It("reads everything it shows with the chart's ClusterRole bound", func() {
		root, err := controlplane.FindRoot()
		gomega.Expect(err).NotTo(gomega.HaveOccurred())
		helm := filepath.Join(root, controlplane.BinDir, "helm")
		if _, err := os.Stat(helm); err != nil {
			ginkgo.Fail("bin/helm is missing: run `make tools`")
		}
		cmd := exec.Command(helm, "template", "kueue-timeshare", filepath.Join(root, "charts", "kueue-timeshare"),
			"--namespace", "kueue-system", "--show-only", "templates/kubectl-plugin-rbac.yaml")
		cmd.Env = append(os.Environ(), "HELM_CACHE_HOME="+ginkgo.GinkgoT().TempDir(), "HELM_CONFIG_HOME="+ginkgo.GinkgoT().TempDir(), "HELM_DATA_HOME="+ginkgo.GinkgoT().TempDir())
		rendered, err := cmd.Output()
		gomega.Expect(err).NotTo(gomega.HaveOccurred())
		var role rbacv1.ClusterRole
		gomega.Expect(yaml.Unmarshal(rendered, &role)).To(gomega.Succeed())
		gomega.Expect(role.Name).To(gomega.Equal("kueue-timeshare-kubectl-plugin-viewer"))
		for _, r := range role.Rules {
			gomega.Expect(r.Verbs).To(gomega.HaveEach(gomega.BeElementOf("get", "list", "watch")), "read-only")
		}
		gomega.Expect(env.Client.Create(ctx, &role)).To(gomega.Succeed())
		gomega.Expect(env.Client.Create(ctx, &rbacv1.ClusterRoleBinding{
			ObjectMeta: metav1.ObjectMeta{Name: user},
			RoleRef:    rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "ClusterRole", Name: role.Name},
			Subjects:   []rbacv1.Subject{{APIGroup: rbacv1.GroupName, Kind: rbacv1.UserKind, Name: user}},
		})).To(gomega.Succeed())

		ginkgo.By("seeing what an admin sees")
		admin := func(args ...string) (int, string, string) {
			var out, errOut bytes.Buffer
			code := app.Run(ctx, args, app.Streams{Out: &out, ErrOut: &errOut}, app.Options{Config: env.ControlPlane.Config, Now: clk.Now})
			return code, out.String(), errOut.String()
		}
		gomega.Eventually(func(g gomega.Gomega) {
			code, out, errOut := asUser("queues", "-o", "json")
			g.Expect(code).To(gomega.Equal(0), errOut)
			_, adminOut, _ := admin("queues", "-o", "json")
			g.Expect(out).To(gomega.Equal(adminOut))
		}, timeout, interval).Should(gomega.Succeed())

		ginkgo.By("reading a Workload and its events for explain")
		j := job("default", "rbac-lq", "rbac-job", "1", "")
		gomega.Expect(env.Client.Create(ctx, j)).To(gomega.Succeed())
		gomega.Eventually(func(g gomega.Gomega) {
			wl := workloadOf(g, ctx, j)
			g.Expect(wl.Status.Conditions).NotTo(gomega.BeEmpty())
			code, out, errOut := asUser("explain", "workload", wl.Name, "-n", "default", "-o", "json")
			g.Expect(code).To(gomega.Equal(0), errOut)
			_, adminOut, _ := admin("explain", "workload", wl.Name, "-n", "default", "-o", "json")
			g.Expect(out).To(gomega.Equal(adminOut))
		}, timeout, interval).Should(gomega.Succeed())

		ginkgo.By("reading flavors and priority classes for what-if")
		gomega.Expect(util.CreateClusterQueue(ctx, env.Client, "default", "rbac-whatif", "1", "", map[string]any{})).To(gomega.Succeed())
		gomega.Expect(env.Client.Create(ctx, job("default", "rbac-whatif", "rbac-whatif-job", "1", "low"))).To(gomega.Succeed())
		file := proposal("rbac-whatif", "5m")
		gomega.Eventually(func(g gomega.Gomega) {
			code, out, errOut := asUser("what-if", "-f", file, "rbac-whatif", "--assume-runtime", "1h", "-o", "json")
			g.Expect(code).To(gomega.Equal(0), errOut)
			_, adminOut, _ := admin("what-if", "-f", file, "rbac-whatif", "--assume-runtime", "1h", "-o", "json")
			g.Expect(out).To(gomega.Equal(adminOut))
		}, timeout, interval).Should(gomega.Succeed())
	})
})
