// Package policy is the victim policy: for a preemptor and one admitted candidate it decides
// whether the candidate may be preempted and why, and it orders the eligible candidates.
//
// The decisions are pure: inputs are plain facts read off workloads once, outputs carry the
// name of the rule that made them and a sentence a person can read. Each feature is one Unit
// (precedence.go); the registry (package plugins) lists them, and this package names none of
// them. Features plug in by adding a unit, never by editing the preemptor; what a reader shows
// of a feature (metrics, kubectl columns, the simulator's warnings) it asks of the feature's
// plugin through an interface of its own.
package policy

import (
	"fmt"
	"slices"
	"time"

	"github.com/go-logr/logr"
	apimeta "k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	kueue "sigs.k8s.io/kueue/apis/kueue/v1beta2"
	"sigs.k8s.io/kueue/pkg/util/priority"
	"sigs.k8s.io/kueue/pkg/workload"
	workloadevict "sigs.k8s.io/kueue/pkg/workload/evict"
)

// Scope says where a candidate runs relative to the preemptor.
type Scope int

const (
	// SameClusterQueue: the candidate is admitted in the preemptor's ClusterQueue;
	// spec.preemption.withinClusterQueue applies.
	SameClusterQueue Scope = iota
	// OtherClusterQueue: the candidate is admitted elsewhere in the cohort tree;
	// spec.preemption.reclaimWithinCohort applies.
	OtherClusterQueue
)

func (s Scope) String() string {
	if s == SameClusterQueue {
		return "withinClusterQueue"
	}
	return "reclaimWithinCohort"
}

// Pending holds the facts the rules read about the pending workload, the preemptor.
type Pending struct {
	Obj          *kueue.Workload
	ClusterQueue kueue.ClusterQueueReference
	// Priority is the effective priority (base plus any boost).
	Priority int64
	// QueuedAt is the queue-order timestamp (creation time, or a later one after some evictions).
	QueuedAt time.Time
	// facts are what the units say of the preemptor beyond these (see PendingFact), one slot each.
	facts [factSlots]any
}

// PendingFact is one unit's slot of facts on a preemptor; only that unit's file holds it.
type PendingFact[T any] struct{ slot int }

var nextPendingFactSlot int

// NewPendingFact gives a unit its slot; called once per unit, from a package variable of its own.
func NewPendingFact[T any]() PendingFact[T] {
	return PendingFact[T]{slot: newSlot(&nextPendingFactSlot, "preemptor facts")}
}

// Of is the unit's fact on p; nil when none is set.
func (f PendingFact[T]) Of(p *Pending) *T {
	v, _ := p.facts[f.slot].(*T)
	return v
}

// Set sets the unit's fact on p; nil clears it.
func (f PendingFact[T]) Set(p *Pending, v *T) {
	if v == nil {
		p.facts[f.slot] = nil
		return
	}
	p.facts[f.slot] = v
}

// Candidate holds the facts the rules read about an admitted workload.
type Candidate struct {
	Info     *workload.Info
	Priority int64
	QueuedAt time.Time
	// QuotaReservedAt is when the QuotaReserved condition last became true; zero if it is not true.
	QuotaReservedAt time.Time
	// TurnCharge shortens its turn: the time its Pods outlived the hold after its last one
	// (TurnChargeOf).
	TurnCharge time.Duration
	// AdmittedAt is when the Admitted condition last became true (work started); zero if it is not true.
	AdmittedAt time.Time
	// RunningSince is when the running time that min-runtimes and expected runtimes count began,
	// by the RuntimeClock in use; zero means AdmittedAt. NotStarted: admitted, but not started by
	// that clock (its Pods are not ready yet).
	RunningSince time.Time
	NotStarted   bool
	// Evicted candidates are already on their way out.
	Evicted bool
	// Admitted: the Admitted condition is true (the workload runs).
	Admitted bool
	// facts are what the units read off the workload (see Unit.Read), one slot each.
	facts [factSlots]any
}

