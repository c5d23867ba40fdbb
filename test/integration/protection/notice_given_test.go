package protection_test

import (
	"context"
	"strings"
	"time"

	"github.com/onsi/ginkgo/v2"
	"github.com/onsi/gomega"
	batchv1 "k8s.io/api/batch/v1"
	eventsv1 "k8s.io/api/events/v1"
	apimeta "k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"

	kueue "sigs.k8s.io/kueue/apis/kueue/v1beta2"

	"github.com/kueue-timeshare/kueue-timeshare/apis/annotations"
	"github.com/kueue-timeshare/kueue-timeshare/pkg/plugins/notice"
)

// The scheduler's half of the notice: the victim keeps running, told its deadline, the preemptor
// waits and says so, and at the deadline the eviction happens with its usual reason.
var _ = ginkgo.Describe("A preemption notice", func() {
	ctx := context.Background()

	// noticeOn waits until j's Workload carries a notice and returns it.
	noticeOn := func(j *batchv1.Job) *annotations.Notice {
		ginkgo.GinkgoHelper()
		var n *annotations.Notice
		gomega.Eventually(func(g gomega.Gomega) {
			var err error
			n, err = annotations.ParseNotice(workloadOf(g, ctx, j).Annotations)
			g.Expect(err).NotTo(gomega.HaveOccurred())
			g.Expect(n).NotTo(gomega.BeNil())
		}, timeout, interval).Should(gomega.Succeed())
		return n
	}
	expectNoticeEnded := func(j *batchv1.Job, outcome notice.Outcome) {
		ginkgo.GinkgoHelper()
		gomega.Eventually(func(g gomega.Gomega) {
			c := apimeta.FindStatusCondition(workloadOf(g, ctx, j).Status.Conditions, notice.Condition)
			g.Expect(c).NotTo(gomega.BeNil())
			g.Expect(c.Status).To(gomega.Equal(metav1.ConditionFalse))
			g.Expect(c.Reason).To(gomega.Equal(string(outcome)))
		}, timeout, interval).Should(gomega.Succeed())
	}

	ginkgo.It("extended to priority preemption keeps the victim running until its deadline", func() {
		ns := namespace(ctx, "notice-priority")
		clusterQueue(ctx, ns, "notice-priority", "1", "", map[string]any{
			"withinClusterQueue": "LowerPriority", "noticePeriod": "2m", "noticeOnPriorityPreemption": true})
		low := job(ns, "notice-priority", "low", "1", "low")
		submit(ctx, low)
		admittedAt(ctx, low)
		before := notices("notice-priority", kueue.InClusterQueueReason, string(notice.EvictedAtDeadline))
		high := job(ns, "notice-priority", "high", "1", "high")
		submit(ctx, high)

		n := noticeOn(low)
		gomega.Expect(n.Reason).To(gomega.Equal(kueue.InClusterQueueReason))
		gomega.Expect(n.Deadline.Sub(n.Start)).To(gomega.BeNumerically(">=", 2*time.Minute))
		gomega.Expect(n.Deadline.Sub(n.Start)).To(gomega.BeNumerically("<", 2*time.Minute+time.Second))
		expectPendingWith(ctx, high, "waiting for the preemption notice of 1 workload(s) ("+ns+"/", "to end at "+rfc3339(n.Deadline))
		expectHeld(ctx, low, high)
		expectEvent(ctx, ns, "PreemptionNotice", "To be evicted at "+rfc3339(n.Deadline))

		clk.SetTime(n.Deadline.Add(-time.Second))
		expectHeld(ctx, low, high)
		clk.SetTime(n.Deadline)
		expectPreempted(ctx, low, high, kueue.InClusterQueueReason)
		expectNoticeEnded(low, notice.EvictedAtDeadline)
		gomega.Expect(notices("notice-priority", kueue.InClusterQueueReason, string(notice.EvictedAtDeadline))).To(gomega.Equal(before + 1))
	})

	ginkgo.It("keeps the victim's room for its preemptor: a second preemptor does not take it", func() {
		ns := namespace(ctx, "notice-promised")
		clusterQueue(ctx, ns, "notice-promised", "1", "", map[string]any{
			"withinClusterQueue": "LowerPriority", "noticePeriod": "2m", "noticeOnPriorityPreemption": true})
		low := job(ns, "notice-promised", "low", "1", "low")
		submit(ctx, low)
		admittedAt(ctx, low)
		first := job(ns, "notice-promised", "first", "1", "high")
		submit(ctx, first)
		n := noticeOn(low)
		gomega.Expect(n.Preemptor).To(gomega.Equal(ns + "/" + workloadOf(gomega.Default, ctx, first).Name))

		// Half the quota, so that Kueue does not take it for the same as the first and set it
		// aside with it: it looks for victims of its own.
		second := job(ns, "notice-promised", "second", "500m", "high")
		submit(ctx, second)
		expectPendingWith(ctx, second, "1 preemption candidate is protected (1 by its preemption notice for "+n.Preemptor+")",
			"the first protection ends at "+rfc3339(n.Deadline))
		expectHeld(ctx, low, second)
		gomega.Expect(noticeOn(low)).To(gomega.Equal(n), "the notice still names the first preemptor")

		clk.SetTime(n.Deadline)
		expectPreempted(ctx, low, first, kueue.InClusterQueueReason)
		gomega.Consistently(func(g gomega.Gomega) {
			g.Expect(unsuspended(g, ctx, second)).To(gomega.BeFalse())
		}, 2*time.Second, interval).Should(gomega.Succeed())
	})

	ginkgo.It("is not given for priority preemption unless the queue extends it", func() {
		ns := namespace(ctx, "notice-not-extended")
		clusterQueue(ctx, ns, "notice-not-extended", "1", "", map[string]any{"withinClusterQueue": "LowerPriority", "noticePeriod": "2m"})
		low := job(ns, "notice-not-extended", "low", "1", "low")
		submit(ctx, low)
		admittedAt(ctx, low)
		high := job(ns, "notice-not-extended", "high", "1", "high")
		submit(ctx, high)
		expectPreempted(ctx, low, high, kueue.InClusterQueueReason)
		gomega.Expect(apimeta.FindStatusCondition(workloadOf(gomega.Default, ctx, low).Status.Conditions, notice.Condition)).To(gomega.BeNil())
	})

	ginkgo.It("is due early when the victim says its checkpoint is done", func() {
		ns := namespace(ctx, "notice-checkpoint")
		clusterQueue(ctx, ns, "notice-checkpoint", "1", "", map[string]any{
			"withinClusterQueue": "LowerPriority", "noticePeriod": "10m", "noticeOnPriorityPreemption": true})
		low := job(ns, "notice-checkpoint", "low", "1", "low")
		submit(ctx, low)
		admittedAt(ctx, low)
		high := job(ns, "notice-checkpoint", "high", "1", "high")
		submit(ctx, high)
		noticeOn(low)
		expectHeld(ctx, low, high)

		wl := workloadOf(gomega.Default, ctx, low)
		patch := []byte(`{"metadata":{"annotations":{"` + annotations.CheckpointDone + `":"true"}}}`)
		gomega.Expect(env.Client.Patch(ctx, wl, rawMergePatch(patch))).To(gomega.Succeed())
		// Nothing but the annotation changes: the clock stays inside the notice.
		expectPreempted(ctx, low, high, kueue.InClusterQueueReason)
		expectNoticeEnded(low, notice.EndedEarly)
	})
})

