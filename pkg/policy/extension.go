package policy

import (
	"context"
	"time"

	"github.com/go-logr/logr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	kueue "sigs.k8s.io/kueue/apis/kueue/v1beta2"
	"sigs.k8s.io/kueue/pkg/workload"
)

// Plugin is a feature's part in the preemptor, beyond its unit's rules. It implements only the
// extension points where it acts (below, and the preemptor's own for the features that still
// live in package preemption); the preemptor calls a point only while the plugin's feature is on,
// so that no plugin checks its own gate.
type Plugin interface {
	Feature() Feature
}

// Handle is what the preemptor lends a plugin at an extension point.
type Handle interface {
	// Sources are the sources of facts the manager gave the preemptor (see Sources).
	Sources() Sources
	// Now is the preemptor's clock.
	Now() time.Time
	// First reports whether decision key is new, remembering it until expires: so that a
	// plugin counts a decision once, not at every search that repeats it.
	First(key string, expires time.Time) bool
	// Role is the manager's replica role, the replica_role label of a plugin's metrics.
	Role() string
	// Log is the logger of the search or preemption at hand.
	Log() logr.Logger
	// Client is the preemptor's client, for what a plugin writes.
	Client() client.Client
}

// Victim is one workload a preemption went through for, with its reason.
type Victim struct {
	Workload *workload.Info
	Reason   string
}

// Search is a preemptor's search for victims, as its observers see it.
type Search struct {
	Preemptor    *workload.Info
	ClusterQueue kueue.ClusterQueueReference
	// Victims is how many it found; none: the preemptor waits.
	Victims int
	// VetoEnds is, for each unit's rule that vetoed some candidate, when the last of its vetoes
	// ends (zero: for as long as the candidate runs).
	VetoEnds map[string]time.Time
}

// The extension points a plugin of a feature package implements.
type (
	// SearchObserver sees the outcome of each search.
	SearchObserver interface {
		AfterSearch(h Handle, s Search)
	}
	// IssueFollower follows a preemption whose evictions (or notices) all went through.
	IssueFollower interface {
		AfterIssue(h Handle, preemptor *workload.Info, victims []Victim)
	}
	// JudgeObserver sees the policy's decision on each candidate a search judges (one holding
	// contested quota), as it is made: it must be cheap, and allocate nothing for candidates it
	// has no interest in.
	JudgeObserver interface {
		Judged(h Handle, c *Candidate, d Decision)
	}
	// OwnEvictionFollower follows the eviction of a victim preempted for one of this project's
	// reasons, once it went through. Evictions run in parallel: it may be called concurrently.
	OwnEvictionFollower interface {
		AfterOwnEviction(ctx context.Context, h Handle, victim *kueue.Workload, reason string)
	}
)
