package policy

import (
	"time"

	apimeta "k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	kueue "sigs.k8s.io/kueue/apis/kueue/v1beta2"
	"sigs.k8s.io/kueue/pkg/workload"
)

// WakePrecision is the resolution of wake-up times: a decision that changes just after an
// instant (a minAdmitDuration counts only once strictly passed) is woken this much later.
const WakePrecision = time.Millisecond

// TimelessFuture is how far ahead a question about what a workload could ever take looks (whether
// it can use a time-sharing turn): every window, min-runtime and finite toleration has ended by
// then.
const TimelessFuture = 100 * 365 * 24 * time.Hour

// WakeSettings are what the features read, besides a running candidate, to say when their
// decisions about it can change.
type WakeSettings struct {
	// Queue is what the units read off the candidate's ClusterQueue (Unit.QueueSettings), by
	// feature; Configured reports whether some ClusterQueue sets a unit's settings (nil: none).
	Queue      map[Feature]any
	Configured func(Feature) bool
	// Lengths are every length of a protection the queues' settings and the manager's defaults
	// set (Unit.Lengths): which one protects a candidate depends on the preemptor, so the end of
	// each is a change (a spare wake-up costs one retry).
	Lengths []time.Duration
	// Enabled says which features are on (their feature gates); nil: all of them.
	Enabled func(Feature) bool
	// Units are the features (plugins.Units); nil: none.
	Units Table
}

func (s WakeSettings) on(f Feature) bool {
	return s.Enabled == nil || s.Enabled(f)
}

// MayChange reports whether a feature that is on may change a decision about some running
// workload.
func (s WakeSettings) MayChange() bool {
	for _, u := range s.Units {
		if s.on(u.Feature) && (u.MayChange == nil || u.MayChange(s)) {
			return true
		}
	}
	return false
}

// ReadFacts sets on c what the features that are on read from wl, a workload holding quota,
// beyond its conditions, each from its source among src (none: nothing known).
func (s WakeSettings) ReadFacts(c *Candidate, wl *kueue.Workload, src Sources) {
	s.Units.ReadFacts(c, wl, src, s.on, false)
}

// Change is an instant at which a feature's decision about a candidate changes while the
// candidate stays as it is.
type Change struct {
	// At is the boundary: the end of a window, a protection, a toleration or a cooldown. Zero: none.
	At time.Time
	// After: the new decision holds only after At (a minAdmitDuration counts once strictly
	// passed); otherwise from At on.
	After bool
}

// Wake is the first instant, to WakePrecision, from which the new decision holds.
func (c Change) Wake() time.Time {
	if c.After {
		return c.At.Add(WakePrecision)
	}
	return c.At
}

// Changes are the instants at which a decision of some feature about c changes. Each feature's
// unit says when its own decision changes (its row of the precedence table); this only collects
// them. They may be in the past, in no particular order.
func Changes(c *Candidate, s WakeSettings) []Change {
	out := make([]Change, 0, len(s.Lengths)+3)
	add := func(ch Change) {
		if !ch.At.IsZero() {
			out = append(out, ch)
		}
	}
	for _, u := range s.Units {
		if s.on(u.Feature) {
			u.Changes(c, s, add)
		}
	}
	return out
}

// Wakes sorts changes against the last check (since) and now.
type Wakes struct {
	// Due: some change woke in (since, now], so the queue must be re-evaluated now.
	Due bool
	// Next is the change that wakes first after now; its At is zero if none.
	Next Change
}

// Add sorts one change in.
func (w *Wakes) Add(ch Change, since, now time.Time) {
	switch at := ch.Wake(); {
	case at.After(now):
		if next := w.Next.Wake(); w.Next.At.IsZero() || at.Before(next) || (at.Equal(next) && ch.At.Before(w.Next.At)) {
			w.Next = ch
		}
	case at.After(since):
		w.Due = true
	}
}

// CandidateOf reads the facts the features' timing needs off a workload holding quota, without
// the preemptor-relative ones (priority, queue order): for readers that have no scheduler
// snapshot (the waker, the kubectl plugin). The features' own facts are left to ReadFacts.
func CandidateOf(wl *kueue.Workload, clock RuntimeClock) Candidate {
	c := Candidate{Info: &workload.Info{Obj: wl}, Evicted: apimeta.IsStatusConditionTrue(wl.Status.Conditions, kueue.WorkloadEvicted)}
	if cond := apimeta.FindStatusCondition(wl.Status.Conditions, kueue.WorkloadQuotaReserved); cond != nil && cond.Status == metav1.ConditionTrue {
		c.QuotaReservedAt = cond.LastTransitionTime.Time
	}
	c.TurnCharge = TurnChargeOf(wl)
	if cond := apimeta.FindStatusCondition(wl.Status.Conditions, kueue.WorkloadAdmitted); cond != nil && cond.Status == metav1.ConditionTrue {
		c.Admitted, c.AdmittedAt = true, cond.LastTransitionTime.Time
	}
	c.CountRuntimeFrom(clock)
	return c
}
