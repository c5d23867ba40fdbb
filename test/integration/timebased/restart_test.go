package timebased_test

import (
	"context"
	"time"

	"github.com/onsi/ginkgo/v2"
	"github.com/onsi/gomega"
	apimeta "k8s.io/apimachinery/pkg/api/meta"

	kueue "sigs.k8s.io/kueue/apis/kueue/v1beta2"
)

var _ = ginkgo.Describe("A manager restart in the middle of a window", ginkgo.Ordered, func() {
	ctx := context.Background()
	var ns string

	ginkgo.BeforeAll(func() {
		ns = timeSharingQueue(ctx, "restart", "rs", "5m", "")
	})

	ginkgo.It("keeps the window's original start: no earlier, no later", func() {
		first := job(ns, "rs", "first")
		gomega.Expect(env.Client.Create(ctx, first)).To(gomega.Succeed())
		var reservedAt time.Time
		gomega.Eventually(func(g gomega.Gomega) {
			g.Expect(unsuspended(g, ctx, first)).To(gomega.BeTrue())
			c := apimeta.FindStatusCondition(workloadOf(g, ctx, first).Status.Conditions, kueue.WorkloadQuotaReserved)
			g.Expect(c).NotTo(gomega.BeNil())
			reservedAt = c.LastTransitionTime.Time
		}, timeout, interval).Should(gomega.Succeed())

		clk.Step(2 * time.Minute)
		ginkgo.By("restarting the manager two minutes into the window")
		gomega.Expect(env.RestartManager()).To(gomega.Succeed())
		second := job(ns, "rs", "second")
		gomega.Expect(env.Client.Create(ctx, second)).To(gomega.Succeed())

		clk.Step(2 * time.Minute)
		gomega.Consistently(func(g gomega.Gomega) {
			g.Expect(unsuspended(g, ctx, first)).To(gomega.BeTrue())
			g.Expect(unsuspended(g, ctx, second)).To(gomega.BeFalse())
		}, 2*time.Second, interval).Should(gomega.Succeed())

		ginkgo.By("taking the turn once five minutes have passed since the original reservation")
		clk.Step(time.Minute + time.Second)
		gomega.Eventually(func(g gomega.Gomega) {
			g.Expect(unsuspended(g, ctx, second)).To(gomega.BeTrue())
			g.Expect(unsuspended(g, ctx, first)).To(gomega.BeFalse())
		}, timeout, interval).Should(gomega.Succeed())
		gomega.Expect(clk.Now().Sub(reservedAt)).To(gomega.BeNumerically(">", 5*time.Minute))
	})
})
