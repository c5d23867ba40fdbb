package policy

import (
	"encoding/json"
	"fmt"
	"slices"
	"time"

	"github.com/go-logr/logr"
	"k8s.io/apimachinery/pkg/util/validation/field"
	"k8s.io/component-base/featuregate"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"

	kueue "sigs.k8s.io/kueue/apis/kueue/v1beta2"
	schdcache "sigs.k8s.io/kueue/pkg/cache/scheduler"

	tsconfig "github.com/kueue-timeshare/kueue-timeshare/apis/config/v1alpha1"
	tsapi "github.com/kueue-timeshare/kueue-timeshare/apis/kueue/v1beta2"
	"github.com/kueue-timeshare/kueue-timeshare/pkg/features"
)

// Feature names one of this project's features on the victim policy: the name of its feature
// gate.
type Feature string

// Unit is one feature of the victim policy: everything about it that the rest of the manager asks
// (the preemptor, the waker, the gauges, the kubectl plugin, the simulator), so that none of them
// reads a feature's facts or checks its gate itself. The registry (registry.go) lists the units.
type Unit struct {
	Feature Feature
	// Option adds its rules, protections and ordering keys.
	Option func() Option
	// Read sets on c the facts it reads off wl, a workload holding quota, beyond its conditions;
	// nil when it reads none.
	Read func(c *Candidate, wl *kueue.Workload, r Reading)
	// Changes gives when its decisions about a running candidate change (see Changes).
	Changes func(*Candidate, WakeSettings, func(Change))
	// MayChange reports whether, with the settings and lengths s says are configured, it may
	// change a decision about some running workload; nil: it may.
	MayChange func(WakeSettings) bool
	// Protects names the settings under which c, running in a ClusterQueue, is protected at
	// s.Now from some preemptor (the ProtectedWorkloads gauge's setting label); nil when it
	// protects nothing.
	Protects func(c *Candidate, s Survey) []string
	// Takes reports whether src is the unit's source of facts, so that a preemptor given src
	// turns the feature on; nil when the preemptor feeds it otherwise.
	Takes func(src any) bool
	// NewSource builds its source of facts when it reads them from the cluster's objects itself
	// (see ClusterSource and Table.NewSources); nil when it has none.
	NewSource func(live client.Reader) ClusterSource
	// Setup adds its controllers to the manager (Table.SetupControllers); nil when it has none.
	Setup func(mgr ctrl.Manager, env Env) error
	// Plugin is its part in the preemptor beyond its rules (see Plugin), and what the readers
	// that show or play it (the kubectl plugin, the metrics, the simulator) ask of it through
	// interfaces of their own; nil when it has neither (time-based's turns are the search's own).
	Plugin Plugin
	// Resolve sets in q what its rules read about the candidates of j.Victims against j's
	// preemptor (QueueFact), once per search and ClusterQueue judged; nil when nothing.
	Resolve func(j Judging, q *QueueFacts)
	// Inherited: what it resolves comes down the cohort tree, so a search waits until the
	// Cohorts above a ClusterQueue are read (a Cohort just created may reach the scheduler first).
	Inherited bool
	// Vetoed says, for a candidate refused by rule (in, the question the policy was asked),
	// what protects it (for the wait's explanation) and until when (zero: for as long as it
	// runs); ok false when rule is not the unit's. nil when it vetoes nothing.
	Vetoed func(rule string, in *Input) (why string, until time.Time, ok bool)
	// Promised: a candidate it vetoes has its room promised to another preemptor, so a preemptor
	// it holds back need not keep the quota it waits for.
	Promised bool
	// Counted: the candidates it vetoes are counted on kueue_preemption_protected_candidates_total,
	// by kind (preempt: in the preemptor's ClusterQueue; reclaim: elsewhere), once per preemptor
	// and end of protection.
	Counted bool
	// Marks is the mark it writes on a Workload for a preemptor to find it by (the preemptor's
	// workload index), ok false when wl carries none; nil when it writes none.
	Marks func(wl *kueue.Workload) (mark string, ok bool)
	// RefusedWhileOff is what the webhooks refuse in the spec of a ClusterQueue or Cohort while
	// its gate is off, so that no setting of it is silently ignored; old is the stored spec on an
	// update (nil otherwise), whose settings are kept. nil when it has no queue settings to refuse.
	RefusedWhileOff func(path *field.Path, spec, old json.RawMessage) field.ErrorList
	// RefusedConfig is what the manager refuses in its configuration while the unit's gate is
	// off; nil when it has no configuration to refuse.
	RefusedConfig func(c *tsconfig.Configuration) field.ErrorList
	// Promises is what a workload promises through it; nil when nothing.
	Promises *Promise
	// Lengths are the lengths of the protections settings s set (read off a queue by
	// QueueSettings, or the manager's default by DefaultSettings), each the end of some
	// protection (WakeSettings.Lengths); nil when its settings set none.
	Lengths func(s any) []time.Duration
	// QueueSettings reads the settings it takes from ext, the extension fields of a ClusterQueue
	// or Cohort (*ClusterQueueExtension or *CohortExtension of apis/kueue/v1beta2), as a
	// comparable value whose zero is "none set"; a ClusterQueue's are resolved up its cohort tree
	// (see QueueNode). nil when it has no queue settings.
	QueueSettings func(ext any) any
	// DefaultSettings is what the manager's configuration c sets for the queues that set nothing;
	// nil when it sets nothing.
	DefaultSettings func(c *tsconfig.Configuration) any
	// Delays is how long a victim of ClusterQueue cq, chosen for reason, keeps running before
	// its eviction (its warning), by the settings of src: for the admission estimate's walk. nil
	// when it delays no eviction.
	Delays func(src Sources, cq *schdcache.ClusterQueueSnapshot) func(reason string) time.Duration
}

