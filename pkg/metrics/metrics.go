// Package metrics holds kueue-timeshare's own Prometheus metrics. They are registered in
// controller-runtime's registry, so the manager serves them on the same endpoint as Kueue's.
package metrics

import (
	"slices"
	"sync"

	"github.com/prometheus/client_golang/prometheus"
	ctrlmetrics "sigs.k8s.io/controller-runtime/pkg/metrics"

	configapi "sigs.k8s.io/kueue/apis/config/v1beta2"
	kueue "sigs.k8s.io/kueue/apis/kueue/v1beta2"
	kueuefeatures "sigs.k8s.io/kueue/pkg/features"
	kueuemetrics "sigs.k8s.io/kueue/pkg/metrics"

	"github.com/kueue-timeshare/kueue-timeshare/pkg/plugins"
	"github.com/kueue-timeshare/kueue-timeshare/pkg/policy"
)

const subsystem = "kueue"

var (
	// ProtectedCandidates counts preemption candidates skipped because they ran for less than
	// their min-runtime. kind is "preempt" (victim in the preemptor's ClusterQueue) or "reclaim".
	ProtectedCandidates *prometheus.CounterVec
	// TurnHolders is, per ClusterQueue with minAdmitDuration, how many workloads hold a turn
	// (hold quota and are not being evicted).
	TurnHolders *prometheus.GaugeVec
	// NextTurnSeconds is, per ClusterQueue with minAdmitDuration and a turn holder, how long
	// until the earliest holder's turn ends (0 once it has).
	NextTurnSeconds *prometheus.GaugeVec
	// ProtectedWorkloads is, per ClusterQueue and setting, how many running workloads are
	// protected now.
	ProtectedWorkloads *prometheus.GaugeVec
	// PendingLongestWait is, per ClusterQueue, the longest current wait of its pending workloads
	// (see WaitSince).
	PendingLongestWait *prometheus.GaugeVec
	// PendingWaitingLong is, per ClusterQueue, how many pending workloads have waited longer than
	// the configured threshold.
	PendingWaitingLong *prometheus.GaugeVec
	// EstimateError is, per ClusterQueue and direction (late, early), how far an admission was
	// from the first estimate its workload was given in that wait.
	EstimateError *prometheus.HistogramVec
	// AdmissionsWithoutEstimate counts, per ClusterQueue, admissions whose first estimate was
	// unknown, or that had none.
	AdmissionsWithoutEstimate *prometheus.CounterVec
)

// The directions of EstimateError and the estimates of AdmissionsWithoutEstimate.
const (
	EstimateLate    = "late"
	EstimateEarly   = "early"
	EstimateUnknown = "unknown"
	EstimateNone    = "none"
)

var (
	vectorsMu sync.Mutex
	// custom is the custom label names the per-ClusterQueue vectors were built with.
	custom []string
	// unitVectors are the features' per-ClusterQueue metrics (queueMetricsOwner), and
	// unitGauges the gauges their counts feed, by feature; built from the registry on first use
	// (unitsLocked), never at package initialization: nil until then.
	unitVectors []prometheus.Collector
	unitGauges  map[policy.Feature]*prometheus.GaugeVec
	// registered is whether Register ran: InitVectors then moves the registration to the new
	// vectors, so that a manager restarted in the same process keeps serving them.
	registered bool
)

func init() {
	build(nil)
}

// InitVectors builds the per-ClusterQueue metrics with the ClusterQueue custom labels of cl
// (the manager's metrics.customLabels, "custom_" names after replica_role, in the order Kueue's
// own ClusterQueue metrics carry them). It keeps the vectors when the names are unchanged.
func InitVectors(cl *kueuemetrics.CustomLabels) {
	names := cl.LabelNames(configapi.SourceKindClusterQueue)
	vectorsMu.Lock()
	defer vectorsMu.Unlock()
	if slices.Equal(names, custom) {
		return
	}
	if registered {
		for _, c := range perClusterQueue() {
			ctrlmetrics.Registry.Unregister(c)
		}
	}
	build(names)
	if registered {
		ctrlmetrics.Registry.MustRegister(perClusterQueue()...)
	}
}

