package estimate

import (
	"cmp"
	"container/heap"
	"fmt"
	"slices"
	"time"

	corev1 "k8s.io/api/core/v1"

	kueue "sigs.k8s.io/kueue/apis/kueue/v1beta2"
	"sigs.k8s.io/kueue/pkg/features"
	"sigs.k8s.io/kueue/pkg/resources"

	"github.com/kueue-timeshare/kueue-timeshare/pkg/estimate/quotatree"
	"github.com/kueue-timeshare/kueue-timeshare/pkg/policy"
)

// Member is one ClusterQueue of a walk of its cohort: its queue and its workloads, as FromSnapshot
// reads them (Queue.Capacity is not read: the tree says what it may use).
type Member struct {
	Queue   *Queue
	Holders []Holder
	Pending []Waiting
}

// CohortOptions are what a walk of a cohort knows besides its members.
type CohortOptions struct {
	// Tree is the cohort tree's quotas and usage, copied from the snapshot the members were read
	// from; the walk changes it.
	Tree *quotatree.Tree
	// FairSharing: the scheduler orders the cohort's admissions and preemptions by fair sharing:
	// the walk orders the heads of a cycle by it, but does not follow its preemptions across
	// ClusterQueues, and an estimate that reclaims is then unknown (cohortWalk.note).
	FairSharing bool
}

// ComputeCohort gives the estimates of each member's pending workloads (in the members' order),
// walking the ClusterQueues of a cohort together on the quota they share. A ClusterQueue borrows
// what the tree lets it (upstream's arithmetic of borrowing and lending limits); a workload that
// does not fit in its own ClusterQueue preempts, as the preemptor reclaims, workloads of other
// ClusterQueues that borrow, when its ClusterQueue's reclaimWithinCohort and the victim policy let
// it (reclaimMinRuntime included) and it stays within its nominal quota; the ClusterQueues' heads
// are taken one per ClusterQueue per cycle, in the scheduler's order of entries without fair
// sharing (cohortWalk.step). Estimates the cohort may change carry a note (cohortWalk.note).
func ComputeCohort(o CohortOptions, members []Member, now time.Time) [][]Estimate {
	co := &cohortWalk{tree: o.Tree, fairSharing: o.FairSharing, limit: now.Add(Horizon)}
	for _, m := range members {
		start(m.Queue, m.Holders, m.Pending, now, co)
	}
	co.shared = co.borrowing()
	co.run()
	out := make([][]Estimate, len(co.ws))
	for i, w := range co.ws {
		out[i] = w.finish()
	}
	return out
}

// cohortWalk walks the members of a cohort together: one walker each, at one instant, on one
// tree.
type cohortWalk struct {
	tree *quotatree.Tree
	ws   []*walker
	// wakes are the instants at which a decision about some hold may change (policy.Changes),
	// at which a reclaim may become possible.
	wakes       times
	limit       time.Time
	fairSharing bool
	// started: the tree is as the cycle started (beforeAdmitting).
	started bool
	// steps counts the cycles (step).
	steps int
	// gen counts the cycles that requeue the parked workloads (walker.parkedNow); cycles those
	// at the walk's instant.
	gen, cycles int
	// version counts the changes of usage; borrowedBy is what the members borrow of each flavor
	// and resource at borrowedAt, a version.
	version, borrowedAt int
	borrowedBy          map[resources.FlavorResource]int64
	// approx is why the walk became approximate (note), empty while it is not.
	approx string
	// steppedAt is the instant of the last cycle.
	steppedAt time.Time
	// flavors: some member has more than one flavor in a resource group; switched: once quota
	// moved between members, the walk admitted some workload in a flavor after the first of its
	// group.
	flavors, switched bool
	// cycle: a step is under way; victims of another member's reclaim then wait in requeues
	// until it ends (cohortWalk.step).
	cycle    bool
	requeues []deferredRequeue
	// entrants are the heads of a cycle under fair sharing, in step's order of entries.
	entrants []quotatree.Entrant
	// reserved is the room the heads of the cycle under way kept back (walker.reserve).
	reserved []reservation
	// narrowed are the members whose room the cycle under way narrowed.
	narrowed []narrowed
	// work is the walk's work so far, against walkBudget: for each step of a member, the
	// workloads in the lines it scans, and for each survey of the borrowers, their holders.
	work int
	// shared: some ClusterQueue borrowed since the walk began. Until then each ClusterQueue of
	// the cohort uses only its own quota and its walk is its own; after, the walk follows the
	// scheduler's order of heads, reclaims and reservations only approximately.
	shared bool
}

// fairPreempts is why an estimate under fair sharing is unknown: the walk reclaims from other
// ClusterQueues as the preemptor does without fair sharing, not by the shares' strategies.
const fairPreempts = "it reclaims from another ClusterQueue"

