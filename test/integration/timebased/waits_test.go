package timebased_test

import (
	"context"
	"time"

	"github.com/onsi/ginkgo/v2"
	"github.com/onsi/gomega"
	batchv1 "k8s.io/api/batch/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"
	ctrlmetrics "sigs.k8s.io/controller-runtime/pkg/metrics"

	kueue "sigs.k8s.io/kueue/apis/kueue/v1beta2"
)

var _ = ginkgo.Describe("The wait gauges", ginkgo.Ordered, func() {
	ctx := context.Background()
	var ns string
	const cq = "wait-gauges"

	ginkgo.BeforeAll(func() {
		// A window longer than the spec steps the clock: nobody rotates, the second job waits.
		ns = timeSharingQueue(ctx, cq, "team", "24h", "")
	})

	ginkgo.It("serve the longest wait and the workloads past the threshold, per ClusterQueue and LocalQueue, until the queues go", func() {
		first, second := job(ns, "team", "first"), job(ns, "team", "second")
		gomega.Expect(env.Client.Create(ctx, first)).To(gomega.Succeed())
		gomega.Eventually(func(g gomega.Gomega) { g.Expect(unsuspended(g, ctx, first)).To(gomega.BeTrue()) }, timeout, interval).Should(gomega.Succeed())
		gomega.Expect(env.Client.Create(ctx, second)).To(gomega.Succeed())
		var created time.Time
		gomega.Eventually(func(g gomega.Gomega) { created = workloadOf(g, ctx, second).CreationTimestamp.Time }, timeout, interval).Should(gomega.Succeed())
		cqSeries := map[string]string{"cluster_queue": cq}
		lqSeries := map[string]string{"name": "team", "namespace": ns}

		ginkgo.By("counting the wait from the waiting workload's creation, on the injected clock")
		// The suite's clock may be behind the API server's (no step yet) or ahead (earlier specs,
		// in random order, step it by hours): the wait on it may already be past the threshold.
		clk.Step(max(created.Sub(clk.Now()), 0) + 10*time.Minute)
		gomega.Eventually(func(g gomega.Gomega) {
			want := clk.Now().Sub(created).Seconds()
			past := 0.0
			if want > time.Hour.Seconds() {
				past = 1
			}
			g.Expect(gaugeValue(g, "kueue_pending_workloads_longest_wait_time_seconds", cqSeries)).To(gomega.Equal(want))
			g.Expect(gaugeValue(g, "kueue_local_queue_pending_workloads_longest_wait_time_seconds", lqSeries)).To(gomega.Equal(want))
			g.Expect(gaugeValue(g, "kueue_pending_workloads_waiting_longer_than_threshold", cqSeries)).To(gomega.Equal(past))
			g.Expect(gaugeValue(g, "kueue_local_queue_pending_workloads_waiting_longer_than_threshold", lqSeries)).To(gomega.Equal(past))
		}, timeout, interval).Should(gomega.Succeed())

		ginkgo.By("counting it past the default threshold of an hour")
		clk.Step(time.Hour)
		gomega.Eventually(func(g gomega.Gomega) {
			g.Expect(gaugeValue(g, "kueue_pending_workloads_longest_wait_time_seconds", cqSeries)).To(gomega.Equal(clk.Now().Sub(created).Seconds()))
			g.Expect(gaugeValue(g, "kueue_pending_workloads_waiting_longer_than_threshold", cqSeries)).To(gomega.Equal(1.0))
			g.Expect(gaugeValue(g, "kueue_local_queue_pending_workloads_waiting_longer_than_threshold", lqSeries)).To(gomega.Equal(1.0))
		}, timeout, interval).Should(gomega.Succeed())

		ginkgo.By("dropping the series of deleted queues")
		for _, j := range []*batchv1.Job{first, second} {
			gomega.Expect(client.IgnoreNotFound(env.Client.Delete(ctx, j, client.PropagationPolicy(metav1.DeletePropagationBackground)))).To(gomega.Succeed())
		}
		gomega.Expect(env.Client.Delete(ctx, &kueue.LocalQueue{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "team"}})).To(gomega.Succeed())
		gomega.Expect(env.Client.Delete(ctx, &kueue.ClusterQueue{ObjectMeta: metav1.ObjectMeta{Name: cq}})).To(gomega.Succeed())
		gomega.Eventually(func(g gomega.Gomega) {
			err := env.Client.Get(ctx, client.ObjectKey{Name: cq}, &kueue.ClusterQueue{})
			g.Expect(apierrors.IsNotFound(err)).To(gomega.BeTrue(), "ClusterQueue still there: %v", err)
			clk.Step(time.Second) // the waker sweeps on the injected clock's ticks
			for name, series := range map[string]map[string]string{
				"kueue_pending_workloads_longest_wait_time_seconds":                 cqSeries,
				"kueue_pending_workloads_waiting_longer_than_threshold":             cqSeries,
				"kueue_local_queue_pending_workloads_longest_wait_time_seconds":     lqSeries,
				"kueue_local_queue_pending_workloads_waiting_longer_than_threshold": lqSeries,
			} {
				_, found := gauge(g, name, series)
				g.Expect(found).To(gomega.BeFalse(), "%s%v is still served", name, series)
			}
		}, timeout, interval).Should(gomega.Succeed())
	})
})

// gaugeValue is the value of the served gauge name whose labels include want; it fails if there
// is none.
func gaugeValue(g gomega.Gomega, name string, want map[string]string) float64 {
	v, found := gauge(g, name, want)
	g.Expect(found).To(gomega.BeTrue(), "%s%v is not served", name, want)
	return v
}

func gauge(g gomega.Gomega, name string, want map[string]string) (float64, bool) {
	families, err := ctrlmetrics.Registry.Gather()
	g.Expect(err).NotTo(gomega.HaveOccurred())
	for _, f := range families {
		if f.GetName() != name {
			continue
		}
	series:
		for _, m := range f.GetMetric() {
			labels := map[string]string{}
			for _, l := range m.GetLabel() {
				labels[l.GetName()] = l.GetValue()
			}
			for k, v := range want {
				if labels[k] != v {
					continue series
				}
			}
			return m.GetGauge().GetValue(), true
		}
	}
	return 0, false
}