func perClusterQueue() []prometheus.Collector {
	unitsLocked()
	return append([]prometheus.Collector{ProtectedCandidates, TurnHolders, NextTurnSeconds, ProtectedWorkloads,
		PendingLongestWait, PendingWaitingLong, EstimateError, AdmissionsWithoutEstimate}, unitVectors...)
}

func build(names []string) {
	custom = names
	labels := func(base ...string) []string { return append(base, names...) }
	ProtectedCandidates = prometheus.NewCounterVec(prometheus.CounterOpts{
		Subsystem: subsystem,
		Name:      "preemption_protected_candidates_total",
		Help: "Preemption candidates skipped because they had run for less than their min-runtime, by the preemptor's " +
			"ClusterQueue and kind (preempt: same ClusterQueue; reclaim: another ClusterQueue of the cohort tree). " +
			"Each candidate counts once per preemptor and protection, however often the preemptor is retried.",
	}, labels("cluster_queue", "kind", "replica_role"))
	TurnHolders = prometheus.NewGaugeVec(prometheus.GaugeOpts{
		Subsystem: subsystem,
		Name:      "time_sharing_turn_holders",
		Help:      "Workloads holding a time-sharing turn (quota) in a ClusterQueue with minAdmitDuration, by ClusterQueue.",
	}, labels("cluster_queue", "replica_role"))
	NextTurnSeconds = prometheus.NewGaugeVec(prometheus.GaugeOpts{
		Subsystem: subsystem,
		Name:      "time_sharing_next_turn_seconds",
		Help:      "Seconds until the earliest turn holder of a ClusterQueue with minAdmitDuration passes its window (0: passed; a waiting workload of the same priority may take its turn).",
	}, labels("cluster_queue", "replica_role"))
	ProtectedWorkloads = prometheus.NewGaugeVec(prometheus.GaugeOpts{
		Subsystem: subsystem,
		Name:      "protected_workloads",
		Help: "Running workloads protected from preemption now, by ClusterQueue and setting: preemptMinRuntime, " +
			"reclaimMinRuntime (resolved from the workload's own ClusterQueue up), toleration.",
	}, labels("cluster_queue", "setting", "replica_role"))
	PendingLongestWait = prometheus.NewGaugeVec(prometheus.GaugeOpts{
		Subsystem: subsystem,
		Name:      "pending_workloads_longest_wait_time_seconds",
		Help:      "The longest wait so far of the ClusterQueue's pending workloads, per 'cluster_queue'; 0 when none is pending. " + waitHelp,
	}, labels("cluster_queue", "replica_role"))
	PendingWaitingLong = prometheus.NewGaugeVec(prometheus.GaugeOpts{
		Subsystem: subsystem,
		Name:      "pending_workloads_waiting_longer_than_threshold",
		Help:      "The number of the ClusterQueue's pending workloads that have waited longer than timeshare.metrics.longWaitThreshold, per 'cluster_queue' (no series when the threshold is 0s). " + waitHelp,
	}, labels("cluster_queue", "replica_role"))
	EstimateError = prometheus.NewHistogramVec(prometheus.HistogramOpts{
		Subsystem: subsystem,
		Name:      "admission_estimate_error_seconds",
		Help: "How far a workload's admission (quota reserved) was from the first estimate it was given in that wait, per 'cluster_queue' " +
			"and 'direction' (late: admitted after the estimate; early: before).",
		// From a quarter of a second (the scheduling interval) to about 4.5 hours.
		Buckets: prometheus.ExponentialBuckets(0.25, 2, 17),
	}, labels("cluster_queue", "direction", "replica_role"))
	AdmissionsWithoutEstimate = prometheus.NewCounterVec(prometheus.CounterOpts{
		Subsystem: subsystem,
		Name:      "admissions_without_estimate_total",
		Help: "Admissions (quota reserved) of workloads whose first estimate in that wait was unknown ('estimate' unknown) " +
			"or that had none ('estimate' none: admitted before one was computed), per 'cluster_queue'.",
	}, labels("cluster_queue", "estimate", "replica_role"))
	unitVectors, unitGauges = nil, nil
}

