package preemption

import (
	"context"
	"fmt"
	"hash/fnv"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/sets"

	kueue "sigs.k8s.io/kueue/apis/kueue/v1beta2"
	schdcache "sigs.k8s.io/kueue/pkg/cache/scheduler"
	"sigs.k8s.io/kueue/pkg/resources"
	"sigs.k8s.io/kueue/pkg/workload"

	"github.com/kueue-timeshare/kueue-timeshare/pkg/policy"
)

// turnUse says whether a pending workload could use a time-sharing turn if it had it.
type turnUse int

const (
	// turnUseless: it does not fit even if every candidate that the rules will ever allow were
	// evicted (it asks for more than the ClusterQueue and what it may borrow, or what it needs
	// is held by workloads it may never preempt). It does not hold the rotation.
	turnUseless turnUse = iota
	// turnLater: it fits once the windows and protections running now have ended. It keeps its
	// place in line: passing it over would let the others' staggered windows starve it.
	turnLater
	// turnNow: it fits now, or after evicting candidates the rules allow now.
	turnNow
)

// turnUseOf answers for info on snapshot, once per workload and scheduling cycle.
func (p *Preemptor) turnUseOf(ctx context.Context, info *workload.Info, snapshot *schdcache.Snapshot) turnUse {
	c := &p.pendingCycle
	c.mu.Lock()
	if c.snapshot != snapshot {
		c.reset(snapshot, p.clock.Now())
	}
	use, ok := c.use[info.Obj.UID]
	c.mu.Unlock()
	if ok {
		return use
	}
	use = p.computeTurnUse(ctx, info, snapshot)
	c.mu.Lock()
	if c.snapshot == snapshot {
		c.use[info.Obj.UID] = use
	}
	c.mu.Unlock()
	return use
}

// computeTurnUse tries each resource group of the ClusterQueue on its own, every flavor of the
// group in order, with the whole request of the workload in that flavor, as the flavor assigner
// assigns one flavor per resource group. Node labels and taints of flavors are not looked at: a
// workload they exclude may be taken for one that can use a turn, which only keeps it in line as
// before.
func (p *Preemptor) computeTurnUse(ctx context.Context, info *workload.Info, snapshot *schdcache.Snapshot) turnUse {
	cq := snapshot.ClusterQueue(info.ClusterQueue)
	if cq == nil {
		return turnUseless
	}
	requests := map[corev1.ResourceName]int64{}
	for _, ps := range info.TotalRequests {
		if ps.Requests == nil {
			continue
		}
		for r, v := range ps.Requests.Iter() {
			requests[r] += v
		}
	}
	byGroup := map[int]map[corev1.ResourceName]int64{}
	for r, v := range requests {
		if v == 0 {
			continue
		}
		found := false
		for i := range cq.ResourceGroups {
			if cq.ResourceGroups[i].CoveredResources.Has(r) {
				if byGroup[i] == nil {
					byGroup[i] = map[corev1.ResourceName]int64{}
				}
				byGroup[i][r] = v
				found = true
				break
			}
		}
		if !found {
			return turnUseless
		}
	}
	use := turnNow
	for i, reqs := range byGroup {
		best := turnUseless
		for _, f := range cq.ResourceGroups[i].Flavors {
			quota := resources.FlavorResourceQuantities{}
			for r, v := range reqs {
				quota[resources.FlavorResource{Flavor: f, Resource: r}] = resources.NewAmount(v)
			}
			best = max(best, p.flavorTurnUse(ctx, info, snapshot, cq, quota))
			if best == turnNow {
				break
			}
		}
		use = min(use, best)
	}
	return use
}

// flavorTurnUse answers for one flavor of one resource group: the search for victims runs as if
// the workload had the turn, now and then at a time when every window and protection has ended.
func (p *Preemptor) flavorTurnUse(ctx context.Context, info *workload.Info, snapshot *schdcache.Snapshot, cq *schdcache.ClusterQueueSnapshot, quota resources.FlavorResourceQuantities) turnUse {
	for fr, v := range quota {
		if _, ok := cq.ResourceNode.Quotas[fr]; !ok || v.Cmp(cq.PotentialAvailable(fr)) > 0 {
			return turnUseless
		}
	}
	contested := sets.New[resources.FlavorResource]()
	for fr := range quota {
		contested.Insert(fr)
	}
	for _, use := range []turnUse{turnNow, turnLater} {
		s := p.newSearchFor(ctx, info, snapshot, contested, workload.Usage{Quota: quota}, false)
		if use == turnLater {
			s.now = s.now.Add(policy.TimelessFuture)
		}
		if s.workloadFits(true) || len(p.targets(s)) > 0 {
			return use
		}
	}
	return turnUseless
}

