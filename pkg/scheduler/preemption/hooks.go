package preemption

import (
	"context"
	"iter"
	"time"

	"github.com/go-logr/logr"
	"k8s.io/client-go/tools/events"
	"sigs.k8s.io/controller-runtime/pkg/client"
	ctrllog "sigs.k8s.io/controller-runtime/pkg/log"

	kueue "sigs.k8s.io/kueue/apis/kueue/v1beta2"
	schdcache "sigs.k8s.io/kueue/pkg/cache/scheduler"
	"sigs.k8s.io/kueue/pkg/util/roletracker"
	"sigs.k8s.io/kueue/pkg/workload"

	"github.com/kueue-timeshare/kueue-timeshare/pkg/policy"
)

// Plugin is one feature's part in the preemptor. It implements only the extension points of
// pkg/policy where it acts (policy.Waiter, policy.JudgeObserver, policy.SearchObserver,
// policy.FirstIssuer, policy.EvictionFollower, policy.OwnEvictionFollower, policy.IssueFollower,
// in the order a preemption meets them). The preemptor calls each point only while the plugin's
// feature is on (Preemptor.on), so that no plugin checks its own gate. A unit names its plugin (Unit.Plugin); pluginsOf lists a table's.
type Plugin = policy.Plugin

// Plugins are the preemptor's parts of the victim policy's features, in the precedence table's
// order (plugins.Units); the features with no part here (toleration, min-runtime) act through
// their unit only, and time-based preemption's turns are the search's own (turn.go).
func Plugins() []Plugin { return pluginsOf(allUnits) }

// pluginsOf are the plugins of table t's features (Unit.Plugin), in its order.
func pluginsOf(t policy.Table) []Plugin {
	var out []Plugin
	for _, u := range t {
		if u.Plugin != nil {
			out = append(out, u.Plugin)
		}
	}
	return out
}

// handle is what the preemptor lends a plugin at policy's extension points, at now.
type handle struct {
	p   *Preemptor
	now time.Time
	log logr.Logger
}

// handleAt is the handle lent at the preemptor's clock, with ctx's logger.
func (p *Preemptor) handleAt(ctx context.Context) handle {
	return handle{p, p.clock.Now(), ctrllog.FromContext(ctx)}
}

func (h handle) Sources() policy.Sources { return h.p.sources }

func (h handle) Now() time.Time { return h.now }

func (h handle) First(key string, expires time.Time) bool {
	return h.p.decisions.First(key, h.now, expires)
}

func (h handle) Role() string { return roletracker.GetRole(h.p.tracker) }

func (h handle) Log() logr.Logger { return h.log }

func (h handle) Client() client.Client { return h.p.client }

func (h handle) Recorder() events.EventRecorder { return h.p.recorder }

func (h handle) QueueLabels(cq kueue.ClusterQueueReference) []string {
	return h.p.customLabels.CQGet(cq)
}

func (h handle) Marked() ([]workload.Reference, bool) { return h.p.index.listed() }

func (h handle) Mark(key workload.Reference, mark string) {
	if h.p.index != nil {
		h.p.index.add(key, mark)
	}
}

func (h handle) Evict(ctx context.Context, cache *schdcache.Cache, preemptor *workload.Info, targets []*Target,
	snap *schdcache.ClusterQueueSnapshot) (int, int, error) {
	return h.p.issueOwn(ctx, cache, preemptor, targets, snap)
}

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
