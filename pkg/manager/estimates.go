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
	"sigs.k8s.io/kueue/pkg/scheduler/preemption/fairsharing"
	"sigs.k8s.io/kueue/pkg/util/roletracker"
	"sigs.k8s.io/kueue/pkg/workload"

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
	// estimateMinInterval is the least time between two walks of one ClusterQueue that reads ask
	// for, and the age up to which the walks share a snapshot: a tenant who changes its pending
	// list and reads the visibility endpoint in a loop gets at most one walk of its queue and one
	// snapshot per interval, whatever the rate.
	estimateMinInterval = time.Second
	// estimateHandover is the time from a victim's release to the preemptor's admission: about
	// one scheduling cycle.
	estimateHandover = time.Second
	// maxEstimated is how many pending workloads of a ClusterQueue are estimated, the first in
	// turn order: as many as the visibility API lists by default.
	maxEstimated = 1000
	// maxCohortWalked is how many pending workloads a cohort's members may have together for a
	// walk of the whole cohort (about 0.35 s on two cores at 1,000 and as many holding, four times
	// that at 2,000); beyond it each ClusterQueue is walked alone and its estimates say so.
	maxCohortWalked = 1000
)

// cachedEstimates serves each ClusterQueue's estimates, computed on request, for ttl, and
// computes them again sooner when the ClusterQueue's pending list changed (a workload arrived,
// was admitted or moved), but not sooner than minInterval after the last walk: a workload that
// joined since is listed without an estimate until then. refreshAll computes them without a
// request. Each ClusterQueue has its own lock, so that a read waits for one walk of its own
// queue at most, never for another team's.
type cachedEstimates struct {
	// compute estimates a ClusterQueue's pending workloads from the snapshot snap gives (nil: a
	// recent one); nil when it cannot yet.
	compute func(cq kueue.ClusterQueueReference, pending []*workload.Info, snap func() *schdcache.Snapshot) map[string]estimate.Estimate
	// pending is the ClusterQueue's pending workloads, in the order they are shown and estimated.
	pending func(kueue.ClusterQueueReference) []*workload.Info
	// max bounds how many of them are estimated, the first in that order (0: all), so that a
	// tenant who floods a queue cannot make each walk arbitrarily long.
	max   int
	clock clock.PassiveClock
	ttl   time.Duration
	// minInterval: see estimateMinInterval (0: none).
	minInterval time.Duration

	mu   sync.Mutex
	byCQ map[kueue.ClusterQueueReference]*cqEstimates
}

// cqEstimates is one ClusterQueue's entry; mu is held while it is computed.
type cqEstimates struct {
	mu sync.Mutex
	// computed is false until a walk gave estimates.
	computed bool
	computedEstimates
}

type computedEstimates struct {
	at      time.Time
	pending []string
	byName  map[string]estimate.Estimate
}

var _ tsvisibility.Estimates = &cachedEstimates{}

func (c *cachedEstimates) Estimates(cq kueue.ClusterQueueReference) map[string]estimate.Estimate {
	e := c.entry(cq)
	e.mu.Lock()
	defer e.mu.Unlock()
	now := c.clock.Now()
	if e.computed && now.Sub(e.at) < c.minInterval {
		return e.byName
	}
	infos := c.listed(cq)
	pending := keysOf(infos)
	if e.computed && now.Sub(e.at) < c.ttl && slices.Equal(e.pending, pending) {
		return e.byName
	}
	return c.computeLocked(e, cq, now, infos, pending, nil)
}

// entry is cq's entry, made on first use.
func (c *cachedEstimates) entry(cq kueue.ClusterQueueReference) *cqEstimates {
	return entryOf(&c.mu, &c.byCQ, cq)
}