// note marks the estimate of wt, which w admitted at the walk's instant taking use, as
// approximate when the cohort's other ClusterQueues may change it: once some ClusterQueue of the
// cohort borrowed, or when another one that may borrow waits for the same flavor and resource (the
// scheduler's cycles, not the walk's order, then say who gets it first). Under fair sharing, whose
// preemptions across ClusterQueues the walk does not follow, one that reclaims, and every one
// after it, is unknown; so is, in a cohort with more than one flavor of a resource, an
// approximate one admitted in a flavor after the first of its group, and every one after it: which
// flavor the assigner picks as quota moves is what the walk follows least (TestEstimateAccuracyInCohorts).
func (co *cohortWalk) note(w *walker, wt *waiting, use []amount, preempts bool) {
	why := co.approx
	switch {
	case co.fairSharing && preempts:
		why = fairPreempts
	case why != "":
	case co.shared:
		why = fmt.Sprintf("ClusterQueues of cohort %s borrow from each other", co.tree.Cohort)
	case co.contested(w, use):
		why = fmt.Sprintf("other ClusterQueues of cohort %s wait for the same quota", co.tree.Cohort)
	}
	// What follows an approximate admission is approximate too.
	co.approx = why
	co.switched = co.switched || (why != "" && co.flavors && !inFirstFlavors(wt, use))
	if wt.out < 0 || why == "" {
		return
	}
	e := &w.out[wt.out]
	switch {
	case co.fairSharing && why == fairPreempts:
		e.When, e.Unknown = time.Time{}, true
		e.Reason = fmt.Sprintf("cohort %s shares its quota by fair sharing, which the estimate does not foresee (%s)", co.tree.Cohort, why)
	case co.switched:
		e.When, e.Unknown = time.Time{}, true
		e.Reason = fmt.Sprintf("cohort %s has ClusterQueues with more than one flavor of a resource, whose assignment the estimate does not foresee once quota moves between them (%s)", co.tree.Cohort, why)
	default:
		e.Note = "approximate: " + why
	}
}

// inFirstFlavors reports whether use, wt's quota, is in the first flavor of each of its groups.
func inFirstFlavors(wt *waiting, use []amount) bool {
	n := 0
	for _, options := range wt.ask {
		if len(options) > 1 && !slices.ContainsFunc(use, func(a amount) bool { return a.slot == options[0][0].slot }) {
			return false
		}
		n += len(options[0])
	}
	return n == len(use)
}

// contested reports whether another member, one that may borrow, has a workload waiting for a
// flavor and resource of use.
func (co *cohortWalk) contested(w *walker, use []amount) bool {
	for _, o := range co.ws {
		if o == w || o.head() == nil {
			continue
		}
		for _, a := range use {
			if s, ok := o.slots[w.frs[a.slot]]; ok && o.capacity[s] > o.nominal[s] {
				return true
			}
		}
	}
	return false
}

// join makes w, whose holders the tree counts already, a member of the walk.
func (co *cohortWalk) join(w *walker) {
	w.co = co
	w.preemptWhileBorrowing = w.q.BorrowWithinCohort || (co.fairSharing && w.q.Reclaim != kueue.PreemptionPolicyNever)
	co.flavors = co.flavors || slices.ContainsFunc(w.q.Groups, func(g Group) bool { return len(g.Flavors) > 1 })
	for _, fr := range w.frs {
		w.nominal = append(w.nominal, co.tree.Nominal(w.q.Name, fr))
	}
	co.ws = append(co.ws, w)
	co.sync(w)
	for _, h := range w.holds {
		co.wake(w, h)
	}
}

// held counts h, which w admitted, in the tree.
func (co *cohortWalk) held(w *walker, h *hold) {
	for _, a := range h.use {
		co.tree.Add(w.q.Name, w.frs[a.slot], a.value)
	}
	co.version++
	co.shared = co.shared || co.borrowing()
	co.wake(w, h)
	co.changed()
}

// left gives back h's quota, which w's hold held, to the tree.
func (co *cohortWalk) left(w *walker, h *hold) {
	for _, a := range h.use {
		co.tree.Remove(w.q.Name, w.frs[a.slot], a.value)
	}
	co.version++
	co.changed()
}

// wake adds the instants at which a decision about h may change.
func (co *cohortWalk) wake(w *walker, h *hold) {
	for _, ch := range policy.Changes(&h.cand, w.q.Wake) {
		if at := ch.Wake(); at.After(w.t) && !at.After(co.limit) {
			heap.Push(&co.wakes, at)
		}
	}
}

// changed makes every member read the tree again, and look again at the workloads that did not
// fit where what it may take grew (less room fits nothing that did not fit).
func (co *cohortWalk) changed() {
	for _, w := range co.ws {
		if co.sync(w) {
			w.freed++
		}
	}
}

// sync sets what w may take of each slot now, borrowing included (negative: what others must
// give back first); it reports whether that grew.
func (co *cohortWalk) sync(w *walker) bool {
	grew := false
	for s, fr := range w.frs {
		if v := co.tree.Room(w.q.Name, fr); v != w.free[s] {
			grew = grew || v > w.free[s]
			w.free[s] = v
		}
	}
	return grew
}

// borrowed is what the members use of fr beyond their nominal quotas, together.
func (co *cohortWalk) borrowed(fr resources.FlavorResource) int64 {
	if co.borrowedBy == nil || co.borrowedAt != co.version {
		co.borrowedBy, co.borrowedAt = map[resources.FlavorResource]int64{}, co.version
		for _, w := range co.ws {
			for s, fr := range w.frs {
				co.borrowedBy[fr] += max(w.used[s]-w.nominal[s], 0)
			}
		}
	}
	return co.borrowedBy[fr]
}

// walkBudget bounds the work of one walk of a cohort (cohortWalk.work; about three seconds of a
// core): the cycles of an instant grow with the workloads waiting, and so does each cycle, so
// that a walk of 10,000 pending would otherwise take minutes (BenchmarkEstimateCohort).
var walkBudget = 50_000_000

// cycleBound is the most cycles one instant takes: a few for each workload still waiting.
func (co *cohortWalk) cycleBound() int {
	n := 16
	for _, w := range co.ws {
		n += 4 * (w.left + 1)
	}
	return n
}

// borrowing reports whether some member uses more than its nominal quota of some slot.
func (co *cohortWalk) borrowing() bool {
	return slices.ContainsFunc(co.ws, (*walker).borrowsAny)
}

