package policy

import (
	"fmt"
	"time"

	apimeta "k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	kueue "sigs.k8s.io/kueue/apis/kueue/v1beta2"

	"github.com/kueue-timeshare/kueue-timeshare/apis/annotations"
	tsapi "github.com/kueue-timeshare/kueue-timeshare/apis/kueue/v1beta2"
)

// Notice before eviction: a victim whose settings give it a notice is not evicted when chosen. It
// keeps running, told its deadline, and the room it holds stays promised to the preemptor that
// chose it: other preemptors leave it alone, and that preemptor looks for no other victims until
// the notice is due (deadline reached, or the victim says its checkpoint is done), when it evicts
// it with the reason it chose it for.

// NoticeSettings are the notice settings of one queue of the tree; unset fields inherit from the
// parent cohort.
type NoticeSettings struct {
	Period               Setting
	OnPriorityPreemption Flag
	OnReclaim            Flag
}

// Flag is a boolean that may be unset; unset inherits from the next queue up.
type Flag struct {
	Set   bool
	Value bool
}

// NoticeNode is one queue on the path from a victim's ClusterQueue to the root of its cohort tree.
type NoticeNode struct {
	// Kind is "ClusterQueue" or "Cohort".
	Kind     string
	Name     string
	Settings NoticeSettings
}

// reasonKind sorts preemption reasons by the notice settings that govern them.
type reasonKind int

const (
	noNotice reasonKind = iota
	// turnNotice: time-based and expected-runtime preemptions, which always get the period.
	turnNotice
	priorityNotice
	reclaimNotice
)

func kindOf(reason string) reasonKind {
	switch reason {
	case TimeBasedReason, ExpectedRuntimeReason:
		return turnNotice
	case kueue.InClusterQueueReason:
		return priorityNotice
	case kueue.InCohortReclamationReason, kueue.InCohortReclaimWhileBorrowingReason, kueue.InCohortFairSharingReason:
		return reclaimNotice
	}
	return noNotice
}

// ResolveNotice is the notice a victim on path gets when preempted for reason: the first
// noticePeriod set from its ClusterQueue up, else def; and zero for a priority preemption or a
// reclaim unless the first noticeOnPriorityPreemption or noticeOnReclaim set on the path is true.
// source names the setting the period came from.
func ResolveNotice(path []NoticeNode, reason string, def time.Duration) (period time.Duration, source string) {
	if on, _ := NoticeExtended(path, reason); !on {
		return 0, ""
	}
	for _, n := range path {
		if n.Settings.Period.Set {
			return n.Settings.Period.Value, fmt.Sprintf("noticePeriod %s from %s %s", n.Settings.Period.Value, n.Kind, n.Name)
		}
	}
	return def, fmt.Sprintf("defaultNoticePeriod %s %s", def, defaultSource)
}

// NoticeExtended reports whether a victim on path preempted for reason gets a notice at all: a
// turn always does, a priority preemption or a reclaim only when the first
// noticeOnPriorityPreemption or noticeOnReclaim set from its ClusterQueue up is true. source says
// what decided it, and is empty when no queue on the path sets the flag.
func NoticeExtended(path []NoticeNode, reason string) (on bool, source string) {
	var field string
	var extension func(NoticeSettings) Flag
	switch kindOf(reason) {
	case noNotice:
		return false, "no notice for a preemption for " + reason
	case turnNotice:
		return true, "a turn always gets the notice"
	case priorityNotice:
		field, extension = "noticeOnPriorityPreemption", func(n NoticeSettings) Flag { return n.OnPriorityPreemption }
	case reclaimNotice:
		field, extension = "noticeOnReclaim", func(n NoticeSettings) Flag { return n.OnReclaim }
	}
	for _, n := range path {
		if f := extension(n.Settings); f.Set {
			return f.Value, fmt.Sprintf("%s %t from %s %s", field, f.Value, n.Kind, n.Name)
		}
	}
	return false, ""
}

// RuleUnderNotice names the protection WithPreemptionNotice adds.
const RuleUnderNotice = "UnderNoticeForAnotherPreemptor"

// WithPreemptionNotice vetoes a candidate under notice for another preemptor: its room is promised.
func WithPreemptionNotice() Option {
	return WithProtections(Rule{
		Name: RuleUnderNotice,
		When: func(in *Input) bool { return NoticedForOther(in.Candidate, in.Preemptor) },
		Why: func(in *Input) string {
			n := in.Candidate.Notice
			return fmt.Sprintf("under notice of preemption for %s until %s", n.Preemptor, n.Deadline.UTC().Format(time.RFC3339))
		},
	})
}

// NoticedForOther reports whether c's room is promised to a preemptor other than p.
func NoticedForOther(c *Candidate, p *Pending) bool {
	return c.Notice != nil && !c.Evicted && (p == nil || p.Obj == nil || c.Notice.PreemptorUID != p.Obj.UID)
}

// NoticeOutcome says how a notice ended; it is the reason of the PreemptionNotice condition once
// False and the outcome label of kueue_preemption_notices_total.
type NoticeOutcome string

const (
	// NoticeEvictedAtDeadline: the deadline came and the victim was evicted.
	NoticeEvictedAtDeadline NoticeOutcome = "EvictedAtDeadline"
	// NoticeEndedEarly: the victim said its checkpoint was done and was evicted then, or it
	// finished or was stopped by its owner first.
	NoticeEndedEarly NoticeOutcome = "EndedEarly"
	// NoticeWithdrawn: the preemptor no longer needed the room (deleted, finished, or admitted
	// without this eviction); the victim keeps running.
	NoticeWithdrawn NoticeOutcome = "Withdrawn"
)

