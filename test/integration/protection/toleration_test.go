package protection_test

import (
	"context"
	"slices"
	"strings"
	"time"

	"github.com/onsi/ginkgo/v2"
	"github.com/onsi/gomega"
	admissionregistrationv1 "k8s.io/api/admissionregistration/v1"
	eventsv1 "k8s.io/api/events/v1"
	schedulingv1 "k8s.io/api/scheduling/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	kueue "sigs.k8s.io/kueue/apis/kueue/v1beta2"

	"github.com/kueue-timeshare/kueue-timeshare/apis/annotations"
	"github.com/kueue-timeshare/kueue-timeshare/pkg/plugins/toleration"
)

// The seed's priority classes: system-critical 10000, high 9000, and at 8000 a class that tolerates
// priorities below 10000 forever (a WorkloadPriorityClass) and one that tolerates them for 10
// minutes after admission (a Kubernetes PriorityClass, as a Job's pods would name it).
var _ = ginkgo.Describe("Preemption toleration on priority classes", ginkgo.Ordered, func() {
	ctx := context.Background()

	ginkgo.BeforeAll(func() {
		gomega.Expect(env.Reconfigure("")).To(gomega.Succeed())
		for name, value := range map[string]int32{"system-critical": 10000, "high-9000": 9000} {
			gomega.Expect(env.Client.Create(ctx, &kueue.WorkloadPriorityClass{ObjectMeta: metav1.ObjectMeta{Name: name}, Value: value})).To(gomega.Succeed())
		}
		gomega.Expect(env.Client.Create(ctx, &kueue.WorkloadPriorityClass{
			ObjectMeta: metav1.ObjectMeta{Name: "low-non-preempted", Annotations: map[string]string{
				annotations.MinimumPreemptablePriority: "10000", annotations.TolerationSeconds: "-1"}},
			Value: 8000,
		})).To(gomega.Succeed())
		gomega.Expect(env.Client.Create(ctx, &schedulingv1.PriorityClass{
			ObjectMeta: metav1.ObjectMeta{Name: "low-non-preempted-10min", Annotations: map[string]string{
				annotations.MinimumPreemptablePriority: "10000", annotations.TolerationSeconds: "600"}},
			Value: 8000,
		})).To(gomega.Succeed())
	})

	ginkgo.It("low-non-preempted: high never preempts it, system-critical does", func() {
		ns := namespace(ctx, "tolerate-forever")
		clusterQueue(ctx, ns, "tolerate-forever", "1", "", map[string]any{"withinClusterQueue": "LowerPriority"})
		low := job(ns, "tolerate-forever", "low", "1", "low-non-preempted")
		submit(ctx, low)
		started := admittedAt(ctx, low)
		high := job(ns, "tolerate-forever", "high", "1", "high-9000")
		submit(ctx, high)
		expectPendingWith(ctx, high, "1 preemption candidate is protected (1 by the preemption toleration of WorkloadPriorityClass low-non-preempted)")

		clk.SetTime(started.Add(1000 * time.Hour))
		expectHeld(ctx, low, high)

		critical := job(ns, "tolerate-forever", "critical", "1", "system-critical")
		submit(ctx, critical)
		expectPreempted(ctx, low, critical, kueue.InClusterQueueReason)
	})

	ginkgo.It("low-non-preempted-10min (a PriorityClass): high preempts it after 10 minutes", func() {
		ns := namespace(ctx, "tolerate-10min")
		clusterQueue(ctx, ns, "tolerate-10min", "1", "", map[string]any{"withinClusterQueue": "LowerPriority"})
		low := job(ns, "tolerate-10min", "low", "1", "")
		low.Spec.Template.Spec.PriorityClassName = "low-non-preempted-10min"
		submit(ctx, low)
		started := admittedAt(ctx, low)
		high := job(ns, "tolerate-10min", "high", "1", "high-9000")
		submit(ctx, high)
		expectPendingWith(ctx, high, "1 preemption candidate is protected (1 by the preemption toleration of PriorityClass low-non-preempted-10min)",
			"the first protection ends at "+rfc3339(started.Add(10*time.Minute)))

		clk.SetTime(started.Add(10*time.Minute - time.Second))
		expectHeld(ctx, low, high)

		ginkgo.By("preempting it when the toleration ends, woken by the clock alone")
		clk.SetTime(started.Add(10 * time.Minute))
		expectPreempted(ctx, low, high, kueue.InClusterQueueReason)
	})

	ginkgo.It("reclaim: the borrower tolerates the owner's high priority", func() {
		ns := namespace(ctx, "tolerate-reclaim")
		cohort(ctx, "tolerate-org", "", nil)
		clusterQueue(ctx, ns, "tolerate-a1", "0", "tolerate-org", nil)
		clusterQueue(ctx, ns, "tolerate-b1", "2", "tolerate-org", map[string]any{"reclaimWithinCohort": "Any"})
		borrower := job(ns, "tolerate-a1", "borrower", "2", "low-non-preempted")
		submit(ctx, borrower)
		admittedAt(ctx, borrower)
		owner := job(ns, "tolerate-b1", "owner", "2", "high-9000")
		submit(ctx, owner)
		expectPendingWith(ctx, owner, "1 by the preemption toleration of WorkloadPriorityClass low-non-preempted")
		expectHeld(ctx, borrower, owner)
	})

	ginkgo.It("fair sharing: the borrower tolerates a high-priority fair-sharing preemption", func() {
		gomega.Expect(env.Reconfigure("fairSharing:\n  preemptionStrategies: [LessThanOrEqualToFinalShare, LessThanInitialShare]\n")).To(gomega.Succeed())
		ginkgo.DeferCleanup(func() { gomega.Expect(env.Reconfigure("")).To(gomega.Succeed()) })
		ns := namespace(ctx, "tolerate-fair")
		cohort(ctx, "tolerate-fair-org", "", nil)
		clusterQueue(ctx, ns, "tolerate-fair-a1", "0", "tolerate-fair-org", nil)
		clusterQueue(ctx, ns, "tolerate-fair-b1", "1", "tolerate-fair-org", map[string]any{"reclaimWithinCohort": "Any"})
		clusterQueue(ctx, ns, "tolerate-fair-c1", "1", "tolerate-fair-org", nil)
		borrower := job(ns, "tolerate-fair-a1", "borrower", "2", "low-non-preempted")
		submit(ctx, borrower)
		admittedAt(ctx, borrower)
		owner := job(ns, "tolerate-fair-b1", "owner", "2", "high-9000")
		submit(ctx, owner)
		expectPendingWith(ctx, owner, "1 by the preemption toleration of WorkloadPriorityClass low-non-preempted")
		expectHeld(ctx, borrower, owner)

		critical := job(ns, "tolerate-fair-b1", "critical", "2", "system-critical")
		submit(ctx, critical)
		expectPreempted(ctx, borrower, critical, kueue.InCohortFairSharingReason)
	})

	ginkgo.It("rejects invalid annotations on both kinds of class, naming the annotation", func() {
		err := env.Client.Create(ctx, &kueue.WorkloadPriorityClass{
			ObjectMeta: metav1.ObjectMeta{Name: "bad-wpc", Annotations: map[string]string{annotations.MinimumPreemptablePriority: "very high"}},
			Value:      1,
		})
		gomega.Expect(apierrors.IsInvalid(err)).To(gomega.BeTrue(), "want an Invalid error, got %v", err)
		gomega.Expect(err.Error()).To(gomega.ContainSubstring("metadata.annotations[preemption-toleration.scheduling.x-k8s.io/minimum-preemptable-priority]"))
		gomega.Expect(err.Error()).To(gomega.ContainSubstring("must be a 32-bit integer"))

		pc := &schedulingv1.PriorityClass{ObjectMeta: metav1.ObjectMeta{Name: "good-pc"}, Value: 1}
		gomega.Expect(env.Client.Create(ctx, pc)).To(gomega.Succeed())
		pc.Annotations = map[string]string{annotations.TolerationSeconds: "10m"}
		err = env.Client.Update(ctx, pc)
		gomega.Expect(apierrors.IsInvalid(err)).To(gomega.BeTrue(), "want an Invalid error on update, got %v", err)
		gomega.Expect(err.Error()).To(gomega.ContainSubstring("metadata.annotations[preemption-toleration.scheduling.x-k8s.io/toleration-seconds]"))
	})

	ginkgo.It("ignores a class with invalid annotations written before the webhook, with a Warning event", func() {
		withoutClassWebhooks(ctx, func() error {
			return env.Client.Create(ctx, &kueue.WorkloadPriorityClass{
				ObjectMeta: metav1.ObjectMeta{Name: "legacy-low", Annotations: map[string]string{
					annotations.MinimumPreemptablePriority: "10000", annotations.TolerationSeconds: "forever"}},
				Value: 8000,
			})
		})
		gomega.Eventually(func(g gomega.Gomega) {
			var list eventsv1.EventList
			g.Expect(env.Client.List(ctx, &list)).To(gomega.Succeed())
			found := slices.ContainsFunc(list.Items, func(e eventsv1.Event) bool {
				return e.Regarding.Name == "legacy-low" && e.Reason == "InvalidPreemptionToleration" && e.Type == "Warning" &&
					strings.Contains(e.Note, "toleration-seconds")
			})
			g.Expect(found).To(gomega.BeTrue(), "no InvalidPreemptionToleration event for legacy-low")
		}, timeout, interval).Should(gomega.Succeed())

		ns := namespace(ctx, "tolerate-legacy")
		clusterQueue(ctx, ns, "tolerate-legacy", "1", "", map[string]any{"withinClusterQueue": "LowerPriority"})
		low := job(ns, "tolerate-legacy", "low", "1", "legacy-low")
		submit(ctx, low)
		admittedAt(ctx, low)
		high := job(ns, "tolerate-legacy", "high", "1", "high-9000")
		submit(ctx, high)
		expectPreempted(ctx, low, high, kueue.InClusterQueueReason)
	})
})

