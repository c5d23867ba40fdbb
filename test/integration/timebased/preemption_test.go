package timebased_test

import (
	"context"
	"slices"
	"time"

	"github.com/onsi/ginkgo/v2"
	"github.com/onsi/gomega"
	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	eventsv1 "k8s.io/api/events/v1"
	apimeta "k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"
	ctrlmetrics "sigs.k8s.io/controller-runtime/pkg/metrics"

	kueue "sigs.k8s.io/kueue/apis/kueue/v1beta2"

	"github.com/kueue-timeshare/kueue-timeshare/test/util"
)

const (
	// Ample: CI runs the suites side by side on a busy machine; Eventually returns once it holds.
	timeout  = 90 * time.Second
	interval = 200 * time.Millisecond
)

var _ = ginkgo.Describe("withinClusterQueueConfig.minAdmitDuration", ginkgo.Ordered, func() {
	ctx := context.Background()
	var ns string

	ginkgo.BeforeAll(func() {
		ns = timeSharingQueue(ctx, "gpu-share", "team", "5m", "")
	})

	ginkgo.It("protects the running workload for minAdmitDuration, then lets the waiting one take a turn", func() {
		first := job(ns, "team", "first")
		gomega.Expect(env.Client.Create(ctx, first)).To(gomega.Succeed())
		gomega.Eventually(func(g gomega.Gomega) { g.Expect(unsuspended(g, ctx, first)).To(gomega.BeTrue()) }, timeout, interval).Should(gomega.Succeed())

		// Same priority, not newer than the running one: upstream's LowerOrNewerEqualPriority never
		// lets it preempt.
		second := job(ns, "team", "second")
		gomega.Expect(env.Client.Create(ctx, second)).To(gomega.Succeed())
		before := preemptedTotal("gpu-share", "InClusterQueueTimeBased")
		evictedBefore := evictedTotal("gpu-share", "InClusterQueueTimeBased")

		ginkgo.By("telling the waiting workload until when the running one is protected")
		gomega.Eventually(func(g gomega.Gomega) {
			reserved := apimeta.FindStatusCondition(workloadOf(g, ctx, first).Status.Conditions, kueue.WorkloadQuotaReserved)
			g.Expect(reserved).NotTo(gomega.BeNil())
			c := apimeta.FindStatusCondition(workloadOf(g, ctx, second).Status.Conditions, kueue.WorkloadQuotaReserved)
			g.Expect(c).NotTo(gomega.BeNil())
			g.Expect(c.Message).To(gomega.ContainSubstring("same-priority workloads are protected by minAdmitDuration 5m0s; the first becomes preemptible after " +
				reserved.LastTransitionTime.Add(5*time.Minute).UTC().Format(time.RFC3339)))
		}, timeout, interval).Should(gomega.Succeed())

		ginkgo.By("keeping the first workload inside its window")
		clk.Step(4 * time.Minute)
		gomega.Consistently(func(g gomega.Gomega) {
			g.Expect(unsuspended(g, ctx, first)).To(gomega.BeTrue())
			g.Expect(unsuspended(g, ctx, second)).To(gomega.BeFalse())
		}, 2*time.Second, interval).Should(gomega.Succeed())

		ginkgo.By("preempting it once the window has passed, with the time-based reason, woken by the clock alone")
		clk.Step(time.Minute + time.Second)
		gomega.Eventually(func(g gomega.Gomega) {
			wl := workloadOf(g, ctx, first)
			c := apimeta.FindStatusCondition(wl.Status.Conditions, kueue.WorkloadPreempted)
			g.Expect(c).NotTo(gomega.BeNil())
			g.Expect(c.Reason).To(gomega.Equal("InClusterQueueTimeBased"))
			g.Expect(c.Message).To(gomega.ContainSubstring("time-sharing"))
			ev := apimeta.FindStatusCondition(wl.Status.Conditions, kueue.WorkloadEvicted)
			g.Expect(ev).NotTo(gomega.BeNil())
			g.Expect(ev.Reason).To(gomega.Equal("InClusterQueueTimeBased"))
			g.Expect(ev.Message).To(gomega.ContainSubstring("minAdmitDuration"))
		}, timeout, interval).Should(gomega.Succeed())
		gomega.Eventually(func(g gomega.Gomega) {
			g.Expect(unsuspended(g, ctx, second)).To(gomega.BeTrue())
			g.Expect(unsuspended(g, ctx, first)).To(gomega.BeFalse())
		}, timeout, interval).Should(gomega.Succeed())
		gomega.Expect(preemptedTotal("gpu-share", "InClusterQueueTimeBased")).To(gomega.Equal(before + 1))
		gomega.Expect(evictedTotal("gpu-share", "InClusterQueueTimeBased")).To(gomega.Equal(evictedBefore + 1))

		ginkgo.By("putting the rotated-out workload back in the queue, under the same reason")
		gomega.Eventually(func(g gomega.Gomega) {
			wl := workloadOf(g, ctx, first)
			c := apimeta.FindStatusCondition(wl.Status.Conditions, kueue.WorkloadRequeued)
			g.Expect(c).NotTo(gomega.BeNil())
			g.Expect(c.Status).To(gomega.Equal(metav1.ConditionTrue))
			g.Expect(c.Reason).To(gomega.Equal("InClusterQueueTimeBased"))
			g.Expect(c.Message).To(gomega.Equal("Requeued after time-sharing preemption"))
			var list eventsv1.EventList
			g.Expect(env.Client.List(ctx, &list, client.InNamespace(ns))).To(gomega.Succeed())
			g.Expect(slices.ContainsFunc(list.Items, func(e eventsv1.Event) bool {
				return e.Regarding.Name == wl.Name && e.Reason == "Requeued" && e.Type == corev1.EventTypeNormal
			})).To(gomega.BeTrue(), "no Requeued event on the rotated-out workload")
		}, timeout, interval).Should(gomega.Succeed())

		ginkgo.By("admitting it again once the second workload's window has passed")
		clk.Step(5*time.Minute + time.Second)
		gomega.Eventually(func(g gomega.Gomega) {
			g.Expect(unsuspended(g, ctx, first)).To(gomega.BeTrue())
			g.Expect(unsuspended(g, ctx, second)).To(gomega.BeFalse())
			ev := apimeta.FindStatusCondition(workloadOf(g, ctx, second).Status.Conditions, kueue.WorkloadEvicted)
			g.Expect(ev).NotTo(gomega.BeNil())
			g.Expect(ev.Reason).To(gomega.Equal("InClusterQueueTimeBased"))
		}, timeout, interval).Should(gomega.Succeed())
	})
})

