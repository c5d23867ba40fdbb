// Package notice is the controller half of the notice before eviction (the PreemptionNotice
// feature). The preemptor gives a notice as the victim Workload's PreemptionNotice condition
// (Read) and evicts it when the notice is due; this controller keeps the notice's
// copy in the Workload's annotations, tells the victim's Pods the deadline, copies
// checkpoint-done from the job, wakes the preemptor, and ends the notices that end without an
// eviction. Everything it does is derived from the Workload's status, so a restarted manager
// carries on.
package notice

import (
	"fmt"
	"time"

	apimeta "k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"

	kueue "sigs.k8s.io/kueue/apis/kueue/v1beta2"
	"sigs.k8s.io/kueue/pkg/workload"
	workloadfinish "sigs.k8s.io/kueue/pkg/workload/finish"

	"github.com/kueue-timeshare/kueue-timeshare/apis/annotations"
	"github.com/kueue-timeshare/kueue-timeshare/pkg/message"
)

// Event reasons. The preemptor records its own events when it gives a notice and when it evicts.
const (
	// ReasonWithdrawn (Normal): the preemptor no longer needs the room; the workload keeps running.
	ReasonWithdrawn = "PreemptionNoticeWithdrawn"
	// ReasonEnded (Normal): the workload finished or stopped before the preemptor evicted it.
	ReasonEnded = "PreemptionNoticeEnded"
	// ReasonInvalid (Warning): the notice annotations disagree with the notice in the Workload's
	// status (none, or another); they are removed or restored, and nothing reads them to decide.
	ReasonInvalid = "InvalidPreemptionNotice"
)

// Action is what a reconcile does with a Workload.
type Action string

const (
	// Nothing: no notice.
	Nothing Action = "Nothing"
	// Tell: the notice is in force; make sure the condition, the Pods and the job's
	// checkpoint-done show it, and wake the preemptor when it is due.
	Tell Action = "Tell"
	// End: end the notice without an eviction (condition False with Outcome, count it once).
	End Action = "End"
	// Clean: the notice ended already (the condition is False); only its annotations are left.
	Clean Action = "Clean"
	// Record: the preemptor evicted the workload for this notice and records the end itself; write
	// the same condition in case its write was lost (not counted again), then clean.
	Record Action = "Record"
)

// Preemptor is what the controller read of the Workload named in a notice.
type Preemptor struct {
	// Found is false when no Workload has the notice's namespace/name.
	Found         bool
	UID           types.UID
	Finished      bool
	Active        bool
	QuotaReserved bool
	// Queue is its LocalQueue, which its owner may change; ElsewhereInTree is true when that puts
	// it outside the victim's cohort tree, where the room it was promised is of no use to it.
	Queue           kueue.LocalQueueName
	ElsewhereInTree bool
}

// PreemptorOf describes wl as a notice's preemptor; nil is a preemptor not found.
func PreemptorOf(wl *kueue.Workload) Preemptor {
	if wl == nil {
		return Preemptor{}
	}
	return Preemptor{Found: true, UID: wl.UID, Finished: workloadfinish.IsFinished(wl),
		Active: workload.IsActive(wl), QuotaReserved: workload.HasQuotaReservation(wl), Queue: wl.Spec.QueueName}
}

// Decision is what Decide says a reconcile should do.
type Decision struct {
	Action Action
	// Outcome is the reason of the False condition End writes.
	Outcome Outcome
	// Why says in words why the notice ends (End).
	Why string
	// Due is true when the preemptor may evict the victim now (Tell); Wait is how long until the
	// deadline otherwise.
	Due  bool
	Wait time.Duration
}

// Decide says what to do with victim wl carrying notice n (nil: none) at now, given its preemptor.
func Decide(wl *kueue.Workload, n *annotations.Notice, pre Preemptor, now time.Time) Decision {
	if n == nil {
		return Decision{Action: Nothing}
	}
	if Ended(wl, n) {
		return Decision{Action: Clean}
	}
	if workloadfinish.IsFinished(wl) {
		return Decision{Action: End, Outcome: EndedEarly, Why: "the workload finished"}
	}
	if PreemptedFor(wl, n) {
		outcome, _ := EvictionOutcome(n, wl)
		return Decision{Action: Record, Outcome: outcome}
	}
	if !workload.HasQuotaReservation(wl) || apimeta.IsStatusConditionTrue(wl.Status.Conditions, kueue.WorkloadEvicted) {
		return Decision{Action: End, Outcome: EndedEarly, Why: "the workload was stopped before the deadline"}
	}
	switch {
	case !pre.Found:
		return Decision{Action: End, Outcome: Withdrawn, Why: fmt.Sprintf("%s was deleted", n.PreemptorText())}
	case pre.UID != n.PreemptorUID:
		return Decision{Action: End, Outcome: Withdrawn, Why: fmt.Sprintf("%s was deleted (one of the same name replaced it)", n.PreemptorText())}
	case pre.Finished:
		return Decision{Action: End, Outcome: Withdrawn, Why: fmt.Sprintf("%s finished", n.PreemptorText())}
	case !pre.Active:
		return Decision{Action: End, Outcome: Withdrawn, Why: fmt.Sprintf("%s was deactivated", n.PreemptorText())}
	case pre.QuotaReserved:
		return Decision{Action: End, Outcome: Withdrawn, Why: fmt.Sprintf("%s was admitted without this eviction", n.PreemptorText())}
	case pre.ElsewhereInTree:
		return Decision{Action: End, Outcome: Withdrawn, Why: fmt.Sprintf("%s moved to a queue outside this cohort tree", n.PreemptorText())}
	}
	due, _ := Due(n, wl, now)
	d := Decision{Action: Tell, Due: due}
	if !due {
		d.Wait = n.Deadline.Sub(now)
	}
	return d
}

// PreemptedFor reports whether wl was preempted for notice n: its Preempted condition is True,
// with the notice's reason, since the notice was given.
func PreemptedFor(wl *kueue.Workload, n *annotations.Notice) bool {
	c := apimeta.FindStatusCondition(wl.Status.Conditions, kueue.WorkloadPreempted)
	return c != nil && c.Status == metav1.ConditionTrue && c.Reason == n.Reason && !c.LastTransitionTime.Time.Before(n.Start.Truncate(time.Second))
}

// Ended reports whether notice n on wl is over: the condition is False since the notice was given.
// A condition False from an earlier notice is older than n.
func Ended(wl *kueue.Workload, n *annotations.Notice) bool {
	c := apimeta.FindStatusCondition(wl.Status.Conditions, Condition)
	return c != nil && c.Status == metav1.ConditionFalse && !c.LastTransitionTime.Time.Before(n.Start.Truncate(time.Second))
}

// EndedMessage is the False condition's message when this controller ends the notice.
func EndedMessage(n *annotations.Notice, d Decision) string {
	if d.Outcome == Withdrawn {
		return message.Bound(fmt.Sprintf("Notice of preemption for %s withdrawn: %s; the workload keeps running", n.PreemptorText(), d.Why))
	}
	return message.Bound(fmt.Sprintf("Notice of preemption for %s ended: %s", n.PreemptorText(), d.Why))
}
