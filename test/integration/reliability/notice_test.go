package reliability_test

import (
	"context"
	"time"

	"github.com/onsi/ginkgo/v2"
	"github.com/onsi/gomega"
	apimeta "k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	kueue "sigs.k8s.io/kueue/apis/kueue/v1beta2"
	"sigs.k8s.io/kueue/pkg/controller/constants"

	"github.com/kueue-timeshare/kueue-timeshare/apis/annotations"
	"github.com/kueue-timeshare/kueue-timeshare/pkg/controlplane"
	"github.com/kueue-timeshare/kueue-timeshare/pkg/plugins/notice"
	"github.com/kueue-timeshare/kueue-timeshare/test/util"
)

// A notice given by one leader is kept by the next: the new leader finds the victim under notice
// for the preemptor (its notice index fills from the Workload informer before it schedules),
// evicts it at the deadline the first leader set, and gives it no second notice.
var _ = ginkgo.Describe("A preemption notice across a leader handover", ginkgo.Ordered, func() {
	ctx := context.Background()
	le := &controlplane.LeaderElection{Namespace: managerNamespace, LeaseDuration: 5 * time.Second, RenewDeadline: 4 * time.Second, RetryPeriod: time.Second}

	ginkgo.It("is kept by the new leader, which evicts the victim at the first leader's deadline", func() {
		k := startCluster()
		acquired := func(p *managerProcess) bool {
			_, err := leaseIndex(p.entries())
			return err == nil
		}
		leader := k.startManager("notice-leader-0", le)
		leader.waitReady()
		gomega.Eventually(func() bool { return acquired(leader) }, timeout, interval).Should(gomega.BeTrue(), "the first manager leads")
		follower := k.startManager("notice-leader-1", le)
		follower.waitReady()

		createBaseObjects(ctx, k.client)
		ns := "notice-handover"
		createNamespace(ctx, k.client, ns)
		dumpOnFailure(k.client, ns)
		// The webhook may still be starting with the manager: retry until it answers.
		gomega.Eventually(func() error {
			return util.CreateClusterQueue(ctx, k.client, ns, "noticed", "1", "", map[string]any{
				"withinClusterQueue": "LowerPriority", "noticePeriod": "30s", "noticeOnPriorityPreemption": true})
		}, timeout, interval).Should(gomega.Succeed())
		low := util.CPUJob(ns, "low", "noticed", "1")
		low.Labels[constants.WorkloadPriorityClassLabel] = "low"
		gomega.Expect(k.client.Create(ctx, low)).To(gomega.Succeed())
		gomega.Eventually(func(g gomega.Gomega) {
			g.Expect(util.Unsuspended(g, ctx, k.client, low)).To(gomega.BeTrue())
		}, timeout, interval).Should(gomega.Succeed())
		high := util.CPUJob(ns, "high", "noticed", "1")
		high.Labels[constants.WorkloadPriorityClassLabel] = "high"
		gomega.Expect(k.client.Create(ctx, high)).To(gomega.Succeed())

		var given *annotations.Notice
		gomega.Eventually(func(g gomega.Gomega) {
			var err error
			given, err = annotations.ParseNotice(util.WorkloadOf(g, ctx, k.client, low).Annotations)
			g.Expect(err).NotTo(gomega.HaveOccurred())
			g.Expect(given).NotTo(gomega.BeNil(), "the first leader gives the low-priority workload notice")
		}, timeout, interval).Should(gomega.Succeed())

		ginkgo.By("killing the leader while the notice runs")
		leader.kill()
		gomega.Eventually(func() bool { return acquired(follower) }, 3*timeout, interval).Should(gomega.BeTrue(), "the follower takes over")
		gomega.Expect(time.Now()).To(gomega.BeTemporally("<", given.Deadline), "the handover came before the deadline; lengthen the notice")

		ginkgo.By("the new leader keeps the notice and evicts at its deadline")
		gomega.Consistently(func(g gomega.Gomega) {
			wl := util.WorkloadOf(g, ctx, k.client, low)
			n, err := annotations.ParseNotice(wl.Annotations)
			g.Expect(err).NotTo(gomega.HaveOccurred())
			g.Expect(n).To(gomega.Equal(given), "the notice is the first leader's, not a second one")
			g.Expect(util.Unsuspended(g, ctx, k.client, high)).To(gomega.BeFalse())
		}, time.Until(given.Deadline)-time.Second, interval).Should(gomega.Succeed())
		gomega.Eventually(func(g gomega.Gomega) {
			wl := util.WorkloadOf(g, ctx, k.client, low)
			preempted := apimeta.FindStatusCondition(wl.Status.Conditions, kueue.WorkloadPreempted)
			g.Expect(preempted).NotTo(gomega.BeNil())
			g.Expect(preempted.Status).To(gomega.Equal(metav1.ConditionTrue))
			g.Expect(preempted.Reason).To(gomega.Equal(kueue.InClusterQueueReason))
			ended := apimeta.FindStatusCondition(wl.Status.Conditions, notice.Condition)
			g.Expect(ended).NotTo(gomega.BeNil())
			g.Expect(ended.Status).To(gomega.Equal(metav1.ConditionFalse))
			g.Expect(ended.Reason).To(gomega.Equal(string(notice.EvictedAtDeadline)))
			g.Expect(ended.Message).To(gomega.ContainSubstring(given.Deadline.UTC().Format(time.RFC3339)))
			g.Expect(util.Unsuspended(g, ctx, k.client, high)).To(gomega.BeTrue())
		}, 3*timeout, interval).Should(gomega.Succeed())
		gomega.Expect(count(leader.entries(), msgPreempted)+count(follower.entries(), msgPreempted)).To(gomega.Equal(1), "one eviction, by the new leader")
		gomega.Expect(count(follower.entries(), msgPreempted)).To(gomega.Equal(1))
	})
})
