package timebased_test

import (
	"context"
	"fmt"
	"time"

	"github.com/onsi/ginkgo/v2"
	"github.com/onsi/gomega"
	batchv1 "k8s.io/api/batch/v1"
	apimeta "k8s.io/apimachinery/pkg/api/meta"

	kueue "sigs.k8s.io/kueue/apis/kueue/v1beta2"

	"github.com/kueue-timeshare/kueue-timeshare/test/util"
)

// The simulator's unfit-job example against the real manager, scaled down: a job that can never
// fit in its ClusterQueue does not hold the rotation; the turn passes over it and it says why.
var _ = ginkgo.Describe("A workload that can never fit", func() {
	ctx := context.Background()

	ginkgo.It("is passed over, and the others keep taking turns (BestEffortFIFO)", func() {
		ns := timeSharingQueue(ctx, "unfit", "unfit", "5m", "BestEffortFIFO")
		var jobs []*batchv1.Job
		create := func(j *batchv1.Job) {
			gomega.Expect(env.Client.Create(ctx, j)).To(gomega.Succeed())
		}
		first := job(ns, "unfit", "job-0")
		create(first)
		jobs = append(jobs, first)
		gomega.Eventually(func(g gomega.Gomega) { g.Expect(unsuspended(g, ctx, first)).To(gomega.BeTrue()) }, timeout, interval).Should(gomega.Succeed())
		// Two CPUs in a one-CPU ClusterQueue; created before the others, so ahead of them in line.
		big := util.CPUJob(ns, "too-big", "unfit", "2")
		create(big)
		for i := 1; i < 3; i++ {
			j := job(ns, "unfit", fmt.Sprintf("job-%d", i))
			create(j)
			jobs = append(jobs, j)
		}

		running := func(g gomega.Gomega) string { return soleHolder(g, ctx, jobs) }
		turns := []string{"job-0"}
		for range 2*len(jobs) - 1 {
			last := turns[len(turns)-1]
			clk.Step(5*time.Minute + time.Second)
			var next string
			gomega.Eventually(func(g gomega.Gomega) {
				next = running(g)
				g.Expect(next).NotTo(gomega.Equal(last), "the window ended, so another job takes a turn")
			}, timeout, interval).Should(gomega.Succeed(), "turns so far: %v", turns)
			turns = append(turns, next)
		}
		ginkgo.GinkgoWriter.Printf("turns: %v\n", turns)
		gomega.Expect(turns[:len(jobs)]).To(gomega.ConsistOf("job-0", "job-1", "job-2"), "every job that fits gets a turn")

		gomega.Eventually(func(g gomega.Gomega) {
			g.Expect(unsuspended(g, ctx, big)).To(gomega.BeFalse())
			c := apimeta.FindStatusCondition(workloadOf(g, ctx, big).Status.Conditions, kueue.WorkloadQuotaReserved)
			g.Expect(c).NotTo(gomega.BeNil())
			g.Expect(c.Message).To(gomega.ContainSubstring("passed over for time-sharing turns: it does not fit in ClusterQueue unfit"))
		}, timeout, interval).Should(gomega.Succeed())
	})
})