// entryOf is m's entry for k, made on first use, with mu held.
func entryOf[K comparable, V any](mu *sync.Mutex, m *map[K]*V, k K) *V {
	mu.Lock()
	defer mu.Unlock()
	if *m == nil {
		*m = map[K]*V{}
	}
	v, ok := (*m)[k]
	if !ok {
		v = new(V)
		(*m)[k] = v
	}
	return v
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
// the next refresh tries again. e.mu is held.
func (c *cachedEstimates) computeLocked(e *cqEstimates, cq kueue.ClusterQueueReference, now time.Time, infos []*workload.Info, pending []string, snap func() *schdcache.Snapshot) map[string]estimate.Estimate {
	byName := c.compute(cq, infos, snap)
	if byName == nil {
		return nil
	}
	e.computed = true
	e.computedEstimates = computedEstimates{at: now, pending: pending, byName: byName}
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
	infos := c.listed(cq)
	if len(infos) == 0 {
		return false
	}
	e := c.entry(cq)
	e.mu.Lock()
	defer e.mu.Unlock()
	pending := keysOf(infos)
	now := c.clock.Now()
	if e.computed && (now.Sub(e.at) < interval/2 || slices.Equal(e.pending, pending)) {
		return false
	}
	c.computeLocked(e, cq, now, infos, pending, snap)
	return true
}

// recentSnapshot hands out one snapshot of the scheduler cache for maxAge, so that the walks of
// a burst of reads, of one ClusterQueue or many, share it. The walks only read it.
type recentSnapshot struct {
	take   func() *schdcache.Snapshot
	clock  clock.PassiveClock
	maxAge time.Duration

	mu   sync.Mutex
	at   time.Time
	snap *schdcache.Snapshot
}

func (r *recentSnapshot) get() *schdcache.Snapshot {
	r.mu.Lock()
	defer r.mu.Unlock()
	now := r.clock.Now()
	if r.snap != nil && now.Sub(r.at) < r.maxAge {
		return r.snap
	}
	if snap := r.take(); snap != nil {
		r.snap, r.at = snap, now
		return snap
	}
	return nil
}

// estimator computes a ClusterQueue's estimates from the scheduler cache's snapshot, the
// turn-ordered pending list the visibility API shows, and the preemptor's policy.
type estimator struct {
	m     *Manager
	clock clock.PassiveClock
	log   logr.Logger
	// first keeps each workload's first estimate, for the error metric.
	first *firstEstimates
	// recent is the snapshot reads walk on.
	recent *recentSnapshot
	// listed is a ClusterQueue's pending workloads that are estimated (cachedEstimates.listed).
	listed  func(kueue.ClusterQueueReference) []*workload.Info
	cohorts cohortWalks
	lists   listMemo
}

// listMemo keeps the ClusterQueues' listed workloads for one snapshot: each member's refresh of a
// cohort compares every member's list with the last walk's, which otherwise lists (and sorts)
// each member's queue once for each member, the square of the cohort's size.
type listMemo struct {
	mu    sync.Mutex
	snap  *schdcache.Snapshot
	lists map[kueue.ClusterQueueReference][]*workload.Info
}

// get is cq's listed workloads (listed), read once for snap.
func (m *listMemo) get(snap *schdcache.Snapshot, cq kueue.ClusterQueueReference, listed func(kueue.ClusterQueueReference) []*workload.Info) []*workload.Info {
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.snap != snap {
		m.snap, m.lists = snap, map[kueue.ClusterQueueReference][]*workload.Info{}
	}
	l, ok := m.lists[cq]
	if !ok {
		l = listed(cq)
		m.lists[cq] = l
	}
	return l
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
		snapshot = e.recent.get
	}
	snap := snapshot()
	if snap == nil {
		return nil
	}
	cqs := snap.ClusterQueue(cq)
	if cqs == nil {
		return nil
	}
	var out map[string]estimate.Estimate
	note := ""
	if cqs.HasParent() {
		listed := func(m kueue.ClusterQueueReference) []*workload.Info { return e.lists.get(snap, m, e.listed) }
		out = e.cohorts.walk(snap, cqs, infos, listed, func(m *schdcache.ClusterQueueSnapshot) estimate.Config { return e.config(p, m) },
			fairsharing.Enabled(e.m.cfg.FairSharing), e.clock.Now(), maxCohortWalked)
		if out == nil {
			note = fmt.Sprintf("approximate: cohort %s has more than %d workloads pending, so its ClusterQueue is walked alone, without borrowing or reclaim",
				cqs.Parent().Root().Name, maxCohortWalked)
		}
	}
	if out == nil {
		q, holders, waiting := estimate.FromSnapshot(cqs, infos, e.config(p, cqs))
		out = map[string]estimate.Estimate{}
		for _, est := range estimate.Compute(q, holders, waiting, e.clock.Now()) {
			out[est.Workload] = estimate.Approximate(est, note)
		}
	}
	e.first.offer(infos, out)
	return out
}

