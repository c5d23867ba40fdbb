package timebased_test

import (
	"context"
	"strings"
	"time"

	"github.com/onsi/ginkgo/v2"
	"github.com/onsi/gomega"
	batchv1 "k8s.io/api/batch/v1"
	apimeta "k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"

	kueue "sigs.k8s.io/kueue/apis/kueue/v1beta2"
)

// A tenant with Kueue's batch-admin rights on its Workloads (the workload-editor role) may set
// spec.active. Leaving the quota that way, and coming back, must not put its workload ahead of
// those that waited meanwhile.
var _ = ginkgo.Describe("A tenant who deactivates and reactivates the workload holding the quota", func() {
	ctx := context.Background()

	ginkgo.DescribeTable("waits from its deactivation: every workload that waited meanwhile takes its turn first",
		func(strategy string) {
			ns := timeSharingQueue(ctx, "tenant-active-"+strings.ToLower(strategy), "tq", "5m", strategy)
			role, err := env.KueueRole(ctx, "workload-editor-role")
			gomega.Expect(err).NotTo(gomega.HaveOccurred())
			tenant, err := env.Tenant(ctx, ns, "team-lead", role)
			gomega.Expect(err).NotTo(gomega.HaveOccurred())
			setActive := func(j *batchv1.Job, active bool) {
				ginkgo.GinkgoHelper()
				var wl *kueue.Workload
				gomega.Eventually(func(g gomega.Gomega) { wl = workloadOf(g, ctx, j) }, timeout, interval).Should(gomega.Succeed())
				patch := []byte(`{"spec":{"active":false}}`)
				if active {
					patch = []byte(`{"spec":{"active":true}}`)
				}
				gomega.Expect(tenant.Patch(ctx, wl, client.RawPatch(types.MergePatchType, patch))).To(gomega.Succeed())
			}

			first := job(ns, "tq", "first")
			gomega.Expect(env.Client.Create(ctx, first)).To(gomega.Succeed())
			gomega.Eventually(func(g gomega.Gomega) { g.Expect(unsuspended(g, ctx, first)).To(gomega.BeTrue()) }, timeout, interval).Should(gomega.Succeed())
			jobs := []*batchv1.Job{first}
			for _, name := range []string{"second", "third"} {
				j := job(ns, "tq", name)
				gomega.Expect(env.Client.Create(ctx, j)).To(gomega.Succeed())
				gomega.Eventually(func(g gomega.Gomega) { workloadOf(g, ctx, j) }, timeout, interval).Should(gomega.Succeed())
				jobs = append(jobs, j)
			}
			holder := func(g gomega.Gomega) string { return soleHolder(g, ctx, jobs) }

			ginkgo.By("deactivating the holder inside its window, as the tenant: a waiting workload takes the quota")
			clk.Step(time.Minute)
			setActive(first, false)
			var next string
			gomega.Eventually(func(g gomega.Gomega) {
				next = holder(g)
				g.Expect(next).NotTo(gomega.Equal("first"))
			}, timeout, interval).Should(gomega.Succeed())

			ginkgo.By("reactivating it at once: it waits behind the one that has waited since before")
			setActive(first, true)
			gomega.Eventually(func(g gomega.Gomega) {
				wl := workloadOf(g, ctx, first)
				g.Expect(apimeta.IsStatusConditionTrue(wl.Status.Conditions, kueue.WorkloadRequeued)).To(gomega.BeTrue(), "back in the queue")
			}, timeout, interval).Should(gomega.Succeed())
			clk.Step(5*time.Minute + time.Second)
			var after string
			gomega.Eventually(func(g gomega.Gomega) {
				after = holder(g)
				g.Expect(after).NotTo(gomega.Equal(next), "the window ended, so another job takes a turn")
			}, timeout, interval).Should(gomega.Succeed())
			ginkgo.GinkgoWriter.Printf("turns: first, %s, %s\n", next, after)
			gomega.Expect(after).NotTo(gomega.Equal("first"), "the reactivated workload took the turn of one that waited longer")
			gomega.Consistently(func(g gomega.Gomega) { g.Expect(holder(g)).To(gomega.Equal(after)) }, time.Second, interval).Should(gomega.Succeed())

			ginkgo.By("then it takes its turn")
			clk.Step(5*time.Minute + time.Second)
			gomega.Eventually(func(g gomega.Gomega) { g.Expect(holder(g)).To(gomega.Equal("first")) }, timeout, interval).Should(gomega.Succeed())
		},
		ginkgo.Entry("BestEffortFIFO", "BestEffortFIFO"),
		ginkgo.Entry("StrictFIFO", "StrictFIFO"),
	)
})
