package e2e_test

import (
	"context"
	"fmt"
	"time"

	"github.com/onsi/ginkgo/v2"
	"github.com/onsi/gomega"
	eventsv1 "k8s.io/api/events/v1"
	apimeta "k8s.io/apimachinery/pkg/api/meta"
	"sigs.k8s.io/controller-runtime/pkg/client"

	kueue "sigs.k8s.io/kueue/apis/kueue/v1beta2"

	"github.com/kueue-timeshare/kueue-timeshare/pkg/plugins/timebased"
	"github.com/kueue-timeshare/kueue-timeshare/pkg/policy"
)

// A batch user's Job asks for a 40 s grace period and its Pods use all of it after each turn;
// the admin bounds the handover hold at 10 s. The next Job gets the quota at the bound and a
// margin, not after 40 s; the overstay is charged to the sticky Job's next turn, which ends that
// much earlier. Real time with Pods: the simulated kubelets keep a deleted Pod running for its
// grace period, as a process that ignores SIGTERM.
var _ = ginkgo.Describe("a grace period longer than the handover bound, with Pods", ginkgo.Ordered, func() {
	const window, grace, bound = time.Minute, 40, 10 * time.Second
	ginkgo.AfterAll(func() {
		reconfigureManager(defaultManagerExtra)
	})

	ginkgo.It("hands the quota over at the bound and charges the overstay to the next turn", func() {
		ctx := context.Background()
		reconfigureManager(defaultManagerExtra + fmt.Sprintf("timeshare:\n  maxHandoverHold: %s\n", bound))
		ns := newNamespace(ctx, "overstay")
		clusterQueue(ctx, ns, ns, "4", map[string]any{
			"withinClusterQueue":       "LowerOrNewerEqualPriority",
			"withinClusterQueueConfig": map[string]any{"minAdmitDuration": window.String()},
		})
		user := newTenant(ctx, ns, "sticky-user", batchUserRole)
		sticky := newJob(ns, jobSpec{name: "sticky", queue: ns, cpu: "4", grace: grace})
		gomega.Expect(user.c.Create(ctx, sticky)).To(gomega.Succeed())
		first, _ := admittedAt(ctx, sticky)
		expectRunning(ctx, sticky, time.Minute)
		polite := newJob(ns, jobSpec{name: "polite", queue: ns, cpu: "4", grace: 1})
		gomega.Expect(user.c.Create(ctx, polite)).To(gomega.Succeed())

		ginkgo.By("rotating the sticky Job out at its window's end; its Pod keeps running its 40 s")
		h := expectHandover(ctx, sticky, polite, first.Add(window), timebased.Reason)
		gomega.Expect(h.nextRunning.Sub(h.evicted)).To(gomega.BeNumerically("<", time.Duration(grace)*time.Second-5*time.Second),
			"the next Job ran before the sticky Job's grace period was over")
		gomega.Expect(h.victimGone.Sub(h.nextRunning)).To(gomega.BeNumerically(">", 0), "both Jobs' Pods ran at once: the admin's bound, not the tenant's grace period")

		ginkgo.By("warning the sticky Job's Workload, and charging it the time its Pod ran past the hold")
		stickyWl := workload(gomega.Default, ctx, sticky)
		var charge time.Duration
		gomega.Eventually(func(g gomega.Gomega) {
			var events eventsv1.EventList
			g.Expect(k8s.List(ctx, &events, client.InNamespace(ns))).To(gomega.Succeed())
			warned := false
			for _, e := range events.Items {
				warned = warned || (e.Reason == "PodsOutlivedHold" && e.Regarding.Name == stickyWl.Name && e.Type == "Warning")
			}
			g.Expect(warned).To(gomega.BeTrue(), "a PodsOutlivedHold Warning on the sticky Job's Workload")
			charge = policy.TurnChargeOf(workload(g, ctx, sticky))
			g.Expect(charge).To(gomega.BeNumerically(">", 0))
		}, time.Minute, interval).Should(gomega.Succeed())
		// Evicted at h.evicted; the hold lasted the bound and its 10 s margin; the Pod ran until
		// its grace period was over.
		want := time.Duration(grace)*time.Second - bound - 10*time.Second
		gomega.Expect(charge).To(gomega.BeNumerically("~", want, 4*time.Second))

		ginkgo.By("giving the sticky Job a turn that much shorter when the polite Job's ends")
		politeAdmitted, _ := admittedAt(ctx, polite)
		var second time.Time
		gomega.Eventually(func(g gomega.Gomega) {
			c := apimeta.FindStatusCondition(workload(g, ctx, sticky).Status.Conditions, kueue.WorkloadQuotaReserved)
			g.Expect(c).NotTo(gomega.BeNil())
			g.Expect(c.LastTransitionTime.Time).To(gomega.BeTemporally(">", politeAdmitted))
			g.Expect(holding(workload(g, ctx, sticky))).To(gomega.BeTrue())
			second = c.LastTransitionTime.Time
		}, window+time.Minute, interval).Should(gomega.Succeed())
		var out time.Time
		gomega.Eventually(func(g gomega.Gomega) {
			wl := workload(g, ctx, sticky)
			c := apimeta.FindStatusCondition(wl.Status.Conditions, kueue.WorkloadEvicted)
			g.Expect(c).NotTo(gomega.BeNil())
			g.Expect(c.LastTransitionTime.Time).To(gomega.BeTemporally(">", second))
			out = c.LastTransitionTime.Time
			spent := apimeta.FindStatusCondition(wl.Status.Conditions, policy.TurnChargeCondition)
			g.Expect(spent).NotTo(gomega.BeNil())
			g.Expect(spent.Reason).To(gomega.Equal(policy.TurnChargeSpent))
		}, window+time.Minute, interval).Should(gomega.Succeed())
		gomega.Expect(out.Sub(second)).To(gomega.BeNumerically("~", window-charge, 4*time.Second), "its second turn lasted the window less the charge")
		ginkgo.AddReportEntry("grace period 40 s, maxHandoverHold 10 s, window 1m",
			fmt.Sprintf("next Job running %s after the eviction, both Jobs' Pods at once for %s; charge %s; next turn %s",
				h.nextRunning.Sub(h.evicted).Round(100*time.Millisecond), h.victimGone.Sub(h.nextRunning).Round(100*time.Millisecond), charge, out.Sub(second)))
	})
})
