package queuesettings

import (
	"context"
	"time"

	"github.com/go-logr/logr"
	"k8s.io/apimachinery/pkg/util/sets"
	utilfeature "k8s.io/apiserver/pkg/util/feature"
	"k8s.io/component-base/featuregate"
	"k8s.io/klog/v2"
	"k8s.io/utils/clock"
	"sigs.k8s.io/controller-runtime/pkg/client"

	kueue "sigs.k8s.io/kueue/apis/kueue/v1beta2"
	qcache "sigs.k8s.io/kueue/pkg/cache/queue"
	kueuefeatures "sigs.k8s.io/kueue/pkg/features"
	kueuemetrics "sigs.k8s.io/kueue/pkg/metrics"
	"sigs.k8s.io/kueue/pkg/util/roletracker"

	"github.com/kueue-timeshare/kueue-timeshare/pkg/features"
	"github.com/kueue-timeshare/kueue-timeshare/pkg/plugins"
	"github.com/kueue-timeshare/kueue-timeshare/pkg/policy"
	"github.com/kueue-timeshare/kueue-timeshare/pkg/timeutil"
)

// SweepPeriod is how often the Waker sweeps at the least: besides the sweep at each wake-up time
// it sees coming, a periodic one refreshes the state gauges and catches any change it could not
// see coming.
const SweepPeriod = time.Second

// WakePrecision is the resolution of wake-up times (see policy.Change).
const WakePrecision = policy.WakePrecision

// Waker re-evaluates a ClusterQueue's pending workloads when a decision about one of its admitted
// workloads changes with time (a window, protection or cooldown ends; see policy.Changes).
// Nothing in the API changes at that moment, so without it a pending workload that found every
// candidate protected would wait for some unrelated event.
type Waker struct {
	Clock  clock.WithTicker
	Client client.Client
	Queues *qcache.Manager
	Store  *Store
	// Sources are the features' sources of facts besides Store (see policy.Sources): the
	// preemption toleration of priority classes, whose end the waker also watches for.
	Sources policy.Sources
	// RuntimeClock is the condition min-runtimes and expected runtimes count from (Admitted if
	// empty); toleration counts from Admitted.
	RuntimeClock policy.RuntimeClock
	// RoleTracker gives the replica_role of the state gauges (standalone if nil).
	RoleTracker *roletracker.RoleTracker
	// CustomLabels gives the gauges' ClusterQueue custom labels (metrics.customLabels; none if nil).
	CustomLabels *kueuemetrics.CustomLabels
	// Waits, if set, has the sweeps also set the gauges of how long pending workloads have waited.
	Waits *WaitGauges
	Log   logr.Logger
	// Lead is how long before an end the Waker also wakes the queue. Upstream's queue
	// manager retries inadmissible workloads a batch period after it is told (RequeueBatchPeriod):
	// waking that much early, less a margin, makes the retry land just after the change instead of
	// a second later. The wake-up at the change itself stays, so an early retry that finds the
	// window still running costs only the delay the lead was meant to save. Zero: no early wake.
	Lead time.Duration
	// Candidate, if set, reads a workload holding quota instead of policy.CandidateOf: the
	// simulator's, whose clock knows the exact times that the conditions keep to the second.
	Candidate func(*kueue.Workload) policy.Candidate
	// Units are the features whose decisions it watches; nil: all of them (plugins.Units).
	Units policy.Table

	last time.Time
	// next is the earliest end (of a window, protection or cooldown, or the early wake-up Lead
	// before one) after the last sweep that it saw coming; zero if none. The exact sweep comes
	// WakePrecision after it.
	next time.Time
	// first is the change the last sweep saw waking first after it (see Next).
	first policy.Wakes
	// gauges are the state gauges' series of the last sweep.
	gauges gauges
	// waits are the wait gauges' series of the last sweep.
	waits waitSeries
}

