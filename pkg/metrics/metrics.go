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
	ctrlmetrics.Registry.MustRegister(ProtectedCandidates, ExpectedRuntimeNominations, ExpectedRuntimeNominationsSkipped,
		TurnHolders, NextTurnSeconds, ProtectedWorkloads)
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

// TurnHolders is, per ClusterQueue with minAdmitDuration, how many workloads hold a turn
// (hold quota and are not being evicted).
var TurnHolders = prometheus.NewGaugeVec(prometheus.GaugeOpts{
	Subsystem: subsystem,
	Name:      "time_sharing_turn_holders",
	Help:      "Workloads holding a time-sharing turn (quota) in a ClusterQueue with minAdmitDuration, by ClusterQueue.",
}, []string{"cluster_queue", "replica_role"})

// NextTurnSeconds is, per ClusterQueue with minAdmitDuration and a turn holder, how long until
// the earliest holder's turn ends (0 once it has).
var NextTurnSeconds = prometheus.NewGaugeVec(prometheus.GaugeOpts{
	Subsystem: subsystem,
	Name:      "time_sharing_next_turn_seconds",
	Help:      "Seconds until the earliest turn holder of a ClusterQueue with minAdmitDuration passes its window (0: passed; a waiting workload of the same priority may take its turn).",
}, []string{"cluster_queue", "replica_role"})

// ProtectedWorkloads is, per ClusterQueue and setting, how many running workloads are
// protected now.
var ProtectedWorkloads = prometheus.NewGaugeVec(prometheus.GaugeOpts{
	Subsystem: subsystem,
	Name:      "protected_workloads",
	Help: "Running workloads protected from preemption now, by ClusterQueue and setting: preemptMinRuntime, " +
		"reclaimMinRuntime (resolved from the workload's own ClusterQueue up), toleration.",
}, []string{"cluster_queue", "setting", "replica_role"})
