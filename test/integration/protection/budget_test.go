package protection_test

import (
	"context"
	"fmt"
	"time"

	"github.com/onsi/ginkgo/v2"
	"github.com/onsi/gomega"
	batchv1 "k8s.io/api/batch/v1"
	apimeta "k8s.io/apimachinery/pkg/api/meta"

	kueue "sigs.k8s.io/kueue/apis/kueue/v1beta2"
)

var _ = ginkgo.Describe("a preemption budget of a ClusterQueue", ginkgo.Ordered, func() {
	ctx := context.Background()
	var ns string

	ginkgo.BeforeAll(func() {
		gomega.Expect(env.Reconfigure("")).To(gomega.Succeed())
		ns = namespace(ctx, "budget")
		clusterQueue(ctx, ns, "budget-cq", "2", "", map[string]any{"withinClusterQueue": "LowerPriority",
			"preemptionBudget": map[string]any{"maxPreemptions": int64(1), "period": "1m"}})
	})

	ginkgo.It("holds the second preemption in the period back, says until when, and lets it happen when a token returns", func() {
		lows := []*batchv1.Job{job(ns, "budget-cq", "low-1", "1", "low"), job(ns, "budget-cq", "low-2", "1", "low")}
		for _, j := range lows {
			submit(ctx, j)
			admittedAt(ctx, j)
		}
		before := heldBackTotal("budget-cq")

		ginkgo.By("spending the only token on the first preemption")
		first := job(ns, "budget-cq", "high-1", "1", "high")
		submit(ctx, first)
		spentAt := clk.Now()
		var victim, survivor *batchv1.Job
		gomega.Eventually(func(g gomega.Gomega) {
			g.Expect(unsuspended(g, ctx, first)).To(gomega.BeTrue())
			for i, j := range lows {
				c := apimeta.FindStatusCondition(workloadOf(g, ctx, j).Status.Conditions, kueue.WorkloadPreempted)
				if c != nil && c.Reason == kueue.InClusterQueueReason {
					victim, survivor = j, lows[1-i]
				}
			}
			g.Expect(victim).NotTo(gomega.BeNil())
		}, timeout, interval).Should(gomega.Succeed())

		ginkgo.By("holding the second back, with the budget and the instant its token returns on the preemptor")
		second := job(ns, "budget-cq", "high-2", "1", "high")
		submit(ctx, second)
		until := spentAt.Add(time.Minute)
		expectPendingWith(ctx, second, fmt.Sprintf("1 by the preemption budget of ClusterQueue budget-cq (1 per 1m), spent until %s",
			until.UTC().Format(time.TimeOnly)))
		clk.SetTime(until.Add(-time.Second))
		expectHeld(ctx, survivor, second)
		gomega.Expect(heldBackTotal("budget-cq")).To(gomega.Equal(before + 1))

		ginkgo.By("preempting when the token returns, woken by the clock alone")
		clk.SetTime(until)
		expectPreempted(ctx, survivor, second, kueue.InClusterQueueReason)
	})
})

// heldBackTotal reads kueue_preemptions_held_back_total for cq.
func heldBackTotal(cq string) float64 {
	for _, s := range seriesOf("kueue_preemptions_held_back_total") {
		if s.labels["cluster_queue"] == cq {
			return s.value
		}
	}
	return 0
}
