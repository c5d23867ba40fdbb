package manager

import (
	"context"
	"fmt"
	"slices"
	"sync"
	"time"

	"github.com/go-logr/logr"
	"k8s.io/utils/clock"

	"sigs.k8s.io/controller-runtime/pkg/manager"

	kueue "sigs.k8s.io/kueue/apis/kueue/v1beta2"
	schdcache "sigs.k8s.io/kueue/pkg/cache/scheduler"
	"sigs.k8s.io/kueue/pkg/util/roletracker"
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
	// maxEstimated is how many pending workloads of a ClusterQueue are estimated, the first in
	// turn order: as many as the visibility API lists by default.
	maxEstimated = 1000
)

// cachedEstimates serves each ClusterQueue's estimates, computed on request, for ttl, and
// computes them again sooner when the ClusterQueue's pending list changed (a workload arrived,
// was admitted or moved), so that no listed workload goes without its estimate. refreshAll
// computes them without a request.
type cachedEstimates struct {
	// compute estimates a ClusterQueue's pending workloads from the snapshot snap gives (nil: a
	// fresh one); nil when it cannot yet.
	compute func(cq kueue.ClusterQueueReference, pending []*workload.Info, snap func() *schdcache.Snapshot) map[string]estimate.Estimate
	// pending is the ClusterQueue's pending workloads, in the order they are shown and estimated.
	pending func(kueue.ClusterQueueReference) []*workload.Info
	// max bounds how many of them are estimated, the first in that order (0: all), so that a
	// tenant who floods a queue cannot make each walk arbitrarily long.
	max   int
	clock clock.PassiveClock
	ttl   time.Duration

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
	infos := c.listed(cq)
	pending := keysOf(infos)
	if e, ok := c.byCQ[cq]; ok && now.Sub(e.at) < c.ttl && slices.Equal(e.pending, pending) {
		return e.byName
	}
	return c.computeLocked(cq, now, infos, pending, nil)
}

// listed is the pending workloads of cq that are estimated.
func (c *cachedEstimates) listed(cq kueue.ClusterQueueReference) []*workload.Info {
	infos := c.pending(cq)
	if c.max > 0 && len(infos) > c.max {
		infos = infos[:c.max]
	}
	return infos
}

// keysOf is the "namespace/name" of each workload of infos, in order.
func keysOf(infos []*workload.Info) []string {
	out := make([]string, len(infos))
	for i, info := range infos {
		out[i] = info.Obj.Namespace + "/" + info.Obj.Name
	}
	return out
}

// computeLocked keeps what compute gives unless it is nil (no preemptor or snapshot yet), so that
// the next refresh tries again.
func (c *cachedEstimates) computeLocked(cq kueue.ClusterQueueReference, now time.Time, infos []*workload.Info, pending []string, snap func() *schdcache.Snapshot) map[string]estimate.Estimate {
	byName := c.compute(cq, infos, snap)
	if byName == nil {
		return nil
	}
	if c.byCQ == nil {
		c.byCQ = map[kueue.ClusterQueueReference]computedEstimates{}
	}
	c.byCQ[cq] = computedEstimates{at: now, pending: pending, byName: byName}
	return byName
}

// refreshAll computes the estimates of each of cqs whose pending list changed since its last
// estimates, unless those are younger than half of interval (a read computed them since the
// last pass), from one snapshot, taken if one is needed. The lock is taken per ClusterQueue, so
// that a read waits for one walk at most. It returns the ClusterQueues it computed (or tried to).
func (c *cachedEstimates) refreshAll(cqs []kueue.ClusterQueueReference, interval time.Duration, snapshot func() *schdcache.Snapshot) []kueue.ClusterQueueReference {
	var snap *schdcache.Snapshot
	once := func() *schdcache.Snapshot {
		if snap == nil {
			snap = snapshot()
		}
		return snap
	}
	var out []kueue.ClusterQueueReference
	for _, cq := range cqs {
		if c.refresh(cq, interval, once) {
			out = append(out, cq)
		}
	}
	return out
}

func (c *cachedEstimates) refresh(cq kueue.ClusterQueueReference, interval time.Duration, snap func() *schdcache.Snapshot) bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	infos := c.listed(cq)
	if len(infos) == 0 {
		return false
	}
	pending := keysOf(infos)
	now := c.clock.Now()
	if e, ok := c.byCQ[cq]; ok && (now.Sub(e.at) < interval/2 || slices.Equal(e.pending, pending)) {
		return false
	}
	c.computeLocked(cq, now, infos, pending, snap)
	return true
}