// withoutClassWebhooks retries create with our priority class webhooks removed, as before an
// upgrade, until the API server has dropped them and create succeeds.
func withoutClassWebhooks(ctx context.Context, create func() error) {
	ginkgo.GinkgoHelper()
	var vwc admissionregistrationv1.ValidatingWebhookConfiguration
	key := client.ObjectKey{Name: "kueue-timeshare-validating-webhook-configuration"}
	gomega.Expect(env.Client.Get(ctx, key, &vwc)).To(gomega.Succeed())
	saved := vwc.DeepCopy()
	vwc.Webhooks = slices.DeleteFunc(vwc.Webhooks, func(w admissionregistrationv1.ValidatingWebhook) bool {
		return strings.Contains(w.Name, "priorityclass")
	})
	gomega.Expect(env.Client.Update(ctx, &vwc)).To(gomega.Succeed())
	defer func() {
		gomega.Expect(env.Client.Get(ctx, key, &vwc)).To(gomega.Succeed())
		vwc.Webhooks = saved.Webhooks
		gomega.Expect(env.Client.Update(ctx, &vwc)).To(gomega.Succeed())
	}()
	// The API server applies webhook configuration changes asynchronously.
	gomega.Eventually(create, timeout, interval).Should(gomega.Succeed())
}

