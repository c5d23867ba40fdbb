package timebased_test

import (
	"context"
	"fmt"
	"time"

	"github.com/onsi/ginkgo/v2"
	"github.com/onsi/gomega"
	batchv1 "k8s.io/api/batch/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	visibilityclient "sigs.k8s.io/kueue/client-go/clientset/versioned"

	"github.com/kueue-timeshare/kueue-timeshare/apis/annotations"
)

var _ = ginkgo.Describe("Visibility API estimates", func() {
	ctx := context.Background()

	ginkgo.It("annotates each pending workload with when its turn comes", func() {
		const window = 5 * time.Minute
		ns := timeSharingQueue(ctx, "estimate", "est", "5m", "BestEffortFIFO")
		api, err := visibilityclient.NewForConfig(env.VisibilityConfig)
		gomega.Expect(err).NotTo(gomega.HaveOccurred())
		var jobs []*batchv1.Job
		for i := range 3 {
			j := job(ns, "est", fmt.Sprintf("job-%d", i))
			gomega.Expect(env.Client.Create(ctx, j)).To(gomega.Succeed())
			jobs = append(jobs, j)
		}
		gomega.Eventually(func(g gomega.Gomega) { soleHolder(g, ctx, jobs) }, timeout, interval).Should(gomega.Succeed())
		gomega.Eventually(func(g gomega.Gomega) {
			// Estimates are kept a few seconds by the manager's clock: move it past them.
			clk.Step(6 * time.Second)
			now := clk.Now()
			list, err := api.VisibilityV1beta2().LocalQueues(ns).GetPendingWorkloadsSummary(ctx, "est", metav1.GetOptions{})
			g.Expect(err).NotTo(gomega.HaveOccurred())
			g.Expect(list.Items).To(gomega.HaveLen(2))
			var prev time.Time
			for i, w := range list.Items {
				g.Expect(w.Annotations[annotations.AdmissionEstimate]).To(gomega.ContainSubstring("expected around"), "item %d", i)
				at, err := time.Parse(time.RFC3339, w.Annotations[annotations.EstimatedAdmission])
				g.Expect(err).NotTo(gomega.HaveOccurred(), "item %d", i)
				// Each takes the next turn: the holder's window, then the first's.
				g.Expect(at).To(gomega.BeTemporally(">", prev.Add(window-time.Minute)), "item %d", i)
				g.Expect(at).To(gomega.BeTemporally("<=", now.Add(time.Duration(i+1)*(window+2*time.Second))), "item %d", i)
				prev = at
			}
		}, timeout, interval).Should(gomega.Succeed())
	})
})
