package policy

import (
	"fmt"
	"time"

	kueue "sigs.k8s.io/kueue/apis/kueue/v1beta2"
	cmputil "sigs.k8s.io/kueue/pkg/util/cmp"
)

// TimeBasedReason is the preemption reason of a same-priority workload preempted because it held
// quota longer than its ClusterQueue's minAdmitDuration (KEP-8522).
const TimeBasedReason = "InClusterQueueTimeBased"

// Names of the rules and ordering key WithTimeBasedPreemption adds.
const (
	RuleTimeExpired = "SamePriorityPastMinAdmitDuration"
	RuleNotYourTurn = "AnotherWorkloadHasTheTurn"
	KeyTimeExpired  = "PastMinAdmitDurationFirst"
)

// WithTimeBasedPreemption adds KEP-8522: under withinClusterQueue LowerOrNewerEqualPriority with a
// minAdmitDuration, a same-priority workload of the preemptor's ClusterQueue becomes eligible once
// it has held quota for strictly longer than minAdmitDuration, measured from the QuotaReserved
// condition's lastTransitionTime. The rule comes after upstream's, so a workload that upstream
// would already preempt keeps upstream's reason.
//
// Among same-priority candidates of that ClusterQueue, expired ones go first, the longest-running
// first; the rest keep upstream's order (most recently reserved first).
//
// Turns: only the same-priority pending workload that has waited longest for a turn may take one
// this way (Preemptor.WaitingLonger is empty); the others are refused, so that a workload just
// preempted for time-sharing does not take the quota straight back.
func WithTimeBasedPreemption() Option {
	notYourTurn := Rule{
		Name: RuleNotYourTurn, Eligible: false,
		When: func(in *Input) bool {
			return in.Preemptor.WaitingLonger != "" && in.Scope == SameClusterQueue &&
				in.Policy == kueue.PreemptionPolicyLowerOrNewerEqualPriority &&
				in.Candidate.Priority == in.Preemptor.Priority && pastMinAdmitDuration(in.Candidate, in.Settings, in.Now)
		},
		Why: func(in *Input) string {
			return fmt.Sprintf("past minAdmitDuration %s, but %s has waited longer for a turn", in.Settings.MinAdmitDuration, in.Preemptor.WaitingLonger)
		},
	}
	rule := Rule{
		Name: RuleTimeExpired, Eligible: true, Reason: TimeBasedReason,
		When: func(in *Input) bool {
			return in.Scope == SameClusterQueue && in.Policy == kueue.PreemptionPolicyLowerOrNewerEqualPriority &&
				in.Candidate.Priority == in.Preemptor.Priority && pastMinAdmitDuration(in.Candidate, in.Settings, in.Now)
		},
		Why: func(in *Input) string {
			return fmt.Sprintf("same priority %d and holding quota for %s, longer than minAdmitDuration %s",
				in.Candidate.Priority, in.Now.Sub(in.Candidate.QuotaReservedAt).Round(time.Second), in.Settings.MinAdmitDuration)
		},
	}
	key := OrderKey{Name: KeyTimeExpired, Compare: func(ctx *OrderContext, a, b *Candidate) int {
		// Only between same-priority workloads of the preemptor's queue; the priority key ran before.
		if a.Info.ClusterQueue != ctx.ClusterQueue || b.Info.ClusterQueue != ctx.ClusterQueue || a.Priority != b.Priority {
			return 0
		}
		ea, eb := pastMinAdmitDuration(a, ctx.Settings, ctx.Now), pastMinAdmitDuration(b, ctx.Settings, ctx.Now)
		switch {
		case ea && eb:
			return a.QuotaReservedAt.Compare(b.QuotaReservedAt)
		default:
			return cmputil.CompareBool(ea, eb)
		}
	}}
	return func(p *Policy) {
		WithRulesBefore(RuleNotLower, notYourTurn, rule)(p)
		WithKeysBefore(KeyReservation, key)(p)
	}
}

// TakesTurns reports whether the ClusterQueue's same-priority workloads take time-sharing turns:
// it sets a minAdmitDuration (read with its gate on).
func (s QueueSettings) TakesTurns() bool { return s.MinAdmitDuration > 0 }

// pastMinAdmitDuration: strictly longer than the window; exactly at it is not enough.
func pastMinAdmitDuration(c *Candidate, s QueueSettings, now time.Time) bool {
	return s.MinAdmitDuration > 0 && !c.QuotaReservedAt.IsZero() && now.Sub(c.QuotaReservedAt) > s.MinAdmitDuration
}

// timeBasedChanges gives when pastMinAdmitDuration changes for c under its ClusterQueue's window.
func timeBasedChanges(c *Candidate, s WakeSettings, add func(Change)) {
	add(minAdmitDurationChange(c, s.MinAdmitDuration))
}

// minAdmitDurationChange is when pastMinAdmitDuration turns true for c: just after the window
// ends, since it counts only once strictly passed.
func minAdmitDurationChange(c *Candidate, window time.Duration) Change {
	return Change{At: MinAdmitDurationEnds(c, window), After: true}
}

// MinAdmitDurationEnds is when c's window ends (its turn, under time-sharing): c becomes
// preemptible for it just after. Zero without a window or a quota reservation.
func MinAdmitDurationEnds(c *Candidate, window time.Duration) time.Time {
	if window <= 0 || c.QuotaReservedAt.IsZero() {
		return time.Time{}
	}
	return c.QuotaReservedAt.Add(window)
}