// run walks the members from one instant to the next at which a holder of any of them may leave
// or a decision about one may change, as walker.run walks one ClusterQueue.
func (co *cohortWalk) run() {
	for co.waiting() {
		if co.endless() {
			return
		}
		if co.work > walkBudget {
			for _, w := range co.ws {
				w.giveUp(fmt.Sprintf("the walk of cohort %s stopped at its bound of work", co.tree.Cohort))
			}
			return
		}
		for _, w := range co.ws {
			w.endHolds()
			if w.left > 0 && w.admissions > w.maxAdmissions {
				w.giveUp("behind workloads that take turns without end")
			}
		}
		if co.step() {
			// Each cycle admits, parks or skips a head: more cycles at one instant than that
			// allows is a loop of the walk's, not of the scheduler's.
			if co.cycles++; co.cycles > co.cycleBound() {
				for _, w := range co.ws {
					w.giveUp(noProgress)
				}
				return
			}
			continue
		}
		next, ok := co.next()
		if !ok {
			for _, w := range co.ws {
				if w.left > 0 {
					w.noRelease()
				}
			}
			return
		}
		if len(co.ws) > 0 && !next.After(co.ws[0].t) {
			for _, w := range co.ws {
				w.giveUp(noProgress)
			}
			return
		}
		if next.After(co.limit) {
			for _, w := range co.ws {
				w.giveUp(fmt.Sprintf("not within %s", Horizon))
			}
			return
		}
		co.cycles = 0
		// A protection of a borrower may have ended: the members that may reclaim look again.
		borrowing := co.borrowing()
		for _, w := range co.ws {
			w.t = next
			if borrowing && w.reclaims() {
				w.freed++
			}
		}
	}
}

// endless ends the walk once the cohort admitted more than its members' bounds together (a
// rotation that never reaches the workloads still waiting, maybe in another ClusterQueue): a
// member that nothing of its own makes room for waits on its holders, the others behind the turns.
func (co *cohortWalk) endless() bool {
	admissions, bound := 0, 0
	for _, w := range co.ws {
		admissions, bound = admissions+w.admissions, bound+w.maxAdmissions
	}
	if admissions <= bound {
		return false
	}
	for _, w := range co.ws {
		if w.left == 0 {
			continue
		}
		if _, ok := w.nextRelease(); ok {
			w.giveUp("behind workloads that take turns without end")
		} else {
			w.noRelease()
		}
	}
	return true
}

// waiting reports whether some member has a pending workload without an answer.
func (co *cohortWalk) waiting() bool {
	return slices.ContainsFunc(co.ws, func(w *walker) bool { return w.left > 0 })
}