// job needs the whole one-CPU ClusterQueue behind the LocalQueue lq.
func job(ns, lq, name string) *batchv1.Job { return util.CPUJob(ns, name, lq, "1") }

func unsuspended(g gomega.Gomega, ctx context.Context, j *batchv1.Job) bool {
	return util.Unsuspended(g, ctx, env.Client, j)
}

func workloadOf(g gomega.Gomega, ctx context.Context, j *batchv1.Job) *kueue.Workload {
	return util.WorkloadOf(g, ctx, env.Client, j)
}

func preemptedTotal(cq, reason string) float64 {
	return counterFor("kueue_preempted_workloads_total", "preempting_cluster_queue", cq, reason)
}

// evictedTotal is kueue_evicted_workloads_total of cq for reason, summed over its other labels.
func evictedTotal(cq, reason string) float64 {
	return counterFor("kueue_evicted_workloads_total", "cluster_queue", cq, reason)
}

// counterFor sums the counter name over the series whose cqLabel is cq and whose reason is reason.
func counterFor(name, cqLabel, cq, reason string) float64 {
	families, err := ctrlmetrics.Registry.Gather()
	gomega.Expect(err).NotTo(gomega.HaveOccurred())
	total := 0.0
	for _, f := range families {
		if f.GetName() != name {
			continue
		}
		for _, m := range f.GetMetric() {
			if labels := labelsOf(m); labels[cqLabel] == cq && labels["reason"] == reason {
				total += m.GetCounter().GetValue()
			}
		}
	}
	return total
}