// factSlots is how many units may keep facts on a candidate; an array, so that reading facts
// allocates nothing.
const factSlots = 4

// Fact is one unit's slot of facts on a candidate; only that unit's file holds it.
type Fact[T any] struct{ slot int }

var nextFactSlot int

// NewFact gives a unit its slot; called once per unit, from a package variable of its own.
func NewFact[T any]() Fact[T] { return Fact[T]{slot: newSlot(&nextFactSlot, "facts")} }

// newSlot takes the next of factSlots slots counted by next, for units' what.
func newSlot(next *int, what string) int {
	if *next == factSlots {
		panic("policy: more units with " + what + " than factSlots")
	}
	*next++
	return *next - 1
}

// Of is the unit's fact on c; nil when the unit read none.
func (f Fact[T]) Of(c *Candidate) *T {
	v, _ := c.facts[f.slot].(*T)
	return v
}

// Set sets the unit's fact on c; nil clears it.
func (f Fact[T]) Set(c *Candidate, v *T) {
	if v == nil {
		c.facts[f.slot] = nil
		return
	}
	c.facts[f.slot] = v
}

// QueueFacts are what the units resolved about one ClusterQueue's candidates against one
// preemptor (Unit.Resolve), one slot each: a search resolves them once per ClusterQueue it judges.
type QueueFacts struct{ slots [factSlots]any }

// QueueFact is one unit's slot of QueueFacts; only that unit's file holds it.
type QueueFact[T any] struct{ slot int }

var nextQueueFactSlot int

// NewQueueFact gives a unit its slot; called once per unit, from a package variable of its own.
func NewQueueFact[T any]() QueueFact[T] {
	return QueueFact[T]{slot: newSlot(&nextQueueFactSlot, "queue facts")}
}

// Of is the unit's fact in in.Queue; nil when it resolved none.
func (f QueueFact[T]) Of(in *Input) *T { return f.In(in.Queue) }

// In is the unit's fact in q; nil when it resolved none (or q is nil).
func (f QueueFact[T]) In(q *QueueFacts) *T {
	if q == nil {
		return nil
	}
	v, _ := q.slots[f.slot].(*T)
	return v
}

// Set sets the unit's fact in q.
func (f QueueFact[T]) Set(q *QueueFacts, v *T) { q.slots[f.slot] = v }

// Input is one question to the policy: may Candidate be preempted for Preemptor under Policy?
type Input struct {
	Preemptor *Pending
	Candidate *Candidate
	Scope     Scope
	// Policy is the preemptor's ClusterQueue policy for the candidate's scope.
	Policy kueue.PreemptionPolicy
	// Queue is what the units resolved about the candidate's ClusterQueue against this preemptor
	// (Unit.Resolve); nil: nothing.
	Queue *QueueFacts
	Now   time.Time
	// eligibleReason is the reason of the rule that found the candidate eligible, for the
	// protections that spare some reasons.
	eligibleReason string
}

// EligibleByTurn reports whether the rule that found the candidate eligible makes it a turn
// (tsapi.ReasonWords.Turn): for the protections that spare turns.
func (in *Input) EligibleByTurn() bool { return IsTurn(in.eligibleReason) }

// Decision is the policy's answer, with the rule that gave it.
type Decision struct {
	Eligible bool
	// Rule names the rule that decided, for logs and tests.
	Rule string
	// Message explains the decision in a sentence.
	Message string
	// Reason, when set, is the preemption reason to record instead of the scope's default
	// (the Preempted condition's reason and the reason label of kueue_preempted_workloads_total).
	Reason string
}

// Rule is one row of the policy table. Rules are tried in order; the first whose When holds decides.
// A protection is a Rule too: it vetoes a candidate the table found eligible (its Eligible is ignored).
type Rule struct {
	Name string
	// Eligible is the verdict this rule gives when it applies.
	Eligible bool
	When     func(*Input) bool
	// Why renders Decision.Message.
	Why func(*Input) string
	// Reason overrides the preemption reason of candidates this rule makes eligible.
	Reason string
}

