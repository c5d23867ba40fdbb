package timebased_test

import (
	"context"
	"fmt"
	"strings"
	"time"

	"github.com/onsi/ginkgo/v2"
	"github.com/onsi/gomega"
	batchv1 "k8s.io/api/batch/v1"
)

var _ = ginkgo.Describe("Fair rotation", func() {
	ctx := context.Background()

	ginkgo.DescribeTable("every same-priority workload takes a turn of at least minAdmitDuration, in a stable cycle",
		func(n int, strategy string) {
			ns := timeSharingQueue(ctx, fmt.Sprintf("rotation-%d-%s", n, strings.ToLower(strategy)), "rot", "5m", strategy)

			var jobs []*batchv1.Job
			var names []string
			for i := range n {
				j := job(ns, "rot", fmt.Sprintf("job-%d", i))
				gomega.Expect(env.Client.Create(ctx, j)).To(gomega.Succeed())
				jobs = append(jobs, j)
				names = append(names, j.Name)
			}
			running := func(g gomega.Gomega) string { return soleHolder(g, ctx, jobs) }
			var turns []string
			gomega.Eventually(func(g gomega.Gomega) { turns = append(turns[:0], running(g)) }, timeout, interval).Should(gomega.Succeed())

			for range 2*n - 1 {
				last := turns[len(turns)-1]
				// Inside the window the holder keeps the quota ...
				clk.Step(4 * time.Minute)
				gomega.Consistently(func(g gomega.Gomega) { g.Expect(running(g)).To(gomega.Equal(last)) }, time.Second, interval).Should(gomega.Succeed())
				// ... and once it has passed, the next one takes its turn.
				clk.Step(time.Minute + time.Second)
				var next string
				gomega.Eventually(func(g gomega.Gomega) {
					next = running(g)
					g.Expect(next).NotTo(gomega.Equal(last), "the window ended, so another job takes a turn")
				}, timeout, interval).Should(gomega.Succeed(), "turns so far: %v", turns)
				turns = append(turns, next)
			}
			ginkgo.GinkgoWriter.Printf("turns: %v\n", turns)
			gomega.Expect(turns[:n]).To(gomega.ConsistOf(names), "every job gets a turn before any gets a second")
			gomega.Expect(turns[n:]).To(gomega.Equal(turns[:n]), "the rotation repeats in the same order")
		},
		ginkgo.Entry("three workloads, BestEffortFIFO", 3, "BestEffortFIFO"),
		ginkgo.Entry("five workloads, BestEffortFIFO", 5, "BestEffortFIFO"),
		ginkgo.Entry("three workloads, StrictFIFO", 3, "StrictFIFO"),
		ginkgo.Entry("five workloads, StrictFIFO", 5, "StrictFIFO"),
	)
})
