// Package minruntime is min-runtime protection: a workload that has run for less than the
// preemptMinRuntime or reclaimMinRuntime resolved for it up its cohort tree is not a victim.
// The settings store reads its settings off ClusterQueues and Cohorts (Unit.QueueSettings); a
// search resolves them once per ClusterQueue it judges (Unit.Resolve), and its rule vetoes.
package minruntime

import (
	"fmt"
	"slices"
	"time"

	kueue "sigs.k8s.io/kueue/apis/kueue/v1beta2"

	tsconfig "github.com/kueue-timeshare/kueue-timeshare/apis/config/v1alpha1"
	tsapi "github.com/kueue-timeshare/kueue-timeshare/apis/kueue/v1beta2"
	"github.com/kueue-timeshare/kueue-timeshare/pkg/cohorttree"
	"github.com/kueue-timeshare/kueue-timeshare/pkg/policy"
)

// Feature is min-runtime protection (preemptMinRuntime, reclaimMinRuntime).
const Feature policy.Feature = "MinRuntimeProtection"

// Rule names the protection Option adds.
const Rule = "ProtectedByMinRuntime"

// Settings are the min-runtime settings of one queue of the tree (a ClusterQueue or a Cohort).
type Settings struct {
	Preempt policy.Setting
	Reclaim policy.Setting
}

// SettingsOf reads the min-runtimes a ClusterQueue or Cohort sets.
func SettingsOf(m tsapi.MinRuntimeSettings) Settings {
	var out Settings
	if m.PreemptMinRuntime != nil {
		out.Preempt = policy.Set(m.PreemptMinRuntime.Duration)
	}
	if m.ReclaimMinRuntime != nil {
		out.Reclaim = policy.Set(m.ReclaimMinRuntime.Duration)
	}
	return out
}

// settingsOf reads them off a ClusterQueue's or Cohort's extension fields (Unit.QueueSettings).
func settingsOf(ext any) any {
	e, ok := ext.(interface {
		MinRuntimes() tsapi.MinRuntimeSettings
	})
	if !ok {
		return nil
	}
	return SettingsOf(e.MinRuntimes())
}

// Node is one queue on the path from a ClusterQueue to the root of its cohort tree, with the
// Settings this unit read off it (nil: none).
type Node = policy.QueueNode

// Path lists the queues from a ClusterQueue (first) up to the root cohort (last).
type Path []Node

// settingsAt are the min-runtimes n sets.
func settingsAt(n Node) Settings {
	s, _ := n.Settings.(Settings)
	return s
}

// Source supplies what a unit read off a ClusterQueue and the Cohorts above it, with the
// manager's default of it: for this unit, the min-runtimes and the Defaults. A preemptor given
// one turns min-runtime protection on.
type Source = policy.PathSource

// PathOf is the min-runtimes on path, read by this unit, and the manager's defaults def, as
// Source.SettingsPath gives them.
func PathOf(path []policy.QueueNode, def any) (Path, Defaults) {
	d, _ := def.(Defaults)
	return Path(path), d
}

// pathFrom is cq's path in src.
func pathFrom(src Source, cq kueue.ClusterQueueReference, parents []kueue.CohortReference) (Path, Defaults) {
	return PathOf(src.SettingsPath(Feature, cq, parents))
}

// ResolveMethod says where a reclaim victim's protection is looked up.
type ResolveMethod string

const (
	// ResolveLCA starts one level below the lowest common ancestor, on the victim's side.
	ResolveLCA ResolveMethod = "LCA"
	// ResolveQueue starts at the victim's ClusterQueue.
	ResolveQueue ResolveMethod = "Queue"
)

// Protection is a resolved min-runtime: how long a candidate is protected after admission, and
// which setting said so.
type Protection struct {
	MinRuntime time.Duration
	// Source is the setting, e.g. reclaimMinRuntime 10m0s from Cohort team-a.
	Source policy.Source
}

// Defaults are the manager-level min-runtimes, used when no queue on the path sets one, and
// where a reclaim victim's protection is looked up.
type Defaults struct {
	Preempt time.Duration
	Reclaim time.Duration
	Method  ResolveMethod
}

// DefaultsOf are the manager configuration's min-runtimes and resolve method.
func DefaultsOf(c *tsconfig.Configuration) Defaults {
	d := Defaults{Method: ResolveMethod(c.ReclaimResolveMethod)}
	if c.DefaultPreemptMinRuntime != nil {
		d.Preempt = c.DefaultPreemptMinRuntime.Duration
	}
	if c.DefaultReclaimMinRuntime != nil {
		d.Reclaim = c.DefaultReclaimMinRuntime.Duration
	}
	return d
}

