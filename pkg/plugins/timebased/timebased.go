// Package timebased is time-based same-priority preemption (KEP-8522): in a ClusterQueue with a
// minAdmitDuration, same-priority workloads take turns on the quota. Its unit holds the rules, the
// ordering key and the settings; the turns themselves (who waits longest, who may hold a turn)
// are the preemptor's search (pkg/scheduler/preemption's turn.go and turnholder.go), which reads
// them through this package.
package timebased

import (
	"cmp"
	"fmt"
	"time"

	"k8s.io/apimachinery/pkg/types"
	kueue "sigs.k8s.io/kueue/apis/kueue/v1beta2"
	cmputil "sigs.k8s.io/kueue/pkg/util/cmp"

	tsapi "github.com/kueue-timeshare/kueue-timeshare/apis/kueue/v1beta2"
	"github.com/kueue-timeshare/kueue-timeshare/pkg/policy"
)

// Feature is time-based same-priority preemption (KEP-8522).
const Feature policy.Feature = "TimeBasedSamePriorityPreemption"

// Unit is time-based same-priority preemption's unit (plugins.Units). A preemptor given the
// ClusterQueues' settings (a Source) turns it on.
func Unit() policy.Unit {
	return policy.Unit{
		Feature: Feature, Option: Option, Changes: changes,
		// Without a minAdmitDuration anywhere it changes nothing.
		MayChange: func(s policy.WakeSettings) bool { return s.Configured != nil && s.Configured(Feature) },
		Takes:     func(src any) bool { _, ok := src.(Source); return ok },
		Resolve:   resolve,

		QueueSettings: settingsOf,
	}
}

// Reason is the preemption reason of a same-priority workload preempted because it held quota
// longer than its ClusterQueue's minAdmitDuration (KEP-8522).
const Reason = tsapi.TimeBasedReason

// Names of the rules and ordering key Option adds.
const (
	RuleExpired     = "SamePriorityPastMinAdmitDuration"
	RuleNotYourTurn = "AnotherWorkloadHasTheTurn"
	KeyExpired      = "PastMinAdmitDurationFirst"
)

// Option adds KEP-8522: under withinClusterQueue LowerOrNewerEqualPriority with a
// minAdmitDuration, a same-priority workload of the preemptor's ClusterQueue becomes eligible once
// it has held quota for strictly longer than minAdmitDuration, measured from the QuotaReserved
// condition's lastTransitionTime. The rule comes after upstream's, so a workload that upstream
// would already preempt keeps upstream's reason.
//
// Among same-priority candidates of that ClusterQueue, expired ones go first, the longest-running
// first; the rest keep upstream's order (most recently reserved first).
//
// Turns: only the same-priority pending workload that has waited longest for a turn may take one
// this way (WaitingLonger is empty for it); the others are refused, so that a
// workload just preempted for time-sharing does not take the quota straight back.
func Option() policy.Option {
	notYourTurn := policy.Rule{
		Name: RuleNotYourTurn, Eligible: false,
		When: func(in *policy.Input) bool {
			return WaitingLonger(in.Preemptor) != "" && in.Scope == policy.SameClusterQueue &&
				in.Policy == kueue.PreemptionPolicyLowerOrNewerEqualPriority &&
				in.Candidate.Priority == in.Preemptor.Priority && pastMinAdmitDuration(in.Candidate, Of(in), in.Now)
		},
		Why: func(in *policy.Input) string {
			return fmt.Sprintf("past minAdmitDuration %s, but %s has waited longer for a turn", Of(in).MinAdmitDuration, WaitingLonger(in.Preemptor))
		},
	}
	rule := policy.Rule{
		Name: RuleExpired, Eligible: true, Reason: Reason,
		When: func(in *policy.Input) bool {
			return in.Scope == policy.SameClusterQueue && in.Policy == kueue.PreemptionPolicyLowerOrNewerEqualPriority &&
				in.Candidate.Priority == in.Preemptor.Priority && pastMinAdmitDuration(in.Candidate, Of(in), in.Now)
		},
		Why: func(in *policy.Input) string {
			window := Of(in).MinAdmitDuration
			msg := fmt.Sprintf("same priority %d and holding quota for %s, longer than minAdmitDuration %s",
				in.Candidate.Priority, in.Now.Sub(in.Candidate.QuotaReservedAt).Round(time.Second), window)
			if in.Candidate.TurnCharge > 0 {
				msg += fmt.Sprintf(" less %s its Pods outlived the hold after its last turn", min(in.Candidate.TurnCharge, window))
			}
			return msg
		},
	}
	key := policy.OrderKey{Name: KeyExpired, Compare: func(ctx *policy.OrderContext, a, b *policy.Candidate) int {
		// Only between same-priority workloads of the preemptor's queue; the priority key ran before.
		if a.Info.ClusterQueue != ctx.ClusterQueue || b.Info.ClusterQueue != ctx.ClusterQueue || a.Priority != b.Priority {
			return 0
		}
		s := InQueue(ctx.Queue)
		ea, eb := pastMinAdmitDuration(a, s, ctx.Now), pastMinAdmitDuration(b, s, ctx.Now)
		switch {
		case ea && eb:
			return a.QuotaReservedAt.Compare(b.QuotaReservedAt)
		default:
			return cmputil.CompareBool(ea, eb)
		}
	}}
	return func(p *policy.Policy) {
		policy.WithRulesBefore(policy.RuleNotLower, notYourTurn, rule)(p)
		policy.WithKeysBefore(policy.KeyReservation, key)(p)
	}
}