// step is one scheduling cycle: each member with a workload in line admits at most one, taking
// their heads as the scheduler orders its entries: without fair sharing by upstream's
// entryOrdering (one that would not borrow first, then higher priority, then older by the queue's
// order), with it by the fair-sharing tournament (quotatree.Tree.First). It reports whether one
// was admitted, or whether a head was kept out by one that is parked for the next cycle.
func (co *cohortWalk) step() bool {
	type entry struct {
		w       *walker
		head    *waiting
		borrows int
		// preemptor: head is its queue's active preemptor, which goes first.
		preemptor bool
		// fits: head fits in the free quota as the cycle starts (the flavor assigner's Fit).
		fits bool
	}
	co.steps++
	// The first cycle after a change in the cohort takes each queue's first workload.
	first := len(co.ws) > 0 && !co.steppedAt.Equal(co.ws[0].t)
	if first {
		co.steppedAt = co.ws[0].t
		co.gen++
	}
	var entries []entry
	retry := false
	// idle: members with a preemptor to admit and no head in this cycle.
	var idle []*walker
	for _, w := range co.ws {
		h := w.cycleHead()
		if h == nil {
			if w.admitting {
				idle = append(idle, w)
			}
			continue
		}
		// The cycle that admits its preemptor comes before the one a workload that never fits
		// takes.
		due := first || w.neverDue
		w.neverDue = due && w.admitting
		if due && !w.admitting && w.neverFirst(h) {
			retry = true
			continue
		}
		entries = append(entries, entry{w, h, w.borrows(h), preemptorsFirst() && w.isPreemptor(h, true), false})
	}
	co.beforeAdmitting(func() {
		for i := range entries {
			w := entries[i].w
			w.startRoom = append(w.startRoom[:0], co.startRoom(w)...)
			entries[i].fits = w.fits(w.startRoom, entries[i].head)
		}
	})
	// One with no other head in this cycle admits its preemptor in it all the same.
	for _, w := range idle {
		w.admitting, retry = false, true
	}
	slices.SortStableFunc(entries, func(a, b entry) int {
		if a.preemptor != b.preemptor {
			if a.preemptor {
				return -1
			}
			return 1
		}
		if c := cmp.Compare(a.borrows, b.borrows); c != 0 {
			return c
		}
		if c := cmp.Compare(b.head.pend.Priority, a.head.pend.Priority); c != 0 {
			return c
		}
		return a.head.cand.QueuedAt.Compare(b.head.cand.QueuedAt)
	})
	if co.fairSharing {
		co.entrants = co.entrants[:0]
		for _, e := range entries {
			co.entrants = append(co.entrants, e.w.entrant(e.head))
		}
	}
	// A head that waits for preemption with no victims keeps its room from the heads after it
	// in the cycle. Under StrictFIFO it stays the head and does so every cycle while nothing
	// changes; under BestEffortFIFO it is parked as inadmissible until something in the cohort
	// changes, so it does so once an instant, and the heads it kept out try again at the next
	// cycle without it.
	co.cycle = true
	defer func() {
		co.cycle = false
		for _, w := range co.ws {
			w.startRoom = w.startRoom[:0]
		}
		for _, r := range co.requeues {
			r.from.requeue(r.release, r.evicted)
		}
		co.requeues = co.requeues[:0]
		for _, n := range co.narrowed {
			// From the narrowed room, so that what the cycle freed counts as freed.
			copy(n.free, n.w.free)
			n.w.free = n.free
			if co.sync(n.w) {
				n.w.freed++
			}
		}
		co.narrowed = co.narrowed[:0]
		for i := len(co.reserved) - 1; i >= 0; i-- {
			r := co.reserved[i]
			co.tree.Remove(r.w.q.Name, r.w.frs[r.slot], r.value)
		}
		if len(co.reserved) > 0 {
			co.reserved = co.reserved[:0]
			co.changed()
		}
	}()
	admitted, parked := false, false
	for len(entries) > 0 {
		// Under fair sharing the next head is the tournament's winner on the usage the heads
		// before it left (upstream's fairSharingIterator.pop).
		i := 0
		if co.fairSharing {
			i = co.tree.First(co.entrants)
			co.entrants = slices.Delete(co.entrants, i, i+1)
		}
		e := entries[i]
		entries = slices.Delete(entries, i, i+1)
		if e.w.admitting {
			// Its ClusterQueue's cycle admits the workload that preempted in the last.
			e.w.admitting, retry = false, true
			continue
		}
		if e.fits && !e.w.fits(e.w.free, e.head) {
			// Nominated to fit, it no longer does beside what the heads before it took or kept
			// back: the scheduler skips it for the cycle, and in the next it may preempt. Skipped
			// again at this instant, only what is kept back each cycle is in its way.
			retry = retry || !e.head.skippedAt.Equal(e.w.t)
			e.head.skippedAt = e.w.t
			continue
		}
		head, spent := e.head, false
		// Nominated not to fit, it does not fit in this cycle in what the heads before it freed
		// by preempting, nor keeps less back for it: their victims leave once the cycle ends
		// (upstream's Preempt mode).
		if saved := e.w.withoutFreedInCycle(e.fits); saved != nil {
			co.narrowed = append(co.narrowed, narrowed{e.w, saved})
		}
		if e.w.step() {
			if e.w.admitting {
				// Its victims' eviction requeues the cohort's parked workloads: in the next
				// cycle one that never fits takes its queue's cycle again (neverFirst).
				co.steppedAt = time.Time{}
			}
			if !e.w.cycleSpent {
				admitted = true
				continue
			}
			// The cycle went to a head that did not fit: it keeps its room as any head does.
			head, spent, retry = e.w.parked, true, true
			e.w.cycleSpent, e.w.parked = false, nil
		}
		retry = retry || parked
		if e.w.declined {
			// Its preemption no longer fits beside the room the heads before it kept: the
			// scheduler skips it for this cycle, and it keeps nothing back.
			e.w.declined = false
			continue
		}
		// One that waits for a protected borrower stays the head and keeps its quota back in
		// every cycle, whatever its ClusterQueue's reclaimWithinCohort.
		guarded, always := false, e.w.q.StrictFIFO
		if g := e.w.guarding; g != nil && g.guarded && !g.done {
			head, guarded, always = g, true, true
		}
		if !always && !spent && e.w.triedGen == co.gen {
			continue
		}
		n := len(co.reserved)
		for _, a := range e.w.reserve(head, guarded) {
			co.tree.Add(e.w.q.Name, e.w.frs[a.slot], a.value)
			co.reserved = append(co.reserved, reservation{e.w, a})
		}
		if len(co.reserved) > n {
			co.changed()
			if !always {
				e.w.triedGen, parked = co.gen, true
			}
		}
	}
	return admitted || retry
}

// withoutFreedInCycle makes w's room, for a head that did not fit as the cycle started, no more
// than it was then; it returns the room to restore once the cycle ends, nil when unchanged.
func (w *walker) withoutFreedInCycle(fits bool) []int64 {
	if fits || len(w.startRoom) == 0 {
		return nil
	}
	var room []int64
	for s, v := range w.free {
		if v > w.startRoom[s] {
			if room == nil {
				room = slices.Clone(w.free)
			}
			room[s] = w.startRoom[s]
		}
	}
	if room == nil {
		return nil
	}
	saved := w.free
	w.free = room
	return saved
}

// entrant is head as the fair-sharing tournament sees it: the quota it takes where it fits now,
// else in the first flavor of each group (the flavor assigner's choice when it must preempt is
// not followed).
func (w *walker) entrant(head *waiting) quotatree.Entrant {
	e := quotatree.Entrant{ClusterQueue: w.q.Name, Use: resources.FlavorResourceQuantities{}, Priority: head.pend.Priority, QueuedAt: head.cand.QueuedAt,
		Preemptor: preemptorsFirst() && w.isPreemptor(head, true)}
	use, ok := w.fit(w.free, head)
	if !ok {
		use = use[:0]
		for _, options := range head.ask {
			use = append(use, options[0]...)
		}
	}
	for _, a := range use {
		e.Use[w.frs[a.slot]] = e.Use[w.frs[a.slot]].Add(resources.NewAmount(a.value))
	}
	return e
}