// String names the defaults as the manager configuration's fields.
func (d Defaults) String() string {
	return fmt.Sprintf("defaultPreemptMinRuntime %s, defaultReclaimMinRuntime %s", d.Preempt, d.Reclaim)
}

// ResolvePreempt is the protection of a victim in the preemptor's own ClusterQueue: the first
// preemptMinRuntime set from the victim's ClusterQueue up, else the default.
func ResolvePreempt(victim Path, d Defaults) Protection {
	return walkUp(victim, 0, "preemptMinRuntime", func(m Settings) policy.Setting { return m.Preempt }, "defaultPreemptMinRuntime", d.Preempt)
}

// ResolveReclaim is the protection of a victim in another ClusterQueue. With ResolveLCA the walk
// starts at the child of the lowest common ancestor on the victim's side, so a setting only
// shields a subtree from its siblings; with ResolveQueue (or no common ancestor) it starts at the
// victim's ClusterQueue.
func ResolveReclaim(method ResolveMethod, preemptor, victim Path, d Defaults) Protection {
	return resolveReclaim(method, func(n Node) bool {
		return slices.ContainsFunc(preemptor, func(p Node) bool { return p.Kind == n.Kind && p.Name == n.Name })
	}, victim, d)
}

// resolveReclaim is ResolveReclaim with the preemptor's path given by onPreemptorPath, which
// reports whether a queue is on it.
func resolveReclaim(method ResolveMethod, onPreemptorPath func(Node) bool, victim Path, d Defaults) Protection {
	start := 0
	if method != ResolveQueue {
		if i := slices.IndexFunc(victim, onPreemptorPath); i > 0 {
			start = i - 1
		}
	}
	return walkUp(victim, start, "reclaimMinRuntime", func(m Settings) policy.Setting { return m.Reclaim }, "defaultReclaimMinRuntime", d.Reclaim)
}

func walkUp(path Path, from int, field string, get func(Settings) policy.Setting, defaultField string, def time.Duration) Protection {
	for _, n := range path[min(from, len(path)):] {
		if s := get(settingsAt(n)); s.Set {
			return Protection{MinRuntime: s.Value, Source: policy.QueueSource(field, s.Value, n.Kind, n.Name)}
		}
	}
	return Protection{MinRuntime: def, Source: policy.DefaultSource(defaultField, def)}
}

// Unit is min-runtime protection's unit (plugins.Units). A preemptor given the min-runtime
// settings (a Source) turns it on.
func Unit() policy.Unit {
	return policy.Unit{
		Feature: Feature, Option: Option, Changes: changes,
		MayChange: func(s policy.WakeSettings) bool { return len(s.Lengths) > 0 },
		Protects:  protects,
		Takes:     func(src any) bool { _, ok := src.(Source); return ok },
		Resolve:   resolve,
		Inherited: true,
		Vetoed:    vetoed,
		Counted:   true,
		Lengths:   lengths,

		QueueSettings: settingsOf,
		DefaultSettings: func(c *tsconfig.Configuration) any {
			return DefaultsOf(c)
		},
	}
}

// resolved is the protection of the judged ClusterQueue's candidates against the preemptor.
var resolved = policy.NewQueueFact[Protection]()

// resolve resolves it (Unit.Resolve): the victims' preemptMinRuntime in the preemptor's own
// ClusterQueue, their reclaimMinRuntime elsewhere.
func resolve(j policy.Judging, q *policy.QueueFacts) {
	src, ok := policy.SourceOf[Source](j.Sources)
	if !ok {
		return
	}
	victim, d := pathFrom(src, j.Victims.Name, cohorttree.Parents(j.Victims))
	var pr Protection
	kind := "preempt"
	if j.Scope == policy.SameClusterQueue {
		pr = ResolvePreempt(victim, d)
	} else {
		kind = "reclaim"
		// Only the preemptor path's names matter: where it meets the victim's.
		pr = resolveReclaim(d.Method, func(n Node) bool {
			if n.Kind == "ClusterQueue" {
				return n.Name == string(j.Preemptor.Name)
			}
			return slices.Contains(j.PreemptorParents, kueue.CohortReference(n.Name))
		}, victim, d)
	}
	resolved.Set(q, &pr)
	if logV := j.Log.V(5); logV.Enabled() {
		logV.Info("Resolved min-runtime protection", "kind", kind, "victimClusterQueue", j.Victims.Name, "minRuntime", pr.MinRuntime, "source", pr.Source.String())
	}
}