// Options are settings that upstream keeps behind feature gates or configuration.
type Options struct {
	// TimestampBuffer: under LowerOrNewerEqualPriority a same-priority candidate counts as newer only
	// if it was queued more than this after the preemptor (upstream's SchedulerTimestampPreemptionBuffer).
	TimestampBuffer time.Duration
	// LocalQueueFairSharing orders candidates of one ClusterQueue by their LocalQueue's usage
	// (admission fair sharing).
	LocalQueueFairSharing bool
}

// Policy decides eligibility with a rule table and orders candidates with a key table.
type Policy struct {
	opts        Options
	rules       []Rule
	protections []Rule
	keys        []OrderKey
}

// Option adds a feature's rules or keys to a Policy.
type Option func(*Policy)

// WithRulesFirst puts rules ahead of the standard table: for protections, which must veto
// preemption that the standard rules would allow.
func WithRulesFirst(rules ...Rule) Option {
	return func(p *Policy) { p.rules = append(append([]Rule{}, rules...), p.rules...) }
}

// WithProtections adds vetoes that apply after the table found a candidate eligible, so a
// decision refused by one of them means "eligible, but protected".
func WithProtections(rules ...Rule) Option {
	return func(p *Policy) {
		for _, r := range rules {
			r.Eligible = false
			p.protections = append(p.protections, r)
		}
	}
}

// WithRulesBefore inserts rules just before the standard rule named name: for new ways of
// becoming eligible that must not override the earlier rows.
func WithRulesBefore(name string, rules ...Rule) Option {
	return func(p *Policy) {
		for i, r := range p.rules {
			if r.Name == name {
				p.rules = append(p.rules[:i], append(append([]Rule{}, rules...), p.rules[i:]...)...)
				return
			}
		}
		panic(fmt.Sprintf("policy: no rule named %q", name))
	}
}

// WithKeysBefore inserts ordering keys just before the standard key named name.
func WithKeysBefore(name string, keys ...OrderKey) Option {
	return func(p *Policy) {
		for i, k := range p.keys {
			if k.Name == name {
				p.keys = append(p.keys[:i], append(append([]OrderKey{}, keys...), p.keys[i:]...)...)
				return
			}
		}
		panic(fmt.Sprintf("policy: no ordering key named %q", name))
	}
}

// New returns the standard policy, identical to upstream Kueue's, extended by opts.
func New(o Options, opts ...Option) *Policy {
	p := &Policy{opts: o, rules: standardRules(o), keys: standardKeys(o)}
	for _, opt := range opts {
		opt(p)
	}
	return p
}

// Decide runs the rule table for one candidate. It leaves Message empty: the search asks
// thousands of times per cycle, and only logs and events need the sentence (see Explain).
func (p *Policy) Decide(in *Input) Decision {
	if r := p.match(in); r != nil {
		return Decision{Eligible: r.Eligible, Rule: r.Name, Reason: r.Reason}
	}
	return Decision{Rule: "NoRule"}
}

// Protects reports whether rule is a protection (WithProtections): a candidate it refused is
// eligible, but protected for now.
func (p *Policy) Protects(rule string) bool {
	return slices.ContainsFunc(p.protections, func(r Rule) bool { return r.Name == rule })
}

// Explain is Decide with Message filled in.
func (p *Policy) Explain(in *Input) Decision {
	if r := p.match(in); r != nil {
		return Decision{Eligible: r.Eligible, Rule: r.Name, Message: r.Why(in), Reason: r.Reason}
	}
	// The standard table ends with a catch-all, so this is only reached by a broken table.
	return Decision{Rule: "NoRule", Message: "no policy rule applied"}
}

func (p *Policy) match(in *Input) *Rule {
	for i := range p.rules {
		if !p.rules[i].When(in) {
			continue
		}
		if !p.rules[i].Eligible {
			return &p.rules[i]
		}
		in.eligibleReason = p.rules[i].Reason
		for j := range p.protections {
			if p.protections[j].When(in) {
				return &p.protections[j]
			}
		}
		return &p.rules[i]
	}
	return nil
}