// EvictionDelay is how long a victim of cq chosen for reason keeps running before its eviction,
// by the units of t that delay evictions (Unit.Delays, the longest when several do); nil when
// none does.
func (t Table) EvictionDelay(src Sources, cq *schdcache.ClusterQueueSnapshot) func(reason string) time.Duration {
	var delays []func(string) time.Duration
	for _, u := range t {
		if u.Delays == nil {
			continue
		}
		if d := u.Delays(src, cq); d != nil {
			delays = append(delays, d)
		}
	}
	switch len(delays) {
	case 0:
		return nil
	case 1:
		return delays[0]
	}
	return func(reason string) time.Duration {
		var longest time.Duration
		for _, d := range delays {
			longest = max(longest, d(reason))
		}
		return longest
	}
}

// PathSource supplies what a unit read off a ClusterQueue and the Cohorts above it (parents,
// nearest first), with the manager's default of it (nil: none): the settings store.
type PathSource interface {
	SettingsPath(f Feature, cq kueue.ClusterQueueReference, parents []kueue.CohortReference) ([]QueueNode, any)
}

// QueueNode is one queue on the path from a ClusterQueue to the root of its cohort tree, with
// what a unit read off it (Unit.QueueSettings; nil: nothing set).
type QueueNode struct {
	// Kind is "ClusterQueue" or "Cohort".
	Kind     string
	Name     string
	Settings any
}

// Promise is a run time a workload announces through a unit's annotation.
type Promise struct {
	// Annotation is the one that announces it.
	Annotation string
	// Runtime is how long wl says it runs; ok false when it says nothing valid.
	Runtime func(wl *kueue.Workload) (d time.Duration, ok bool)
}

// PromisedRuntime is the run time wl announces through the first unit of t that reads one.
func (t Table) PromisedRuntime(wl *kueue.Workload) (time.Duration, bool) {
	for _, u := range t {
		if u.Promises == nil {
			continue
		}
		if d, ok := u.Promises.Runtime(wl); ok {
			return d, true
		}
	}
	return 0, false
}

// Promisers are the annotations through which the units of t read a run time.
func (t Table) Promisers() []string {
	var out []string
	for _, u := range t {
		if u.Promises != nil {
			out = append(out, u.Promises.Annotation)
		}
	}
	return out
}

// ReasonWords say in words what a preemption reason means.
type ReasonWords = tsapi.ReasonWords

// RefusedWhileOff is what the units of t whose gate is off (on false) refuse in spec (see
// Unit.RefusedWhileOff).
func (t Table) RefusedWhileOff(path *field.Path, spec, old json.RawMessage, on func(Feature) bool) field.ErrorList {
	var errs field.ErrorList
	for _, u := range t {
		if u.RefusedWhileOff != nil && !on(u.Feature) {
			errs = append(errs, u.RefusedWhileOff(path, spec, old)...)
		}
	}
	return errs
}

// RefusedConfig is what the units of t whose gate is off (on false) refuse in the manager's
// configuration c (see Unit.RefusedConfig).
func (t Table) RefusedConfig(c *tsconfig.Configuration, on func(Feature) bool) field.ErrorList {
	var errs field.ErrorList
	for _, u := range t {
		if u.RefusedConfig != nil && !on(u.Feature) {
			errs = append(errs, u.RefusedConfig(c)...)
		}
	}
	return errs
}

// Marked is the first mark a unit of t reads on wl (see Unit.Marks).
func (t Table) Marked(wl *kueue.Workload) (string, bool) {
	for _, u := range t {
		if u.Marks == nil {
			continue
		}
		if m, ok := u.Marks(wl); ok {
			return m, true
		}
	}
	return "", false
}