// Resolved are queue facts holding p, as a search would have resolved them: for readers that
// resolve it themselves, and for tests.
func Resolved(p Protection) *policy.QueueFacts {
	var q policy.QueueFacts
	Into(&q, p)
	return &q
}

// Into sets p in q, as a search resolves it.
func Into(q *policy.QueueFacts, p Protection) { resolved.Set(q, &p) }

// Of is the protection in's candidate has; none when nothing was resolved.
func Of(in *policy.Input) Protection {
	if p := resolved.Of(in); p != nil {
		return *p
	}
	return Protection{}
}

// vetoed explains a candidate Rule refused (Unit.Vetoed): the setting, and when it ends.
func vetoed(rule string, in *policy.Input) (string, time.Time, bool) {
	if rule != Rule {
		return "", time.Time{}, false
	}
	pr := Of(in)
	return pr.Source.String(), ProtectionEnds(in.Candidate, pr), true
}

// lengths are the min-runtimes s sets, settings or defaults (Unit.Lengths).
func lengths(s any) []time.Duration {
	var out []time.Duration
	add := func(d time.Duration) {
		if d > 0 {
			out = append(out, d)
		}
	}
	switch s := s.(type) {
	case Settings:
		for _, st := range []policy.Setting{s.Preempt, s.Reclaim} {
			if st.Set {
				add(st.Value)
			}
		}
	case Defaults:
		add(s.Preempt)
		add(s.Reclaim)
	}
	return out
}

// protects names the min-runtimes protecting c at s.Now: its ClusterQueue's preemptMinRuntime,
// and its reclaimMinRuntime resolved from its own queue up (the nearest a reclaiming queue can
// be).
func protects(c *policy.Candidate, s policy.Survey) []string {
	src, ok := policy.SourceOf[Source](s.Sources)
	if !ok {
		return nil
	}
	path, defaults := pathFrom(src, s.ClusterQueue, s.Parents())
	var out []string
	if Protected(c, ResolvePreempt(path, defaults), s.Now) {
		out = append(out, "preemptMinRuntime")
	}
	if Protected(c, ResolveReclaim(ResolveQueue, nil, path, defaults), s.Now) {
		out = append(out, "reclaimMinRuntime")
	}
	return out
}

// Option vetoes an otherwise eligible candidate that has been running (admitted) for less than
// its resolved min-runtime. A candidate already evicted, or not yet admitted, has no running work
// to protect.
func Option() policy.Option {
	return policy.WithProtections(policy.Rule{
		Name: Rule,
		When: func(in *policy.Input) bool { return Protected(in.Candidate, Of(in), in.Now) },
		Why: func(in *policy.Input) string {
			pr := Of(in)
			if in.Candidate.NotStarted {
				return fmt.Sprintf("its Pods are not ready yet, and %s counts from then", pr.Source)
			}
			return fmt.Sprintf("running for %s, less than %s", in.Now.Sub(in.Candidate.RunsSince()).Round(time.Second), pr.Source)
		},
	})
}

// Protected reports whether c is inside the min-runtime of p at now: strictly less than the
// minimum; at exactly the minimum it may be preempted.
func Protected(c *policy.Candidate, p Protection, now time.Time) bool {
	return p.MinRuntime > 0 && !c.Evicted && !c.AdmittedAt.IsZero() && (c.NotStarted || now.Sub(c.RunsSince()) < p.MinRuntime)
}

// changes gives when Protected changes for c under each configured min-runtime.
func changes(c *policy.Candidate, s policy.WakeSettings, add func(policy.Change)) {
	for _, d := range s.Lengths {
		add(protectionChange(c, d))
	}
}

// protectionChange is when Protected turns false for c under a min-runtime of d: at its end, the
// first instant not strictly inside it. None if it never changes while c stays as it is (no
// protection, evicted, or not started by the runtime clock).
func protectionChange(c *policy.Candidate, d time.Duration) policy.Change {
	if d <= 0 || c.Evicted || c.AdmittedAt.IsZero() || c.NotStarted {
		return policy.Change{}
	}
	return policy.Change{At: c.RunsSince().Add(d)}
}

// ProtectionEnds is when c stops being protected by p.
func ProtectionEnds(c *policy.Candidate, p Protection) time.Time {
	since := c.RunsSince()
	if since.IsZero() {
		return time.Time{} // not known until it starts running
	}
	return since.Add(p.MinRuntime)
}
