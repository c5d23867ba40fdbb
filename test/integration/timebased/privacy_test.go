package timebased_test

import (
	"context"
	"maps"
	"slices"
	"strings"
	"time"

	"github.com/onsi/ginkgo/v2"
	"github.com/onsi/gomega"
	corev1 "k8s.io/api/core/v1"
	eventsv1 "k8s.io/api/events/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/rest"
	"sigs.k8s.io/controller-runtime/pkg/client"

	kueue "sigs.k8s.io/kueue/apis/kueue/v1beta2"
	visibilityclient "sigs.k8s.io/kueue/client-go/clientset/versioned"

	"github.com/kueue-timeshare/kueue-timeshare/apis/annotations"
	"github.com/kueue-timeshare/kueue-timeshare/pkg/message"
	"github.com/kueue-timeshare/kueue-timeshare/test/util"
)

// Two teams share a ClusterQueue. Upstream names another team's workload by UID only; nothing team
// B reads (its LocalQueue's pending list with the admission estimates, its Workloads' status, the
// events in its namespace) names a workload of team A's namespace. The admin's ClusterQueue view
// keeps the names.
var _ = ginkgo.Describe("Two namespaces sharing a ClusterQueue", func() {
	ctx := context.Background()

	ginkgo.It("show a tenant no workload name of the other namespace; the admin's ClusterQueue view keeps them", func() {
		const cq = "privacy"
		rf := &kueue.ResourceFlavor{ObjectMeta: metav1.ObjectMeta{Name: "default-flavor"}}
		if err := env.Client.Create(ctx, rf); !apierrors.IsAlreadyExists(err) {
			gomega.Expect(err).NotTo(gomega.HaveOccurred())
		}
		obj, err := util.RawCPUClusterQueue(cq, "1", map[string]any{"withinClusterQueue": "LowerPriority"})
		gomega.Expect(err).NotTo(gomega.HaveOccurred())
		gomega.Expect(env.Client.Create(ctx, obj)).To(gomega.Succeed())
		team := func(prefix string) string {
			ginkgo.GinkgoHelper()
			ns := &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{GenerateName: prefix + "-"}}
			gomega.Expect(env.Client.Create(ctx, ns)).To(gomega.Succeed())
			gomega.Expect(env.Client.Create(ctx, &kueue.LocalQueue{
				ObjectMeta: metav1.ObjectMeta{Namespace: ns.Name, Name: "lq"},
				Spec:       kueue.LocalQueueSpec{ClusterQueue: cq},
			})).To(gomega.Succeed())
			return ns.Name
		}
		nsA, nsB := team("team-a"), team("team-b")

		ginkgo.By("team A's Job holds the quota, declaring no runtime; team B's waits")
		secret := job(nsA, "lq", "secret-project")
		gomega.Expect(env.Client.Create(ctx, secret)).To(gomega.Succeed())
		gomega.Eventually(func(g gomega.Gomega) { g.Expect(unsuspended(g, ctx, secret)).To(gomega.BeTrue()) }, timeout, interval).Should(gomega.Succeed())
		waiting := job(nsB, "lq", "waiting")
		gomega.Expect(env.Client.Create(ctx, waiting)).To(gomega.Succeed())

		ginkgo.By("the admin's ClusterQueue view names team A's workload in team B's estimate")
		admin, err := visibilityclient.NewForConfig(env.VisibilityConfig)
		gomega.Expect(err).NotTo(gomega.HaveOccurred())
		gomega.Eventually(func(g gomega.Gomega) {
			clk.Step(6 * time.Second)
			list, err := admin.VisibilityV1beta2().ClusterQueues().GetPendingWorkloadsSummary(ctx, cq, metav1.GetOptions{})
			g.Expect(err).NotTo(gomega.HaveOccurred())
			g.Expect(list.Items).To(gomega.HaveLen(1))
			g.Expect(list.Items[0].Annotations[annotations.AdmissionEstimate]).To(gomega.ContainSubstring("held by " + nsA + "/"))
		}, timeout, interval).Should(gomega.Succeed())

		ginkgo.By("team B's user, with Kueue's pending-workloads and workload viewer roles, reads its LocalQueue")
		cfg := rest.CopyConfig(env.VisibilityConfig)
		cfg.Impersonate = rest.ImpersonationConfig{UserName: "team-b-user", Groups: []string{"system:authenticated"}}
		for _, name := range []string{"pending-workloads-lq-viewer-role", "workload-viewer-role"} {
			role, err := env.KueueRole(ctx, name)
			gomega.Expect(err).NotTo(gomega.HaveOccurred())
			_, err = env.Tenant(ctx, nsB, "team-b-user", role)
			gomega.Expect(err).NotTo(gomega.HaveOccurred())
		}
		tenantB, err := visibilityclient.NewForConfig(cfg)
		gomega.Expect(err).NotTo(gomega.HaveOccurred())
		gomega.Eventually(func(g gomega.Gomega) {
			list, err := tenantB.VisibilityV1beta2().LocalQueues(nsB).GetPendingWorkloadsSummary(ctx, "lq", metav1.GetOptions{})
			g.Expect(err).NotTo(gomega.HaveOccurred())
			g.Expect(list.Items).To(gomega.HaveLen(1))
			g.Expect(list.Items[0].Annotations[annotations.AdmissionEstimate]).To(gomega.ContainSubstring("held by " + message.OtherNamespace))
			g.Expect(list.Items[0].Annotations).NotTo(gomega.ContainElement(gomega.ContainSubstring(nsA)))
		}, timeout, interval).Should(gomega.Succeed())

		ginkgo.By("nor do team B's Workload's status and the events in its namespace name team A's")
		var wl *kueue.Workload
		gomega.Eventually(func(g gomega.Gomega) {
			wl = workloadOf(g, ctx, waiting)
			g.Expect(wl.Status.Conditions).To(gomega.ContainElement(gomega.HaveField("Type", kueue.WorkloadQuotaReserved)))
		}, timeout, interval).Should(gomega.Succeed())
		for _, c := range wl.Status.Conditions {
			gomega.Expect(c.Message).NotTo(gomega.ContainSubstring(nsA), "condition %s", c.Type)
		}
		gomega.Expect(strings.Join(slices.Collect(maps.Values(wl.Annotations)), " ")).NotTo(gomega.ContainSubstring(nsA))
		var events eventsv1.EventList
		gomega.Expect(env.Client.List(ctx, &events, client.InNamespace(nsB))).To(gomega.Succeed())
		for _, e := range events.Items {
			gomega.Expect(e.Note).NotTo(gomega.ContainSubstring(nsA), "event %s %s", e.Reason, e.Regarding.Name)
		}
	})
})
