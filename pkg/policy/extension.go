package policy

import (
	"context"
	"time"

	"github.com/go-logr/logr"
	"k8s.io/client-go/tools/events"
	"sigs.k8s.io/controller-runtime/pkg/client"

	kueue "sigs.k8s.io/kueue/apis/kueue/v1beta2"
	schdcache "sigs.k8s.io/kueue/pkg/cache/scheduler"
	upstream "sigs.k8s.io/kueue/pkg/scheduler/preemption"
	"sigs.k8s.io/kueue/pkg/workload"
)

// Target is a victim the preemptor chose, with its reason and ClusterQueue (upstream's type).
type Target = upstream.Target

// Plugin is a feature's part in the preemptor, beyond its unit's rules (Unit.Plugin). It
// implements only the extension points where it acts (below); the preemptor calls a point only
// while the plugin's feature is on, so that no plugin checks its own gate. The readers that show
// or play a feature declare the interfaces they ask of its plugin next to themselves.
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
	// Recorder is the preemptor's event recorder.
	Recorder() events.EventRecorder
	// QueueLabels are ClusterQueue cq's custom metric label values (Kueue's
	// metrics.customLabels), for a plugin's per-ClusterQueue metrics.
	QueueLabels(cq kueue.ClusterQueueReference) []string
	// Marked lists the workloads that may carry a unit's mark (Unit.Marks), or false while the
	// preemptor's index has not synced (or it has none) and every workload must be read; Mark
	// lists one the plugin is about to mark, before the mark can be read back.
	Marked() ([]workload.Reference, bool)
	Mark(key workload.Reference, mark string)
	// Evict evicts targets, preempted for one of this project's reasons (or for upstream's, to
	// end a notice in the same write), a few at a time, as the preemptor does; it returns how
	// many are being evicted, how many evictions failed, and one error.
	Evict(ctx context.Context, cache *schdcache.Cache, preemptor *workload.Info, targets []*Target,
		snap *schdcache.ClusterQueueSnapshot) (preempted, failed int, err error)
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

// The extension points a plugin of a feature package implements, in the order a preemption meets
// them.
type (
	// Waiter is what a preemptor may wait on instead of a search: WaitTargets are the victims
	// due now, held whether wl waits on some at all; ExplainWait says what wl waits on, or "".
	Waiter interface {
		WaitTargets(ctx context.Context, h Handle, wl *workload.Info, snapshot *schdcache.Snapshot) (targets []*Target, held bool)
		ExplainWait(h Handle, wl *workload.Info, snapshot *schdcache.Snapshot) string
	}
	// JudgeObserver sees the policy's decision on each candidate a search judges (one holding
	// contested quota), as it is made: it must be cheap, and allocate nothing for candidates it
	// has no interest in.
	JudgeObserver interface {
		Judged(h Handle, c *Candidate, d Decision)
	}
	// SearchObserver sees the outcome of each search.
	SearchObserver interface {
		AfterSearch(h Handle, s Search)
	}
	// FirstIssuer takes a preemption's targets before they are evicted: one that issues them
	// itself says so (issued), with what the issue returns.
	FirstIssuer interface {
		IssueFirst(ctx context.Context, h Handle, cache *schdcache.Cache, preemptor *workload.Info, targets []*Target,
			snap *schdcache.ClusterQueueSnapshot) (issued bool, preempted, failed int, err error)
	}
	// EvictionFollower follows the eviction of any victim of ours, whatever its reason, once it
	// went through. Evictions run in parallel: it may be called concurrently.
	EvictionFollower interface {
		AfterEviction(ctx context.Context, h Handle, victim *kueue.Workload, cq kueue.ClusterQueueReference)
	}
	// OwnEvictionFollower follows the eviction of a victim preempted for one of this project's
	// reasons, once it went through. Evictions run in parallel: it may be called concurrently.
	OwnEvictionFollower interface {
		AfterOwnEviction(ctx context.Context, h Handle, victim *kueue.Workload, reason string)
	}
	// IssueFollower follows a preemption whose evictions (or notices) all went through.
	IssueFollower interface {
		AfterIssue(h Handle, preemptor *workload.Info, victims []Victim)
	}
)
