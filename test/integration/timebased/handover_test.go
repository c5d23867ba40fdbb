package timebased_test

import (
	"context"
	"time"

	"github.com/onsi/ginkgo/v2"
	"github.com/onsi/gomega"
	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	apimeta "k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	kueue "sigs.k8s.io/kueue/apis/kueue/v1beta2"

	"github.com/kueue-timeshare/kueue-timeshare/test/util"
)

// No job controller runs on envtest: the spec plays its part, reporting the rotated-out Job's
// Pods as terminating and then gone, as the job controller does after Kueue suspends the Job,
// and keeping as many Pod objects of the Job (never scheduled: no kubelet either).
var _ = ginkgo.Describe("Handover after the victim's Pods terminate", ginkgo.Ordered, func() {
	ctx := context.Background()
	var ns string

	ginkgo.BeforeAll(func() {
		ns = timeSharingQueue(ctx, "handover", "team", "5m", "")
	})

	ginkgo.It("keeps the turn's quota until the rotated-out Job has no Pods left, then hands it over", func() {
		first := job(ns, "team", "first")
		first.Spec.Template.Spec.TerminationGracePeriodSeconds = ptr.To[int64](20)
		gomega.Expect(env.Client.Create(ctx, first)).To(gomega.Succeed())
		gomega.Eventually(func(g gomega.Gomega) { g.Expect(unsuspended(g, ctx, first)).To(gomega.BeTrue()) }, timeout, interval).Should(gomega.Succeed())
		second := job(ns, "team", "second")
		gomega.Expect(env.Client.Create(ctx, second)).To(gomega.Succeed())
		gomega.Eventually(func(g gomega.Gomega) {
			g.Expect(apimeta.FindStatusCondition(workloadOf(g, ctx, second).Status.Conditions, kueue.WorkloadQuotaReserved)).NotTo(gomega.BeNil())
		}, timeout, interval).Should(gomega.Succeed())

		ginkgo.By("reporting the first Job's Pod as terminating, as the job controller does once it is suspended")
		setPods(ctx, first, 0, 1)

		ginkgo.By("ending the first Job's turn")
		clk.Step(5*time.Minute + time.Second)
		gomega.Eventually(func(g gomega.Gomega) {
			wl := workloadOf(g, ctx, first)
			g.Expect(apimeta.FindStatusCondition(wl.Status.Conditions, kueue.WorkloadEvicted)).NotTo(gomega.BeNil())
			g.Expect(apimeta.IsStatusConditionTrue(wl.Status.Conditions, kueue.WorkloadQuotaReserved)).To(gomega.BeFalse(), "Kueue releases the quota of a Job with no active Pods")
		}, timeout, interval).Should(gomega.Succeed())

		ginkgo.By("keeping the second Job waiting while the first Job's Pod terminates, saying why")
		gomega.Eventually(func(g gomega.Gomega) {
			c := apimeta.FindStatusCondition(workloadOf(g, ctx, second).Status.Conditions, kueue.WorkloadQuotaReserved)
			g.Expect(c).NotTo(gomega.BeNil())
			g.Expect(c.Message).To(gomega.ContainSubstring("waiting for the Pods of the preempted workload(s) " + ns + "/"))
			g.Expect(c.Message).To(gomega.ContainSubstring("to terminate"))
		}, timeout, interval).Should(gomega.Succeed())
		gomega.Consistently(func(g gomega.Gomega) {
			g.Expect(unsuspended(g, ctx, second)).To(gomega.BeFalse())
		}, 2*time.Second, interval).Should(gomega.Succeed())

		ginkgo.By("handing the quota over once the Pod is gone, without waiting for the grace period to end")
		setPods(ctx, first, 0, 0)
		gomega.Eventually(func(g gomega.Gomega) {
			g.Expect(unsuspended(g, ctx, second)).To(gomega.BeTrue())
			g.Expect(unsuspended(g, ctx, first)).To(gomega.BeFalse())
		}, timeout, interval).Should(gomega.Succeed(), util.Describe(ctx, env.Client, first, second))
	})

	ginkgo.It("stops holding when the grace period and its margin are over, even if a Pod never goes", func() {
		third := job(ns, "team", "third")
		gomega.Expect(env.Client.Create(ctx, third)).To(gomega.Succeed())
		var holder, waiting *batchv1.Job
		// second holds the quota now; first and third wait.
		holder = &batchv1.Job{}
		gomega.Expect(env.Client.Get(ctx, client.ObjectKey{Namespace: ns, Name: "second"}, holder)).To(gomega.Succeed())
		setPods(ctx, holder, 0, 1)
		clk.Step(5*time.Minute + time.Second)
		gomega.Eventually(func(g gomega.Gomega) {
			wl := workloadOf(g, ctx, holder)
			g.Expect(apimeta.FindStatusCondition(wl.Status.Conditions, kueue.WorkloadEvicted)).NotTo(gomega.BeNil())
			g.Expect(apimeta.IsStatusConditionTrue(wl.Status.Conditions, kueue.WorkloadQuotaReserved)).To(gomega.BeFalse())
		}, timeout, interval).Should(gomega.Succeed())
		first := &batchv1.Job{}
		gomega.Expect(env.Client.Get(ctx, client.ObjectKey{Namespace: ns, Name: "first"}, first)).To(gomega.Succeed())
		waiting = first
		gomega.Consistently(func(g gomega.Gomega) {
			g.Expect(unsuspended(g, ctx, waiting)).To(gomega.BeFalse())
			g.Expect(unsuspended(g, ctx, third)).To(gomega.BeFalse())
		}, 2*time.Second, interval).Should(gomega.Succeed())

		ginkgo.By("passing the victim's grace period (the Pod default, 30s) and the hold's margin (10s)")
		clk.Step(41 * time.Second)
		gomega.Eventually(func(g gomega.Gomega) {
			g.Expect(unsuspended(g, ctx, waiting) || unsuspended(g, ctx, third)).To(gomega.BeTrue())
		}, timeout, interval).Should(gomega.Succeed())
	})
})