// NoticeDue reports whether the notice on wl, given at the latest until n.Deadline, is over at now,
// and how: the deadline came, or the workload said its checkpoint is done.
func NoticeDue(n *annotations.Notice, wl *kueue.Workload, now time.Time) (bool, NoticeOutcome) {
	if annotations.CheckpointIsDone(wl.Annotations) {
		return true, NoticeEndedEarly
	}
	if !now.Before(n.Deadline) {
		return true, NoticeEvictedAtDeadline
	}
	return false, ""
}

// noticeChanges gives when a notice on c falls due: its deadline, for the preemptor waiting on it.
func noticeChanges(c *Candidate, _ WakeSettings, add func(Change)) {
	if c.Notice != nil && !c.Evicted {
		add(Change{At: c.Notice.Deadline})
	}
}

// NoticeCondition is the type of the Workload condition that shows a notice: True with the
// preemption reason while it runs, False with a NoticeOutcome once it has ended.
const NoticeCondition = "PreemptionNotice"

// NoticeFieldOwner is the server-side apply field manager that owns NoticeCondition.
const NoticeFieldOwner = "kueue-timeshare-notice"

// IsNoticeReason reports whether a preemption for reason can come with a notice; a notice naming
// any other reason was not given by the manager.
func IsNoticeReason(reason string) bool {
	return kindOf(reason) != noNotice
}

// NoticeInForceMessage is the message of the True NoticeCondition the preemptor writes when it
// gives notice n. It is also the manager's record of n: ReadNotice honours the annotations only
// when they give this same message.
func NoticeInForceMessage(n *annotations.Notice) string {
	return fmt.Sprintf("To be evicted at %s to make room for workload %s (%s); set the annotation %s=true on its job or Workload once its work is saved to be evicted sooner",
		n.Deadline.UTC().Format(time.RFC3339), n.Preemptor, n.Reason, annotations.CheckpointDone)
}

// NoticeRecord is the True NoticeCondition that records notice n, given at n.Start.
func NoticeRecord(n *annotations.Notice, generation int64) metav1.Condition {
	return metav1.Condition{Type: NoticeCondition, Status: metav1.ConditionTrue, Reason: n.Reason, Message: NoticeInForceMessage(n),
		LastTransitionTime: metav1.NewTime(n.Start.UTC().Truncate(time.Second)), ObservedGeneration: generation}
}

// ReadNotice is the notice in force on wl as every reader of it (the preemptor, the notice
// controller, the waker, the simulator) must see it: nil when there is none, and an error naming
// the rule when the annotations hold one the manager did not give. The annotations are written
// by the manager but writable by the Workload's owner, so they count only when the manager's
// record in the Workload's status, which tenants cannot write, agrees: the NoticeCondition is
// True with the notice's reason and message (which carry its deadline and preemptor), set no
// earlier than the notice's start; and the deadline is within the longest notice a queue can set.
func ReadNotice(wl *kueue.Workload) (*annotations.Notice, error) {
	n, err := annotations.ParseNotice(wl.Annotations)
	if err != nil || n == nil {
		return nil, err
	}
	if err := NoticeAgrees(wl, n); err != nil {
		return nil, err
	}
	return n, nil
}

// NoticeAgrees checks a well-formed notice n on wl against the rules ReadNotice applies.
func NoticeAgrees(wl *kueue.Workload, n *annotations.Notice) error {
	if !IsNoticeReason(n.Reason) {
		return fmt.Errorf("annotation %s: reason %q is not a preemption reason that gets a notice", annotations.PreemptionNotice, n.Reason)
	}
	// A deadline is rounded up to the second when given.
	if longest := n.Start.Truncate(time.Second).Add(tsapi.MaximumNoticePeriod + time.Second); n.Deadline.After(longest) {
		return fmt.Errorf("annotation %s: more than %s after the notice's start", annotations.PreemptionDeadline, tsapi.MaximumNoticePeriod)
	}
	c := apimeta.FindStatusCondition(wl.Status.Conditions, NoticeCondition)
	if c == nil || c.Status != metav1.ConditionTrue || c.Reason != n.Reason || c.Message != NoticeInForceMessage(n) ||
		c.LastTransitionTime.Time.Before(n.Start.Truncate(time.Second)) {
		return fmt.Errorf("annotations %s and %s: not given by the manager (the Workload's %s condition does not record them)",
			annotations.PreemptionNotice, annotations.PreemptionDeadline, NoticeCondition)
	}
	return nil
}

// NoticeEvictionOutcome is how a notice on wl ended when the preemptor evicted wl for it: early
// once the workload said its checkpoint was done, else at the deadline. The preemptor and the
// notice controller both record it, so that either may write the condition.
func NoticeEvictionOutcome(n *annotations.Notice, wl *kueue.Workload) (NoticeOutcome, string) {
	at := n.Deadline.UTC().Format(time.RFC3339)
	if annotations.CheckpointIsDone(wl.Annotations) {
		return NoticeEndedEarly, fmt.Sprintf("Evicted before its deadline %s: its checkpoint is done", at)
	}
	return NoticeEvictedAtDeadline, fmt.Sprintf("Evicted at its deadline %s", at)
}