// neverFirst reports whether, under BestEffortFIFO, a workload that never fits comes before head
// in w's queue (by priority, then queue time): parked as inadmissible, it is requeued with the
// others at each change in the cohort and takes its ClusterQueue's first cycle after it, in which
// the other ClusterQueues' heads go alone.
func (w *walker) neverFirst(head *waiting) bool {
	if w.q.StrictFIFO || head == w.stickyHead() {
		return false
	}
	if w.q.turns().TakesTurns() {
		// The walk's lines are in turn order there; the queue pops in its own.
		head = w.queueHead(head)
	}
	var first *waiting
	for _, n := range w.nevers {
		if queuedAhead(n, head) && (first == nil || queuedAhead(n, first)) {
			first = n
		}
	}
	if first == nil {
		return false
	}
	// It has had its cycle at this instant (walker.parkAhead).
	w.park(first)
	w.parkEquivalents(first)
	return true
}

// beforeAdmitting runs f on the quota as a cycle starts, when the scheduler nominates its heads:
// without the workloads that preempted in the last cycle, which it admits in this one
// (walker.admitting).
func (co *cohortWalk) beforeAdmitting(f func()) {
	var admitting []*walker
	for _, w := range co.ws {
		if w.admitting {
			admitting = append(admitting, w)
			for _, a := range w.admittingUse {
				co.tree.Remove(w.q.Name, w.frs[a.slot], a.value)
			}
		}
	}
	co.started = len(admitting) > 0
	f()
	co.started = false
	for i := len(admitting) - 1; i >= 0; i-- {
		w := admitting[i]
		for _, a := range w.admittingUse {
			co.tree.Add(w.q.Name, w.frs[a.slot], a.value)
		}
	}
}

// startRoom is what w may take as the cycle starts (beforeAdmitting), w.free unless a workload
// that preempted is admitted in it.
func (co *cohortWalk) startRoom(w *walker) []int64 {
	if !co.started {
		return w.free
	}
	room := make([]int64, len(w.frs))
	for s, fr := range w.frs {
		room[s] = co.tree.Room(w.q.Name, fr)
	}
	return room
}

// cycleHead is the head w offers a cycle: its first in line that has not had a cycle at this
// instant (parked, walker.parkAhead), or nil when every one has.
func (w *walker) cycleHead() *waiting {
	if p := w.stickyHead(); p != nil {
		return p
	}
	for _, l := range w.lines {
		for _, wt := range l.items[l.first:] {
			if !wt.done && !w.parkedNow(wt) && !wt.backsOff(w.t) {
				return wt
			}
		}
	}
	return nil
}

// queueHead is the first of w's waiting workloads in its queue's order, head unless one comes
// before it.
func (w *walker) queueHead(head *waiting) *waiting {
	for _, l := range w.lines {
		if l.priority < head.pend.Priority {
			break
		}
		for _, wt := range l.items[l.first:] {
			if !wt.done && !wt.backsOff(w.t) && queuedAhead(wt, head) {
				head = wt
			}
		}
	}
	return head
}

// queuedAhead reports whether a comes before b in its queue by priority, then queue time (not
// the turn time where the queue takes turns).
func queuedAhead(a, b *waiting) bool {
	return a.pend.Priority > b.pend.Priority || (a.pend.Priority == b.pend.Priority && a.cand.QueuedAt.Before(b.cand.QueuedAt))
}

// deferredRequeue is a victim of a reclaim that goes back in its ClusterQueue's line once the
// cycle ends: evicted in a cycle, it is not that ClusterQueue's head before the next, so the
// heads the cycle took go first.
type deferredRequeue struct {
	release
	evicted time.Time
}

// narrowed is a walker whose room a cycle narrowed (walker.withoutFreedInCycle), and the room
// it had.
type narrowed struct {
	w    *walker
	free []int64
}

type reservation struct {
	w *walker
	amount
}

// reserve is the quota head, which did not fit, keeps from the heads after it in a cycle where
// its ClusterQueue may not always reclaim (upstream's reserveCapacityForUnreclaimablePreempt), in
// the first flavor of each group where its nominal quota could hold it (the flavor assigner's
// Preempt; nothing when there is none, its NoFit): all it asks, up to its borrowing limit, when it
// would borrow, else what it asks within its nominal quota (upstream's quotaResourcesToReserve).
// guarded: head waits for a protected borrower, and keeps it back even where its ClusterQueue
// may always reclaim.
func (w *walker) reserve(head *waiting, guarded bool) []amount {
	if head != nil && preemptorsFirst() && w.isPreemptor(head, true) {
		// An active preemptor keeps its room back whatever its queue may reclaim.
		guarded = true
	}
	if (w.q.Reclaim == kueue.PreemptionPolicyAny && !guarded) || head == nil || head.done || head.backsOff(w.t) || !head.possible || w.fits(w.free, head) {
		return nil
	}
	tree := w.co.tree
	var asks []amount
	for _, options := range head.ask {
		chosen := -1
		for i, in := range options {
			if !slices.ContainsFunc(in, func(a amount) bool { return a.value > w.nominal[a.slot] }) {
				chosen = i
				break
			}
		}
		if chosen < 0 {
			return nil
		}
		asks = append(asks, options[chosen]...)
	}
	used := func(a amount) int64 { return tree.Used(w.q.Name, w.frs[a.slot]) }
	borrows := slices.ContainsFunc(asks, func(a amount) bool { return used(a)+a.value > w.nominal[a.slot] })
	var out []amount
	for _, a := range asks {
		r := min(a.value, w.nominal[a.slot]-used(a))
		if borrows {
			r = a.value
			if limit, ok := tree.BorrowingLimit(w.q.Name, w.frs[a.slot]); ok {
				r = min(a.value, w.nominal[a.slot]+limit-used(a))
			}
		}
		if r > 0 {
			out = append(out, amount{a.slot, r})
		}
	}
	return out
}

