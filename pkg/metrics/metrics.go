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
		"ClusterQueue and kind (preempt: same ClusterQueue; reclaim: another ClusterQueue of the cohort tree). " +
		"Each candidate counts once per preemptor and protection, however often the preemptor is retried.",
}, []string{"cluster_queue", "kind", "replica_role"})

func init() {
	ctrlmetrics.Registry.MustRegister(ProtectedCandidates, ExpectedRuntimeNominations, ExpectedRuntimeNominationsSkipped)
}

// ExpectedRuntimeNominations counts admitted workloads found past their expected runtime (and so
// preemptible by equal or higher priorities of their ClusterQueue) in victim searches.
var ExpectedRuntimeNominations = prometheus.NewCounterVec(prometheus.CounterOpts{
	Subsystem: subsystem,
	Name:      "expected_runtime_nominations_total",
	Help:      "Workloads nominated as preemption candidates because they ran past their expected runtime, once per workload and admission.",
}, []string{"replica_role"})

// ExpectedRuntimeNominationsSkipped counts opted-in workloads not nominated, by reason.
var ExpectedRuntimeNominationsSkipped = prometheus.NewCounterVec(prometheus.CounterOpts{
	Subsystem: subsystem,
	Name:      "expected_runtime_nomination_skipped_total",
	Help: "Workloads with an expected runtime that were not nominated, by reason: cooldown, missing_start, invalid_duration, " +
		"not_running, minruntime_protected, clock_skew, invalid_not_before; once per workload, admission and reason.",
}, []string{"reason", "replica_role"})