// setPods writes a Job's active and terminating Pod counts, as the job controller would.
func setPods(ctx context.Context, j *batchv1.Job, active, terminating int32) {
	ginkgo.GinkgoHelper()
	var obj batchv1.Job
	gomega.Eventually(func(g gomega.Gomega) {
		g.Expect(env.Client.Get(ctx, client.ObjectKeyFromObject(j), &obj)).To(gomega.Succeed())
		obj.Status.Active = active
		obj.Status.Terminating = ptr.To(terminating)
		g.Expect(env.Client.Status().Update(ctx, &obj)).To(gomega.Succeed())
	}, timeout, interval).Should(gomega.Succeed())
	// The Pods themselves, which the manager also reads: as many as the status counts.
	sa := &corev1.ServiceAccount{ObjectMeta: metav1.ObjectMeta{Namespace: j.Namespace, Name: "default"}}
	if err := env.Client.Create(ctx, sa); !apierrors.IsAlreadyExists(err) {
		gomega.Expect(err).NotTo(gomega.HaveOccurred())
	}
	selector := client.MatchingLabels{batchv1.ControllerUidLabel: string(obj.UID)}
	var pods corev1.PodList
	gomega.Expect(env.Client.List(ctx, &pods, client.InNamespace(j.Namespace), selector)).To(gomega.Succeed())
	want := int(active + terminating)
	for i := len(pods.Items); i < want; i++ {
		pod := &corev1.Pod{
			ObjectMeta: metav1.ObjectMeta{Namespace: j.Namespace, GenerateName: j.Name + "-", Labels: selector},
			Spec:       corev1.PodSpec{Containers: []corev1.Container{{Name: "main", Image: "pause"}}},
		}
		gomega.Expect(env.Client.Create(ctx, pod)).To(gomega.Succeed())
	}
	for i := want; i < len(pods.Items); i++ {
		gomega.Expect(client.IgnoreNotFound(env.Client.Delete(ctx, &pods.Items[i], client.GracePeriodSeconds(0)))).To(gomega.Succeed())
	}
	// The manager reads both from its informers: the spec steps the clock only once they agree,
	// as a real cluster's Pods exist long before their Job is preempted.
	gomega.Eventually(func(g gomega.Gomega) {
		cached := env.Manager.GetClient()
		var seen batchv1.Job
		g.Expect(cached.Get(ctx, client.ObjectKeyFromObject(j), &seen)).To(gomega.Succeed())
		g.Expect(seen.Status.Active).To(gomega.Equal(active))
		g.Expect(ptr.Deref(seen.Status.Terminating, 0)).To(gomega.Equal(terminating))
		var left corev1.PodList
		g.Expect(cached.List(ctx, &left, client.InNamespace(j.Namespace), selector)).To(gomega.Succeed())
		g.Expect(left.Items).To(gomega.HaveLen(want))
	}, timeout, interval).Should(gomega.Succeed())
}