// Rule names of the standard table, for WithRulesBefore.
const (
	RuleNever              = "PolicyNever"
	RuleAny                = "PolicyAny"
	RuleLowerPriority      = "LowerPriority"
	RuleNewerEqualPriority = "NewerEqualPriority"
	RuleNotLower           = "PriorityNotLower"
)

// standardRules is upstream Kueue's eligibility (SatisfiesPreemptionPolicy in its
// preemption/common package) as a table, one row per case, so that features can add rows;
// TestParityWithUpstream holds it to upstream's function.
func standardRules(o Options) []Rule {
	return []Rule{
		{
			Name: RuleNever, Eligible: false,
			When: func(in *Input) bool {
				return in.Policy != kueue.PreemptionPolicyAny && in.Policy != kueue.PreemptionPolicyLowerPriority &&
					in.Policy != kueue.PreemptionPolicyLowerOrNewerEqualPriority
			},
			Why: func(in *Input) string { return fmt.Sprintf("%s is Never", in.Scope) },
		},
		{
			Name: RuleAny, Eligible: true,
			When: func(in *Input) bool { return in.Policy == kueue.PreemptionPolicyAny },
			Why:  func(in *Input) string { return fmt.Sprintf("%s is Any", in.Scope) },
		},
		{
			Name: RuleLowerPriority, Eligible: true,
			When: func(in *Input) bool { return in.Candidate.Priority < in.Preemptor.Priority },
			Why: func(in *Input) string {
				return fmt.Sprintf("priority %d is lower than the preemptor's %d", in.Candidate.Priority, in.Preemptor.Priority)
			},
		},
		{
			Name: RuleNewerEqualPriority, Eligible: true,
			When: func(in *Input) bool {
				return in.Policy == kueue.PreemptionPolicyLowerOrNewerEqualPriority && newerWithSamePriority(in, o.TimestampBuffer)
			},
			Why: func(in *Input) string {
				return fmt.Sprintf("same priority %d and queued after the preemptor", in.Candidate.Priority)
			},
		},
		{
			Name: RuleNotLower, Eligible: false,
			When: func(*Input) bool { return true },
			Why: func(in *Input) string {
				return fmt.Sprintf("priority %d is not lower than the preemptor's %d and %s is %s",
					in.Candidate.Priority, in.Preemptor.Priority, in.Scope, in.Policy)
			},
		},
	}
}

func newerWithSamePriority(in *Input, buffer time.Duration) bool {
	if in.Candidate.Priority != in.Preemptor.Priority || !in.Preemptor.QueuedAt.Before(in.Candidate.QueuedAt) {
		return false
	}
	return buffer <= 0 || in.Candidate.QueuedAt.Sub(in.Preemptor.QueuedAt) > buffer
}

// NewPending reads the facts the rules need off a pending workload.
func NewPending(log logr.Logger, info *workload.Info, ordering workload.Ordering) *Pending {
	return &Pending{
		Obj:          info.Obj,
		ClusterQueue: info.ClusterQueue,
		Priority:     priority.EffectivePriority(log, info.Obj),
		QueuedAt:     ordering.GetQueueOrderTimestamp(info.Obj).Time,
	}
}

// NewCandidate reads the facts the rules need off an admitted workload. It returns a value so
// that callers can keep candidates in one slice instead of allocating each.
func NewCandidate(log logr.Logger, info *workload.Info, ordering workload.Ordering) Candidate {
	c := Candidate{
		Info:     info,
		Priority: priority.EffectivePriority(log, info.Obj),
		QueuedAt: ordering.GetQueueOrderTimestamp(info.Obj).Time,
		Evicted:  workloadevict.IsEvicted(info.Obj),
	}
	if cond := apimeta.FindStatusCondition(info.Obj.Status.Conditions, kueue.WorkloadQuotaReserved); cond != nil && cond.Status == metav1.ConditionTrue {
		c.QuotaReservedAt = cond.LastTransitionTime.Time
	}
	c.TurnCharge = TurnChargeOf(info.Obj)
	if cond := apimeta.FindStatusCondition(info.Obj.Status.Conditions, kueue.WorkloadAdmitted); cond != nil && cond.Status == metav1.ConditionTrue {
		c.Admitted, c.AdmittedAt = true, cond.LastTransitionTime.Time
	}
	return c
}