// Marking reports whether a unit of t that is on marks workloads.
func (t Table) Marking(on func(Feature) bool) bool {
	for _, u := range t {
		if u.Marks != nil && on(u.Feature) {
			return true
		}
	}
	return false
}

// Reading is what a unit's Read is given besides the workload.
type Reading struct {
	// Sources are the manager's sources of facts; the unit takes its own from them.
	Sources Sources
	// OtherQueue: the workload is read as a candidate for a preemptor of another ClusterQueue.
	OtherQueue bool
}

// Judging is what a unit's Resolve is given: the ClusterQueue whose workloads a search judges
// (Victims), and the preemptor's.
type Judging struct {
	// Sources are the manager's sources of facts; the unit takes its own from them.
	Sources Sources
	Log     logr.Logger
	Scope   Scope
	// Preemptor and Victims are the ClusterQueues, the same one under SameClusterQueue;
	// PreemptorParents are the Cohorts above the preemptor's, nearest first, read once per search.
	Preemptor, Victims *schdcache.ClusterQueueSnapshot
	PreemptorParents   []kueue.CohortReference
}

// Resolve sets in q what the units of t resolve about j.Victims (see Unit.Resolve).
func (t Table) Resolve(j Judging, q *QueueFacts) {
	for _, u := range t {
		if u.Resolve != nil {
			u.Resolve(j, q)
		}
	}
}

// Resolves reports whether some unit of t resolves facts about the queues it judges.
func (t Table) Resolves() bool {
	return slices.ContainsFunc(t, func(u Unit) bool { return u.Resolve != nil })
}

// Inherits reports whether some unit of t resolves what Cohorts set (Unit.Inherited).
func (t Table) Inherits() bool {
	return slices.ContainsFunc(t, func(u Unit) bool { return u.Inherited })
}

// Survey is what a unit's Protects is given besides the candidate.
type Survey struct {
	Now time.Time
	// Sources are the manager's sources of facts; the unit takes its own from them.
	Sources Sources
	// ClusterQueue is the candidate's; Parents gives the Cohorts above it, nearest first.
	ClusterQueue kueue.ClusterQueueReference
	Parents      func() []kueue.CohortReference
}

// Protections names the settings under which c is protected at s.Now, by the units of t that
// are on, each with its source among src.
func (t Table) Protections(c *Candidate, s Survey, src Sources, on func(Feature) bool) []string {
	var out []string
	for _, u := range t {
		if u.Protects != nil && (on == nil || on(u.Feature)) {
			s.Sources = src
			out = append(out, u.Protects(c, s)...)
		}
	}
	return out
}

// Sources are the sources of facts the manager gives the units: for example the store of the
// preemption toleration of priority classes. Each unit takes the one that implements the
// interface it reads through (sourceOf), so the manager registers sources, not features.
type Sources []any

// SourceOf is the first of src that is a T: a unit takes its own source with it.
func SourceOf[T any](src Sources) (T, bool) {
	for _, s := range src {
		if t, ok := s.(T); ok {
			return t, true
		}
	}
	var zero T
	return zero, false
}

// Table is a list of units, the one that decides first listed first.
type Table []Unit

// Without is t without feature f's unit.
func (t Table) Without(f Feature) Table {
	return slices.DeleteFunc(slices.Clone(t), func(u Unit) bool { return u.Feature == f })
}

// Features names the units of t, in order.
func (t Table) Features() []Feature {
	out := make([]Feature, len(t))
	for i, u := range t {
		out[i] = u.Feature
	}
	return out
}

// With adds the rules and keys of the named features of t in the table's order, whatever the
// order they are named in.
func (t Table) With(features ...Feature) Option {
	for _, f := range features {
		if !slices.ContainsFunc(t, func(u Unit) bool { return u.Feature == f }) {
			panic(fmt.Sprintf("policy: no feature named %q", f))
		}
	}
	return func(p *Policy) {
		for _, u := range t {
			if slices.Contains(features, u.Feature) {
				u.Option()(p)
			}
		}
	}
}

// ReadFacts sets on c what the units of t that are on read off wl (see Unit.Read), each from its
// source among src.
func (t Table) ReadFacts(c *Candidate, wl *kueue.Workload, src Sources, on func(Feature) bool, otherQueue bool) {
	for _, u := range t {
		if u.Read != nil && (on == nil || on(u.Feature)) {
			u.Read(c, wl, Reading{Sources: src, OtherQueue: otherQueue})
		}
	}
}

// GateOn reports whether feature f's gate is on in the process-wide gate.
func GateOn(f Feature) bool { return features.Enabled(featuregate.Feature(f)) }