// preemptorsFirst reports whether a ClusterQueue's active preemptor goes first among a cycle's
// heads and keeps its room back (the manager turns PrioritizePreemptorWorkloads on).
func preemptorsFirst() bool {
	return features.Enabled(features.PrioritizePreemptorWorkloads)
}

// nominatedRoom is what w may take of each slot as the scheduler sees it when it nominates the
// heads of a cycle, as the cycle starts (walker.startRoom): before the heads ahead of w's took or
// kept back any room, and before the workloads that preempted in the last are admitted. It
// chooses a head's victims there, and checks only when it reaches that head whether they still
// make room (upstream's schedule, "no longer fits"). Outside a cycle it is w.free.
func (co *cohortWalk) nominatedRoom(w *walker) []int64 {
	if co.cycle && len(w.startRoom) > 0 {
		return w.startRoom
	}
	return w.free
}

// next is the first instant after now at which a holder of a member may leave or a decision
// about one may change.
func (co *cohortWalk) next() (time.Time, bool) {
	var next time.Time
	found := false
	for _, w := range co.ws {
		if at, ok := w.nextRelease(); ok && (!found || at.Before(next)) {
			next, found = at, true
		}
	}
	for co.wakes.Len() > 0 && len(co.ws) > 0 && !co.wakes[0].After(co.ws[0].t) {
		heap.Pop(&co.wakes)
	}
	if co.wakes.Len() > 0 && (!found || co.wakes[0].Before(next)) {
		next, found = co.wakes[0], true
	}
	return next, found
}

// reclaim admits wt, which does not fit with the holders of its own ClusterQueue that may leave
// for it, by also preempting workloads that other members hold beyond their nominal quota, as the
// preemptor reclaims: when reclaimWithinCohort and the victim policy let it (for each victim, as a
// candidate of another ClusterQueue) and wt's ClusterQueue stays within its nominal quota.
// Victims are taken in the order of the policy's key table and then minimised, as take does.
func (w *walker) reclaim(bp *byPriority, wt *waiting, turn bool, newer []release) bool {
	w.guard(wt, false)
	// Only the cycle's head may hold its queue; the others wait behind it.
	head := !w.headTried
	w.headTried = true
	if !w.reclaims() {
		return false
	}
	tree := w.co.tree
	// It must fit within its nominal quota and in what is free, with every holder of its own that
	// may leave for it gone and all that the other members borrow given back.
	free := w.scratch[:0]
	for s, fr := range w.frs {
		borrowed := w.co.borrowed(fr) - max(w.used[s]-w.nominal[s], 0)
		pooled := bp.pooled[s]
		if !turn {
			pooled -= bp.turned[s]
		}
		free = append(free, min(w.nominal[s]-w.used[s], w.free[s]+borrowed)+pooled)
	}
	w.scratch = free
	if !w.fits(free, wt) {
		w.guard(wt, head && w.withinNominal(wt) && w.protectedBorrower(wt))
		return false
	}
	if w.failed.covers(w, wt, turn) {
		w.guard(wt, head && w.failed.guarded)
		return false
	}
	candidates := w.candidates[:0]
	for _, r := range bp.pool[bp.first:] {
		if !r.h.gone && (turn || !r.turn) {
			candidates = append(candidates, r)
		}
	}
	candidates = append(candidates, newer...)
	own := len(candidates)
	guarded := false
	w.againstBorrowers(wt, func(o *walker, h *hold, d policy.Decision) bool {
		if !d.Eligible {
			guarded = guarded || w.q.Policy.Protects(d.Rule)
			return true
		}
		at := w.t
		if w.q.Notice != nil {
			at = at.Add(min(max(w.q.Notice(cmp.Or(d.Reason, kueue.InCohortReclamationReason)), 0), Horizon))
		}
		candidates = append(candidates, release{at: at, requeue: h.ends.IsZero() || w.t.Before(h.ends), own: policy.IsOwnReason(d.Reason), h: h, from: o})
		return true
	})
	w.candidates = candidates
	if len(candidates) == own {
		w.guard(wt, head && guarded)
		return false
	}
	order := &policy.OrderContext{ClusterQueue: w.q.Name, Queue: &w.q.Resolved, Now: w.t}
	slices.SortStableFunc(candidates, func(a, b release) int { return w.q.Policy.Compare(order, &a.h.cand, &b.h.cand) })
	saved := tree.Save()
	var taken []release
	fits := w.fitsWithinNominal(wt)
	for _, r := range candidates {
		if fits {
			break
		}
		// One whose ClusterQueue no longer borrows is no longer a candidate (upstream's
		// candidateIsValid).
		if r.from != nil && !r.from.borrowsWith(r.h) {
			continue
		}
		taken = append(taken, r)
		w.co.take(r.owner(w), r.h, false)
		fits = w.fitsWithinNominal(wt)
	}
	if !fits {
		tree.Restore(saved)
		w.failed = failedReclaim{version: w.co.version, at: w.t, prio: wt.pend.Priority, turn: turn, requests: wt.requests, guarded: guarded}
		w.guard(wt, head && guarded)
		return false
	}
	for i := len(taken) - 1; i >= 0; i-- {
		w.co.take(taken[i].owner(w), taken[i].h, true)
		if w.fitsWithinNominal(wt) {
			taken = slices.Delete(taken, i, i+1)
			continue
		}
		w.co.take(taken[i].owner(w), taken[i].h, false)
	}
	tree.Restore(saved)
	var last time.Time
	at, name, evicted := w.t, "", w.t
	for _, r := range taken {
		if free := r.freeAt(); name == "" || !free.Before(last) {
			last, name = free, r.h.name
		}
		evicted = maxTime(evicted, r.at)
	}
	at = maxTime(at, last).Add(w.q.Handover)
	w.evict(taken, evicted)
	use, ok := w.fit(w.free, wt)
	if !ok {
		// The tree's arithmetic and the slots' disagree; give no answer rather than a wrong one.
		w.unknown(wt, "needs quota the cohort's arithmetic does not give back")
		return true
	}
	w.admitAt(wt, use, "when "+name+" leaves", at, true)
	w.preempted(true)
	return true
}

