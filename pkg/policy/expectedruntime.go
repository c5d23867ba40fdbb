package policy

import (
	"fmt"
	"time"

	kueue "sigs.k8s.io/kueue/apis/kueue/v1beta2"

	"github.com/kueue-timeshare/kueue-timeshare/apis/annotations"
)

// FeatureExpectedRuntime is expected-runtime requeue.
const FeatureExpectedRuntime Feature = "ExpectedRuntimeRequeue"

func init() {
	register(Unit{
		Feature: FeatureExpectedRuntime, Option: WithExpectedRuntimeRequeue, Changes: expectedRuntimeChanges,
		Read: readExpectedRuntime,
		Reasons: map[string]ReasonWords{ExpectedRuntimeReason: {
			Eviction: "expected runtime: the workload ran past its expected runtime and a workload of its ClusterQueue needed the quota",
			Turn:     true,
			Requeue:  "Requeued after preemption for running past its expected runtime",
		}},
	})
}

// readExpectedRuntime reads the expected-runtime annotations. A candidate for a preemptor of
// another ClusterQueue is not read: the rule applies within a ClusterQueue only, and the
// nominations are counted for the preemptor's own queue.
func readExpectedRuntime(c *Candidate, wl *kueue.Workload, r Reading) {
	if r.OtherQueue {
		return
	}
	if er, ok := annotations.ParseExpectedRuntime(wl.Annotations); ok {
		c.ExpectedRuntime = &er
	}
}

// ExpectedRuntimeReason is the preemption reason of a workload preempted because it ran past its
// expected runtime.
const ExpectedRuntimeReason = "InClusterQueueExpectedRuntime"

// RuleExpectedRuntime names the rule WithExpectedRuntimeRequeue adds.
const RuleExpectedRuntime = "NominatedPastExpectedRuntime"

// Nominate says whether c, which opted in to expected-runtime requeue, is nominated at now: it
// runs, has run at least its expected runtime, and is past any cooldown. When it is not, skip is
// the reason to count, or "" when it simply has not run long enough yet.
func Nominate(c *Candidate, now time.Time) (nominated bool, skip string) {
	er := c.ExpectedRuntime
	switch {
	case er == nil:
		return false, ""
	case er.Skip != "":
		return false, er.Skip
	case c.Evicted || !c.Admitted:
		return false, annotations.SkipNotRunning
	case c.AdmittedAt.IsZero():
		return false, annotations.SkipMissingStart
	case c.NotStarted:
		return false, "" // PodsReady clock: its Pods are not ready yet
	case now.Before(c.runningSince()):
		return false, annotations.SkipClockSkew
	case !er.NotBefore.IsZero() && now.Before(er.NotBefore):
		return false, annotations.SkipCooldown
	case now.Sub(c.runningSince()) < er.Expected:
		return false, ""
	}
	return true, ""
}

// NominatedFrom is the first instant at which Nominate says yes for c as it is now: its expected
// runtime counted from when it runs, or the end of its cooldown if later. Zero when c is not
// nominated at any instant (not opted in, invalid annotations, not running, or its Pods not ready
// yet under the PodsReady clock).
func NominatedFrom(c *Candidate) time.Time {
	er := c.ExpectedRuntime
	if er == nil || er.Skip != "" || c.Evicted || !c.Admitted || c.AdmittedAt.IsZero() || c.NotStarted {
		return time.Time{}
	}
	at := c.runningSince().Add(er.Expected)
	if er.NotBefore.After(at) {
		at = er.NotBefore
	}
	return at
}

// expectedRuntimeChanges gives when Nominate changes for c, with expected-runtime requeue on.
func expectedRuntimeChanges(c *Candidate, _ WakeSettings, add func(Change)) {
	add(nominationChange(c))
}

// nominationChange is when Nominate turns true for c: see NominatedFrom.
func nominationChange(c *Candidate) Change {
	return Change{At: NominatedFrom(c)}
}

// WithExpectedRuntimeRequeue makes a nominated workload (see Nominate) a candidate for pending
// workloads of equal or higher priority of its own ClusterQueue, whatever withinClusterQueue says
// unless it is Never. The rule comes after upstream's, so a workload upstream would preempt anyway
// keeps upstream's reason; protections (min-runtime, toleration) still veto it. Victims are only
// evicted when that lets the preemptor be admitted, so with no contender a nominated workload keeps
// running.
func WithExpectedRuntimeRequeue() Option {
	return WithRulesBefore(RuleNotLower, Rule{
		Name: RuleExpectedRuntime, Eligible: true, Reason: ExpectedRuntimeReason,
		When: func(in *Input) bool {
			if in.Scope != SameClusterQueue || in.Policy == kueue.PreemptionPolicyNever || in.Candidate.Priority > in.Preemptor.Priority {
				return false
			}
			ok, _ := Nominate(in.Candidate, in.Now)
			return ok
		},
		Why: func(in *Input) string {
			return fmt.Sprintf("running for %s, past its expected runtime %s", in.Now.Sub(in.Candidate.runningSince()).Round(time.Second),
				in.Candidate.ExpectedRuntime.Expected)
		},
	})
}