// expectEvent waits for an event in ns with reason whose note contains part, about a Workload
// or a Job.
func expectEvent(ctx context.Context, ns, reason, part string) {
	ginkgo.GinkgoHelper()
	gomega.Eventually(func(g gomega.Gomega) {
		var list eventsv1.EventList
		g.Expect(env.Client.List(ctx, &list, client.InNamespace(ns))).To(gomega.Succeed())
		kinds := map[string]bool{}
		for _, e := range list.Items {
			if e.Reason == reason && strings.Contains(e.Note, part) {
				kinds[e.Regarding.Kind] = true
			}
		}
		g.Expect(kinds).To(gomega.HaveKey("Workload"))
		g.Expect(kinds).To(gomega.HaveKey("Job"))
	}, timeout, interval).Should(gomega.Succeed())
}

// notices reads kueue_preemption_notices_total for the victim ClusterQueue cq.
func notices(cq, reason, outcome string) float64 {
	for _, s := range seriesOf("kueue_preemption_notices_total") {
		if s.labels["cluster_queue"] == cq && s.labels["reason"] == reason && s.labels["outcome"] == outcome {
			return s.value
		}
	}
	return 0
}

func rawMergePatch(body []byte) client.Patch {
	return client.RawPatch(types.MergePatchType, body)
}