// config is what the walk reads of cq besides the snapshot: the preemptor's policy and what it
// resolves for cq.
func (e *estimator) config(p *preemption.Preemptor, cq *schdcache.ClusterQueueSnapshot) estimate.Config {
	ordering := workload.Ordering{PodsReadyRequeuingTimestamp: requeuingTimestamp(&e.m.cfg)}
	sources := append(policy.Sources{e.m.settings}, e.m.sources...)
	var active policy.ActivePreemptor
	if s := e.m.scheduler.Load(); s != nil {
		active, _ = s.ActivePreemptor(cq.Name)
	}
	return estimate.Config{
		Log: e.log, Policy: p.Policy(), StrictFIFO: e.m.settings.StrictFIFO(cq.Name),
		Resolved: p.QueueFacts(e.log, cq),
		Wake:     policy.WakeSettings{Queue: e.m.settings.UnitSettingsOf(cq.Name), Lengths: e.m.settings.Lengths(), Enabled: queuesettings.FeatureEnabled},
		Sources:  sources,
		Ordering: ordering,
		Clock:    policy.RuntimeClock(e.m.timeshareCfg.RuntimeClock),
		TurnTime: p.WaitingSince(cq.Name, ordering),
		Handover: estimateHandover,
		DrainOf:  scheduler.DrainWithin(e.m.timeshareCfg.MaxHandoverHold.Duration),
		Against: func(victims *schdcache.ClusterQueueSnapshot) policy.QueueFacts {
			return p.QueueFactsAgainst(e.log, cq, victims)
		},
		Preemptor: active,
	}
}

// cohortWalks walks each cohort tree once for all its ClusterQueues: the estimates of one depend
// on the others' workloads. A walk is kept for the snapshot it was made on while no member's
// listed workloads changed, so that the members' refreshes and reads on one snapshot share it.
// Each root Cohort has its own lock, as each ClusterQueue has in cachedEstimates.
type cohortWalks struct {
	mu     sync.Mutex
	byRoot map[kueue.CohortReference]*cohortWalk
}

type cohortWalk struct {
	mu   sync.Mutex
	snap *schdcache.Snapshot
	// pending is each member's listed workloads when it was walked; out its estimates.
	pending map[kueue.ClusterQueueReference][]string
	out     map[kueue.ClusterQueueReference]map[string]estimate.Estimate
}

func (c *cohortWalks) entry(root kueue.CohortReference) *cohortWalk {
	return entryOf(&c.mu, &c.byRoot, root)
}

// walk gives the estimates of cq's workloads infos, walking cq's cohort tree with each other
// member's listed workloads (listed, which the caller reads once per snapshot) unless the last
// walk on snap saw the same; nil when the members have more than most pending together.
func (c *cohortWalks) walk(snap *schdcache.Snapshot, cq *schdcache.ClusterQueueSnapshot, infos []*workload.Info,
	listed func(kueue.ClusterQueueReference) []*workload.Info, config func(*schdcache.ClusterQueueSnapshot) estimate.Config,
	fairSharing bool, now time.Time, most int) map[string]estimate.Estimate {
	w := c.entry(cq.Parent().Root().Name)
	w.mu.Lock()
	defer w.mu.Unlock()
	pending := func(m kueue.ClusterQueueReference) []*workload.Info {
		if m == cq.Name {
			return infos
		}
		return listed(m)
	}
	if w.snap == snap && w.same(pending) {
		return w.out[cq.Name]
	}
	total := 0
	for _, m := range cq.Parent().Root().SubtreeClusterQueues() {
		if total += len(pending(m.Name)); total > most {
			return nil
		}
	}
	tree, members := estimate.FromCohort(snap, cq, pending, config)
	w.snap, w.pending, w.out = snap, map[kueue.ClusterQueueReference][]string{}, map[kueue.ClusterQueueReference]map[string]estimate.Estimate{}
	for i, ests := range estimate.ComputeCohort(estimate.CohortOptions{Tree: tree, FairSharing: fairSharing}, members, now) {
		name := members[i].Queue.Name
		w.pending[name] = keysOf(pending(name))
		out := make(map[string]estimate.Estimate, len(ests))
		for _, est := range ests {
			out[est.Workload] = est
		}
		w.out[name] = out
	}
	return w.out[cq.Name]
}

// same reports whether every member's listed workloads are those of the last walk.
func (w *cohortWalk) same(pending func(kueue.ClusterQueueReference) []*workload.Info) bool {
	for name, keys := range w.pending {
		if !slices.Equal(keys, keysOf(pending(name))) {
			return false
		}
	}
	return w.pending != nil
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
	// The cache and the shared snapshot bound CPU, so they age in real time whatever clock the
	// policy reads: under a stepped clock they would otherwise serve one walk for ever.
	e.recent = &recentSnapshot{take: e.snapshot, clock: clock.RealClock{}, maxAge: estimateMinInterval}
	m.estimateCache = &cachedEstimates{compute: e.compute, pending: m.turnOrdered().PendingWorkloadsInfo, max: maxEstimated,
		clock: clock.RealClock{}, ttl: estimateTTL, minInterval: estimateMinInterval}
	e.listed = m.estimateCache.listed
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
