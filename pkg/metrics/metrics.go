// Package metrics holds kueue-timeshare's own Prometheus metrics. They are registered in
// controller-runtime's registry, so the manager serves them on the same endpoint as Kueue's.
package metrics

import (
	"github.com/prometheus/client_golang/prometheus"
	ctrlmetrics "sigs.k8s.io/controller-runtime/pkg/metrics"
)

const subsystem = "kueue"

// ProtectedCandidates counts preemption candidates skipped because they ran for less than their
// min-runtime. kind is "preempt" (victim in the preemptor's ClusterQueue) or "reclaim".
var ProtectedCandidates = prometheus.NewCounterVec(prometheus.CounterOpts{
	Subsystem: subsystem,
	Name:      "preemption_protected_candidates_total",
	Help: "Preemption candidates skipped because they had run for less than their min-runtime, by the preemptor's " +
		"ClusterQueue and kind (preempt: same ClusterQueue; reclaim: another ClusterQueue of the cohort tree).",
}, []string{"cluster_queue", "kind"})

func init() {
	ctrlmetrics.Registry.MustRegister(ProtectedCandidates)
}