// withinNominal reports whether wt fits in its ClusterQueue's nominal quota in some flavor of
// each group it needs: the flavor assigner's Preempt rather than NoFit, were nothing else used.
func (w *walker) withinNominal(wt *waiting) bool {
	for _, options := range wt.ask {
		if !slices.ContainsFunc(options, func(in []amount) bool {
			return !slices.ContainsFunc(in, func(a amount) bool { return a.value > w.nominal[a.slot] })
		}) {
			return false
		}
	}
	return true
}

// protectedBorrower reports whether a workload that another member holds beyond its nominal
// quota, in a flavor and resource wt may take, is protected from wt for now: the preemptor's
// protection survey that makes a head with no victims hold its quota (WaitVerdict.HoldQuota).
// A borrower the cycle under way admitted does not count: the scheduler nominated wt before it.
// The answer is kept for the workloads of wt's priority that ask as many resource groups, until
// the cohort's usage, the cycle or the instant changes (walker.protected).
func (w *walker) protectedBorrower(wt *waiting) bool {
	key := protectedKey{version: w.co.version, step: w.co.steps, at: w.t, prio: wt.pend.Priority, groups: len(wt.ask)}
	if w.protected.key == key {
		return w.protected.found
	}
	found := false
	w.againstBorrowers(wt, func(_ *walker, h *hold, d policy.Decision) bool {
		if w.co.cycle && h.step == w.co.steps {
			// Admitted in this cycle, it was not there when the scheduler nominated wt.
			return true
		}
		found = !d.Eligible && w.q.Policy.Protects(d.Rule)
		return !found
	})
	w.protected = protectedAnswer{key, found}
	return found
}

// protectedAnswer is protectedBorrower's last answer, for key.
type protectedAnswer struct {
	key   protectedKey
	found bool
}

type protectedKey struct {
	version, step int
	at            time.Time
	prio          int64
	groups        int
}

// againstBorrowers gives yield the policy's decision on each workload that another member holds
// beyond its nominal quota, in a flavor and resource wt may take, as a candidate of another
// ClusterQueue for wt (the preemptor's reclaim), until yield returns false.
func (w *walker) againstBorrowers(wt *waiting, yield func(o *walker, h *hold, d policy.Decision) bool) {
	in := &w.input
	*in = policy.Input{Preemptor: w.asPreemptor(wt), Scope: policy.OtherClusterQueue, Policy: w.q.Reclaim, Now: w.t}
	w.borrowersAgainst(in, func(o *walker, h *hold) bool { return w.asks(wt, o, h) }, yield)
}

// borrowersAgainst asks the policy, with in, about each holder of the other members that borrow
// that uses a slot they borrow and that asks accepts (nil: every one), until yield returns false.
func (w *walker) borrowersAgainst(in *policy.Input, asks func(o *walker, h *hold) bool, yield func(o *walker, h *hold, d policy.Decision) bool) {
	for _, o := range w.co.ws {
		if o == w {
			continue
		}
		// What o borrows of each slot, read off the tree once for all its holds.
		borrows := w.borrowsBuf[:0]
		for _, fr := range o.frs {
			borrows = append(borrows, w.co.tree.Borrowing(o.q.Name, fr))
		}
		w.borrowsBuf = borrows
		if !slices.Contains(borrows, true) {
			continue
		}
		o.compact()
		in.Queue = w.q.Against[o.q.Name]
		w.co.work += len(o.holds)
		for _, h := range o.holds {
			if h.gone || !slices.ContainsFunc(h.use, func(a amount) bool { return borrows[a.slot] }) || (asks != nil && !asks(o, h)) {
				continue
			}
			in.Candidate = &h.cand
			if !yield(o, h, w.q.Policy.Decide(in)) {
				return
			}
		}
	}
}

// reclaimable is, per slot, what the holders of the other members that borrow hold and a
// preemptor like bp's may ever reclaim from them (the policy asked at policy.TimelessFuture), as
// the preemptor asks whether a workload could use a turn; kept while the cohort's usage is the same.
func (w *walker) reclaimable(bp *byPriority) []int64 {
	if bp.reclaimableAt == w.co.version && bp.reclaimable != nil {
		return bp.reclaimable
	}
	out := append(bp.reclaimable[:0], make([]int64, len(w.free))...)
	in := policy.Input{Preemptor: bp.rep, Scope: policy.OtherClusterQueue, Policy: w.q.Reclaim, Now: w.t.Add(policy.TimelessFuture)}
	w.borrowersAgainst(&in, nil, func(o *walker, h *hold, d policy.Decision) bool {
		if d.Eligible {
			for _, a := range h.use {
				if s, ok := w.slots[o.frs[a.slot]]; ok {
					out[s] += a.value
				}
			}
		}
		return true
	})
	bp.reclaimable, bp.reclaimableAt = out, w.co.version
	return out
}

// failedReclaim is the last reclaim that found too little: one of no higher priority that asks at
// least as much of every resource, at the same instant and usage, finds too little too.
type failedReclaim struct {
	version  int
	at       time.Time
	prio     int64
	turn     bool
	requests map[corev1.ResourceName]int64
	// guarded: it found a borrower protected for now.
	guarded bool
}

