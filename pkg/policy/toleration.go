package policy

import (
	"fmt"
	"math"
	"time"

	kueue "sigs.k8s.io/kueue/apis/kueue/v1beta2"

	"github.com/kueue-timeshare/kueue-timeshare/apis/annotations"
)

// Toleration is the preemption toleration of the priority class a candidate's priority came from.
type Toleration struct {
	annotations.Toleration
	// Source names the class, e.g. "WorkloadPriorityClass low-non-preempted".
	Source string
}

// toleration is the preemption toleration of the candidate's priority class, if any.
var toleration = NewFact[Toleration]()

// TolerationOf is the preemption toleration of c's priority class, if any.
func TolerationOf(c *Candidate) *Toleration { return toleration.Of(c) }

// FeatureToleration is preemption toleration.
const FeatureToleration Feature = "PreemptionToleration"

// ClassTolerations supplies the preemption toleration of priority classes: the toleration unit's
// source of facts (see Sources).
type ClassTolerations interface {
	For(*kueue.PriorityClassRef) *Toleration
}

// TolerationUnit is preemption toleration's unit (plugins.Units).
func TolerationUnit() Unit {
	return Unit{Feature: FeatureToleration, Option: WithPreemptionToleration, Changes: tolerationChanges, Read: readToleration,
		Protects: func(c *Candidate, s Survey) []string {
			// Protected by its toleration from some preemptor: the lowest priority there is.
			if Tolerated(c, math.MinInt64, s.Now) {
				return []string{"toleration"}
			}
			return nil
		},
		Shields: tolerationShields,
		Takes:   func(src any) bool { _, ok := src.(ClassTolerations); return ok },
		Vetoed: func(rule string, c *Candidate) (string, time.Time, bool) {
			if rule != RuleToleration {
				return "", time.Time{}, false
			}
			return "the preemption toleration of " + toleration.Of(c).Source, ToleranceEnds(c), true
		},
	}
}

// tolerationShields is c's toleration, if it has one, against the lowest preemptor there is.
func tolerationShields(c *Candidate, now time.Time) []Shield {
	t := toleration.Of(c)
	if t == nil {
		return nil
	}
	return []Shield{{Kind: "toleration", Active: Tolerated(c, math.MinInt64, now), Forever: t.Forever, Until: ToleranceEnds(c),
		Source: fmt.Sprintf("the preemption toleration of %s (preemptors below priority %d)", t.Source, t.MinimumPreemptablePriority)}}
}

// readToleration reads the toleration of wl's priority class from the registered
// ClassTolerations; none without one.
func readToleration(c *Candidate, wl *kueue.Workload, r Reading) {
	if src, ok := SourceOf[ClassTolerations](r.Sources); ok {
		toleration.Set(c, src.For(wl.Spec.PriorityClassRef))
	}
}

// RuleToleration names the protection WithPreemptionToleration adds.
const RuleToleration = "ToleratesPreemptor"

// WithPreemptionToleration vetoes an otherwise eligible candidate whose priority class tolerates
// the preemptor: the preemptor's priority is below the class's minimum preemptable priority, and
// the candidate has run (since admission) for less than the toleration time, or it tolerates
// forever. Like min-runtime, it protects running work only: not an evicted or unadmitted candidate.
func WithPreemptionToleration() Option {
	return WithProtections(Rule{
		Name: RuleToleration,
		When: func(in *Input) bool { return Tolerated(in.Candidate, in.Preemptor.Priority, in.Now) },
		Why: func(in *Input) string {
			t := toleration.Of(in.Candidate)
			return fmt.Sprintf("%s tolerates preemption by priority %d (below %d) %s", t.Source, in.Preemptor.Priority,
				t.MinimumPreemptablePriority, tolerationTerm(t.Toleration))
		},
	})
}

// Tolerated reports whether c's toleration keeps it from a preemptor of priority prio at now.
func Tolerated(c *Candidate, prio int64, now time.Time) bool {
	t := toleration.Of(c)
	if t == nil || !t.Tolerates() || c.Evicted || c.AdmittedAt.IsZero() || prio >= t.MinimumPreemptablePriority {
		return false
	}
	return t.Forever || now.Sub(c.AdmittedAt) < t.Duration
}

// ToleranceEnds is when c's toleration ends; zero when it lasts for as long as c runs.
func ToleranceEnds(c *Candidate) time.Time {
	t := toleration.Of(c)
	if t == nil || t.Forever {
		return time.Time{}
	}
	return c.AdmittedAt.Add(t.Duration)
}

// tolerationChanges gives when Tolerated changes for c, with toleration on.
func tolerationChanges(c *Candidate, _ WakeSettings, add func(Change)) {
	add(tolerationChange(c))
}

// tolerationChange is when Tolerated turns false for c, for every preemptor it tolerates: at the
// end of the toleration time. None if never while c stays as it is.
func tolerationChange(c *Candidate) Change {
	t := toleration.Of(c)
	if t == nil || t.Forever || t.Duration <= 0 || c.Evicted || c.AdmittedAt.IsZero() {
		return Change{}
	}
	return Change{At: c.AdmittedAt.Add(t.Duration)}
}

func tolerationTerm(t annotations.Toleration) string {
	if t.Forever {
		return "for as long as it runs"
	}
	return fmt.Sprintf("for %s after admission", t.Duration)
}
