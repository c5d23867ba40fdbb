package e2e_test

import (
	"context"
	"encoding/json"
	"strings"
	"time"

	"github.com/onsi/ginkgo/v2"
	"github.com/onsi/gomega"
	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/rest"
	"sigs.k8s.io/controller-runtime/pkg/client"

	kueue "sigs.k8s.io/kueue/apis/kueue/v1beta2"
	visibilityclient "sigs.k8s.io/kueue/client-go/clientset/versioned"
)

// Two teams share a time-sharing ClusterQueue with Pods running: what team B reads names nothing
// of team A's, and team A, deactivating and reactivating its holder (an API call its batch-admin
// role grants), does not get the next turn ahead of team B's Job that waited longer.
var _ = ginkgo.Describe("tenants who play, with Pods", func() {
	ginkgo.It("learn nothing of another team's workloads, and cannot take the next turn by deactivating their holder", func() {
		ctx := context.Background()
		withVisibility()
		nsA, nsB := newNamespace(ctx, "team-a"), newNamespace(ctx, "team-b")
		const cq = "players"
		clusterQueue(ctx, nsA, cq, "4", map[string]any{
			"withinClusterQueue":       "LowerOrNewerEqualPriority",
			"withinClusterQueueConfig": map[string]any{"minAdmitDuration": "1m"},
		})
		submit(ctx, &kueue.LocalQueue{ObjectMeta: metav1.ObjectMeta{Namespace: nsB, Name: cq},
			Spec: kueue.LocalQueueSpec{ClusterQueue: cq}})
		teamA := newTenant(ctx, nsA, "alice", batchAdminRole)

		ada := newJob(nsA, jobSpec{name: "ada", queue: cq, cpu: "4", grace: 10})
		submit(ctx, ada)
		time.Sleep(1100 * time.Millisecond)
		grace := newJob(nsB, jobSpec{name: "grace", queue: cq, cpu: "4", grace: 10})
		submit(ctx, grace)
		time.Sleep(1100 * time.Millisecond)
		linus := newJob(nsB, jobSpec{name: "linus", queue: cq, cpu: "4", grace: 10})
		submit(ctx, linus)

		admittedAt(ctx, ada)
		expectRunning(ctx, ada, time.Minute)
		var adaWorkload string
		gomega.Eventually(func(g gomega.Gomega) { adaWorkload = workload(g, ctx, ada).Name }, time.Minute, interval).Should(gomega.Succeed())
		secrets := []string{nsA, adaWorkload}

		ginkgo.By("reading, as team B would, its Workloads, its events and its LocalQueue's estimates while team A's Job holds the quota")
		expectNothingOf(ctx, nsB, cq, secrets, grace, linus)

		ginkgo.By("deactivating team A's holder inside its window, and reactivating it once team B's first Job has the quota")
		setActive := func(active bool) {
			ginkgo.GinkgoHelper()
			body, err := json.Marshal(map[string]any{"spec": map[string]any{"active": active}})
			gomega.Expect(err).NotTo(gomega.HaveOccurred())
			gomega.Eventually(func(g gomega.Gomega) {
				wl := workload(g, ctx, ada)
				g.Expect(teamA.c.Patch(ctx, wl, client.RawPatch(types.MergePatchType, body))).To(gomega.Succeed())
			}, 30*time.Second, interval).Should(gomega.Succeed())
		}
		time.Sleep(15 * time.Second)
		setActive(false)
		reservedGrace, _ := admittedAt(ctx, grace)
		expectRunning(ctx, grace, time.Minute)
		setActive(true)

		ginkgo.By("handing the next turn to team B's second Job, which waited since before the reactivation")
		gomega.Eventually(func(g gomega.Gomega) {
			g.Expect(holding(workload(g, ctx, linus))).To(gomega.BeTrue())
		}, reservedGrace.Add(2*time.Minute).Sub(time.Now()), interval).Should(gomega.Succeed())
		gomega.Expect(time.Now()).To(gomega.BeTemporally(">=", reservedGrace.Add(time.Minute)), "team B's first Job kept its whole window")
		gomega.Eventually(func(g gomega.Gomega) {
			g.Expect(holding(workload(g, ctx, ada))).To(gomega.BeFalse(), "the reactivated holder waits behind the Job that waited longer")
		}, 5*time.Second, interval).Should(gomega.Succeed())
		expectRunning(ctx, linus, time.Minute)
		gomega.Expect(running(jobPods(ctx, ada))).To(gomega.BeZero())

		ginkgo.By("reading team B's view again, with team A's Job back in the queue")
		expectNothingOf(ctx, nsB, cq, secrets, grace, linus)
	})
})

// expectNothingOf reads what a user of ns sees of its own work (its Workloads' conditions, its
// namespace's events, its LocalQueue lq's pending workloads with their estimates), once jobs' Workloads
// have a message, and checks that none of it contains any of secrets.
func expectNothingOf(ctx context.Context, ns, lq string, secrets []string, jobs ...*batchv1.Job) {
	ginkgo.GinkgoHelper()
	cfg := rest.CopyConfig(cp.Config)
	cfg.Host = "https://" + visibilityAddress
	cfg.CAData, cfg.CAFile = cp.ServingCA(), ""
	vis, err := visibilityclient.NewForConfig(cfg)
	gomega.Expect(err).NotTo(gomega.HaveOccurred())
	gomega.Eventually(func(g gomega.Gomega) {
		var texts []string
		for _, j := range jobs {
			for _, c := range workload(g, ctx, j).Status.Conditions {
				texts = append(texts, c.Message)
			}
		}
		g.Expect(strings.Join(texts, "")).NotTo(gomega.BeEmpty(), "the waiting Workloads say why")
		var events corev1.EventList
		g.Expect(k8s.List(ctx, &events, client.InNamespace(ns))).To(gomega.Succeed())
		for _, e := range events.Items {
			texts = append(texts, e.Message, e.InvolvedObject.Name, e.InvolvedObject.Namespace)
			if e.Related != nil {
				texts = append(texts, e.Related.Name, e.Related.Namespace)
			}
		}
		s, err := vis.VisibilityV1beta2().LocalQueues(ns).GetPendingWorkloadsSummary(ctx, lq, metav1.GetOptions{})
		g.Expect(err).NotTo(gomega.HaveOccurred())
		for _, p := range s.Items {
			texts = append(texts, p.Namespace, p.Name)
			for _, v := range p.Annotations {
				texts = append(texts, v)
			}
		}
		for _, text := range texts {
			for _, secret := range secrets {
				g.Expect(text).NotTo(gomega.ContainSubstring(secret), "team B reads team A's %q", secret)
			}
		}
	}, 30*time.Second, interval).Should(gomega.Succeed())
}
