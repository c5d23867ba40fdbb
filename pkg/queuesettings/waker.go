package queuesettings

import (
	"context"
	"time"

	"github.com/go-logr/logr"
	apimeta "k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/sets"
	utilfeature "k8s.io/apiserver/pkg/util/feature"
	"k8s.io/klog/v2"
	"k8s.io/utils/clock"
	"sigs.k8s.io/controller-runtime/pkg/client"

	kueue "sigs.k8s.io/kueue/apis/kueue/v1beta2"
	qcache "sigs.k8s.io/kueue/pkg/cache/queue"
	kueuefeatures "sigs.k8s.io/kueue/pkg/features"
	kueuemetrics "sigs.k8s.io/kueue/pkg/metrics"
	"sigs.k8s.io/kueue/pkg/util/roletracker"

	"github.com/kueue-timeshare/kueue-timeshare/apis/annotations"
	"github.com/kueue-timeshare/kueue-timeshare/pkg/features"
	"github.com/kueue-timeshare/kueue-timeshare/pkg/scheduler/preemption/policy"
)

// SweepPeriod is how often the Waker looks for windows that have run out, at the least: it also
// sweeps just after the earliest end it saw coming on its previous sweep.
const SweepPeriod = time.Second

// WakePrecision is how long after a window's end the Waker sweeps: a window counts only once
// strictly passed, so the sweep at its end would find it still running.
const WakePrecision = time.Millisecond

// Waker re-evaluates a ClusterQueue's pending workloads when a window of one of its admitted
// workloads runs out. Nothing in the API changes at that moment, so without it a pending workload
// that found every candidate protected would wait for some unrelated event.
type Waker struct {
	Clock  clock.WithTicker
	Client client.Client
	Queues *qcache.Manager
	Store  *Store
	// Tolerations, if set, gives the preemption toleration of priority classes, whose end the
	// waker also watches for.
	Tolerations func(*kueue.PriorityClassRef) *policy.Toleration
	// RuntimeClock is the condition min-runtimes and expected runtimes count from (Admitted if
	// empty); toleration counts from Admitted.
	RuntimeClock policy.RuntimeClock
	// RoleTracker gives the replica_role of the state gauges (standalone if nil).
	RoleTracker *roletracker.RoleTracker
	// CustomLabels gives the gauges' ClusterQueue custom labels (metrics.customLabels; none if nil).
	CustomLabels *kueuemetrics.CustomLabels
	Log          logr.Logger
	// Lead is how long before an end the Waker also wakes the queue. Upstream's queue manager
	// retries inadmissible workloads a batch period after it is told (RequeueBatchPeriod): waking
	// that much early, less a margin, makes the retry land just after the end instead of a
	// second later. The wake at the end itself stays, so an early retry that finds the window
	// still running costs only the delay the lead was meant to save. Zero: no early wake.
	Lead time.Duration

	last time.Time
	// next is the earliest end after the last sweep that it saw coming; zero if none.
	next time.Time
	// gauges are the state gauges' series of the last sweep.
	gauges gauges
}

// Start sweeps every SweepPeriod of the injected clock, and just after each end it sees coming,
// until ctx ends: a turn then starts when the window ends, not up to a second later, which over
// N-1 turns would add up.
func (w *Waker) Start(ctx context.Context) error {
	w.last = w.Clock.Now()
	t := w.Clock.NewTicker(SweepPeriod)
	defer t.Stop()
	exact := w.Clock.NewTimer(SweepPeriod)
	defer exact.Stop()
	// A first sweep finds the windows already running, so the first exact wake-up is armed.
	w.sweep(ctx)
	for {
		exact.Stop()
		if !w.next.IsZero() {
			exact.Reset(w.next.Sub(w.Clock.Now()) + WakePrecision)
		}
		select {
		case <-ctx.Done():
			return nil
		case <-t.C():
			w.sweep(ctx)
		case <-exact.C():
			w.sweep(ctx)
		}
	}
}

