package simulator

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"math/rand"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/util/sets"
	"k8s.io/klog/v2"
	"k8s.io/utils/ptr"

	configapi "sigs.k8s.io/kueue/apis/config/v1beta2"
	kueue "sigs.k8s.io/kueue/apis/kueue/v1beta2"
	schdcache "sigs.k8s.io/kueue/pkg/cache/scheduler"
	"sigs.k8s.io/kueue/pkg/features"
	"sigs.k8s.io/kueue/pkg/resources"
	"sigs.k8s.io/kueue/pkg/util/priority"
	"sigs.k8s.io/kueue/pkg/workload"

	"github.com/kueue-timeshare/kueue-timeshare/pkg/scheduler"
)

var (
	orderCases = flag.Int("order-cases", 12, "generated scenarios TestHeadsPerCycleOrder runs, each with and without fair sharing forced on")
	orderSeed  = flag.Int64("order-seed", 0, "the only seed TestHeadsPerCycleOrder runs, to rerun a failure")
	// orderRunLimit bounds one run of TestHeadsPerCycleOrder.
	orderRunLimit = flag.Duration("order-run-limit", 15*time.Second, "how long one run of TestHeadsPerCycleOrder may take")
)

// TestHeadsPerCycleOrder runs bunched generated scenarios at a budget of 32 heads per ClusterQueue
// per cycle and watches every cycle through the loop's hooks: the snapshot before each admission,
// and which heads each round of the cycle took. In every round after a cycle's first (the rounds
// the budget adds; the first is upstream's loop, which TestHeadsPerCycleOneIsUpstreamsLoop holds):
//   - a ClusterQueue never admits a workload while one ahead of it in queue order (priority, then
//     queue-order timestamp), still active in the queue, fits the same snapshot (ClusterQueues
//     with turns excluded, as their turn order is the preemptor's; both queueing strategies);
//   - under fair sharing, each admission goes to a head that the fair-sharing tournament, on the
//     shares as the cycle's admissions so far left them, can put first (ties either way) among
//     the round's heads in its cohort tree that fit and were not admitted or held back yet.
//
// A head "fits" when, for each of its pod sets and resource groups, some flavor of the group
// (first in the ClusterQueue's order) has the requests available in the snapshot: unused nominal
// quota plus what the cohort tree can lend, within borrowing and lending limits
// (ClusterQueueSnapshot.Available), after the usage the cycle added so far.
func TestHeadsPerCycleOrder(t *testing.T) {
	cases := *orderCases
	if raceDetector && !flagSet("order-cases") {
		cases = 6
	}
	var total orderFigures
	runs, cut := 0, 0
	for seed := int64(1); seed <= int64(cases); seed++ {
		if *orderSeed != 0 && seed != *orderSeed {
			continue
		}
		for _, fair := range []bool{false, true} {
			m := generate(seed).bunch(fair)
			sc, err := Parse(fmt.Sprintf("bunched-%d.yaml", seed), []byte(m.YAML()))
			if err != nil {
				t.Fatal(err)
			}
			sc.Timeshare.HeadsPerCycle = ptr.To[int32](32)
			c := newOrderChecker(sc)
			// Some scenarios rotate turns every few minutes for hours, which takes the simulator
			// minutes: each run gets a bound, and what it checked until then counts.
			ctx, cancel := context.WithTimeout(context.Background(), *orderRunLimit)
			_, err = Run(ctx, sc, Options{preemptor: c.wrap})
			cancel()
			switch {
			case errors.Is(err, context.DeadlineExceeded):
				cut++
				t.Logf("seed %d (fair sharing %t): stopped after %s at cycle %d", seed, m.FairSharing, *orderRunLimit, c.figures.Cycles+1)
			case err != nil:
				t.Fatalf("seed %d: %v", seed, err)
			}
			c.endCycle()
			if len(c.problems) > 0 {
				t.Errorf("seed %d (fair sharing %t) at headsPerCycle 32: %d problems, first: %s\n%s", seed, m.FairSharing, len(c.problems), c.problems[0], m.YAML())
			}
			total.add(c.figures)
			runs++
		}
	}
	t.Logf("%d runs (%d stopped at their time limit): %d cycles, %d with more than one round; %d (cycle, ClusterQueue) pairs admitted more than one workload (at most %d), in %d cycles; "+
		"%d admissions, %d in later rounds, %d of them while other workloads were active in their queue (%d times a parked one ahead fit: the queue keeps it parked); "+
		"%d of those under fair sharing in a cohort, %d of them against another fitting head",
		runs, cut, total.Cycles, total.MultiRound, total.ManyPairs, total.MostPerCQ, total.ManyCycles,
		total.Admissions, total.Later, total.FIFOChecked, total.ParkedAheadFit, total.FairAdmissions, total.FairChecked)
	// The checks are only worth something if cycles do admit several workloads of a ClusterQueue.
	if runs >= 20 && total.ManyCycles < runs {
		t.Errorf("only %d cycles admitted more than one workload of a ClusterQueue in %d runs: the scenarios no longer bunch up", total.ManyCycles, runs)
	}
	if runs >= 20 && total.FairChecked < runs/2 {
		t.Errorf("only %d fair-sharing admissions had another fitting head to lose to: the check no longer bites", total.FairChecked)
	}
}