// unitsLocked builds the units' per-ClusterQueue metrics with the custom label names in use, once
// per build; vectorsMu is held.
func unitsLocked() {
	if unitGauges != nil {
		return
	}
	unitGauges = map[policy.Feature]*prometheus.GaugeVec{}
	labels := func(base ...string) []string { return append(base, custom...) }
	for _, u := range plugins.Units() {
		q, ok := u.Plugin.(queueMetricsOwner)
		if !ok {
			continue
		}
		all, counts := q.QueueMetrics(labels)
		unitVectors = append(unitVectors, all...)
		if counts != nil {
			unitGauges[u.Feature] = counts
		}
	}
}

// waitHelp says what the wait gauges count.
const waitHelp = "A workload is pending while it is active, unfinished and holds no quota; its wait counts from the latest of its creation, " +
	"its last eviction and its last requeue (the end of a backoff, a reactivation)."

// LocalQueuePendingLongestWait and LocalQueuePendingWaitingLong are the LocalQueue twins of
// PendingLongestWait and PendingWaitingLong, registered, like Kueue's LocalQueue metrics, only
// with the LocalQueueMetrics feature gate. They carry no custom labels: a LocalQueue's come from
// labels and annotations its namespace's users write.
var (
	LocalQueuePendingLongestWait = prometheus.NewGaugeVec(prometheus.GaugeOpts{
		Subsystem: subsystem,
		Name:      "local_queue_pending_workloads_longest_wait_time_seconds",
		Help:      "The longest wait so far of the LocalQueue's pending workloads, per 'name' and 'namespace'; 0 when none is pending. " + waitHelp,
	}, []string{"name", "namespace", "replica_role"})
	LocalQueuePendingWaitingLong = prometheus.NewGaugeVec(prometheus.GaugeOpts{
		Subsystem: subsystem,
		Name:      "local_queue_pending_workloads_waiting_longer_than_threshold",
		Help:      "The number of the LocalQueue's pending workloads that have waited longer than timeshare.metrics.longWaitThreshold, per 'name' and 'namespace' (no series when the threshold is 0s). " + waitHelp,
	}, []string{"name", "namespace", "replica_role"})
)

// Register adds every metric of this package to controller-runtime's registry. Like Kueue's
// Register, it panics when called twice.
func Register() {
	vectorsMu.Lock()
	defer vectorsMu.Unlock()
	ctrlmetrics.Registry.MustRegister(append(perClusterQueue(), unitCollectors()...)...)
	if kueuefeatures.Enabled(kueuefeatures.LocalQueueMetrics) {
		ctrlmetrics.Registry.MustRegister(LocalQueuePendingLongestWait, LocalQueuePendingWaitingLong)
	}
	registered = true
}

// ClusterQueueLabels is the label values of a per-ClusterQueue series: names (cluster_queue
// first, replica_role last), then the custom labels cl holds for the ClusterQueue.
func ClusterQueueLabels(cl *kueuemetrics.CustomLabels, cq kueue.ClusterQueueReference, names ...string) []string {
	return append(names, cl.CQGet(cq)...)
}

// A feature's plugin (policy.Unit.Plugin) implements these where it owns metrics.
type (
	// metricsOwner owns metrics, registered with the manager's.
	metricsOwner interface {
		Metrics() []prometheus.Collector
	}
	// queueMetricsOwner builds per-ClusterQueue metrics, whose label names labels gives (its own,
	// then the manager's ClusterQueue custom labels), and returns them all, with the gauge its
	// counts feed (nil: none); they are rebuilt when the custom labels change.
	queueMetricsOwner interface {
		QueueMetrics(labels func(names ...string) []string) (all []prometheus.Collector, counts *prometheus.GaugeVec)
	}
)

// unitCollectors are the metrics the features' plugins own (metricsOwner).
func unitCollectors() []prometheus.Collector {
	var out []prometheus.Collector
	for _, u := range plugins.Units() {
		if m, ok := u.Plugin.(metricsOwner); ok {
			out = append(out, m.Metrics()...)
		}
	}
	return out
}

// UnitGauge is the per-ClusterQueue gauge of feature f's counts (queueMetricsOwner's counts),
// labelled by ClusterQueue and the unit's label; nil when it has none.
func UnitGauge(f policy.Feature) *prometheus.GaugeVec {
	vectorsMu.Lock()
	defer vectorsMu.Unlock()
	unitsLocked()
	return unitGauges[f]
}
