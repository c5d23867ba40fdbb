// Package toleration is preemption toleration (the scheduler-plugins preemption toleration): a
// priority class may declare that its workloads tolerate preemptors below a priority, for a time
// or for as long as they run. It holds the victim policy's unit (its rule, facts and timing) and
// the store of the classes' tolerations with the two small controllers that fill it.
package toleration

import (
	"fmt"
	"math"
	"time"

	"sigs.k8s.io/controller-runtime/pkg/client"

	kueue "sigs.k8s.io/kueue/apis/kueue/v1beta2"

	"github.com/kueue-timeshare/kueue-timeshare/apis/annotations"
	"github.com/kueue-timeshare/kueue-timeshare/pkg/policy"
)

// Toleration is the preemption toleration of the priority class a candidate's priority came from.
type Toleration struct {
	annotations.Toleration
	// Source names the class, e.g. "WorkloadPriorityClass low-non-preempted".
	Source string
}

// fact is the preemption toleration of the candidate's priority class, if any.
var fact = policy.NewFact[Toleration]()

// Of is the preemption toleration of c's priority class, if any.
func Of(c *policy.Candidate) *Toleration { return fact.Of(c) }

// Feature is preemption toleration's gate.
const Feature policy.Feature = "PreemptionToleration"

// Source supplies the preemption toleration of priority classes: the unit's source of facts (see
// policy.Sources); the Store is one.
type Source interface {
	For(*kueue.PriorityClassRef) *Toleration
}

// Unit is preemption toleration's unit (plugins.Units).
func Unit() policy.Unit {
	return policy.Unit{Feature: Feature, Option: Option, Changes: changes, Read: read,
		Protects: func(c *policy.Candidate, s policy.Survey) []string {
			// Protected by its toleration from some preemptor: the lowest priority there is.
			if Tolerated(c, math.MinInt64, s.Now) {
				return []string{"toleration"}
			}
			return nil
		},
		Plugin: Plugin{},
		Takes:  func(src any) bool { _, ok := src.(Source); return ok },
		// Misses are read from the cache: a workload may name a class its controller has not
		// reconciled yet.
		NewSource: func(live client.Reader) policy.ClusterSource {
			if live == nil {
				return NewStore()
			}
			return NewStore(ReadMisses(live))
		},
		Vetoed: func(rule string, in *policy.Input) (string, time.Time, bool) {
			if rule != RuleTolerates {
				return "", time.Time{}, false
			}
			return "the preemption toleration of " + fact.Of(in.Candidate).Source, Ends(in.Candidate), true
		},
	}
}

// Plugin is preemption toleration's plugin: it acts in the preemptor through its rule only, and
// shows a workload's toleration in the kubectl plugin (Shields).
type Plugin struct{}

// Feature is the plugin's gate.
func (Plugin) Feature() policy.Feature { return Feature }

// Shields are the protections the toleration gives c at now, as the kubectl plugin shows them.
func (Plugin) Shields(c *policy.Candidate, now time.Time) []policy.Shield { return shields(c, now) }

// shields is c's toleration, if it has one, against the lowest preemptor there is.
func shields(c *policy.Candidate, now time.Time) []policy.Shield {
	t := fact.Of(c)
	if t == nil {
		return nil
	}
	return []policy.Shield{{Kind: "toleration", Active: Tolerated(c, math.MinInt64, now), Forever: t.Forever, Until: Ends(c),
		Source: fmt.Sprintf("the preemption toleration of %s (preemptors below priority %d)", t.Source, t.MinimumPreemptablePriority)}}
}

// read reads the toleration of wl's priority class from its Source; none without one.
func read(c *policy.Candidate, wl *kueue.Workload, r policy.Reading) {
	if src, ok := policy.SourceOf[Source](r.Sources); ok {
		fact.Set(c, src.For(wl.Spec.PriorityClassRef))
	}
}

// RuleTolerates names the protection Option adds.
const RuleTolerates = "ToleratesPreemptor"

// Option vetoes an otherwise eligible candidate whose priority class tolerates
// the preemptor: the preemptor's priority is below the class's minimum preemptable priority, and
// the candidate has run (since admission) for less than the toleration time, or it tolerates
// forever. Like min-runtime, it protects running work only: not an evicted or unadmitted candidate.
func Option() policy.Option {
	return policy.WithProtections(policy.Rule{
		Name: RuleTolerates,
		When: func(in *policy.Input) bool { return Tolerated(in.Candidate, in.Preemptor.Priority, in.Now) },
		Why: func(in *policy.Input) string {
			t := fact.Of(in.Candidate)
			return fmt.Sprintf("%s tolerates preemption by priority %d (below %d) %s", t.Source, in.Preemptor.Priority,
				t.MinimumPreemptablePriority, tolerationTerm(t.Toleration))
		},
	})
}

// Tolerated reports whether c's toleration keeps it from a preemptor of priority prio at now.
func Tolerated(c *policy.Candidate, prio int64, now time.Time) bool {
	t := fact.Of(c)
	if t == nil || !t.Tolerates() || c.Evicted || c.AdmittedAt.IsZero() || prio >= t.MinimumPreemptablePriority {
		return false
	}
	return t.Forever || now.Sub(c.AdmittedAt) < t.Duration
}

// Ends is when c's toleration ends; zero when it lasts for as long as c runs.
func Ends(c *policy.Candidate) time.Time {
	t := fact.Of(c)
	if t == nil || t.Forever {
		return time.Time{}
	}
	return c.AdmittedAt.Add(t.Duration)
}

// changes gives when Tolerated changes for c, with toleration on.
func changes(c *policy.Candidate, _ policy.WakeSettings, add func(policy.Change)) {
	add(change(c))
}

// change is when Tolerated turns false for c, for every preemptor it tolerates: at the
// end of the toleration time. None if never while c stays as it is.
func change(c *policy.Candidate) policy.Change {
	t := fact.Of(c)
	if t == nil || t.Forever || t.Duration <= 0 || c.Evicted || c.AdmittedAt.IsZero() {
		return policy.Change{}
	}
	return policy.Change{At: c.AdmittedAt.Add(t.Duration)}
}

func tolerationTerm(t annotations.Toleration) string {
	if t.Forever {
		return "for as long as it runs"
	}
	return fmt.Sprintf("for %s after admission", t.Duration)
}