// passesOver reports whether workloads that cannot use a turn are passed over in the rotation of
// a ClusterQueue: not under StrictFIFO, where the head of the line blocks as in upstream Kueue.
func (p *Preemptor) passesOver(info *workload.Info) bool {
	return !p.settings(info.ClusterQueue).StrictFIFO
}

// canHoldTurn filters the workloads that may hold the turn in info's ClusterQueue on snapshot.
func (p *Preemptor) canHoldTurn(ctx context.Context, snapshot *schdcache.Snapshot, info *workload.Info) func(*workload.Info) bool {
	if snapshot == nil || !p.passesOver(info) {
		return nil
	}
	return func(other *workload.Info) bool {
		o := *other
		o.ClusterQueue = info.ClusterQueue
		return !p.uselessFor(ctx, &o, snapshot)
	}
}

// uselessFor reports whether info cannot use a turn (turnUseOf is turnUseless). That answer does
// not depend on the time, since the "later" question looks past every window and protection, but
// only on the workload and its ClusterQueue's quota, settings and admitted workloads: it is kept
// across cycles while none of them changes, so that a flood of workloads that can never use a turn
// costs its searches once per change of their queue, not at every cycle. The rest of the cohort
// counts through the room it leaves the queue (cohortRoom): "cannot" holds while the cohort leaves
// no more, "can" while it leaves no less.
func (p *Preemptor) uselessFor(ctx context.Context, info *workload.Info, snapshot *schdcache.Snapshot) bool {
	state := p.queueState(snapshot, info.ClusterQueue)
	room := p.cohortRoomOf(snapshot, info.ClusterQueue)
	c := &p.pendingCycle
	c.mu.Lock()
	useless, ok := c.useless.get(info.Obj, state, room, p.clock.Now())
	c.mu.Unlock()
	if ok {
		return useless
	}
	useless = p.turnUseOf(ctx, info, snapshot) == turnUseless
	c.mu.Lock()
	c.useless.put(info.Obj, state, room, useless, p.clock.Now())
	c.mu.Unlock()
	return useless
}

// cohortRoom is what a ClusterQueue may take of each of its flavors and resources as its cohort
// stands in one cycle (ClusterQueueSnapshot.Available), read once per cycle and shared by the
// answers found in it.
type cohortRoom struct {
	available map[resources.FlavorResource]int64
}

// cohortRoomOf is cq's cohortRoom in snapshot's cycle.
func (p *Preemptor) cohortRoomOf(snapshot *schdcache.Snapshot, cq kueue.ClusterQueueReference) *cohortRoom {
	c := &p.pendingCycle
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.snapshot != snapshot {
		c.reset(snapshot, p.clock.Now())
	}
	if r, ok := c.rooms[cq]; ok {
		return r
	}
	r := &cohortRoom{available: map[resources.FlavorResource]int64{}}
	if cqs := snapshot.ClusterQueue(cq); cqs != nil {
		for fr := range cqs.ResourceNode.Quotas {
			r.available[fr] = cqs.Available(fr).Int64()
		}
	}
	c.rooms[cq] = r
	return r
}

// keeps reports whether an answer found with room r still holds with now: one that could not use
// a turn while the cohort leaves no more room, one that could while it leaves no less.
func (r *cohortRoom) keeps(now *cohortRoom, useless bool) bool {
	if r == now {
		return true
	}
	for fr, v := range now.available {
		if was := r.available[fr]; (useless && v > was) || (!useless && v < was) {
			return false
		}
	}
	return true
}

// foundUseless reports whether this cycle found that info cannot use a turn, by its own search
// or by uselessFor's memory for the queue's state in this cycle.
func (p *Preemptor) foundUseless(info *workload.Info) bool {
	c := &p.pendingCycle
	c.mu.Lock()
	defer c.mu.Unlock()
	if use, ok := c.use[info.Obj.UID]; ok {
		return use == turnUseless
	}
	state, ok := c.states[info.ClusterQueue]
	room, rok := c.rooms[info.ClusterQueue]
	if !ok || !rok {
		return false
	}
	useless, ok := c.useless.get(info.Obj, state, room, p.clock.Now())
	return ok && useless
}

