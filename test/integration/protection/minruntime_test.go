package protection_test

import (
	"context"
	"fmt"
	"time"

	"github.com/onsi/ginkgo/v2"
	"github.com/onsi/gomega"

	kueue "sigs.k8s.io/kueue/apis/kueue/v1beta2"
)

var _ = ginkgo.Describe("preemptMinRuntime within a ClusterQueue", ginkgo.Ordered, func() {
	ctx := context.Background()
	var ns string

	ginkgo.BeforeAll(func() {
		gomega.Expect(env.Reconfigure("")).To(gomega.Succeed())
		ns = namespace(ctx, "in-queue")
		clusterQueue(ctx, ns, "solo", "1", "", map[string]any{"withinClusterQueue": "LowerPriority", "preemptMinRuntime": "10m"})
	})

	ginkgo.It("keeps a lower-priority workload running for 10m, says why, then lets it be preempted", func() {
		low := job(ns, "solo", "low", "1", "low")
		submit(ctx, low)
		started := admittedAt(ctx, low)
		before := protectedTotal("solo", "preempt")

		high := job(ns, "solo", "high", "1", "high")
		submit(ctx, high)
		ginkgo.By("telling the pending workload what protects the candidate and until when")
		expectPendingWith(ctx, high, fmt.Sprintf("1 preemption candidate is protected (1 by preemptMinRuntime 10m0s from ClusterQueue solo); the first protection ends at %s",
			rfc3339(started.Add(10*time.Minute))))
		gomega.Expect(protectedTotal("solo", "preempt")).To(gomega.BeNumerically(">", before))

		ginkgo.By("still protecting it one second before the end")
		clk.SetTime(started.Add(10*time.Minute - time.Second))
		expectHeld(ctx, low, high)
		ginkgo.By("counting the protection once, however often the pending workload was retried")
		gomega.Expect(protectedTotal("solo", "preempt")).To(gomega.Equal(before + 1))

		ginkgo.By("preempting it at the end, woken by the clock alone")
		clk.SetTime(started.Add(10 * time.Minute))
		expectPreempted(ctx, low, high, kueue.InClusterQueueReason)
	})
})

var _ = ginkgo.Describe("preemptMinRuntime inherited from a Cohort, across a manager restart", ginkgo.Ordered, func() {
	ctx := context.Background()
	var ns string

	ginkgo.BeforeAll(func() {
		gomega.Expect(env.Reconfigure("")).To(gomega.Succeed())
		ns = namespace(ctx, "restart")
		cohort(ctx, "restart-org", "", map[string]any{"preemptMinRuntime": "5m"})
		clusterQueue(ctx, ns, "restart-cq", "1", "restart-org", map[string]any{"withinClusterQueue": "LowerPriority"})
	})

	ginkgo.It("measures from the original admission after the manager restarts", func() {
		low := job(ns, "restart-cq", "low", "1", "low")
		submit(ctx, low)
		started := admittedAt(ctx, low)

		clk.SetTime(started.Add(2 * time.Minute))
		ginkgo.By("restarting the manager two minutes into the protection")
		gomega.Expect(env.RestartManager()).To(gomega.Succeed())
		high := job(ns, "restart-cq", "high", "1", "high")
		submit(ctx, high)
		expectPendingWith(ctx, high, "preemptMinRuntime 5m0s from Cohort restart-org", rfc3339(started.Add(5*time.Minute)))

		clk.SetTime(started.Add(4 * time.Minute))
		expectHeld(ctx, low, high)

		clk.SetTime(started.Add(5 * time.Minute))
		expectPreempted(ctx, low, high, kueue.InClusterQueueReason)
	})
})

var _ = ginkgo.Describe("preemptMinRuntime with time-based same-priority preemption", ginkgo.Ordered, func() {
	ctx := context.Background()
	var ns string

	ginkgo.BeforeAll(func() {
		gomega.Expect(env.Reconfigure("")).To(gomega.Succeed())
		ns = namespace(ctx, "timebased")
		clusterQueue(ctx, ns, "share", "1", "", map[string]any{
			"withinClusterQueue":       "LowerOrNewerEqualPriority",
			"withinClusterQueueConfig": map[string]any{"minAdmitDuration": "1m"},
			"preemptMinRuntime":        "5m",
		})
	})

	ginkgo.It("keeps a same-priority workload past minAdmitDuration but inside preemptMinRuntime", func() {
		first := job(ns, "share", "first", "1", "")
		submit(ctx, first)
		started := admittedAt(ctx, first)
		second := job(ns, "share", "second", "1", "")
		submit(ctx, second)

		clk.SetTime(started.Add(2 * time.Minute))
		expectPendingWith(ctx, second, "preemptMinRuntime 5m0s from ClusterQueue share")
		expectHeld(ctx, first, second)

		clk.SetTime(started.Add(5 * time.Minute))
		expectPreempted(ctx, first, second, "InClusterQueueTimeBased")
	})
})

