package policy

import (
	"fmt"
	"time"

	kueue "sigs.k8s.io/kueue/apis/kueue/v1beta2"

	tsconfig "github.com/kueue-timeshare/kueue-timeshare/apis/config/v1alpha1"
	tsapi "github.com/kueue-timeshare/kueue-timeshare/apis/kueue/v1beta2"
)

// MinRuntimes are the min-runtime settings of one queue of the tree (a ClusterQueue or a Cohort).
type MinRuntimes struct {
	Preempt Setting
	Reclaim Setting
}

// MinRuntimesOf reads the min-runtimes a ClusterQueue or Cohort sets.
func MinRuntimesOf(m tsapi.MinRuntimeSettings) MinRuntimes {
	var out MinRuntimes
	if m.PreemptMinRuntime != nil {
		out.Preempt = Set(m.PreemptMinRuntime.Duration)
	}
	if m.ReclaimMinRuntime != nil {
		out.Reclaim = Set(m.ReclaimMinRuntime.Duration)
	}
	return out
}

// TreeNode is one queue on the path from a ClusterQueue to the root of its cohort tree.
type TreeNode struct {
	// Kind is "ClusterQueue" or "Cohort"; Name is unique within a kind.
	Kind     string
	Name     string
	Settings MinRuntimes
}

// Path lists the queues from a ClusterQueue (first) up to the root cohort (last).
type Path []TreeNode

// MinRuntimeLookup gives the min-runtimes set on one ClusterQueue or Cohort.
type MinRuntimeLookup interface {
	ClusterQueueMinRuntimes(kueue.ClusterQueueReference) MinRuntimes
	CohortMinRuntimes(kueue.CohortReference) MinRuntimes
}

// PathOf is cq's Path through parents (nearest first, see cohorttree), with each queue's own
// min-runtimes.
func PathOf(cq kueue.ClusterQueueReference, parents []kueue.CohortReference, src MinRuntimeLookup) Path {
	path := make(Path, 0, len(parents)+1)
	path = append(path, TreeNode{Kind: "ClusterQueue", Name: string(cq), Settings: src.ClusterQueueMinRuntimes(cq)})
	for _, c := range parents {
		path = append(path, TreeNode{Kind: "Cohort", Name: string(c), Settings: src.CohortMinRuntimes(c)})
	}
	return path
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
	Source Source
}

// Defaults are the manager-level min-runtimes, used when no queue on the path sets one.
type Defaults struct {
	Preempt time.Duration
	Reclaim time.Duration
}

// DefaultsOf are the manager configuration's min-runtimes.
func DefaultsOf(c *tsconfig.Configuration) Defaults {
	var d Defaults
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
	return walkUp(victim, 0, "preemptMinRuntime", func(m MinRuntimes) Setting { return m.Preempt }, "defaultPreemptMinRuntime", d.Preempt)
}

// ResolveReclaim is the protection of a victim in another ClusterQueue. With ResolveLCA the walk
// starts at the child of the lowest common ancestor on the victim's side, so a setting only
// shields a subtree from its siblings; with ResolveQueue (or no common ancestor) it starts at the
// victim's ClusterQueue.
func ResolveReclaim(method ResolveMethod, preemptor, victim Path, d Defaults) Protection {
	start := 0
	if method != ResolveQueue {
		if i := lowestCommonAncestor(preemptor, victim); i > 0 {
			start = i - 1
		}
	}
	return walkUp(victim, start, "reclaimMinRuntime", func(m MinRuntimes) Setting { return m.Reclaim }, "defaultReclaimMinRuntime", d.Reclaim)
}

// lowestCommonAncestor returns the index in victim of the first queue that is also on the
// preemptor's path, or -1.
func lowestCommonAncestor(preemptor, victim Path) int {
	for i, v := range victim {
		for _, p := range preemptor {
			if p.Kind == v.Kind && p.Name == v.Name {
				return i
			}
		}
	}
	return -1
}

func walkUp(path Path, from int, field string, get func(MinRuntimes) Setting, defaultField string, def time.Duration) Protection {
	for _, n := range path[min(from, len(path)):] {
		if s := get(n.Settings); s.Set {
			return Protection{MinRuntime: s.Value, Source: QueueSource(field, s.Value, n.Kind, n.Name)}
		}
	}
	return Protection{MinRuntime: def, Source: DefaultSource(defaultField, def)}
}