// bunch makes a scenario's arrivals bunch up so that cycles admit several workloads per
// ClusterQueue: it adds 10 to 30 small workloads and moves every arrival onto a 45-minute grid.
// With fairSharing, fair sharing is on and at least three ClusterQueues are in a cohort.
func (m *genModel) bunch(fairSharing bool) *genModel {
	rng := rand.New(rand.NewSource(m.Seed<<8 + 77))
	c := *m
	c.CQs = append([]genCQ(nil), m.CQs...)
	c.WLs = append([]genWL(nil), m.WLs...)
	if fairSharing {
		c.FairSharing = true
		// Three ClusterQueues at least, so that shares compete.
		for i := len(c.CQs); i < 3; i++ {
			cq := c.CQs[0]
			cq.Name = fmt.Sprintf("cq%d", i)
			cq.Quota = append([]genQuota(nil), cq.Quota...)
			c.CQs = append(c.CQs, cq)
		}
		for i := range c.CQs {
			if c.CQs[i].Cohort == "" {
				c.CQs[i].Cohort = "co"
				c.CQs[i].Reclaim = []string{"Any", "LowerPriority", "Never"}[rng.Intn(3)]
			}
		}
	}
	for i := range 10 + rng.Intn(21) {
		w := genWL{
			Name:         fmt.Sprintf("b%d", i),
			CQ:           c.CQs[rng.Intn(len(c.CQs))].Name,
			CPU:          1 + rng.Intn(2),
			Arrival:      time.Duration(rng.Intn(180)) * time.Minute,
			Duration:     time.Duration([]int{10, 30, 60}[rng.Intn(3)]) * time.Minute,
			Checkpointed: rng.Intn(2) == 0,
		}
		if rng.Intn(5) > 0 {
			w.Class = c.Classes[rng.Intn(len(c.Classes))].Name
		}
		c.WLs = append(c.WLs, w)
	}
	for i := range c.WLs {
		c.WLs[i].Arrival = c.WLs[i].Arrival.Truncate(45 * time.Minute)
	}
	return &c
}

// orderFigures count what the checks saw.
type orderFigures struct {
	// Cycles are the cycles with heads; MultiRound those that took more than one round.
	Cycles, MultiRound int
	// ManyPairs are the (cycle, ClusterQueue) pairs with more than one admission, ManyCycles the
	// cycles with at least one such pair, MostPerCQ the most admissions of one pair.
	ManyPairs, ManyCycles, MostPerCQ int
	// Admissions in all, Later those in the rounds after the first (the ones checked);
	// FIFOChecked those (in ClusterQueues without turns) while other workloads were active in
	// their queue, which the loop could have taken out of order;
	// ParkedAheadFit the parked workloads ahead that fit the snapshot of a later admission.
	Admissions, Later, FIFOChecked, ParkedAheadFit int
	// FairAdmissions are the later rounds' admissions in a cohort under fair sharing, FairChecked
	// those with another fitting head of the same cohort tree in the round.
	FairAdmissions, FairChecked int
}

func (f *orderFigures) add(o orderFigures) {
	f.Cycles += o.Cycles
	f.MultiRound += o.MultiRound
	f.ManyPairs += o.ManyPairs
	f.ManyCycles += o.ManyCycles
	f.MostPerCQ = max(f.MostPerCQ, o.MostPerCQ)
	f.Admissions += o.Admissions
	f.Later += o.Later
	f.FIFOChecked += o.FIFOChecked
	f.ParkedAheadFit += o.ParkedAheadFit
	f.FairAdmissions += o.FairAdmissions
	f.FairChecked += o.FairChecked
}

