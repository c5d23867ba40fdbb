package policy

import (
	"fmt"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	kueue "sigs.k8s.io/kueue/apis/kueue/v1beta2"

	"github.com/kueue-timeshare/kueue-timeshare/apis/annotations"
	tsapi "github.com/kueue-timeshare/kueue-timeshare/apis/kueue/v1beta2"
)

// FeatureExpectedRuntime is expected-runtime requeue.
const FeatureExpectedRuntime Feature = "ExpectedRuntimeRequeue"

// ExpectedRuntimeUnit is expected-runtime requeue's unit (plugins.Units).
func ExpectedRuntimeUnit() Unit {
	return Unit{
		Feature: FeatureExpectedRuntime, Option: WithExpectedRuntimeRequeue, Changes: expectedRuntimeChanges,
		Read: readExpectedRuntime,
		// The cooldown is the manager's own record (annotations.ManagerOwned): the simulation writes its own.
		NotCarried: func(map[string]string) (string, []string) { return "", []string{annotations.RequeueNotBefore} },
		Promises:   &Promise{Annotation: annotations.ExpectedRuntime, Runtime: promisedRuntime},
		Metrics:    []prometheus.Collector{nominations, nominationsSkipped},
		Column:     &Column{Header: "EXPECTED RUNTIME ENDS", Label: "expected-runtime", Cell: expectedRuntimeCell},
	}
}

// promisedRuntime is wl's valid expected runtime.
func promisedRuntime(wl *kueue.Workload) (time.Duration, bool) {
	if er, ok := annotations.ParseExpectedRuntime(wl.Annotations); ok && er.Problem == "" && er.Expected > 0 {
		return er.Expected, true
	}
	return 0, false
}

// nominations counts admitted workloads found past their expected runtime (and so preemptible by
// equal or higher priorities of their ClusterQueue) in victim searches.
var nominations = prometheus.NewCounterVec(prometheus.CounterOpts{
	Subsystem: "kueue",
	Name:      "expected_runtime_nominations_total",
	Help:      "Workloads nominated as preemption candidates because they ran past their expected runtime, once per workload and admission.",
}, []string{"replica_role"})

// nominationsSkipped counts opted-in workloads not nominated, by reason.
var nominationsSkipped = prometheus.NewCounterVec(prometheus.CounterOpts{
	Subsystem: "kueue",
	Name:      "expected_runtime_nomination_skipped_total",
	Help: "Workloads with an expected runtime that were not nominated, by reason: cooldown, missing_start, invalid_duration, " +
		"not_running, minruntime_protected, clock_skew, invalid_not_before; once per workload, admission and reason.",
}, []string{"reason", "replica_role"})

// CountNomination counts one nomination (skip empty) or one skip for the reason skip, by a
// manager in role.
func CountNomination(skip, role string) {
	if skip == "" {
		nominations.WithLabelValues(role).Inc()
		return
	}
	nominationsSkipped.WithLabelValues(skip, role).Inc()
}

// expectedRuntimeCell is c's expected runtime (or why it is ignored) and when it is nominated.
func expectedRuntimeCell(c *Candidate) (string, time.Time) {
	er := expectedRuntime.Of(c)
	if er == nil {
		return "", time.Time{}
	}
	if er.Problem != "" {
		return er.Problem, NominatedFrom(c)
	}
	return er.Expected.String(), NominatedFrom(c)
}

// expectedRuntime is the candidate's expected-runtime annotations when it opted in.
var expectedRuntime = NewFact[annotations.ExpectedRuntimeSettings]()

// ExpectedRuntimeOf is c's expected-runtime annotations when it opted in (and was read).
func ExpectedRuntimeOf(c *Candidate) *annotations.ExpectedRuntimeSettings {
	return expectedRuntime.Of(c)
}

// readExpectedRuntime reads the expected-runtime annotations. A candidate for a preemptor of
// another ClusterQueue is not read: the rule applies within a ClusterQueue only, and the
// nominations are counted for the preemptor's own queue.
func readExpectedRuntime(c *Candidate, wl *kueue.Workload, r Reading) {
	if r.OtherQueue {
		return
	}
	if er, ok := annotations.ParseExpectedRuntime(wl.Annotations); ok {
		expectedRuntime.Set(c, &er)
	}
}

// ExpectedRuntimeReason is the preemption reason of a workload preempted because it ran past its
// expected runtime.
const ExpectedRuntimeReason = tsapi.ExpectedRuntimeReason

// RuleExpectedRuntime names the rule WithExpectedRuntimeRequeue adds.
const RuleExpectedRuntime = "NominatedPastExpectedRuntime"

// Nominate says whether c, which opted in to expected-runtime requeue, is nominated at now: it
// runs, has run at least its expected runtime, and is past any cooldown. When it is not, skip is
// the reason to count, or "" when it simply has not run long enough yet.
func Nominate(c *Candidate, now time.Time) (nominated bool, skip string) {
	er := expectedRuntime.Of(c)
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
	er := expectedRuntime.Of(c)
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
				expectedRuntime.Of(in.Candidate).Expected)
		},
	})
}