// queueState is a fingerprint of what uselessFor's answers in cq depend on: its quota generation,
// its preemption policy and settings, and its admitted workloads with their versions.
// It is computed once per cycle.
func (p *Preemptor) queueState(snapshot *schdcache.Snapshot, cq kueue.ClusterQueueReference) uint64 {
	c := &p.pendingCycle
	c.mu.Lock()
	if c.snapshot != snapshot {
		c.reset(snapshot, p.clock.Now())
	}
	state, ok := c.states[cq]
	c.mu.Unlock()
	if ok {
		return state
	}
	state = p.computeQueueState(snapshot, cq)
	c.mu.Lock()
	if c.snapshot == snapshot {
		c.states[cq] = state
	}
	c.mu.Unlock()
	return state
}

func (p *Preemptor) computeQueueState(snapshot *schdcache.Snapshot, cq kueue.ClusterQueueReference) uint64 {
	cqs := snapshot.ClusterQueue(cq)
	if cqs == nil {
		return 0
	}
	// Maps iterate in no order: each entry is hashed on its own and the hashes combined by XOR.
	hash := func(parts ...any) uint64 {
		h := fnv.New64a()
		fmt.Fprint(h, parts...)
		return h.Sum64()
	}
	sum := hash(cqs.AllocatableResourceGeneration, " ", fmt.Sprintf("%v %+v", cqs.Preemption, p.settings(cq)))
	for fr, q := range cqs.ResourceNode.Quotas {
		sum ^= hash("quota ", fr, " ", q.Nominal, " ", cqs.PotentialAvailable(fr))
	}
	for _, info := range cqs.Workloads {
		h := fnv.New64a()
		h.Write([]byte(info.Obj.UID))
		h.Write([]byte{'/'})
		h.Write([]byte(info.Obj.ResourceVersion))
		sum ^= h.Sum64()
	}
	return sum
}

// uselessMemo is uselessFor's memory: by UID, the answer, the workload's version and its queue's
// state it was found for, and when it was last used. Entries unused for forgetAfter are dropped
// (the workload was admitted or deleted); a line kept across cycles (largeQueue) reads its
// workloads' answers only when it is read again, so the time is that of the clock, not a count of
// cycles.
type uselessMemo struct {
	cycles  int
	entries map[types.UID]uselessEntry
}

type uselessEntry struct {
	resourceVersion string
	state           uint64
	room            *cohortRoom
	useless         bool
	used            time.Time
}

const forgetAfter = 10 * time.Minute

func (m *uselessMemo) get(wl *kueue.Workload, state uint64, room *cohortRoom, now time.Time) (bool, bool) {
	e, ok := m.entries[wl.UID]
	if !ok || e.resourceVersion != wl.ResourceVersion || e.state != state || !e.room.keeps(room, e.useless) {
		return false, false
	}
	e.used = now
	m.entries[wl.UID] = e
	return e.useless, true
}

func (m *uselessMemo) put(wl *kueue.Workload, state uint64, room *cohortRoom, useless bool, now time.Time) {
	if m.entries == nil {
		m.entries = map[types.UID]uselessEntry{}
	}
	m.entries[wl.UID] = uselessEntry{resourceVersion: wl.ResourceVersion, state: state, room: room, useless: useless, used: now}
}

// nextCycle starts a cycle; every hundred cycles it drops the entries unused for forgetAfter.
func (m *uselessMemo) nextCycle(now time.Time) {
	m.cycles++
	if m.cycles%100 != 0 {
		return
	}
	for uid, e := range m.entries {
		if now.Sub(e.used) >= forgetAfter {
			delete(m.entries, uid)
		}
	}
}

// explainPassedOver says why a workload of a rotating ClusterQueue is passed over, or "".
func (p *Preemptor) explainPassedOver(ctx context.Context, info *workload.Info, snapshot *schdcache.Snapshot) string {
	if !p.passesOver(info) || p.turnUseOf(ctx, info, snapshot) != turnUseless {
		return ""
	}
	return fmt.Sprintf("passed over for time-sharing turns: it does not fit in ClusterQueue %s even if every workload it may preempt were preempted; the turn goes to the next workload in line and comes back to it once it can fit", info.ClusterQueue)
}

// reset starts the cache of a new cycle.
func (c *pendingCycle) reset(snapshot *schdcache.Snapshot, now time.Time) {
	c.snapshot = snapshot
	c.lines = map[lineKey][]turnEntry{}
	c.holders = map[lineKey][]turnEntry{}
	if c.large == nil {
		c.large = map[kueue.ClusterQueueReference]largeList{}
	}
	c.use = map[types.UID]turnUse{}
	c.states = map[kueue.ClusterQueueReference]uint64{}
	c.rooms = map[kueue.ClusterQueueReference]*cohortRoom{}
	c.useless.nextCycle(now)
}