// orderChecker watches the cycles of one run through the preemptor's hooks, which the loop calls
// in order: SubstituteHead for each head of a round (on the cycle's snapshot, before nomination),
// then VetoAdmission for each head that fits, right before its usage is added.
type orderChecker struct {
	sc          *Scenario
	w           *world
	fairSharing bool
	ordering    workload.Ordering
	figures     orderFigures

	// snap is the current cycle's snapshot, rounds its rounds so far.
	snap   *schdcache.Snapshot
	rounds int
	// heads are the current round's heads by ClusterQueue, with the usage their nomination
	// chose (the first flavors that fit at the round's start; none when they did not fit).
	heads map[kueue.ClusterQueueReference]*orderHead
	// admitted counts this cycle's admissions by ClusterQueue; turns are the ClusterQueues where
	// a head stepped aside for a turn this cycle.
	admitted map[kueue.ClusterQueueReference]int
	taken    sets.Set[workload.Reference]
	turns    sets.Set[kueue.ClusterQueueReference]

	problems []string
}

type orderHead struct {
	info  *workload.Info
	usage workload.Usage
	fits  bool
	// done: admitted, or held back by the veto, in this round.
	done bool
}

func newOrderChecker(sc *Scenario) *orderChecker {
	return &orderChecker{
		sc:          sc,
		fairSharing: sc.FairSharing != nil,
		ordering:    workload.Ordering{PodsReadyRequeuingTimestamp: configapi.EvictionTimestamp},
	}
}

// watched is the run's preemptor with the checker's hooks around its own.
type watched struct {
	scheduler.Preemptor
	hooks scheduler.Hooks
}

func (p watched) Hooks() scheduler.Hooks { return p.hooks }

func (c *orderChecker) wrap(w *world, p scheduler.Preemptor) scheduler.Preemptor {
	c.w = w
	inner := p.Hooks()
	hooks := inner
	hooks.SubstituteHead = func(ctx context.Context, head *workload.Info, snap *schdcache.Snapshot) *workload.Info {
		var turn *workload.Info
		if inner.SubstituteHead != nil {
			turn = inner.SubstituteHead(ctx, head, snap)
		}
		c.head(head, turn, snap)
		return turn
	}
	hooks.VetoAdmission = func(ctx context.Context, wl *workload.Info, snap *schdcache.Snapshot) string {
		var veto string
		if inner.VetoAdmission != nil {
			veto = inner.VetoAdmission(ctx, wl, snap)
		}
		c.admission(wl, snap, veto != "")
		return veto
	}
	return watched{Preemptor: p, hooks: hooks}
}

// head notes a round's head, as the loop keeps it: the workload whose turn it is, unless that one
// is the head itself or was taken earlier in the cycle.
func (c *orderChecker) head(head, turn *workload.Info, snap *schdcache.Snapshot) {
	if snap != c.snap {
		c.endCycle()
		c.snap, c.rounds, c.heads = snap, 0, nil
		c.admitted = map[kueue.ClusterQueueReference]int{}
		c.taken = sets.New[workload.Reference]()
		c.turns = sets.New[kueue.ClusterQueueReference]()
	}
	cq := head.ClusterQueue
	if _, again := c.heads[cq]; again || c.heads == nil {
		c.rounds++
		c.heads = map[kueue.ClusterQueueReference]*orderHead{}
	}
	kept := head
	if turn != nil && turn.Obj.UID != head.Obj.UID && !c.taken.Has(workload.Key(turn.Obj)) {
		// As the loop takes it: in the head's ClusterQueue.
		info := *turn
		info.ClusterQueue = cq
		kept = &info
		c.turns.Insert(cq)
	}
	h := &orderHead{info: kept}
	h.usage, h.fits = fitUsage(snap, cq, kept)
	c.heads[cq] = h
}

// endCycle counts the cycle that ends.
func (c *orderChecker) endCycle() {
	if c.snap == nil {
		return
	}
	c.figures.Cycles++
	if c.rounds > 1 {
		c.figures.MultiRound++
	}
	many := false
	for _, n := range c.admitted {
		if n > 1 {
			c.figures.ManyPairs++
			many = true
		}
		c.figures.MostPerCQ = max(c.figures.MostPerCQ, n)
	}
	if many {
		c.figures.ManyCycles++
	}
	c.snap = nil
}

