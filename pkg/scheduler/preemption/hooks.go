package preemption

import (
	"context"
	"iter"
	"time"

	"github.com/go-logr/logr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	kueue "sigs.k8s.io/kueue/apis/kueue/v1beta2"
	schdcache "sigs.k8s.io/kueue/pkg/cache/scheduler"
	"sigs.k8s.io/kueue/pkg/util/roletracker"
	"sigs.k8s.io/kueue/pkg/workload"

	"github.com/kueue-timeshare/kueue-timeshare/pkg/plugins/budget"
	"github.com/kueue-timeshare/kueue-timeshare/pkg/plugins/expectedruntime"
	"github.com/kueue-timeshare/kueue-timeshare/pkg/policy"
)

// Plugin is one feature's part in the preemptor. It implements only the extension points where it
// acts: policy's (policy.JudgeObserver, policy.SearchObserver, policy.OwnEvictionFollower,
// policy.IssueFollower), which a feature package can implement, and those below, for the features that still live in this package. The preemptor
// calls each point but the source option (which turns the feature on) only while the plugin's
// feature is on (Preemptor.on), so that no plugin checks its own gate. Plugins lists them.
type Plugin = policy.Plugin

// The preemptor's own extension points, in the order a preemption meets them; each decision of a
// search (policy.JudgeObserver) and its outcome (policy.SearchObserver) come after the waiter, an
// eviction for one of our reasons after the first issuer (policy.OwnEvictionFollower), a
// preemption that went through after the followers of evictions (policy.IssueFollower).
type (
	// sourceTaker turns one of the sources given to WithSources into the plugin's option, ok
	// false when src is not its source.
	sourceTaker interface {
		optionFor(src any) (opt Option, ok bool)
	}
	// waiter is what a preemptor may wait on instead of a search: targets are the victims due
	// now, held whether wl waits on some at all; explainWait says what wl waits on, or "".
	waiter interface {
		waitTargets(p *Preemptor, ctx context.Context, wl *workload.Info, snapshot *schdcache.Snapshot) (targets []*Target, held bool)
		explainWait(p *Preemptor, wl *workload.Info, snapshot *schdcache.Snapshot) string
	}
	// firstIssuer takes a preemption's targets before they are evicted: one that issues them
	// itself says so (issued) with what issueTargets returns.
	firstIssuer interface {
		issueFirst(p *Preemptor, ctx context.Context, cache *schdcache.Cache, preemptor *workload.Info, targets []*Target,
			snap *schdcache.ClusterQueueSnapshot) (issued bool, preempted, failed int, err error)
	}
	// evictionFollower follows the eviction of any victim of ours, whatever its reason.
	evictionFollower interface {
		afterEviction(p *Preemptor, ctx context.Context, victim *kueue.Workload, cq kueue.ClusterQueueReference)
	}
)

// sourceOption is the option with builds from src, ok false when src is not a T (sourceTaker).
func sourceOption[T any](src any, with func(T) Option) (Option, bool) {
	s, ok := src.(T)
	if !ok {
		return nil, false
	}
	return with(s), true
}

// Plugins are the preemptor's parts of the victim policy's features, in the precedence table's
// order (plugins.Units); the features with no part here (toleration) act through their unit only.
func Plugins() []Plugin {
	return []Plugin{timeBasedPlugin{}, expectedruntime.Plugin{}, minRuntimePlugin{}, noticePlugin{}, budget.Plugin{}}
}

// handle is what the preemptor lends a plugin at policy's extension points, at now.
type handle struct {
	p   *Preemptor
	now time.Time
	log logr.Logger
}

func (h handle) Sources() policy.Sources { return h.p.sources }

func (h handle) Now() time.Time { return h.now }

func (h handle) First(key string, expires time.Time) bool {
	return h.p.decisions.First(key, h.now, expires)
}

func (h handle) Role() string { return roletracker.GetRole(h.p.tracker) }

func (h handle) Log() logr.Logger { return h.log }

func (h handle) Client() client.Client { return h.p.client }

// victimsOf are targets as policy's extension points see them.
func victimsOf(targets []*Target) []policy.Victim {
	out := make([]policy.Victim, len(targets))
	for i, t := range targets {
		out[i] = policy.Victim{Workload: t.WorkloadInfo, Reason: t.Reason}
	}
	return out
}

// pluginsOn yields the plugins of p that implement extension point T, in order, while their
// feature is on: the one place the preemptor checks a feature's gate for its plugin.
func pluginsOn[T any](p *Preemptor) iter.Seq[T] {
	return func(yield func(T) bool) {
		for _, pl := range p.plugins {
			if t, ok := pl.(T); ok && p.on(pl.Feature()) && !yield(t) {
				return
			}
		}
	}
}