// Start sweeps at each wake-up time it sees coming, and every SweepPeriod of the injected clock,
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
		if d, ok := exactDelay(w.Clock.Now(), w.next); ok {
			exact.Reset(d)
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

// exactDelay is how long from now the exact sweep for next waits; false when there is none. It
// saturates: next may come from a tenant's annotation (a cooldown or deadline in year 9999), and
// a wait that wrapped negative would fire the timer at once, sweep after sweep.
func exactDelay(now, next time.Time) (time.Duration, bool) {
	if next.IsZero() {
		return 0, false
	}
	return timeutil.Delay(now, next, WakePrecision), true
}

// Next is the change that the last sweep saw waking first after it (its At is zero if none): a
// caller that drives the clock itself steps it there.
func (w *Waker) Next() policy.Change {
	return w.first.Next
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
// (or since Start), however long ago that was. Start sweeps on its own; a caller that drives the
// clock itself (the simulator) calls Sweep after advancing it instead of calling Start.
func (w *Waker) Sweep(ctx context.Context) {
	w.sweep(ctx)
}

// sweep wakes every ClusterQueue (and so its cohort tree) with a workload holding quota that has a
// change that woke in (since, now], and notes the earliest end still to come.
func (w *Waker) sweep(ctx context.Context) {
	now := w.Clock.Now()
	since := w.last
	w.last = now
	w.next, w.first = time.Time{}, policy.Wakes{}
	if w.Waits != nil {
		w.setWaitGauges(ctx, now)
	}
	ws := policy.WakeSettings{Lengths: w.Store.Lengths(), Configured: w.Store.Configured, Enabled: FeatureEnabled, Units: w.Units}
	if ws.Units == nil {
		ws.Units = plugins.Units()
	}
	if !ws.MayChange() {
		w.setGauges(ctx, nil, now)
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
	// What the units read off each ClusterQueue, read once per sweep.
	queues := map[kueue.ClusterQueueReference]map[policy.Feature]any{}
	sources := w.sources()
	woken := sets.New[kueue.ClusterQueueReference]()
	for i := range list.Items {
		wl := &list.Items[i]
		cq := wl.Status.Admission.ClusterQueue
		holding[cq] = append(holding[cq], wl)
		qs, ok := queues[cq]
		if !ok {
			qs = w.Store.UnitSettingsOf(cq)
			queues[cq] = qs
		}
		wakes := w.wakes(wl, qs, ws, sources, since, now)
		if next := wakes.Next.At; !next.IsZero() && (w.next.IsZero() || next.Before(w.next)) {
			w.next = next
		}
		w.first.Add(wakes.Next, since, now)
		if wakes.Due && !woken.Has(cq) {
			woken.Insert(cq)
			w.Log.V(3).Info("A window, protection or cooldown ran out (or runs out within the requeue batch period); re-evaluating pending workloads", "workload", klog.KObj(wl), "clusterQueue", cq)
			Wake(ctx, w.Client, w.Queues, cq, w.Log)
		}
	}
	w.setGauges(ctx, holding, now)
}

// wakes sorts the changes of decisions about wl, and the early wake-ups Lead before them, against
// (since, now].
func (w *Waker) wakes(wl *kueue.Workload, qs map[policy.Feature]any, ws policy.WakeSettings, sources policy.Sources, since, now time.Time) policy.Wakes {
	c := policy.CandidateOf(wl, w.RuntimeClock)
	if w.Candidate != nil {
		c = w.Candidate(wl)
	}
	ws.ReadFacts(&c, wl, sources)
	ws.Queue = qs
	var out policy.Wakes
	for _, ch := range policy.Changes(&c, ws) {
		if w.Lead > 0 {
			out.Add(policy.Change{At: ch.At.Add(-w.Lead), After: ch.After}, since, now)
		}
		out.Add(ch, since, now)
	}
	return out
}

// FeatureEnabled says whether a feature of the victim policy is on: its feature gate, named
// after it.
func FeatureEnabled(f policy.Feature) bool {
	return features.Enabled(featuregate.Feature(f))
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

// sources are the store and the other sources of facts the features read from.
func (w *Waker) sources() policy.Sources {
	return append(policy.Sources{w.Store}, w.Sources...)
}
