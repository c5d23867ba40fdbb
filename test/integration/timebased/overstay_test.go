package timebased_test

import (
	"context"
	"time"

	"github.com/onsi/ginkgo/v2"
	"github.com/onsi/gomega"
	batchv1 "k8s.io/api/batch/v1"
	eventsv1 "k8s.io/api/events/v1"
	apimeta "k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	kueue "sigs.k8s.io/kueue/apis/kueue/v1beta2"

	"github.com/kueue-timeshare/kueue-timeshare/pkg/policy"
)

// A tenant who may edit Jobs sets a grace period of a day on its Job, and its process ignores
// SIGTERM: its Pods keep running after its turn. The manager holds the quota for the next holder
// only up to maxHandoverHold (5m in this suite, the default), tells the Workload so with a Warning,
// and charges the time the Pods ran past it to the Job's next turn, which ends that much earlier.
// As in the handover specs, the spec plays the job controller's part for the Pods.
var _ = ginkgo.Describe("A tenant's grace period past the longest hold", ginkgo.Ordered, func() {
	ctx := context.Background()

	ginkgo.It("hands the quota over at the bound and charges the Pods' overstay to the Job's next turn", func() {
		ns := timeSharingQueue(ctx, "overstay", "team", "5m", "")
		role, err := env.KueueRole(ctx, "job-editor-role")
		gomega.Expect(err).NotTo(gomega.HaveOccurred())
		tenant, err := env.Tenant(ctx, ns, "overstay-user", role)
		gomega.Expect(err).NotTo(gomega.HaveOccurred())

		ginkgo.By("the tenant creates a Job with a grace period of a day, then another")
		sticky := job(ns, "team", "sticky")
		sticky.Spec.Template.Spec.TerminationGracePeriodSeconds = ptr.To[int64](86400)
		gomega.Eventually(func() error { return tenant.Create(ctx, sticky) }, timeout, interval).Should(gomega.Succeed(), "once RBAC serves the binding")
		gomega.Eventually(func(g gomega.Gomega) { g.Expect(unsuspended(g, ctx, sticky)).To(gomega.BeTrue()) }, timeout, interval).Should(gomega.Succeed())
		other := job(ns, "team", "other")
		gomega.Expect(tenant.Create(ctx, other)).To(gomega.Succeed())
		gomega.Eventually(func(g gomega.Gomega) {
			g.Expect(apimeta.FindStatusCondition(workloadOf(g, ctx, other).Status.Conditions, kueue.WorkloadQuotaReserved)).NotTo(gomega.BeNil())
		}, timeout, interval).Should(gomega.Succeed())

		ginkgo.By("ending the sticky Job's turn while its Pod ignores SIGTERM")
		setPods(ctx, sticky, 0, 1)
		clk.Step(5*time.Minute + time.Second)
		gomega.Eventually(func(g gomega.Gomega) {
			g.Expect(apimeta.IsStatusConditionTrue(workloadOf(g, ctx, sticky).Status.Conditions, kueue.WorkloadQuotaReserved)).To(gomega.BeFalse())
			c := apimeta.FindStatusCondition(workloadOf(g, ctx, other).Status.Conditions, kueue.WorkloadQuotaReserved)
			g.Expect(c.Message).To(gomega.ContainSubstring("at the latest"))
		}, timeout, interval).Should(gomega.Succeed())
		gomega.Consistently(func(g gomega.Gomega) { g.Expect(unsuspended(g, ctx, other)).To(gomega.BeFalse()) }, 2*time.Second, interval).Should(gomega.Succeed())

		ginkgo.By("handing the quota over at maxHandoverHold and its margin, not after a day, with a Warning on the sticky Job's Workload")
		clk.Step(5*time.Minute + 11*time.Second)
		gomega.Eventually(func(g gomega.Gomega) { g.Expect(unsuspended(g, ctx, other)).To(gomega.BeTrue()) }, timeout, interval).Should(gomega.Succeed())
		stickyName := workloadOf(gomega.Default, ctx, sticky).Name
		gomega.Eventually(func(g gomega.Gomega) {
			var events eventsv1.EventList
			g.Expect(env.Client.List(ctx, &events, client.InNamespace(ns))).To(gomega.Succeed())
			var notes []string
			for _, e := range events.Items {
				if e.Reason == "PodsOutlivedHold" && e.Regarding.Name == stickyName && e.Type == "Warning" {
					notes = append(notes, e.Note)
				}
			}
			g.Expect(notes).To(gomega.ConsistOf(gomega.ContainSubstring("the time they keep running is charged to its next turn")))
		}, timeout, interval).Should(gomega.Succeed())

		ginkgo.By("charging the 3m1s its Pod ran past the bound once it is gone")
		clk.Step(3 * time.Minute)
		setPods(ctx, sticky, 0, 0)
		gomega.Eventually(func(g gomega.Gomega) {
			g.Expect(policy.TurnChargeOf(workloadOf(g, ctx, sticky))).To(gomega.Equal(3*time.Minute + time.Second))
		}, timeout, interval).Should(gomega.Succeed())

		ginkgo.By("giving the sticky Job its next turn when the other's ends: 1m59s instead of five minutes")
		clk.Step(2*time.Minute + time.Second)
		gomega.Eventually(func(g gomega.Gomega) {
			g.Expect(unsuspended(g, ctx, sticky)).To(gomega.BeTrue())
			g.Expect(unsuspended(g, ctx, other)).To(gomega.BeFalse())
		}, timeout, interval).Should(gomega.Succeed())
		clk.Step(2 * time.Minute)
		gomega.Eventually(func(g gomega.Gomega) {
			wl := workloadOf(g, ctx, sticky)
			g.Expect(apimeta.IsStatusConditionTrue(wl.Status.Conditions, kueue.WorkloadQuotaReserved)).To(gomega.BeFalse())
			c := apimeta.FindStatusCondition(wl.Status.Conditions, policy.TurnChargeCondition)
			g.Expect(c).NotTo(gomega.BeNil())
			g.Expect([]string{string(c.Status), c.Reason}).To(gomega.Equal([]string{"False", policy.TurnChargeSpent}))
			g.Expect(unsuspended(g, ctx, other)).To(gomega.BeTrue())
		}, timeout, interval).Should(gomega.Succeed())

		ginkgo.By("the tenant cannot clear the charge: Workload status is the manager's")
		wl := workloadOf(gomega.Default, ctx, sticky)
		apimeta.RemoveStatusCondition(&wl.Status.Conditions, policy.TurnChargeCondition)
		gomega.Expect(tenant.Status().Update(ctx, wl)).NotTo(gomega.Succeed())
		var j batchv1.Job
		gomega.Expect(tenant.Get(ctx, client.ObjectKeyFromObject(sticky), &j)).To(gomega.Succeed())
	})
})