// FeatureMinRuntime is min-runtime protection (preemptMinRuntime, reclaimMinRuntime).
const FeatureMinRuntime Feature = "MinRuntimeProtection"

// MinRuntimeUnit is min-runtime protection's unit (plugins.Units).
func MinRuntimeUnit() Unit {
	return Unit{
		Feature: FeatureMinRuntime, Option: WithMinRuntimeProtection, Changes: minRuntimeChanges,
		MayChange: func(s WakeSettings) bool { return len(s.MinRuntimes) > 0 },
		Protects:  protectedByMinRuntime,
	}
}

// MinRuntimeSource supplies what min-runtime protection resolves through the cohort tree: the
// min-runtime unit's source of facts (see Sources).
type MinRuntimeSource interface {
	MinRuntimeLookup
	// MinRuntimeDefaults are the manager configuration's defaults and reclaim resolve method.
	MinRuntimeDefaults() (Defaults, ResolveMethod)
}

// protectedByMinRuntime names the min-runtimes protecting c at s.Now: its ClusterQueue's
// preemptMinRuntime, and its reclaimMinRuntime resolved from its own queue up (the nearest a
// reclaiming queue can be).
func protectedByMinRuntime(c *Candidate, s Survey) []string {
	src, ok := SourceOf[MinRuntimeSource](s.Sources)
	if !ok {
		return nil
	}
	defaults, _ := src.MinRuntimeDefaults()
	path := PathOf(s.ClusterQueue, s.Parents(), src)
	var out []string
	if Protected(c, ResolvePreempt(path, defaults), s.Now) {
		out = append(out, "preemptMinRuntime")
	}
	if Protected(c, ResolveReclaim(ResolveQueue, nil, path, defaults), s.Now) {
		out = append(out, "reclaimMinRuntime")
	}
	return out
}

// RuleMinRuntime names the protection WithMinRuntimeProtection adds.
const RuleMinRuntime = "ProtectedByMinRuntime"

// WithMinRuntimeProtection vetoes an otherwise eligible candidate that has been running (admitted)
// for less than its resolved min-runtime (Input.Protection). A candidate already evicted, or not
// yet admitted, has no running work to protect.
func WithMinRuntimeProtection() Option {
	return WithProtections(Rule{
		Name: RuleMinRuntime,
		When: func(in *Input) bool { return Protected(in.Candidate, in.Protection, in.Now) },
		Why: func(in *Input) string {
			if in.Candidate.NotStarted {
				return fmt.Sprintf("its Pods are not ready yet, and %s counts from then", in.Protection.Source)
			}
			return fmt.Sprintf("running for %s, less than %s", in.Now.Sub(in.Candidate.RunsSince()).Round(time.Second), in.Protection.Source)
		},
	})
}

// Protected reports whether c is inside the min-runtime of p at now: strictly less than the
// minimum; at exactly the minimum it may be preempted.
func Protected(c *Candidate, p Protection, now time.Time) bool {
	return p.MinRuntime > 0 && !c.Evicted && !c.AdmittedAt.IsZero() && (c.NotStarted || now.Sub(c.RunsSince()) < p.MinRuntime)
}

// minRuntimeChanges gives when Protected changes for c under each configured min-runtime.
func minRuntimeChanges(c *Candidate, s WakeSettings, add func(Change)) {
	for _, d := range s.MinRuntimes {
		add(protectionChange(c, d))
	}
}

// protectionChange is when Protected turns false for c under a min-runtime of d: at its end, the
// first instant not strictly inside it. None if it never changes while c stays as it is (no
// protection, evicted, or not started by the runtime clock).
func protectionChange(c *Candidate, d time.Duration) Change {
	if d <= 0 || c.Evicted || c.AdmittedAt.IsZero() || c.NotStarted {
		return Change{}
	}
	return Change{At: c.RunsSince().Add(d)}
}

// ProtectionEnds is when c stops being protected by p.
func ProtectionEnds(c *Candidate, p Protection) time.Time {
	since := c.RunsSince()
	if since.IsZero() {
		return time.Time{} // not known until it starts running
	}
	return since.Add(p.MinRuntime)
}
