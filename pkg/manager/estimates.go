package manager

import (
	"context"
	"slices"
	"sync"
	"time"

	"github.com/go-logr/logr"
	"k8s.io/utils/clock"

	kueue "sigs.k8s.io/kueue/apis/kueue/v1beta2"
	"sigs.k8s.io/kueue/pkg/workload"

	"github.com/kueue-timeshare/kueue-timeshare/pkg/cohorttree"
	"github.com/kueue-timeshare/kueue-timeshare/pkg/estimate"
	"github.com/kueue-timeshare/kueue-timeshare/pkg/policy"
	"github.com/kueue-timeshare/kueue-timeshare/pkg/queuesettings"
	"github.com/kueue-timeshare/kueue-timeshare/pkg/scheduler"
	"github.com/kueue-timeshare/kueue-timeshare/pkg/scheduler/preemption"
	tsvisibility "github.com/kueue-timeshare/kueue-timeshare/pkg/visibility"
)

const (
	// estimateTTL is how long a ClusterQueue's estimates are served before they are computed
	// again: a walk costs up to a few hundred milliseconds on a large queue.
	estimateTTL = 5 * time.Second
	// estimateHandover is the time from a victim's release to the preemptor's admission: about
	// one scheduling cycle.
	estimateHandover = time.Second
)

// cachedEstimates serves each ClusterQueue's estimates, computed on request, for ttl, and
// computes them again sooner when the ClusterQueue's pending list changed (a workload arrived,
// was admitted or moved), so that no listed workload goes without its estimate.
type cachedEstimates struct {
	compute func(kueue.ClusterQueueReference) map[string]estimate.Estimate
	// pending is the ClusterQueue's pending workloads ("namespace/name"), in order; nil: the
	// ttl alone decides.
	pending func(kueue.ClusterQueueReference) []string
	clock   clock.PassiveClock
	ttl     time.Duration

	mu   sync.Mutex
	byCQ map[kueue.ClusterQueueReference]computedEstimates
}

type computedEstimates struct {
	at      time.Time
	pending []string
	byName  map[string]estimate.Estimate
}

var _ tsvisibility.Estimates = &cachedEstimates{}

func (c *cachedEstimates) Estimates(cq kueue.ClusterQueueReference) map[string]estimate.Estimate {
	c.mu.Lock()
	defer c.mu.Unlock()
	now := c.clock.Now()
	var pending []string
	if c.pending != nil {
		pending = c.pending(cq)
	}
	if e, ok := c.byCQ[cq]; ok && now.Sub(e.at) < c.ttl && slices.Equal(e.pending, pending) {
		return e.byName
	}
	byName := c.compute(cq)
	if c.byCQ == nil {
		c.byCQ = map[kueue.ClusterQueueReference]computedEstimates{}
	}
	c.byCQ[cq] = computedEstimates{at: now, pending: pending, byName: byName}
	return byName
}

// estimator computes a ClusterQueue's estimates from the scheduler cache's snapshot, the
// turn-ordered pending list the visibility API shows, and the preemptor's policy.
type estimator struct {
	m       *Manager
	pending tsvisibility.Pending
	clock   clock.PassiveClock
	log     logr.Logger
}

func (e *estimator) compute(cq kueue.ClusterQueueReference) map[string]estimate.Estimate {
	p := e.m.preemptor.Load()
	if p == nil {
		return nil
	}
	snap, err := e.m.Cache.Snapshot(context.Background())
	if err != nil {
		e.log.V(2).Info("No snapshot for the admission estimate", "clusterQueue", cq, "err", err)
		return nil
	}
	cqs := snap.ClusterQueue(cq)
	if cqs == nil {
		return nil
	}
	ordering := workload.Ordering{PodsReadyRequeuingTimestamp: requeuingTimestamp(&e.m.cfg)}
	settings := e.m.settings.Settings(cq)
	defaults, _ := e.m.settings.MinRuntimeDefaults()
	c := estimate.Config{
		Log: e.log, Policy: p.Policy(), Settings: settings,
		Protection: policy.ResolvePreempt(policy.PathOf(cq, cohorttree.Parents(cqs), e.m.settings), defaults),
		Wake:       policy.WakeSettings{Queue: settings, MinRuntimes: e.m.settings.MinRuntimeValues(), Enabled: queuesettings.FeatureEnabled},
		Sources:    policy.Sources{e.m.settings, e.m.tolerations},
		Ordering:   ordering,
		Clock:      policy.RuntimeClock(e.m.timeshareCfg.RuntimeClock),
		TurnTime:   func(wl *kueue.Workload) time.Time { return preemption.TurnTime(wl, ordering) },
		Notice:     p.NoticeOf(cqs),
		Handover:   estimateHandover,
		DrainOf:    scheduler.DrainOf,
	}
	q, holders, waiting := estimate.FromSnapshot(cqs, e.pending.PendingWorkloadsInfo(cq), c)
	out := map[string]estimate.Estimate{}
	for _, est := range estimate.Compute(q, holders, waiting, e.clock.Now()) {
		out[est.Workload] = est
	}
	return out
}

// estimates is the visibility API's source of estimates; nil under upstream's scheduler, whose
// preemptor is not ours.
func (m *Manager) estimates(pending tsvisibility.Pending) tsvisibility.Estimates {
	if m.opts.UpstreamScheduler {
		return nil
	}
	var clk clock.PassiveClock = clock.RealClock{}
	if m.opts.Clock != nil {
		clk = m.opts.Clock
	}
	e := &estimator{m: m, pending: pending, clock: clk, log: m.log.WithName("estimate")}
	keys := func(cq kueue.ClusterQueueReference) []string {
		var out []string
		for _, info := range pending.PendingWorkloadsInfo(cq) {
			out = append(out, info.Obj.Namespace+"/"+info.Obj.Name)
		}
		return out
	}
	return &cachedEstimates{compute: e.compute, pending: keys, clock: clk, ttl: estimateTTL}
}

// keepPreemptor records the preemptor f builds, whose policy the estimate asks.
func (m *Manager) keepPreemptor(f scheduler.PreemptorFactory) scheduler.PreemptorFactory {
	return func(c scheduler.PreemptorConfig) scheduler.Preemptor {
		p := f(c)
		if tp, ok := p.(timesharePreemptor); ok {
			m.preemptor.Store(tp.Preemptor)
		}
		return p
	}
}