// noteEnd remembers end, and the early wake-up Lead before it, if it is the earliest one still to
// come (a window ending now has not passed yet).
func (w *Waker) noteEnd(end, now time.Time) {
	for _, t := range w.wakeTimes(end) {
		if !t.Before(now) && (w.next.IsZero() || t.Before(w.next)) {
			w.next = t
		}
	}
}

// wakeTimes are the moments at which the end of a window or protection wakes its queue.
func (w *Waker) wakeTimes(end time.Time) []time.Time {
	if w.Lead <= 0 {
		return []time.Time{end}
	}
	return []time.Time{end.Add(-w.Lead), end}
}

// RequeueBatchPeriod is how long upstream's queue manager waits before it retries a queue's
// inadmissible workloads (its own default: a second, ten with SchedulerLongRequeueInterval). The
// manager builds the queue's requeuer with it, so that the Waker's Lead is known to match.
func RequeueBatchPeriod() time.Duration {
	if utilfeature.DefaultFeatureGate.Enabled(kueuefeatures.SchedulerLongRequeueInterval) {
		return 10 * time.Second
	}
	return time.Second
}

// LeadMargin is how long after an end the early wake-up's retry is meant to land.
const LeadMargin = 20 * time.Millisecond

// Sweep runs one sweep at the clock's current time. It covers everything since the previous sweep
// (or since Start), however long ago that was. Start sweeps every SweepPeriod; a caller that drives
// the clock itself (the simulator) calls Sweep after advancing it instead of calling Start.
func (w *Waker) Sweep(ctx context.Context) {
	w.sweep(ctx)
}

// sweep wakes every queue in which some window, protection or cooldown ended since the previous
// sweep.
func (w *Waker) sweep(ctx context.Context) {
	now := w.Clock.Now()
	since := w.last
	w.last = now
	w.next = time.Time{}
	windows := map[kueue.ClusterQueueReference]time.Duration{}
	for cq, qs := range w.Store.snapshot() {
		if qs.MinAdmitDuration > 0 {
			windows[cq] = qs.MinAdmitDuration
		}
	}
	var values []time.Duration
	if features.Enabled(features.MinRuntimeProtection) {
		values = w.Store.minRuntimeValues()
	}
	tolerations := w.Tolerations != nil && features.Enabled(features.PreemptionToleration)
	expected := features.Enabled(features.ExpectedRuntimeRequeue)
	protections := len(values) > 0 || tolerations || expected
	if len(windows) == 0 && !protections {
		w.setGauges(ctx, nil, nil, now)
		return
	}
	var list kueue.WorkloadList
	// Only unfinished workloads holding quota, through our index, read-only from the cache: a
	// full list copies every workload, and pending and finished ones can outnumber running ones
	// by far (in upstream's performance load, that copy was most of the manager's CPU).
	if err := w.Client.List(ctx, &list, client.MatchingFields{HoldingQuotaKey: AnyClusterQueue}, client.UnsafeDisableDeepCopy); err != nil {
		w.Log.V(2).Info("Could not check windows and protections", "error", err.Error())
		return
	}
	holding := map[kueue.ClusterQueueReference][]*kueue.Workload{}
	for i := range list.Items {
		wl := &list.Items[i]
		holding[wl.Status.Admission.ClusterQueue] = append(holding[wl.Status.Admission.ClusterQueue], wl)
	}
	for cq, window := range windows {
		if w.windowEnded(holding[cq], window, since, now) {
			w.Log.V(3).Info("A minAdmitDuration ran out (or runs out within the requeue batch period); re-evaluating pending workloads", "clusterQueue", cq)
			Wake(ctx, w.Client, w.Queues, cq, w.Log)
		}
	}
	if protections {
		w.sweepProtections(ctx, list.Items, values, tolerations, expected, since, now)
	}
	w.setGauges(ctx, holding, windows, now)
}

