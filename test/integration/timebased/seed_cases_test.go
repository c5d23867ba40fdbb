package timebased_test

import (
	"context"
	"slices"
	"strings"
	"time"

	"github.com/onsi/ginkgo/v2"
	"github.com/onsi/gomega"
	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	eventsv1 "k8s.io/api/events/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	apimeta "k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	kueue "sigs.k8s.io/kueue/apis/kueue/v1beta2"
	"sigs.k8s.io/kueue/pkg/controller/constants"

	"github.com/kueue-timeshare/kueue-timeshare/test/util"
)

// The seed's integration cases not covered by the other files of this suite (1, 2, 6 and 9 are in
// preemption_test.go, rotation_test.go, restart_test.go and the manager suite).
var _ = ginkgo.Describe("KEP-8522 integration cases", ginkgo.Ordered, func() {
	ctx := context.Background()
	var ns string
	window := map[string]any{"withinClusterQueue": "LowerOrNewerEqualPriority", "withinClusterQueueConfig": map[string]any{"minAdmitDuration": "5m"}}

	ginkgo.BeforeAll(func() {
		gomega.Expect(env.Reconfigure("")).To(gomega.Succeed())
		n := &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{GenerateName: "kep-cases-"}}
		gomega.Expect(env.Client.Create(ctx, n)).To(gomega.Succeed())
		ns = n.Name
		rf := &kueue.ResourceFlavor{ObjectMeta: metav1.ObjectMeta{Name: "default-flavor"}}
		if err := env.Client.Create(ctx, rf); !apierrors.IsAlreadyExists(err) {
			gomega.Expect(err).NotTo(gomega.HaveOccurred())
		}
		for name, value := range map[string]int32{"tb-low": 10, "tb-mid": 100} {
			gomega.Expect(env.Client.Create(ctx, &kueue.WorkloadPriorityClass{ObjectMeta: metav1.ObjectMeta{Name: name}, Value: value})).To(gomega.Succeed())
		}
	})

	sized := func(lq, name, cpu, priority string) *batchv1.Job {
		j := util.CPUJob(ns, lq+"-"+name, lq, cpu)
		if priority != "" {
			j.Labels[constants.WorkloadPriorityClassLabel] = priority
		}
		gomega.Expect(env.Client.Create(ctx, j)).To(gomega.Succeed())
		return j
	}
	reservedAt := func(j *batchv1.Job) time.Time {
		ginkgo.GinkgoHelper()
		var at time.Time
		gomega.Eventually(func(g gomega.Gomega) {
			g.Expect(unsuspended(g, ctx, j)).To(gomega.BeTrue())
			c := apimeta.FindStatusCondition(workloadOf(g, ctx, j).Status.Conditions, kueue.WorkloadQuotaReserved)
			g.Expect(c).NotTo(gomega.BeNil())
			at = c.LastTransitionTime.Time
		}, timeout, interval).Should(gomega.Succeed())
		return at
	}
	preemptedWith := func(g gomega.Gomega, j *batchv1.Job) string {
		c := apimeta.FindStatusCondition(workloadOf(g, ctx, j).Status.Conditions, kueue.WorkloadPreempted)
		if c == nil || c.Status != metav1.ConditionTrue {
			return ""
		}
		return c.Reason
	}
	held := func(running, waiting *batchv1.Job) {
		ginkgo.GinkgoHelper()
		gomega.Consistently(func(g gomega.Gomega) {
			g.Expect(unsuspended(g, ctx, running)).To(gomega.BeTrue())
			g.Expect(unsuspended(g, ctx, waiting)).To(gomega.BeFalse())
		}, 2*time.Second, interval).Should(gomega.Succeed())
	}

	ginkgo.It("3. mixed priorities: the lower priority goes first, even when a same-priority one has expired", func() {
		gomega.Expect(util.CreateClusterQueue(ctx, env.Client, ns, "kep-mixed", "2", "", window)).To(gomega.Succeed())
		low := sized("kep-mixed", "low", "1", "tb-low")
		same := sized("kep-mixed", "same", "1", "tb-mid")
		reservedAt(low)
		started := reservedAt(same)
		clk.SetTime(started.Add(10 * time.Minute))
		preemptor := sized("kep-mixed", "preemptor", "1", "tb-mid")
		gomega.Eventually(func(g gomega.Gomega) {
			g.Expect(preemptedWith(g, low)).To(gomega.Equal(kueue.InClusterQueueReason))
			g.Expect(unsuspended(g, ctx, preemptor)).To(gomega.BeTrue())
		}, timeout, interval).Should(gomega.Succeed())
		gomega.Consistently(func(g gomega.Gomega) {
			g.Expect(unsuspended(g, ctx, same)).To(gomega.BeTrue())
			g.Expect(preemptedWith(g, same)).To(gomega.BeEmpty())
		}, 2*time.Second, interval).Should(gomega.Succeed())
	})

	ginkgo.It("4. minAdmitDuration not set: the first same-priority workload keeps its quota", func() {
		gomega.Expect(util.CreateClusterQueue(ctx, env.Client, ns, "kep-unset", "1", "", map[string]any{"withinClusterQueue": "LowerOrNewerEqualPriority"})).To(gomega.Succeed())
		first := sized("kep-unset", "first", "1", "")
		started := reservedAt(first)
		second := sized("kep-unset", "second", "1", "")
		clk.SetTime(started.Add(24 * time.Hour))
		held(first, second)
	})

	ginkgo.It("5. exactly at minAdmitDuration the workload is not preempted; a second later it is", func() {
		gomega.Expect(util.CreateClusterQueue(ctx, env.Client, ns, "kep-edge", "1", "", window)).To(gomega.Succeed())
		first := sized("kep-edge", "first", "1", "")
		started := reservedAt(first)
		second := sized("kep-edge", "second", "1", "")
		clk.SetTime(started.Add(5 * time.Minute))
		held(first, second)
		clk.SetTime(started.Add(5*time.Minute + time.Second))
		gomega.Eventually(func(g gomega.Gomega) {
			g.Expect(preemptedWith(g, first)).To(gomega.Equal("InClusterQueueTimeBased"))
			g.Expect(unsuspended(g, ctx, second)).To(gomega.BeTrue())
		}, timeout, interval).Should(gomega.Succeed())
	})

	ginkgo.It("7. several expired at once: the longest-running goes first, then the order is deterministic", func() {
		gomega.Expect(util.CreateClusterQueue(ctx, env.Client, ns, "kep-many", "3", "", window)).To(gomega.Succeed())
		oldest := sized("kep-many", "oldest", "1", "")
		t0 := reservedAt(oldest)
		clk.SetTime(t0.Add(time.Minute))
		twinA := sized("kep-many", "twin-a", "1", "")
		twinB := sized("kep-many", "twin-b", "1", "")
		reservedAt(twinA)
		reservedAt(twinB)
		clk.SetTime(t0.Add(time.Hour))

		// All three expired; a two-CPU waiter needs two of them: the longest-running, then of the twins
		// (reserved at the same instant) the one with the smaller UID.
		var a, b *kueue.Workload
		gomega.Eventually(func(g gomega.Gomega) {
			a, b = workloadOf(g, ctx, twinA), workloadOf(g, ctx, twinB)
		}, timeout, interval).Should(gomega.Succeed())
		first, spared := twinA, twinB
		if b.UID < a.UID {
			first, spared = twinB, twinA
		}
		waiter := sized("kep-many", "waiter", "2", "")
		var waiterUID string
		gomega.Eventually(func(g gomega.Gomega) { waiterUID = string(workloadOf(g, ctx, waiter).UID) }, timeout, interval).Should(gomega.Succeed())
		// Read the Preempted events, not the conditions: a victim that takes its next turn at once
		// has its condition replaced before a poll could see it.
		preemptedBy := func(g gomega.Gomega, j *batchv1.Job) bool {
			wl := workloadOf(g, ctx, j)
			var list eventsv1.EventList
			g.Expect(env.Client.List(ctx, &list, client.InNamespace(ns))).To(gomega.Succeed())
			return slices.ContainsFunc(list.Items, func(e eventsv1.Event) bool {
				return e.Regarding.Name == wl.Name && e.Reason == "Preempted" && strings.Contains(e.Note, waiterUID) &&
					strings.Contains(e.Note, "time-sharing")
			})
		}
		gomega.Eventually(func(g gomega.Gomega) {
			g.Expect(preemptedBy(g, oldest)).To(gomega.BeTrue(), "the longest-running workload is preempted by the waiter")
			g.Expect(preemptedBy(g, first)).To(gomega.BeTrue(), "the twin with the smaller UID is preempted by the waiter")
			g.Expect(unsuspended(g, ctx, waiter)).To(gomega.BeTrue())
		}, timeout, interval).Should(gomega.Succeed())
		// The other twin may later lose a time-sharing turn to a rotated-out workload, never to the waiter.
		gomega.Consistently(func(g gomega.Gomega) { g.Expect(preemptedBy(g, spared)).To(gomega.BeFalse()) }, 2*time.Second, interval).Should(gomega.Succeed())
	})

	ginkgo.It("8. fair sharing: time-based preemption stays inside the ClusterQueue", func() {
		gomega.Expect(env.Reconfigure("fairSharing:\n  preemptionStrategies: [LessThanOrEqualToFinalShare, LessThanInitialShare]\n")).To(gomega.Succeed())
		ginkgo.DeferCleanup(func() { gomega.Expect(env.Reconfigure("")).To(gomega.Succeed()) })
		withReclaim := map[string]any{"withinClusterQueue": "LowerOrNewerEqualPriority", "reclaimWithinCohort": "Any",
			"withinClusterQueueConfig": map[string]any{"minAdmitDuration": "5m"}}
		gomega.Expect(util.CreateClusterQueue(ctx, env.Client, ns, "kep-fair-a", "1", "kep-fair", withReclaim)).To(gomega.Succeed())
		gomega.Expect(util.CreateClusterQueue(ctx, env.Client, ns, "kep-fair-b", "1", "kep-fair", nil)).To(gomega.Succeed())
		other := sized("kep-fair-b", "other", "1", "")
		first := sized("kep-fair-a", "first", "1", "")
		reservedAt(other)
		started := reservedAt(first)
		clk.SetTime(started.Add(time.Hour))
		second := sized("kep-fair-a", "second", "1", "")
		gomega.Eventually(func(g gomega.Gomega) {
			g.Expect(preemptedWith(g, first)).To(gomega.Equal("InClusterQueueTimeBased"))
			g.Expect(unsuspended(g, ctx, second)).To(gomega.BeTrue())
		}, timeout, interval).Should(gomega.Succeed())
		// The other ClusterQueue's workload, running within its own quota for as long, is untouched.
		gomega.Consistently(func(g gomega.Gomega) {
			g.Expect(unsuspended(g, ctx, other)).To(gomega.BeTrue())
			g.Expect(preemptedWith(g, other)).To(gomega.BeEmpty())
		}, 2*time.Second, interval).Should(gomega.Succeed())
	})
})
