package timebased_test

import (
	"context"
	"fmt"
	"strings"
	"time"

	"github.com/onsi/ginkgo/v2"
	"github.com/onsi/gomega"
	batchv1 "k8s.io/api/batch/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	visibilityv1beta2 "sigs.k8s.io/kueue/apis/visibility/v1beta2"
	visibilityclient "sigs.k8s.io/kueue/client-go/clientset/versioned"
)

var _ = ginkgo.Describe("Visibility API", func() {
	ctx := context.Background()

	ginkgo.DescribeTable("pending positions are the order in which the workloads take their turns",
		func(strategy string) {
			const n = 4
			cq := "visibility-" + strings.ToLower(strategy)
			ns := timeSharingQueue(ctx, cq, "vis", "5m", strategy)
			api, err := visibilityclient.NewForConfig(env.VisibilityConfig)
			gomega.Expect(err).NotTo(gomega.HaveOccurred())

			var jobs []*batchv1.Job
			for i := range n {
				j := job(ns, "vis", fmt.Sprintf("job-%d", i))
				gomega.Expect(env.Client.Create(ctx, j)).To(gomega.Succeed())
				jobs = append(jobs, j)
			}
			holder := func(g gomega.Gomega) string { return soleHolder(g, ctx, jobs) }
			// pendingJobs reads both lists of the API and returns the Jobs of the pending workloads
			// by position, once every job but the holder is listed.
			pendingJobs := func(g gomega.Gomega, holding string) []string {
				inCQ, err := api.VisibilityV1beta2().ClusterQueues().GetPendingWorkloadsSummary(ctx, cq, metav1.GetOptions{})
				g.Expect(err).NotTo(gomega.HaveOccurred())
				inLQ, err := api.VisibilityV1beta2().LocalQueues(ns).GetPendingWorkloadsSummary(ctx, "vis", metav1.GetOptions{})
				g.Expect(err).NotTo(gomega.HaveOccurred())
				order := ownerJobs(g, inCQ.Items)
				g.Expect(order).To(gomega.HaveLen(n - 1))
				g.Expect(order).NotTo(gomega.ContainElement(holding))
				g.Expect(ownerJobs(g, inLQ.Items)).To(gomega.Equal(order), "the LocalQueue lists the same order")
				for i := range inCQ.Items {
					g.Expect(inCQ.Items[i].PositionInClusterQueue).To(gomega.BeEquivalentTo(i))
					g.Expect(inCQ.Items[i].PositionInLocalQueue).To(gomega.BeEquivalentTo(i))
					g.Expect(inLQ.Items[i].PositionInLocalQueue).To(gomega.BeEquivalentTo(i))
				}
				return order
			}

			var turns []string
			var predictions [][]string
			gomega.Eventually(func(g gomega.Gomega) { turns = append(turns[:0], holder(g)) }, timeout, interval).Should(gomega.Succeed())
			for range 2*n - 1 {
				last := turns[len(turns)-1]
				var order []string
				gomega.Eventually(func(g gomega.Gomega) { order = pendingJobs(g, last) }, timeout, interval).Should(gomega.Succeed())
				predictions = append(predictions, order)
				clk.Step(5*time.Minute + time.Second)
				var next string
				gomega.Eventually(func(g gomega.Gomega) {
					next = holder(g)
					g.Expect(next).NotTo(gomega.Equal(last), "the window ended, so another job takes a turn")
				}, timeout, interval).Should(gomega.Succeed(), "turns so far: %v", turns)
				turns = append(turns, next)
			}
			ginkgo.GinkgoWriter.Printf("turns: %v\npending orders shown: %v\n", turns, predictions)
			// Workloads rotated out go behind those listed, so the list read during turn t names
			// the holders of the next n-1 turns, in order.
			for t, order := range predictions {
				if t+n <= len(turns) {
					gomega.Expect(turns[t+1:t+n]).To(gomega.Equal(order), "pending order shown during turn %d (%s)", t, turns[t])
				}
			}

			ginkgo.By("serving the same order under v1beta1")
			gomega.Eventually(func(g gomega.Gomega) {
				old, err := api.VisibilityV1beta1().ClusterQueues().GetPendingWorkloadsSummary(ctx, cq, metav1.GetOptions{})
				g.Expect(err).NotTo(gomega.HaveOccurred())
				var oldOrder []string
				for _, w := range old.Items {
					g.Expect(w.OwnerReferences).To(gomega.HaveLen(1))
					oldOrder = append(oldOrder, w.OwnerReferences[0].Name)
				}
				g.Expect(oldOrder).To(gomega.Equal(pendingJobs(g, turns[len(turns)-1])))
			}, timeout, interval).Should(gomega.Succeed())
		},
		ginkgo.Entry("BestEffortFIFO", "BestEffortFIFO"),
		ginkgo.Entry("StrictFIFO", "StrictFIFO"),
	)
})

// soleHolder returns the name of the one job of jobs that runs, and fails unless exactly one does.
func soleHolder(g gomega.Gomega, ctx context.Context, jobs []*batchv1.Job) string {
	var holders []string
	for _, j := range jobs {
		if unsuspended(g, ctx, j) {
			holders = append(holders, j.Name)
		}
	}
	g.Expect(holders).To(gomega.HaveLen(1), "exactly one job holds the quota")
	return holders[0]
}

// ownerJobs returns the names of the Jobs owning the listed workloads, in list order.
func ownerJobs(g gomega.Gomega, items []visibilityv1beta2.PendingWorkload) []string {
	var out []string
	for _, w := range items {
		g.Expect(w.OwnerReferences).To(gomega.HaveLen(1), "workload %s", w.Name)
		out = append(out, w.OwnerReferences[0].Name)
	}
	return out
}