// admission checks a head that fits, right before the loop admits it (unless vetoed).
func (c *orderChecker) admission(wl *workload.Info, snap *schdcache.Snapshot, vetoed bool) {
	cq := wl.ClusterQueue
	h := c.heads[cq]
	if h == nil || h.info.Obj.UID != wl.Obj.UID {
		c.problems = append(c.problems, fmt.Sprintf("cycle %d round %d: %s fits but is not the round's head of %s", c.figures.Cycles+1, c.rounds, klog.KObj(wl.Obj), cq))
		return
	}
	if vetoed {
		h.done = true
		return
	}
	c.figures.Admissions++
	// A cycle's first heads are the queues' own pops and go through upstream's iterator with
	// what only the queue knows (an active preemptor comes first in its queue and, with
	// PrioritizePreemptorWorkloads, in the cycle); the rounds after them are the loop's own.
	if c.rounds > 1 {
		c.figures.Later++
		c.queueOrder(wl, snap)
		c.shareOrder(h, snap)
	}
	h.done = true
	c.admitted[cq]++
	c.taken.Insert(workload.Key(wl.Obj))
}

// queueOrder: no workload ahead of wl in its queue, and still active there, fits snap.
func (c *orderChecker) queueOrder(wl *workload.Info, snap *schdcache.Snapshot) {
	cq := wl.ClusterQueue
	if v := c.sc.queueView(string(cq)); v == nil || v.Spec.Preemption.WithinClusterQueueConfig.MinAdmitDuration != nil || c.turns.Has(cq) {
		return
	}
	parked := sets.New(c.w.queues.DumpInadmissible()[cq]...)
	checked := false
	for _, other := range c.w.queues.PendingWorkloadsInfo(cq) {
		// The queue also lists the workloads the cycle took (admitted): they are no longer waiting.
		if other.Obj.UID == wl.Obj.UID || c.taken.Has(workload.Key(other.Obj)) {
			continue
		}
		isParked := parked.Has(workload.Key(other.Obj))
		checked = checked || !isParked
		if !c.ahead(other.Obj, wl.Obj) {
			continue
		}
		_, fits := fitUsage(snap, cq, other)
		if isParked {
			if fits {
				c.figures.ParkedAheadFit++
			}
			continue
		}
		if fits {
			c.problems = append(c.problems, fmt.Sprintf("cycle %d round %d at +%s: %s admitted in %s while %s, ahead of it in the queue, fit the same snapshot",
				c.figures.Cycles+1, c.rounds, FormatOffset(c.w.now()), klog.KObj(wl.Obj), cq, klog.KObj(other.Obj)))
		}
	}
	if checked {
		c.figures.FIFOChecked++
	}
}

// ahead reports whether a comes before b in a ClusterQueue's queue: higher priority, then the
// earlier queue-order timestamp.
func (c *orderChecker) ahead(a, b *kueue.Workload) bool {
	pa, pb := priority.Priority(a), priority.Priority(b)
	if pa != pb {
		return pa > pb
	}
	return c.ordering.GetQueueOrderTimestamp(a).Before(c.ordering.GetQueueOrderTimestamp(b))
}

// shareOrder: under fair sharing, h can win the tournament among the round's heads of its
// cohort tree that fit snap and were not processed yet.
func (c *orderChecker) shareOrder(h *orderHead, snap *schdcache.Snapshot) {
	cq := snap.ClusterQueue(h.info.ClusterQueue)
	if !c.fairSharing || !cq.HasParent() {
		return
	}
	c.figures.FairAdmissions++
	candidates := map[*schdcache.ClusterQueueSnapshot]*orderHead{cq: h}
	for name, other := range c.heads {
		if other == h || other.done {
			continue
		}
		o := snap.ClusterQueue(name)
		if !o.HasParent() || o.Parent().Root() != cq.Parent().Root() {
			continue
		}
		if _, fits := fitUsage(snap, name, other.info); fits {
			candidates[o] = other
		}
	}
	if len(candidates) == 1 {
		return
	}
	c.figures.FairChecked++
	shares := c.shares(candidates)
	winners := c.tournament(cq.Parent().Root(), candidates, shares)
	for _, w := range winners {
		if w == h {
			return
		}
	}
	var names []string
	for _, w := range winners {
		names = append(names, fmt.Sprintf("%s in %s", klog.KObj(w.info.Obj), w.info.ClusterQueue))
	}
	c.problems = append(c.problems, fmt.Sprintf("cycle %d round %d at +%s: %s admitted in %s while fair sharing puts first %s",
		c.figures.Cycles+1, c.rounds, FormatOffset(c.w.now()), klog.KObj(h.info.Obj), h.info.ClusterQueue, strings.Join(names, ", ")))
}

