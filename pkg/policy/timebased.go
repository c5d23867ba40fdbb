package policy

import (
	"cmp"
	"fmt"
	"strings"
	"time"

	apimeta "k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	kueue "sigs.k8s.io/kueue/apis/kueue/v1beta2"
	cmputil "sigs.k8s.io/kueue/pkg/util/cmp"

	tsapi "github.com/kueue-timeshare/kueue-timeshare/apis/kueue/v1beta2"
)

// FeatureTimeBased is time-based same-priority preemption (KEP-8522).
const FeatureTimeBased Feature = "TimeBasedSamePriorityPreemption"

// TimeBasedUnit is time-based same-priority preemption's unit (plugins.Units).
func TimeBasedUnit() Unit {
	return Unit{
		Feature: FeatureTimeBased, Option: WithTimeBasedPreemption, Changes: timeBasedChanges,
		// Without a minAdmitDuration it changes nothing.
		MayChange: func(WakeSettings) bool { return false },
	}
}

// TimeBasedReason is the preemption reason of a same-priority workload preempted because it held
// quota longer than its ClusterQueue's minAdmitDuration (KEP-8522).
const TimeBasedReason = tsapi.TimeBasedReason

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
			msg := fmt.Sprintf("same priority %d and holding quota for %s, longer than minAdmitDuration %s",
				in.Candidate.Priority, in.Now.Sub(in.Candidate.QuotaReservedAt).Round(time.Second), in.Settings.MinAdmitDuration)
			if in.Candidate.TurnCharge > 0 {
				msg += fmt.Sprintf(" less %s its Pods outlived the hold after its last turn", min(in.Candidate.TurnCharge, in.Settings.MinAdmitDuration))
			}
			return msg
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

// QueueSettings are a ClusterQueue's time-sharing settings, resolved for the preemptor's
// ClusterQueue. The zero value means none is set: upstream behaviour.
type QueueSettings struct {
	// MinAdmitDuration is spec.preemption.withinClusterQueueConfig.minAdmitDuration (KEP-8522).
	MinAdmitDuration time.Duration
	// StrictFIFO: spec.queueingStrategy is StrictFIFO, so a turn never passes over the workload
	// whose turn it is, even one that cannot use it (upstream's head-of-line blocking).
	StrictFIFO bool
}

// TakesTurns reports whether the ClusterQueue's same-priority workloads take time-sharing turns:
// it sets a minAdmitDuration (read with its gate on).
func (s QueueSettings) TakesTurns() bool { return s.MinAdmitDuration > 0 }

// pastMinAdmitDuration: strictly past the turn's end; exactly at it is not enough.
func pastMinAdmitDuration(c *Candidate, s QueueSettings, now time.Time) bool {
	end := s.TurnEnds(c)
	return !end.IsZero() && now.After(end)
}

// timeBasedChanges gives when pastMinAdmitDuration changes for c under its ClusterQueue's window.
func timeBasedChanges(c *Candidate, s WakeSettings, add func(Change)) {
	add(Change{At: s.Queue.TurnEnds(c), After: true})
}

// TurnEnds is when c's turn ends under these settings (its minAdmitDuration, counted from its
// quota reservation, less its turn charge, at most the whole window): c becomes preemptible for it
// just after, since the window counts only once strictly passed. Zero without a window or a quota
// reservation.
func (s QueueSettings) TurnEnds(c *Candidate) time.Time {
	if s.MinAdmitDuration <= 0 || c.QuotaReservedAt.IsZero() {
		return time.Time{}
	}
	return c.QuotaReservedAt.Add(s.MinAdmitDuration - min(max(c.TurnCharge, 0), s.MinAdmitDuration))
}

// TurnPlace is where a same-priority pending workload stands in its ClusterQueue's turn order,
// for the preemptor and the admission estimate alike: At is when it started waiting for a turn
// (when it last left the quota, else its queue-order time), Left whether it got there by leaving
// the quota.
type TurnPlace struct {
	At   time.Time
	Left bool
	UID  types.UID
}

// Compare orders two places: the earlier time first. Condition times have a resolution of one
// second, and a workload is often rotated out in the second the one it makes room for joined the
// queue: on equal times the one that left the quota goes behind the one that joined, as the back
// of the line is where leaving puts it. Then the smaller UID.
func (a TurnPlace) Compare(b TurnPlace) int {
	if c := a.At.Compare(b.At); c != 0 {
		return c
	}
	if a.Left != b.Left {
		if a.Left {
			return 1
		}
		return -1
	}
	return cmp.Compare(a.UID, b.UID)
}

// TurnChargeCondition is the Workload condition by which the manager charges a workload's next
// turn with the time its Pods kept running past the longest hold after a turn
// (timeshare.maxHandoverHold): True while the charge waits for that turn, False once the turn it
// shortened is over. A tenant's grace period may keep its Pods running, but not for free.
const TurnChargeCondition = "kueue-timeshare.io/TurnCharge"

// Reasons of the TurnCharge condition.
const (
	TurnChargeOwed  = "PodsOutlivedHold"
	TurnChargeSpent = "ChargedToTurn"
)

// turnChargeMark precedes the charge in the condition's message, which is where it is kept: the
// status is the manager's, and the message says it in words too.
const turnChargeMark = "its next turn is shorter by "

// TurnChargeMessage is the message of an owed charge: the Pods outlived the hold (bound) by
// overstay.
func TurnChargeMessage(overstay, bound time.Duration) string {
	overstay = overstay.Round(time.Second)
	return fmt.Sprintf("Its Pods ran %s past the longest hold the manager allows after a preemption (maxHandoverHold %s), while another workload had its quota; %s%s",
		overstay, bound, turnChargeMark, overstay)
}

// TurnChargeOf is the charge wl owes its current or next turn: zero unless its TurnCharge condition
// is True and says how much.
func TurnChargeOf(wl *kueue.Workload) time.Duration {
	c := apimeta.FindStatusCondition(wl.Status.Conditions, TurnChargeCondition)
	if c == nil || c.Status != metav1.ConditionTrue {
		return 0
	}
	_, after, ok := strings.Cut(c.Message, turnChargeMark)
	if !ok {
		return 0
	}
	d, err := time.ParseDuration(after)
	if err != nil || d < 0 {
		return 0
	}
	return d
}