// The tree: org (root) <- team-a (reclaimMinRuntime 10m) <- a1 (reclaimMinRuntime 0s, no quota,
// borrows), and org <- b1 (2 CPUs, reclaims). From b1, LCA resolution starts at team-a (10m);
// Queue resolution starts at a1 (0s).
func reclaimTree(ctx context.Context, prefix string) string {
	ns := namespace(ctx, prefix)
	cohort(ctx, prefix+"-org", "", nil)
	cohort(ctx, prefix+"-team-a", prefix+"-org", map[string]any{"reclaimMinRuntime": "10m"})
	clusterQueue(ctx, ns, prefix+"-a1", "0", prefix+"-team-a", map[string]any{"reclaimMinRuntime": "0s"})
	clusterQueue(ctx, ns, prefix+"-b1", "2", prefix+"-org", map[string]any{"reclaimWithinCohort": "Any"})
	return ns
}

var _ = ginkgo.Describe("reclaimMinRuntime resolved at the lowest common ancestor", ginkgo.Ordered, func() {
	ctx := context.Background()
	var ns string

	ginkgo.BeforeAll(func() {
		gomega.Expect(env.Reconfigure("")).To(gomega.Succeed())
		ns = reclaimTree(ctx, "lca")
	})

	ginkgo.It("protects the borrower by team-a's value, then reclaims", func() {
		borrower := job(ns, "lca-a1", "borrower", "2", "")
		submit(ctx, borrower)
		started := admittedAt(ctx, borrower)
		before := protectedTotal("lca-b1", "reclaim")

		owner := job(ns, "lca-b1", "owner", "2", "")
		submit(ctx, owner)
		expectPendingWith(ctx, owner, "1 preemption candidate is protected (1 by reclaimMinRuntime 10m0s from Cohort lca-team-a)",
			rfc3339(started.Add(10*time.Minute)))
		gomega.Expect(protectedTotal("lca-b1", "reclaim")).To(gomega.BeNumerically(">", before))

		clk.SetTime(started.Add(9 * time.Minute))
		expectHeld(ctx, borrower, owner)

		clk.SetTime(started.Add(10 * time.Minute))
		expectPreempted(ctx, borrower, owner, kueue.InCohortReclamationReason)
	})
})

var _ = ginkgo.Describe("reclaimMinRuntime resolved from the victim's ClusterQueue", ginkgo.Ordered, func() {
	ctx := context.Background()
	var ns string

	ginkgo.BeforeAll(func() {
		gomega.Expect(env.Reconfigure("timeshare:\n  reclaimResolveMethod: Queue\n")).To(gomega.Succeed())
		ns = reclaimTree(ctx, "queue")
	})
	ginkgo.AfterAll(func() {
		gomega.Expect(env.Reconfigure("")).To(gomega.Succeed())
	})

	ginkgo.It("takes a1's 0s: the borrower is reclaimed at once", func() {
		borrower := job(ns, "queue-a1", "borrower", "2", "")
		submit(ctx, borrower)
		admittedAt(ctx, borrower)
		owner := job(ns, "queue-b1", "owner", "2", "")
		submit(ctx, owner)
		expectPreempted(ctx, borrower, owner, kueue.InCohortReclamationReason)
	})
})

var _ = ginkgo.Describe("reclaimMinRuntime under fair sharing", ginkgo.Ordered, func() {
	ctx := context.Background()
	var ns string

	ginkgo.BeforeAll(func() {
		gomega.Expect(env.Reconfigure("fairSharing:\n  preemptionStrategies: [LessThanOrEqualToFinalShare, LessThanInitialShare]\n")).To(gomega.Succeed())
		// b1 has only half of what it asks for, so it borrows after preempting: a fair-sharing
		// preemption (its share, 1 of 2 borrowed, is below a1's, 2 of 2), not a reclaim.
		ns = namespace(ctx, "fair")
		cohort(ctx, "fair-org", "", nil)
		cohort(ctx, "fair-team-a", "fair-org", map[string]any{"reclaimMinRuntime": "10m"})
		clusterQueue(ctx, ns, "fair-a1", "0", "fair-team-a", nil)
		clusterQueue(ctx, ns, "fair-b1", "1", "fair-org", map[string]any{"reclaimWithinCohort": "Any"})
		clusterQueue(ctx, ns, "fair-c1", "1", "fair-org", nil)
	})
	ginkgo.AfterAll(func() {
		gomega.Expect(env.Reconfigure("")).To(gomega.Succeed())
	})

	ginkgo.It("protects the borrower from fair-sharing preemption until its min-runtime ends", func() {
		borrower := job(ns, "fair-a1", "borrower", "2", "")
		submit(ctx, borrower)
		started := admittedAt(ctx, borrower)
		owner := job(ns, "fair-b1", "owner", "2", "")
		submit(ctx, owner)
		expectPendingWith(ctx, owner, "reclaimMinRuntime 10m0s from Cohort fair-team-a")

		clk.SetTime(started.Add(9 * time.Minute))
		expectHeld(ctx, borrower, owner)

		clk.SetTime(started.Add(10 * time.Minute))
		expectPreempted(ctx, borrower, owner, kueue.InCohortFairSharingReason)
	})
})
