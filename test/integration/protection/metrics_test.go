package protection_test

import (
	"context"
	"time"

	"github.com/onsi/ginkgo/v2"
	"github.com/onsi/gomega"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"

	"github.com/kueue-timeshare/kueue-timeshare/test/util"
)

// The suite's manager promotes the ClusterQueue label "team" to custom_team (metrics.customLabels),
// as an admin who splits dashboards by team does; our metrics must carry it as Kueue's own do.
var _ = ginkgo.Describe("Metrics with Kueue's custom labels", func() {
	var (
		ctx = context.Background()
		ns  string
	)
	ginkgo.BeforeEach(func() {
		ns = namespace(ctx, "custom-labels")
		cq, err := util.RawCPUClusterQueue("labelled", "1", map[string]any{"withinClusterQueue": "LowerPriority", "preemptMinRuntime": "10m"})
		gomega.Expect(err).NotTo(gomega.HaveOccurred())
		cq.SetLabels(map[string]string{"team": "vision"})
		gomega.Expect(env.Client.Create(ctx, cq)).To(gomega.Succeed())
		lq := &unstructured.Unstructured{Object: map[string]any{"spec": map[string]any{"clusterQueue": "labelled"}}}
		lq.SetAPIVersion("kueue.x-k8s.io/v1beta2")
		lq.SetKind("LocalQueue")
		lq.SetNamespace(ns)
		lq.SetName("labelled")
		gomega.Expect(env.Client.Create(ctx, lq)).To(gomega.Succeed())
	})

	ginkgo.It("labels the protected-candidates counter and the protected-workloads gauge with the ClusterQueue's team", func() {
		low := job(ns, "labelled", "low", "1", "low")
		submit(ctx, low)
		started := admittedAt(ctx, low)
		submit(ctx, job(ns, "labelled", "high", "1", "high"))

		want := map[string]string{"cluster_queue": "labelled", "custom_team": "vision", "replica_role": "standalone"}
		hasSeries := func(name string, extra map[string]string) func(g gomega.Gomega) {
			return func(g gomega.Gomega) {
				var found []map[string]string
				for _, s := range seriesOf(name) {
					if s.labels["cluster_queue"] == "labelled" && s.value > 0 {
						found = append(found, s.labels)
					}
				}
				labels := map[string]string{}
				for k, v := range want {
					labels[k] = v
				}
				for k, v := range extra {
					labels[k] = v
				}
				g.Expect(found).To(gomega.ContainElement(labels))
			}
		}
		ginkgo.By("counting the protected candidate with custom_team")
		gomega.Eventually(hasSeries("kueue_preemption_protected_candidates_total", map[string]string{"kind": "preempt"}), timeout, interval).Should(gomega.Succeed())
		ginkgo.By("showing the protected workload in the gauge with custom_team")
		clk.SetTime(started.Add(time.Second))
		gomega.Eventually(hasSeries("kueue_protected_workloads", map[string]string{"setting": "preemptMinRuntime"}), timeout, interval).Should(gomega.Succeed())
	})
})
