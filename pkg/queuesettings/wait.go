package queuesettings

import (
	"context"
	"time"

	apimeta "k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	kueue "sigs.k8s.io/kueue/apis/kueue/v1beta2"
	kueuemetrics "sigs.k8s.io/kueue/pkg/metrics"
	"sigs.k8s.io/kueue/pkg/util/roletracker"

	"github.com/kueue-timeshare/kueue-timeshare/pkg/metrics"
)

// PendingKey indexes the pending Workloads (see isPending) under AnyPending: the wait gauges read
// them every sweep and must not copy the admitted and finished ones.
const PendingKey = "timeshare.status.pending"

// AnyPending is the PendingKey value of every pending Workload.
const AnyPending = "*"

// WaitGauges configures the gauges of how long pending workloads have waited.
type WaitGauges struct {
	// LongWaitThreshold is the wait past which a workload counts in the waiting-longer gauges;
	// 0: no such series.
	LongWaitThreshold time.Duration
	// LocalQueueMetrics selects the LocalQueues with series, as it does for Kueue's LocalQueue
	// metrics (nil: every LocalQueue while the LocalQueueMetrics gate is on).
	LocalQueueMetrics *kueuemetrics.LocalQueueMetricsConfig
}

// lqKey names one LocalQueue series without its replica_role.
type lqKey struct{ namespace, name string }

// waitSeries are the wait gauges' series of one sweep.
type waitSeries struct {
	cqLongest, cqLong map[gaugeKey]float64
	lqLongest, lqLong map[lqKey]float64
}

func isPending(wl *kueue.Workload) bool {
	return wl.Spec.QueueName != "" && ptr.Deref(wl.Spec.Active, true) && wl.DeletionTimestamp == nil &&
		!apimeta.IsStatusConditionTrue(wl.Status.Conditions, kueue.WorkloadQuotaReserved) &&
		!apimeta.IsStatusConditionTrue(wl.Status.Conditions, kueue.WorkloadFinished)
}

func indexPending(obj client.Object) []string {
	if wl, ok := obj.(*kueue.Workload); ok && isPending(wl) {
		return []string{AnyPending}
	}
	return nil
}

// WaitingSince is when wl last started waiting: the latest of its creation, its last eviction and
// its last requeue (the end of a backoff, a reactivation). Evicted turns False at each admission,
// so its time is the last eviction's; Requeued stays True across preemptions, so on its own (as
// upstream's admission wait time reads it) it would date a workload preempted twice from the first.
func WaitingSince(wl *kueue.Workload) time.Time {
	since := wl.CreationTimestamp.Time
	for _, typ := range []string{kueue.WorkloadEvicted, kueue.WorkloadRequeued} {
		if c := apimeta.FindStatusCondition(wl.Status.Conditions, typ); c != nil && c.Status == metav1.ConditionTrue && c.LastTransitionTime.After(since) {
			since = c.LastTransitionTime.Time
		}
	}
	return since
}

// setWaitGauges sets the wait gauges at now from the informer cache: every ClusterQueue and every
// selected LocalQueue has a series (0 when nothing waits), so that a deleted queue's series go
// with it. The cost is one pass over the queues and the pending workloads.
func (w *Waker) setWaitGauges(ctx context.Context, now time.Time) {
	cfg := w.Waits
	var cqs kueue.ClusterQueueList
	var lqs kueue.LocalQueueList
	var pending kueue.WorkloadList
	if err := w.Client.List(ctx, &cqs, client.UnsafeDisableDeepCopy); err != nil {
		w.Log.V(2).Info("Could not list ClusterQueues for the wait gauges", "error", err.Error())
		return
	}
	if err := w.Client.List(ctx, &lqs, client.UnsafeDisableDeepCopy); err != nil {
		w.Log.V(2).Info("Could not list LocalQueues for the wait gauges", "error", err.Error())
		return
	}
	if err := w.Client.List(ctx, &pending, client.MatchingFields{PendingKey: AnyPending}, client.UnsafeDisableDeepCopy); err != nil {
		w.Log.V(2).Info("Could not list pending Workloads for the wait gauges", "error", err.Error())
		return
	}
	threshold := cfg.LongWaitThreshold
	s := waitSeries{cqLongest: map[gaugeKey]float64{}, cqLong: map[gaugeKey]float64{}, lqLongest: map[lqKey]float64{}, lqLong: map[lqKey]float64{}}
	for i := range cqs.Items {
		k := gaugeKey{cq: cqs.Items[i].Name}
		s.cqLongest[k] = 0
		if threshold > 0 {
			s.cqLong[k] = 0
		}
	}
	cqOf := make(map[lqKey]string, len(lqs.Items))
	for i := range lqs.Items {
		lq := &lqs.Items[i]
		k := lqKey{lq.Namespace, lq.Name}
		cqOf[k] = string(lq.Spec.ClusterQueue)
		if cfg.LocalQueueMetrics.ShouldExposeLocalQueueMetrics(lq.Labels) {
			s.lqLongest[k] = 0
			if threshold > 0 {
				s.lqLong[k] = 0
			}
		}
	}
	for i := range pending.Items {
		wl := &pending.Items[i]
		// Re-checked: the index is only as fresh as the object it was computed from.
		if !isPending(wl) {
			continue
		}
		lq := lqKey{wl.Namespace, string(wl.Spec.QueueName)}
		cq, ok := cqOf[lq]
		if !ok {
			continue // Kueue does not queue a workload whose LocalQueue does not exist.
		}
		wait := max(now.Sub(WaitingSince(wl)), 0)
		if v, ok := s.cqLongest[gaugeKey{cq: cq}]; ok {
			s.cqLongest[gaugeKey{cq: cq}] = max(v, wait.Seconds())
			if threshold > 0 && wait > threshold {
				s.cqLong[gaugeKey{cq: cq}]++
			}
		}
		if v, ok := s.lqLongest[lq]; ok {
			s.lqLongest[lq] = max(v, wait.Seconds())
			if threshold > 0 && wait > threshold {
				s.lqLong[lq]++
			}
		}
	}
	role := roletracker.GetRole(w.RoleTracker)
	byCQ := func(k gaugeKey) []string {
		return metrics.ClusterQueueLabels(w.CustomLabels, kueue.ClusterQueueReference(k.cq), k.cq, role)
	}
	byLQ := func(k lqKey) []string { return []string{k.name, k.namespace, role} }
	setAll(metrics.PendingLongestWait, s.cqLongest, w.waits.cqLongest, byCQ)
	setAll(metrics.PendingWaitingLong, s.cqLong, w.waits.cqLong, byCQ)
	setAll(metrics.LocalQueuePendingLongestWait, s.lqLongest, w.waits.lqLongest, byLQ)
	setAll(metrics.LocalQueuePendingWaitingLong, s.lqLong, w.waits.lqLong, byLQ)
	w.waits = s
}
