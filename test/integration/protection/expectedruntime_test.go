package protection_test

import (
	"context"
	"slices"
	"strings"
	"time"

	"github.com/onsi/ginkgo/v2"
	"github.com/onsi/gomega"
	dto "github.com/prometheus/client_model/go"
	batchv1 "k8s.io/api/batch/v1"
	eventsv1 "k8s.io/api/events/v1"
	apimeta "k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"
	ctrlmetrics "sigs.k8s.io/controller-runtime/pkg/metrics"

	kueue "sigs.k8s.io/kueue/apis/kueue/v1beta2"

	"github.com/kueue-timeshare/kueue-timeshare/apis/annotations"
)

// expectedRuntimeJob is a one-CPU job of the LocalQueue lq with the given annotations.
func expectedRuntimeJob(ns, lq, name string, ann map[string]string) *batchv1.Job {
	j := job(ns, lq, name, "1", "")
	j.Annotations = ann
	return j
}

var _ = ginkgo.Describe("Expected-runtime requeue", ginkgo.Ordered, func() {
	ctx := context.Background()
	var ns string
	longAnn := map[string]string{annotations.ExpectedRuntime: "10m", annotations.RequeueDelay: "30m"}

	ginkgo.BeforeAll(func() {
		gomega.Expect(env.Reconfigure("")).To(gomega.Succeed())
		ns = namespace(ctx, "expected")
		clusterQueue(ctx, ns, "expected", "1", "", map[string]any{"withinClusterQueue": "LowerPriority"})
	})

	ginkgo.It("copies the annotations from the Job to its Workload", func() {
		long := expectedRuntimeJob(ns, "expected", "long", longAnn)
		submit(ctx, long)
		gomega.Eventually(func(g gomega.Gomega) {
			ann := workloadOf(g, ctx, long).Annotations
			g.Expect(ann).To(gomega.HaveKeyWithValue(annotations.ExpectedRuntime, "10m"))
			g.Expect(ann).To(gomega.HaveKeyWithValue(annotations.RequeueDelay, "30m"))
		}, timeout, interval).Should(gomega.Succeed())
	})

	ginkgo.It("keeps a workload past its expected runtime running while nobody waits, then requeues it for a contender", func() {
		long := expectedRuntimeJob(ns, "expected", "long", nil)
		started := admittedAt(ctx, long)
		clk.SetTime(started.Add(15 * time.Minute))
		gomega.Consistently(func(g gomega.Gomega) { g.Expect(unsuspended(g, ctx, long)).To(gomega.BeTrue()) }, 2*time.Second, interval).Should(gomega.Succeed())

		before := counter("kueue_expected_runtime_nominations_total", "")
		evictedBefore := counter("kueue_evicted_workloads_total", "InClusterQueueExpectedRuntime")
		contender := expectedRuntimeJob(ns, "expected", "contender", nil)
		submit(ctx, contender)
		expectPreempted(ctx, long, contender, "InClusterQueueExpectedRuntime")
		gomega.Expect(counter("kueue_expected_runtime_nominations_total", "")).To(gomega.BeNumerically(">", before))

		ginkgo.By("writing the cooldown: now + requeue-delay")
		preemptedAt := clk.Now()
		gomega.Eventually(func(g gomega.Gomega) {
			g.Expect(workloadOf(g, ctx, long).Annotations).To(gomega.HaveKeyWithValue(annotations.RequeueNotBefore, rfc3339(preemptedAt.Add(30*time.Minute))))
		}, timeout, interval).Should(gomega.Succeed())
		gomega.Eventually(func(g gomega.Gomega) {
			c := apimeta.FindStatusCondition(workloadOf(g, ctx, long).Status.Conditions, kueue.WorkloadEvicted)
			g.Expect(c).NotTo(gomega.BeNil())
			g.Expect(c.Reason).To(gomega.Equal("InClusterQueueExpectedRuntime"))
			g.Expect(c.Message).To(gomega.ContainSubstring("expected runtime"))
		}, timeout, interval).Should(gomega.Succeed())
		gomega.Expect(counter("kueue_evicted_workloads_total", "InClusterQueueExpectedRuntime")).To(gomega.BeNumerically(">", evictedBefore))

		ginkgo.By("putting it back in the queue, under the same reason")
		gomega.Eventually(func(g gomega.Gomega) {
			c := apimeta.FindStatusCondition(workloadOf(g, ctx, long).Status.Conditions, kueue.WorkloadRequeued)
			g.Expect(c).NotTo(gomega.BeNil())
			g.Expect(c.Status).To(gomega.Equal(metav1.ConditionTrue))
			g.Expect(c.Reason).To(gomega.Equal("InClusterQueueExpectedRuntime"))
			g.Expect(c.Message).To(gomega.Equal("Requeued after preemption for running past its expected runtime"))
		}, timeout, interval).Should(gomega.Succeed())

		ginkgo.By("not nominating it again during the cooldown")
		gomega.Expect(env.Client.Delete(ctx, contender, deleteInBackground)).To(gomega.Succeed())
		readmitted := admittedAt(ctx, long)
		third := expectedRuntimeJob(ns, "expected", "third", nil)
		submit(ctx, third)
		skippedBefore := counter("kueue_expected_runtime_nomination_skipped_total", "cooldown")
		clk.SetTime(readmitted.Add(20 * time.Minute))
		expectHeld(ctx, long, third)
		gomega.Eventually(func() float64 { return counter("kueue_expected_runtime_nomination_skipped_total", "cooldown") }, timeout, interval).
			Should(gomega.BeNumerically(">", skippedBefore))

		ginkgo.By("nominating it once the cooldown is over")
		clk.SetTime(preemptedAt.Add(30 * time.Minute))
		expectPreempted(ctx, long, third, "InClusterQueueExpectedRuntime")
	})

	ginkgo.It("warns about invalid annotations on the Workload and never nominates it", func() {
		ns := namespace(ctx, "expected-bad")
		clusterQueue(ctx, ns, "expected-bad", "1", "", map[string]any{"withinClusterQueue": "LowerPriority"})
		bad := expectedRuntimeJob(ns, "expected-bad", "bad", map[string]string{annotations.ExpectedRuntime: "ten minutes"})
		submit(ctx, bad)
		started := admittedAt(ctx, bad)
		gomega.Eventually(func(g gomega.Gomega) {
			wl := workloadOf(g, ctx, bad)
			var list eventsv1.EventList
			g.Expect(env.Client.List(ctx, &list)).To(gomega.Succeed())
			g.Expect(slices.ContainsFunc(list.Items, func(e eventsv1.Event) bool {
				return e.Regarding.Name == wl.Name && e.Reason == "InvalidExpectedRuntime" && e.Type == "Warning" &&
					strings.Contains(e.Note, `"ten minutes" is not a duration`)
			})).To(gomega.BeTrue(), "no InvalidExpectedRuntime event")
		}, timeout, interval).Should(gomega.Succeed())
		clk.SetTime(started.Add(time.Hour))
		other := expectedRuntimeJob(ns, "expected-bad", "other", nil)
		submit(ctx, other)
		expectHeld(ctx, bad, other)
	})
})

var deleteInBackground = client.PropagationPolicy(metav1.DeletePropagationBackground)

// counter reads a counter of our registry; label is the reason label value, "" for none.
func counter(name, reason string) float64 {
	families, err := ctrlmetrics.Registry.Gather()
	gomega.Expect(err).NotTo(gomega.HaveOccurred())
	for _, f := range families {
		if f.GetName() != name {
			continue
		}
		for _, m := range f.GetMetric() {
			if reason == "" && !slices.ContainsFunc(m.GetLabel(), func(l *dto.LabelPair) bool { return l.GetName() == "reason" }) {
				return m.GetCounter().GetValue()
			}
			for _, l := range m.GetLabel() {
				if l.GetName() == "reason" && l.GetValue() == reason {
					return m.GetCounter().GetValue()
				}
			}
		}
	}
	return 0
}