// The manager's toleration store is filled by controllers, which may lag behind a class created a
// moment before a workload naming it; the preemptor then reads the class from the cache itself.
var _ = ginkgo.Describe("A priority class its controller has not read yet", func() {
	ctx := context.Background()

	ginkgo.It("is read from the manager's cache when a preemptor asks for it", func() {
		reading := toleration.NewStore(toleration.ReadMisses(env.Manager.GetClient()))
		controllersOnly := toleration.NewStore()
		gomega.Expect(env.Client.Create(ctx, &kueue.WorkloadPriorityClass{
			ObjectMeta: metav1.ObjectMeta{Name: "created-just-now", Annotations: map[string]string{
				annotations.MinimumPreemptablePriority: "10000", annotations.TolerationSeconds: "600"}},
			Value: 8000,
		})).To(gomega.Succeed())
		ref := kueue.NewWorkloadPriorityClassRef("created-just-now")
		want := &toleration.Toleration{
			Toleration: annotations.Toleration{MinimumPreemptablePriority: 10000, Duration: 10 * time.Minute},
			Source:     "WorkloadPriorityClass created-just-now",
		}
		gomega.Eventually(func() *toleration.Toleration { return reading.For(ref) }, timeout, interval).To(gomega.Equal(want))
		gomega.Expect(controllersOnly.For(ref)).To(gomega.BeNil(), "a store that waits for its controllers knows nothing of the class")
	})
})
