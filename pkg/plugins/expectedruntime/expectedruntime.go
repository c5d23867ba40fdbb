// Package expectedruntime is expected-runtime requeue: a workload that declares how long it runs
// (annotations.ExpectedRuntime) may be preempted by a workload of equal or higher priority of its
// ClusterQueue once it has run that long, and then waits a cooldown before it is admitted again.
// The package holds its unit (rule, facts, timing, metrics, kubectl column), its part in the
// preemptor (Plugin) and the controller that carries the annotations from a job to its Workload.
package expectedruntime

import (
	"fmt"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	ctrl "sigs.k8s.io/controller-runtime"

	kueue "sigs.k8s.io/kueue/apis/kueue/v1beta2"

	"github.com/kueue-timeshare/kueue-timeshare/apis/annotations"
	tsapi "github.com/kueue-timeshare/kueue-timeshare/apis/kueue/v1beta2"
	"github.com/kueue-timeshare/kueue-timeshare/pkg/policy"
)

// Feature is expected-runtime requeue's gate.
const Feature policy.Feature = "ExpectedRuntimeRequeue"

// Unit is expected-runtime requeue's unit (plugins.Units). A preemptor given a DefaultCooldown
// turns it on.
func Unit() policy.Unit {
	return policy.Unit{
		Feature: Feature, Option: Option, Changes: changes, Read: read, Takes: takes,
		Setup:    func(mgr ctrl.Manager, _ policy.Env) error { return Setup(mgr) },
		Plugin:   Plugin{},
		Promises: &policy.Promise{Annotation: annotations.ExpectedRuntime, Runtime: promisedRuntime},
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

// countNomination counts one nomination (skip empty) or one skip for the reason skip, by a
// manager in role.
func countNomination(skip, role string) {
	if skip == "" {
		nominations.WithLabelValues(role).Inc()
		return
	}
	nominationsSkipped.WithLabelValues(skip, role).Inc()
}

// cell is c's expected runtime (or why it is ignored) and when it is nominated.
func cell(c *policy.Candidate) (string, time.Time) {
	er := fact.Of(c)
	if er == nil {
		return "", time.Time{}
	}
	if er.Problem != "" {
		return er.Problem, NominatedFrom(c)
	}
	return er.Expected.String(), NominatedFrom(c)
}

// fact is the candidate's expected-runtime annotations when it opted in.
var fact = policy.NewFact[annotations.ExpectedRuntimeSettings]()

// Of is c's expected-runtime annotations when it opted in (and was read).
func Of(c *policy.Candidate) *annotations.ExpectedRuntimeSettings {
	return fact.Of(c)
}

// takes: a DefaultCooldown turns the feature on.
func takes(src any) bool {
	_, ok := src.(DefaultCooldown)
	return ok
}

// read reads the expected-runtime annotations. A candidate for a preemptor of
// another ClusterQueue is not read: the rule applies within a ClusterQueue only, and the
// nominations are counted for the preemptor's own queue.
func read(c *policy.Candidate, wl *kueue.Workload, r policy.Reading) {
	if r.OtherQueue {
		return
	}
	if er, ok := annotations.ParseExpectedRuntime(wl.Annotations); ok {
		fact.Set(c, &er)
	}
}

// Reason is the preemption reason of a workload preempted because it ran past its expected
// runtime.
const Reason = tsapi.ExpectedRuntimeReason

// Rule names the rule Option adds.
const Rule = "NominatedPastExpectedRuntime"

// Nominate says whether c, which opted in to expected-runtime requeue, is nominated at now: it
// runs, has run at least its expected runtime, and is past any cooldown. When it is not, skip is
// the reason to count, or "" when it simply has not run long enough yet.
func Nominate(c *policy.Candidate, now time.Time) (nominated bool, skip string) {
	er := fact.Of(c)
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
	case now.Before(c.RunsSince()):
		return false, annotations.SkipClockSkew
	case !er.NotBefore.IsZero() && now.Before(er.NotBefore):
		return false, annotations.SkipCooldown
	case now.Sub(c.RunsSince()) < er.Expected:
		return false, ""
	}
	return true, ""
}

// NominatedFrom is the first instant at which Nominate says yes for c as it is now: its expected
// runtime counted from when it runs, or the end of its cooldown if later. Zero when c is not
// nominated at any instant (not opted in, invalid annotations, not running, or its Pods not ready
// yet under the PodsReady clock).
func NominatedFrom(c *policy.Candidate) time.Time {
	er := fact.Of(c)
	if er == nil || er.Skip != "" || c.Evicted || !c.Admitted || c.AdmittedAt.IsZero() || c.NotStarted {
		return time.Time{}
	}
	at := c.RunsSince().Add(er.Expected)
	if er.NotBefore.After(at) {
		at = er.NotBefore
	}
	return at
}

// changes gives when Nominate changes for c, with expected-runtime requeue on: see
// NominatedFrom.
func changes(c *policy.Candidate, _ policy.WakeSettings, add func(policy.Change)) {
	add(policy.Change{At: NominatedFrom(c)})
}

// Option makes a nominated workload (see Nominate) a candidate for pending
// workloads of equal or higher priority of its own ClusterQueue, whatever withinClusterQueue says
// unless it is Never. The rule comes after upstream's, so a workload upstream would preempt anyway
// keeps upstream's reason; protections (min-runtime, toleration) still veto it. Victims are only
// evicted when that lets the preemptor be admitted, so with no contender a nominated workload keeps
// running.
func Option() policy.Option {
	return policy.WithRulesBefore(policy.RuleNotLower, policy.Rule{
		Name: Rule, Eligible: true, Reason: Reason,
		When: func(in *policy.Input) bool {
			if in.Scope != policy.SameClusterQueue || in.Policy == kueue.PreemptionPolicyNever || in.Candidate.Priority > in.Preemptor.Priority {
				return false
			}
			ok, _ := Nominate(in.Candidate, in.Now)
			return ok
		},
		Why: func(in *policy.Input) string {
			return fmt.Sprintf("running for %s, past its expected runtime %s", in.Now.Sub(in.Candidate.RunsSince()).Round(time.Second),
				fact.Of(in.Candidate).Expected)
		},
	})
}
