package timebased_test

import (
	"context"
	"time"

	"github.com/onsi/ginkgo/v2"
	"github.com/onsi/gomega"
	corev1 "k8s.io/api/core/v1"
	apimeta "k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	kueue "sigs.k8s.io/kueue/apis/kueue/v1beta2"
	"sigs.k8s.io/kueue/pkg/controller/constants"
)

var _ = ginkgo.Describe("A manager restart in the middle of a window", ginkgo.Ordered, func() {
	ctx := context.Background()
	var ns string

	ginkgo.BeforeAll(func() {
		n := &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{GenerateName: "restart-"}}
		gomega.Expect(env.Client.Create(ctx, n)).To(gomega.Succeed())
		ns = n.Name
		gomega.Expect(ignoreExists(env.Client.Create(ctx, &kueue.ResourceFlavor{ObjectMeta: metav1.ObjectMeta{Name: "default-flavor"}}))).To(gomega.Succeed())
		gomega.Expect(env.Client.Create(ctx, clusterQueue("restart", "5m"))).To(gomega.Succeed())
		gomega.Expect(env.Client.Create(ctx, &kueue.LocalQueue{
			ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "rs"},
			Spec:       kueue.LocalQueueSpec{ClusterQueue: "restart"},
		})).To(gomega.Succeed())
	})

	ginkgo.It("keeps the window's original start: no earlier, no later", func() {
		first := job(ns, "first")
		first.Labels[constants.QueueLabel] = "rs"
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
		second := job(ns, "second")
		second.Labels[constants.QueueLabel] = "rs"
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
