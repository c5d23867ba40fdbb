package manager_test

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

const (
	// Ample: CI runs the suites side by side on a busy machine; Eventually returns once it holds.
	timeout  = 90 * time.Second
	interval = 250 * time.Millisecond
)

var _ = ginkgo.Describe("Admission through the kueue-timeshare manager", ginkgo.Ordered, func() {
	var (
		ctx context.Context
		ns  *corev1.Namespace
		rf  *kueue.ResourceFlavor
		cq  *kueue.ClusterQueue
		lq  *kueue.LocalQueue
	)

	ginkgo.BeforeAll(func() {
		ctx = context.Background()
		ns = &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{GenerateName: "admission-"}}
		gomega.Expect(env.Client.Create(ctx, ns)).To(gomega.Succeed())
		rf = &kueue.ResourceFlavor{ObjectMeta: metav1.ObjectMeta{Name: "default-flavor"}}
		gomega.Expect(env.Client.Create(ctx, rf)).To(gomega.Succeed())
		cq = clusterQueue("team-a", "2")
		gomega.Expect(env.Client.Create(ctx, cq)).To(gomega.Succeed())
		lq = &kueue.LocalQueue{
			ObjectMeta: metav1.ObjectMeta{Namespace: ns.Name, Name: "team-a"},
			Spec:       kueue.LocalQueueSpec{ClusterQueue: "team-a"},
		}
		gomega.Expect(env.Client.Create(ctx, lq)).To(gomega.Succeed())
	})

	ginkgo.It("admits a Job that fits, and keeps a Job over quota pending with a readable reason until room frees up", func() {
		first := job(ns.Name, "first", "1500m")
		gomega.Expect(env.Client.Create(ctx, first)).To(gomega.Succeed())
		ginkgo.By("suspending the Job on creation (mutating webhook)")
		gomega.Expect(ptr.Deref(first.Spec.Suspend, false)).To(gomega.BeTrue())

		ginkgo.By("reserving quota, admitting the Workload and unsuspending the Job")
		gomega.Eventually(func(g gomega.Gomega) {
			wl := workloadOf(g, ctx, first)
			g.Expect(apimeta.IsStatusConditionTrue(wl.Status.Conditions, kueue.WorkloadQuotaReserved)).To(gomega.BeTrue())
			g.Expect(apimeta.IsStatusConditionTrue(wl.Status.Conditions, kueue.WorkloadAdmitted)).To(gomega.BeTrue())
			g.Expect(wl.Status.Admission).NotTo(gomega.BeNil())
			g.Expect(wl.Status.Admission.ClusterQueue).To(gomega.Equal(kueue.ClusterQueueReference("team-a")))
			var got batchv1.Job
			g.Expect(env.Client.Get(ctx, client.ObjectKeyFromObject(first), &got)).To(gomega.Succeed())
			g.Expect(ptr.Deref(got.Spec.Suspend, true)).To(gomega.BeFalse())
		}, timeout, interval).Should(gomega.Succeed())

		second := job(ns.Name, "second", "1")
		gomega.Expect(env.Client.Create(ctx, second)).To(gomega.Succeed())
		ginkgo.By("leaving the second Job pending with the quota shortfall in the condition message")
		gomega.Eventually(func(g gomega.Gomega) {
			wl := workloadOf(g, ctx, second)
			c := apimeta.FindStatusCondition(wl.Status.Conditions, kueue.WorkloadQuotaReserved)
			g.Expect(c).NotTo(gomega.BeNil())
			g.Expect(c.Status).To(gomega.Equal(metav1.ConditionFalse))
			g.Expect(c.Reason).To(gomega.Equal("Pending"))
			g.Expect(c.Message).To(gomega.ContainSubstring("insufficient unused quota for cpu in flavor default-flavor"))
		}, timeout, interval).Should(gomega.Succeed())
		gomega.Consistently(func(g gomega.Gomega) {
			var got batchv1.Job
			g.Expect(env.Client.Get(ctx, client.ObjectKeyFromObject(second), &got)).To(gomega.Succeed())
			g.Expect(ptr.Deref(got.Spec.Suspend, false)).To(gomega.BeTrue())
		}, 2*time.Second, interval).Should(gomega.Succeed())

		ginkgo.By("admitting the pending Job once the first one is gone")
		gomega.Expect(env.Client.Delete(ctx, first, client.PropagationPolicy(metav1.DeletePropagationBackground))).To(gomega.Succeed())
		gomega.Eventually(func(g gomega.Gomega) {
			var got batchv1.Job
			g.Expect(env.Client.Get(ctx, client.ObjectKeyFromObject(second), &got)).To(gomega.Succeed())
			g.Expect(ptr.Deref(got.Spec.Suspend, true)).To(gomega.BeFalse())
		}, timeout, interval).Should(gomega.Succeed())
	})

	ginkgo.It("rejects an invalid ClusterQueue in the webhook, naming the field", func() {
		bad := clusterQueue("negative-quota", "-1")
		err := env.Client.Create(ctx, bad)
		gomega.Expect(apierrors.IsForbidden(err) || apierrors.IsInvalid(err)).To(gomega.BeTrue(), "unexpected error: %v", err)
		gomega.Expect(err.Error()).To(gomega.And(
			gomega.ContainSubstring(`admission webhook "vclusterqueue.kb.io" denied the request`),
			gomega.ContainSubstring("spec.resourceGroups[0].flavors[0].resources[0].nominalQuota"),
			gomega.ContainSubstring("must be greater than or equal to 0"),
		))
		gomega.Expect(apierrors.IsNotFound(env.Client.Get(ctx, client.ObjectKeyFromObject(bad), &kueue.ClusterQueue{}))).To(gomega.BeTrue())
	})
})

func clusterQueue(name, cpu string) *kueue.ClusterQueue { return util.CPUClusterQueue(name, cpu) }

func job(ns, name, cpu string) *batchv1.Job { return util.CPUJob(ns, name, "team-a", cpu) }

func workloadOf(g gomega.Gomega, ctx context.Context, j *batchv1.Job) *kueue.Workload {
	return util.WorkloadOf(g, ctx, env.Client, j)
}