// estimator computes a ClusterQueue's estimates from the scheduler cache's snapshot, the
// turn-ordered pending list the visibility API shows, and the preemptor's policy.
type estimator struct {
	m     *Manager
	clock clock.PassiveClock
	log   logr.Logger
	// first keeps each workload's first estimate, for the error metric.
	first *firstEstimates
}

// snapshot is a fresh snapshot of the scheduler cache, nil when none can be taken.
func (e *estimator) snapshot() *schdcache.Snapshot {
	snap, err := e.m.Cache.Snapshot(context.Background())
	if err != nil {
		e.log.V(2).Info("No snapshot for the admission estimate", "err", err)
		return nil
	}
	return snap
}

func (e *estimator) compute(cq kueue.ClusterQueueReference, infos []*workload.Info, snapshot func() *schdcache.Snapshot) map[string]estimate.Estimate {
	p := e.m.preemptor.Load()
	if p == nil {
		return nil
	}
	if snapshot == nil {
		snapshot = e.snapshot
	}
	snap := snapshot()
	if snap == nil {
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
		DrainOf:    scheduler.DrainWithin(e.m.timeshareCfg.MaxHandoverHold.Duration),
	}
	q, holders, waiting := estimate.FromSnapshot(cqs, infos, c)
	out := map[string]estimate.Estimate{}
	for _, est := range estimate.Compute(q, holders, waiting, e.clock.Now()) {
		out[est.Workload] = est
	}
	e.first.offer(infos, out)
	return out
}

// setupEstimates builds the estimates the visibility API serves and, on the replica that
// schedules, computes them without a request every refresh interval and observes their error at
// each admission. Nothing under upstream's scheduler, whose preemptor is not ours.
func (m *Manager) setupEstimates() error {
	if m.opts.UpstreamScheduler {
		return nil
	}
	var clk clock.WithTicker = clock.RealClock{}
	if c, ok := m.opts.Clock.(clock.WithTicker); ok {
		clk = c
	}
	log := m.log.WithName("estimate")
	first := &firstEstimates{role: func() string { return roletracker.GetRole(m.roleTracker) }, customLabels: m.customLabels}
	e := &estimator{m: m, clock: clk, log: log, first: first}
	m.estimateCache = &cachedEstimates{compute: e.compute, pending: m.turnOrdered().PendingWorkloadsInfo, max: maxEstimated, clock: clk, ttl: estimateTTL}
	interval := m.timeshareCfg.AdmissionEstimates.RefreshInterval.Duration
	run := func(ctx context.Context) error {
		return m.runEstimates(ctx, first, interval, clk, e.snapshot, log)
	}
	if err := m.Add(manager.RunnableFunc(run)); err != nil {
		return fmt.Errorf("adding the admission estimates: %w", err)
	}
	return nil
}

// estimates is the visibility API's source of estimates; nil under upstream's scheduler.
func (m *Manager) estimates() tsvisibility.Estimates {
	if m.estimateCache == nil {
		return nil
	}
	return m.estimateCache
}

// runEstimates runs on the replica that schedules (leader election): it keeps first estimates
// while it runs, observes them at admissions through the Workload informer, and computes the
// estimates of changed ClusterQueues every interval (never when it is 0).
func (m *Manager) runEstimates(ctx context.Context, first *firstEstimates, interval time.Duration, clk clock.WithTicker,
	snapshot func() *schdcache.Snapshot, log logr.Logger) error {
	inf, err := m.GetCache().GetInformer(ctx, &kueue.Workload{})
	if err != nil {
		return fmt.Errorf("watching Workloads for admissions: %w", err)
	}
	reg, err := inf.AddEventHandler(first.handler())
	if err != nil {
		return fmt.Errorf("watching Workloads for admissions: %w", err)
	}
	first.start()
	defer func() {
		first.stop()
		_ = inf.RemoveEventHandler(reg)
	}()
	if interval <= 0 {
		<-ctx.Done()
		return nil
	}
	t := clk.NewTicker(interval)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return nil
		case <-t.C():
			computed := m.estimateCache.refreshAll(m.Queues.GetClusterQueueNames(), interval, snapshot)
			log.V(5).Info("Admission estimates refreshed", "clusterQueues", len(computed))
		}
	}
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