// sweepProtections wakes the ClusterQueue (and so its cohort tree) of every running workload whose
// min-runtime (for any value configured anywhere), priority class toleration or expected-runtime
// cooldown ended, or that reached its expected runtime, in (since, now]. Which min-runtime applies
// depends on the preemptor, so every configured value is tried: a spare wake-up costs one retry.
func (w *Waker) sweepProtections(ctx context.Context, holding []kueue.Workload, values []time.Duration, tolerations, expected bool, since, now time.Time) {
	woken := sets.New[kueue.ClusterQueueReference]()
	for i := range holding {
		wl := &holding[i]
		if apimeta.IsStatusConditionTrue(wl.Status.Conditions, kueue.WorkloadEvicted) {
			continue
		}
		c := apimeta.FindStatusCondition(wl.Status.Conditions, kueue.WorkloadAdmitted)
		if c == nil || c.Status != metav1.ConditionTrue {
			continue
		}
		// Min-runtimes and expected runtimes count from the runtime clock (zero: not started yet,
		// and so no end known); tolerations from admission.
		running := policy.RunningSince(wl, w.RuntimeClock)
		times := make([]time.Time, 0, len(values)+3)
		if !running.IsZero() {
			for _, d := range values {
				times = append(times, running.Add(d))
			}
		}
		if tolerations {
			if t := w.Tolerations(wl.Spec.PriorityClassRef); t != nil && !t.Forever && t.Duration > 0 {
				times = append(times, c.LastTransitionTime.Add(t.Duration))
			}
		}
		if expected {
			// Reaching the expected runtime, or the end of a cooldown, nominates the workload.
			if er, ok := annotations.ParseExpectedRuntime(wl.Annotations); ok && er.Skip == "" {
				if !running.IsZero() {
					times = append(times, running.Add(er.Expected))
				}
				times = append(times, er.NotBefore)
			}
		}
		for _, end := range times {
			w.noteEnd(end, now)
		}
		var wakes []time.Time
		for _, end := range times {
			wakes = append(wakes, w.wakeTimes(end)...)
		}
		for _, end := range wakes {
			if end.After(since) && !end.After(now) && !woken.Has(wl.Status.Admission.ClusterQueue) {
				cq := wl.Status.Admission.ClusterQueue
				woken.Insert(cq)
				w.Log.V(3).Info("A protection or cooldown ran out (or runs out within the requeue batch period); re-evaluating pending workloads", "workload", klog.KObj(wl), "clusterQueue", cq, "at", end)
				Wake(ctx, w.Client, w.Queues, cq, w.Log)
				break
			}
		}
	}
}

// windowEnded: some workload holding quota in a ClusterQueue (holding) left its window in
// (since, now]. Eligibility is strict (held longer than the window), so a window ending exactly at
// now counts next sweep. It also notes the windows still to end.
func (w *Waker) windowEnded(holding []*kueue.Workload, window time.Duration, since, now time.Time) bool {
	ended := false
	for _, wl := range holding {
		c := apimeta.FindStatusCondition(wl.Status.Conditions, kueue.WorkloadQuotaReserved)
		if c == nil || c.Status != metav1.ConditionTrue {
			continue
		}
		end := c.LastTransitionTime.Add(window)
		w.noteEnd(end, now)
		for _, t := range w.wakeTimes(end) {
			ended = ended || (!t.Before(since) && t.Before(now))
		}
	}
	return ended
}

// Wake makes the queue manager retry cq's inadmissible workloads, as a spec change would.
func Wake(ctx context.Context, c client.Client, queues *qcache.Manager, cq kueue.ClusterQueueReference, log logr.Logger) {
	var obj kueue.ClusterQueue
	if err := c.Get(ctx, client.ObjectKey{Name: string(cq)}, &obj); err != nil {
		log.V(2).Info("Could not wake ClusterQueue", "clusterQueue", cq, "error", err.Error())
		return
	}
	if err := queues.UpdateClusterQueue(ctx, &obj, true); err != nil {
		log.V(2).Info("Could not wake ClusterQueue", "clusterQueue", cq, "error", err.Error())
	}
}