// guard records whether wt's reclaim waits for a protected borrower (walker.guarding).
func (w *walker) guard(wt *waiting, guarded bool) {
	wt.guarded = guarded
	switch {
	case guarded:
		w.guarding = wt
	case w.guarding == wt:
		w.guarding = nil
	}
}

func (f *failedReclaim) covers(w *walker, wt *waiting, turn bool) bool {
	if f.requests == nil || f.version != w.co.version || !f.at.Equal(w.t) || wt.pend.Priority > f.prio || turn && !f.turn {
		return false
	}
	for r, v := range f.requests {
		if wt.requests[r] < v {
			return false
		}
	}
	return true
}

// reclaims reports whether w's ClusterQueue may reclaim from the cohort.
func (w *walker) reclaims() bool {
	switch w.q.Reclaim {
	case kueue.PreemptionPolicyAny, kueue.PreemptionPolicyLowerPriority, kueue.PreemptionPolicyLowerOrNewerEqualPriority:
		return true
	}
	return false
}

// take takes h's usage off the tree (back: puts it back), for reclaim's trials.
func (co *cohortWalk) take(o *walker, h *hold, back bool) {
	for _, a := range h.use {
		if back {
			co.tree.Add(o.q.Name, o.frs[a.slot], a.value)
		} else {
			co.tree.Remove(o.q.Name, o.frs[a.slot], a.value)
		}
	}
}

// fitsWithinNominal reports whether wt fits in what the tree leaves its ClusterQueue without
// borrowing.
func (w *walker) fitsWithinNominal(wt *waiting) bool {
	free := w.scratch[:0]
	for s, fr := range w.frs {
		free = append(free, min(w.co.tree.Available(w.q.Name, fr), max(w.nominal[s]-w.co.tree.Used(w.q.Name, fr), 0)))
	}
	w.scratch = free
	return w.fits(free, wt)
}

// borrows is how far up the cohort tree wt borrows, 0 within its ClusterQueue's nominal quota
// (the borrowing level of upstream's flavor assignment, which orders the scheduler's heads), in
// the flavors that borrow least: as things are when it fits, else once the victims its
// preemption would choose are gone (upstream's borrowAfterPreemptions), or every holder of its
// ClusterQueue that may leave for it by now when those do not make room.
func (w *walker) borrows(wt *waiting) int {
	tree := w.co.tree
	var gone []release
	if !w.fits(w.free, wt) {
		bp := w.forPriority(wt.pend)
		w.pool(bp)
		turn := w.canUseTurn(bp, wt)
		if room, all, newer := w.preemptionRoom(bp, wt, turn); w.fits(all, wt) {
			gone, _ = w.victims(bp, wt, room, all, turn, newer)
		} else {
			gone = slices.DeleteFunc(slices.Clone(bp.pool[bp.first:]), func(r release) bool { return r.h.gone })
		}
	}
	for _, r := range gone {
		o := r.owner(w)
		for _, a := range r.h.use {
			tree.Remove(o.q.Name, o.frs[a.slot], a.value)
		}
	}
	level := 0
	for _, options := range wt.ask {
		least := -1
		for _, in := range options {
			most := 0
			for _, a := range in {
				most = max(most, tree.FindHeightOfLowestSubtreeThatFits(w.q.Name, w.frs[a.slot], a.value))
			}
			if least < 0 || most < least {
				least = most
			}
		}
		level = max(level, least)
	}
	for i := len(gone) - 1; i >= 0; i-- {
		o := gone[i].owner(w)
		for _, a := range gone[i].h.use {
			tree.Add(o.q.Name, o.frs[a.slot], a.value)
		}
	}
	return level
}

// borrowsAny reports whether w's ClusterQueue uses more than its nominal quota of some slot.
func (w *walker) borrowsAny() bool {
	return slices.ContainsFunc(w.frs, func(fr resources.FlavorResource) bool { return w.co.tree.Borrowing(w.q.Name, fr) })
}

// compact drops the holds that left from w.holds once they are most of it.
func (w *walker) compact() {
	if w.gone*2 > len(w.holds) {
		w.holds = slices.DeleteFunc(w.holds, func(h *hold) bool { return h.gone })
		w.gone = 0
	}
}

// borrowsWith reports whether h uses a slot of which w's ClusterQueue uses more than its nominal
// quota.
func (w *walker) borrowsWith(h *hold) bool {
	return slices.ContainsFunc(h.use, func(a amount) bool { return w.co.tree.Borrowing(w.q.Name, w.frs[a.slot]) })
}

// asks reports whether h, a hold of o, uses a flavor and resource that wt may take.
func (w *walker) asks(wt *waiting, o *walker, h *hold) bool {
	for _, a := range h.use {
		if s, ok := w.slots[o.frs[a.slot]]; ok {
			for _, options := range wt.ask {
				for _, in := range options {
					if slices.ContainsFunc(in, func(b amount) bool { return b.slot == s }) {
						return true
					}
				}
			}
		}
	}
	return false
}

// times is a heap of instants.
type times []time.Time

func (t times) Len() int           { return len(t) }
func (t times) Less(i, j int) bool { return t[i].Before(t[j]) }
func (t times) Swap(i, j int)      { t[i], t[j] = t[j], t[i] }
func (t *times) Push(x any)        { *t = append(*t, x.(time.Time)) }
func (t *times) Pop() any {
	old := *t
	x := old[len(old)-1]
	*t = old[:len(old)-1]
	return x
}