// Settings are a ClusterQueue's time-sharing settings. The zero value means none is set:
// upstream behaviour.
type Settings struct {
	// MinAdmitDuration is spec.preemption.withinClusterQueueConfig.minAdmitDuration (KEP-8522).
	MinAdmitDuration time.Duration
	// StrictFIFO: spec.queueingStrategy is StrictFIFO, so a turn never passes over the workload
	// whose turn it is, even one that cannot use it (upstream's head-of-line blocking).
	StrictFIFO bool
}

// TakesTurns reports whether the ClusterQueue's same-priority workloads take time-sharing turns:
// it sets a minAdmitDuration (read with its gate on).
func (s Settings) TakesTurns() bool { return s.MinAdmitDuration > 0 }

// pastMinAdmitDuration: strictly past the turn's end; exactly at it is not enough.
func pastMinAdmitDuration(c *policy.Candidate, s Settings, now time.Time) bool {
	end := s.TurnEnds(c)
	return !end.IsZero() && now.After(end)
}

// changes gives when pastMinAdmitDuration changes for c under its ClusterQueue's window.
func changes(c *policy.Candidate, s policy.WakeSettings, add func(policy.Change)) {
	qs, _ := s.Queue[Feature].(Settings)
	add(policy.Change{At: qs.TurnEnds(c), After: true})
}

// TurnEnds is when c's turn ends under these settings (its minAdmitDuration, counted from its
// quota reservation, less its turn charge, at most the whole window): c becomes preemptible for it
// just after, since the window counts only once strictly passed. Zero without a window or a quota
// reservation.
func (s Settings) TurnEnds(c *policy.Candidate) time.Time {
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

// settingsOf reads the window off a ClusterQueue's extension fields (Unit.QueueSettings); a
// Cohort sets none.
func settingsOf(ext any) any {
	e, ok := ext.(interface{ MinAdmitDuration() time.Duration })
	if !ok {
		return nil
	}
	return Settings{MinAdmitDuration: e.MinAdmitDuration()}
}

// Source supplies a ClusterQueue's settings as the settings store keeps them: what each unit read
// off it (nil while the unit's gate is off), and its queueing strategy. A preemptor given one
// turns time-based preemption on.
type Source interface {
	QueueSettingsOf(f policy.Feature, cq kueue.ClusterQueueReference) any
	StrictFIFO(cq kueue.ClusterQueueReference) bool
}

// SettingsOf are cq's settings in src.
func SettingsOf(src Source, cq kueue.ClusterQueueReference) Settings {
	s, _ := src.QueueSettingsOf(Feature, cq).(Settings)
	s.StrictFIFO = src.StrictFIFO(cq)
	return s
}

// resolved are the settings of the preemptor's ClusterQueue, which the rules and the key read.
var resolved = policy.NewQueueFact[Settings]()

// resolve resolves them for a search (Unit.Resolve): only for the preemptor's own ClusterQueue,
// whose candidates alone the rules and the key read them for.
func resolve(j policy.Judging, q *policy.QueueFacts) {
	if j.Scope != policy.SameClusterQueue {
		return
	}
	if src, ok := policy.SourceOf[Source](j.Sources); ok {
		s := SettingsOf(src, j.Preemptor.Name)
		resolved.Set(q, &s)
	}
}

// Of are the settings of in's preemptor's ClusterQueue; none when nothing was resolved.
func Of(in *policy.Input) Settings { return InQueue(in.Queue) }

// InQueue are the settings resolved in q; none when nothing was.
func InQueue(q *policy.QueueFacts) Settings {
	if s := resolved.In(q); s != nil {
		return *s
	}
	return Settings{}
}

// Resolved are queue facts holding s, as a search would have resolved them: for readers that
// resolve it themselves, and for tests.
func Resolved(s Settings) *policy.QueueFacts {
	var q policy.QueueFacts
	Into(&q, s)
	return &q
}

// Into sets s in q, as a search resolves it.
func Into(q *policy.QueueFacts, s Settings) { resolved.Set(q, &s) }

// waitingLonger names a same-priority workload of the preemptor's ClusterQueue whose turn comes
// before the preemptor's: the preemptor's turns (pkg/scheduler/preemption's turn.go) set it.
var waitingLonger = policy.NewPendingFact[string]()

// WaitingLonger is the workload whose turn comes before p's; "" when p has the turn.
func WaitingLonger(p *policy.Pending) string {
	if name := waitingLonger.Of(p); name != nil {
		return *name
	}
	return ""
}

// SetWaitingLonger records the workload whose turn comes before p's; "": p has the turn.
func SetWaitingLonger(p *policy.Pending, name string) {
	if name == "" {
		waitingLonger.Set(p, nil)
		return
	}
	waitingLonger.Set(p, &name)
}