// RuntimeClock names the condition from which running time is counted (the manager's
// timeshare.runtimeClock).
type RuntimeClock string

const (
	// RuntimeClockAdmitted counts from the Admitted condition.
	RuntimeClockAdmitted RuntimeClock = "Admitted"
	// RuntimeClockPodsReady counts from the PodsReady condition, which Kueue maintains while
	// waitForPodsReady is enabled: an admitted workload whose Pods are not ready has not started.
	RuntimeClockPodsReady RuntimeClock = "PodsReady"
)

// RunningSince is when wl's running time began by clock; zero if it has not begun.
func RunningSince(wl *kueue.Workload, clock RuntimeClock) time.Time {
	admitted := apimeta.FindStatusCondition(wl.Status.Conditions, kueue.WorkloadAdmitted)
	if admitted == nil || admitted.Status != metav1.ConditionTrue {
		return time.Time{}
	}
	if clock != RuntimeClockPodsReady {
		return admitted.LastTransitionTime.Time
	}
	var since time.Time
	// A PodsReady left over from before the last admission does not count.
	if ready := apimeta.FindStatusCondition(wl.Status.Conditions, kueue.WorkloadPodsReady); ready != nil && ready.Status == metav1.ConditionTrue &&
		!ready.LastTransitionTime.Before(&admitted.LastTransitionTime) {
		since = ready.LastTransitionTime.Time
	}
	// Readiness bought once per admission: Pods that stop being ready and are ready again do not
	// start the clock again, nor stop it meanwhile.
	if first := FirstReady(wl, admitted.LastTransitionTime.Time); !first.IsZero() && (since.IsZero() || first.Before(since)) {
		since = first
	}
	return since
}

// FirstReadyCondition is the manager's record, in a Workload's status, of when its Pods were first
// ready since its admission (pkg/firstready writes it under the PodsReady runtime clock). Kueue's
// PodsReady condition keeps only the last transition, which a readiness probe that fails now and
// then moves forward. A Workload's status is not the tenant's to write.
const FirstReadyCondition = "kueue-timeshare.io/FirstPodsReady"

// FirstReadyFieldOwner owns FirstReadyCondition.
const FirstReadyFieldOwner = "kueue-timeshare-first-ready"

// FirstReady is the time FirstReadyCondition records for the admission at admittedAt; zero when it
// records none, or one from before that admission.
func FirstReady(wl *kueue.Workload, admittedAt time.Time) time.Time {
	c := apimeta.FindStatusCondition(wl.Status.Conditions, FirstReadyCondition)
	if c == nil || c.Status != metav1.ConditionTrue || c.LastTransitionTime.Time.Before(admittedAt) {
		return time.Time{}
	}
	return c.LastTransitionTime.Time
}

// CountRuntimeFrom sets RunningSince and NotStarted by clock.
func (c *Candidate) CountRuntimeFrom(clock RuntimeClock) {
	if clock != RuntimeClockPodsReady || !c.Admitted {
		return
	}
	c.RunningSince = RunningSince(c.Info.Obj, clock)
	c.NotStarted = c.RunningSince.IsZero()
}

// RunsSince is when the counted running time began; zero if it has not (not admitted, or
// not started by the clock in use).
func (c *Candidate) RunsSince() time.Time {
	if c.NotStarted || c.AdmittedAt.IsZero() {
		return time.Time{}
	}
	if !c.RunningSince.IsZero() {
		return c.RunningSince
	}
	return c.AdmittedAt
}