type shareKey struct {
	cohort kueue.CohortReference
	head   *orderHead
}

// shares are, for each candidate and each cohort above it, the share of the cohort's child on
// the candidate's side with the candidate's usage added.
func (c *orderChecker) shares(candidates map[*schdcache.ClusterQueueSnapshot]*orderHead) map[shareKey]schdcache.DRS {
	out := map[shareKey]schdcache.DRS{}
	for cq, h := range candidates {
		revert := cq.SimulateUsageAddition(h.usage)
		share := cq.DominantResourceShare()
		for ancestor := range cq.PathParentToRoot() {
			out[shareKey{ancestor.GetName(), h}] = share
			share = ancestor.DominantResourceShare()
		}
		revert()
	}
	return out
}

// tournament returns the candidates under cohort that can come first in it, ties kept: a
// cohort's entrants are its child cohorts' possible winners and its own ClusterQueues' heads,
// compared by the share their side would have with them admitted.
func (c *orderChecker) tournament(cohort *schdcache.CohortSnapshot, candidates map[*schdcache.ClusterQueueSnapshot]*orderHead, shares map[shareKey]schdcache.DRS) []*orderHead {
	var entrants []*orderHead
	for _, child := range cohort.ChildCohorts() {
		entrants = append(entrants, c.tournament(child, candidates, shares)...)
	}
	for _, cq := range cohort.ChildCQs() {
		if h, ok := candidates[cq]; ok {
			entrants = append(entrants, h)
		}
	}
	var best []*orderHead
	for _, e := range entrants {
		beaten := false
		for _, o := range entrants {
			if o != e && c.before(o, e, cohort.GetName(), shares) {
				beaten = true
				break
			}
		}
		if !beaten {
			best = append(best, e)
		}
	}
	return best
}

// before is the fair-sharing order in a cohort: a side that does not borrow what it asks for (with its gate), the lower share, the higher priority
// (with its gate), the earlier queue-order timestamp.
func (c *orderChecker) before(a, b *orderHead, cohort kueue.CohortReference, shares map[shareKey]schdcache.DRS) bool {
	sa, sb := shares[shareKey{cohort, a}], shares[shareKey{cohort, b}]
	if features.Enabled(features.FairSharingPrioritizeNonBorrowing) {
		if ba, bb := sa.IsBorrowingOn(a.usage.Quota), sb.IsBorrowingOn(b.usage.Quota); ba != bb {
			return !ba
		}
	}
	if cmp := schdcache.CompareDRS(sa, sb); cmp != 0 {
		return cmp < 0
	}
	if features.Enabled(features.PrioritySortingWithinCohort) {
		if pa, pb := priority.Priority(a.info.Obj), priority.Priority(b.info.Obj); pa != pb {
			return pa > pb
		}
	}
	return c.ordering.GetQueueOrderTimestamp(a.info.Obj).Before(c.ordering.GetQueueOrderTimestamp(b.info.Obj))
}

// fitUsage is the usage wl would take in cq from snap, choosing for each pod set and resource
// group the first flavor that has all its requests available, and whether every one had one.
func fitUsage(snap *schdcache.Snapshot, cqName kueue.ClusterQueueReference, wl *workload.Info) (workload.Usage, bool) {
	cq := snap.ClusterQueue(cqName)
	usage := workload.Usage{Quota: resources.FlavorResourceQuantities{}}
	if cq == nil {
		return usage, false
	}
	for _, ps := range wl.TotalRequests {
		byGroup := map[*schdcache.ResourceGroup][]corev1.ResourceName{}
		for r := range ps.Requests.Iter() {
			rg := cq.RGByResource(r)
			if rg == nil {
				return usage, false
			}
			byGroup[rg] = append(byGroup[rg], r)
		}
		for rg, names := range byGroup {
			found := false
			for _, f := range rg.Flavors {
				fits := true
				for _, r := range names {
					fr := resources.FlavorResource{Flavor: f, Resource: r}
					if cq.Available(fr).Cmp(usage.Quota[fr].AddInt64(ps.Requests.ResourceValue(r))) < 0 {
						fits = false
						break
					}
				}
				if fits {
					for _, r := range names {
						fr := resources.FlavorResource{Flavor: f, Resource: r}
						usage.Quota[fr] = usage.Quota[fr].AddInt64(ps.Requests.ResourceValue(r))
					}
					found = true
					break
				}
			}
			if !found {
				return usage, false
			}
		}
	}
	return usage, true
}
