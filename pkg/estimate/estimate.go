// Package estimate says when each pending workload of a ClusterQueue is expected to be admitted.
//
// It walks the quota forward in time: the workloads holding quota leave when the victim policy
// (pkg/policy) first lets the workload whose turn it is preempt them, or when they end by their
// promised runtime; the pending workloads, in turn order, take the quota as it frees and then hold
// it themselves, under the same rules. It is pure: the caller gives the instant, the quota and
// the workloads, read from a scheduler snapshot (see FromSnapshot).
//
// New arrivals are not foreseen, nor completions that nothing announces (a workload with no
// promised runtime runs until the policy lets someone preempt it), nor changes of the other
// ClusterQueues of the cohort: what they use now is taken as used for ever.
package estimate

import (
	"cmp"
	"container/heap"
	"fmt"
	"math"
	"slices"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"

	kueue "sigs.k8s.io/kueue/apis/kueue/v1beta2"
	"sigs.k8s.io/kueue/pkg/resources"
	"sigs.k8s.io/kueue/pkg/workload"

	"github.com/kueue-timeshare/kueue-timeshare/apis/annotations"
	tsapi "github.com/kueue-timeshare/kueue-timeshare/apis/kueue/v1beta2"
	"github.com/kueue-timeshare/kueue-timeshare/pkg/plugins/notice"
	"github.com/kueue-timeshare/kueue-timeshare/pkg/plugins/timebased"
	"github.com/kueue-timeshare/kueue-timeshare/pkg/policy"
)

// Horizon is the furthest an estimate reaches: beyond it the answer is unknown. It is the
// longest duration an annotation may give, so that no tenant's value overflows a time.
const Horizon = annotations.MaxDuration

// Estimate is the answer for one pending workload.
type Estimate struct {
	// Workload is "namespace/name".
	Workload string
	// Position is its place in turn order, from 1.
	Position int
	// When is when it is expected to be admitted; zero when Unknown.
	When    time.Time
	Unknown bool
	// Reason says what it waits for, or why the answer is unknown.
	Reason string
	// Note, on a known estimate, says what the walk foresees only approximately.
	Note string
	// Sentence is the answer for a person: "expected around 14:05, 3rd in turn order; turns are 1h".
	Sentence string
}

// Group is one resource group of the ClusterQueue: the flavors are tried in order, the first in
// which every resource of the group fits is taken (upstream's flavor assigner without borrowing
// preferences).
type Group struct {
	Resources []corev1.ResourceName
	Flavors   []kueue.ResourceFlavorReference
}

// Queue is what the walk reads of the ClusterQueue and its policy.
type Queue struct {
	Name   kueue.ClusterQueueReference
	Groups []Group
	// Capacity is what the ClusterQueue may use of each flavor and resource: its own usage plus
	// what is available to it now, borrowing included.
	Capacity map[resources.FlavorResource]int64
	// Policy decides whether a holder may be preempted at an instant, as the preemptor does.
	Policy *policy.Policy
	// Within is spec.preemption.withinClusterQueue.
	Within kueue.PreemptionPolicy
	// StrictFIFO: spec.queueingStrategy is StrictFIFO.
	StrictFIFO bool
	// Resolved is what the units resolve about the ClusterQueue's workloads against a preemptor
	// of the queue itself (policy.Unit.Resolve: its preemptMinRuntime).
	Resolved policy.QueueFacts
	// Wake lists the instants at which a decision may change (policy.Changes).
	Wake policy.WakeSettings
	// Notice is the notice period a victim gets before an eviction for reason; nil: none.
	Notice func(reason string) time.Duration
	// Handover is how long an eviction and the next admission take.
	Handover time.Duration
	// Reclaim is spec.preemption.reclaimWithinCohort, for a walk of the cohort (ComputeCohort).
	Reclaim kueue.PreemptionPolicy
	// BorrowWithinCohort: spec.preemption.borrowWithinCohort lets it preempt while borrowing.
	BorrowWithinCohort bool
	// Against is what the units resolve about another ClusterQueue's workloads against a
	// preemptor of this one (its reclaimMinRuntime), by ClusterQueue, for a walk of the cohort.
	Against map[kueue.ClusterQueueReference]*policy.QueueFacts
	// Preemptor is its active preemptor when the walk begins; zero: none.
	Preemptor policy.ActivePreemptor
}

// turns are the queue's time-sharing settings, as the preemptor resolved them (Resolved).
func (q *Queue) turns() timebased.Settings { return timebased.InQueue(&q.Resolved) }

// Holder is a workload holding quota in the ClusterQueue.
type Holder struct {
	Name string
	// Usage is the quota it holds.
	Usage map[resources.FlavorResource]int64
	// Candidate carries its facts as the preemptor reads them (policy.NewCandidate and the
	// units' facts).
	Candidate policy.Candidate
	// Runtime is the run time it promised (zero: none), counted from when it started to run.
	Runtime time.Duration
	// ReadySince is when its Pods were first ready since its admission (zero: not known). Its
	// Job's own run, and so its end, counts from then, whatever clock the policy counts by.
	ReadySince time.Time
	// Drain is how long its quota stays held after an eviction for one of this project's
	// reasons: its Pods' grace period under HandoverAfterVictimTermination (zero: none).
	Drain time.Duration
}

// Waiting is a pending workload.
type Waiting struct {
	Name string
	// Requests are its total requests by resource.
	Requests map[corev1.ResourceName]int64
	Pending  *policy.Pending
	// Candidate carries the facts it will have once admitted (the units' facts; its times are
	// set by the walk).
	Candidate policy.Candidate
	// Runtime is the run time it promises (zero: none).
	Runtime time.Duration
	// Drain is Holder.Drain once it holds quota.
	Drain time.Duration
	// NotBefore is when its queue offers it to the scheduler again after a requeue backoff
	// (upstream's RequeueState.RequeueAt); zero: now.
	NotBefore time.Time
}

// Compute gives the estimates of pending, given in turn order, at now. The policy is asked about
// each holder once per priority among the pending workloads; each admission then scans the line
// (see docs/admission-estimate.md for the cost).
func Compute(q *Queue, holders []Holder, pending []Waiting, now time.Time) []Estimate {
	w := start(q, holders, pending, now, nil)
	w.run()
	return w.finish()
}

// start makes the walker of q's holders and pending workloads at now.
// In a walk of the cohort (co), the ClusterQueue's quota is co's tree's, which counts the holders
// already.
func start(q *Queue, holders []Holder, pending []Waiting, now time.Time, co *cohortWalk) *walker {
	if q.Policy == nil {
		// No policy given: upstream's rules alone.
		qc := *q
		qc.Policy = policy.New(policy.Options{})
		q = &qc
	}
	w := newWalker(q, now, len(holders)+len(pending))
	if co != nil {
		for s, fr := range w.frs {
			w.capacity[s] = co.tree.PotentialAvailable(q.Name, fr)
		}
	}
	pends := make([]*policy.Pending, len(pending))
	for i := range pending {
		if pends[i] = pending[i].Pending; pends[i] == nil {
			pends[i] = &policy.Pending{}
		}
		// A candidate queued after the preemptor may be preempted at once (upstream's newer
		// equal priority); the walk asks as the last of each priority, which none of the
		// workloads it admits came after, and, for a holder queued after some workload in line,
		// also as one queued before it (byPriority.older).
		p := pends[i]
		if last, ok := w.last[p.Priority]; !ok || p.QueuedAt.After(last) {
			w.last[p.Priority] = p.QueuedAt
		}
		if first, ok := w.first[p.Priority]; !ok || p.QueuedAt.Before(first) {
			w.first[p.Priority] = p.QueuedAt
		}
	}
	for i := range holders {
		h := &holders[i]
		first, ok := w.first[h.Candidate.Priority]
		w.hold(&hold{name: h.Name, cand: h.Candidate, use: w.usage(h.Usage), ends: endsOf(&h.Candidate, h.Runtime, h.ReadySince, now), runtime: h.Runtime, drain: h.Drain, requests: requestsOf(h.Usage), since: now, older: ok && h.Candidate.QueuedAt.After(first)})
	}
	if co != nil {
		co.join(w)
	}
	w.out = make([]Estimate, len(pending))
	for i := range pending {
		p := &pending[i]
		w.out[i] = Estimate{Workload: p.Name, Position: i + 1}
		w.enqueue(&waiting{out: i, name: p.Name, requests: p.Requests, pend: pends[i], cand: p.Candidate, runtime: p.Runtime, drain: p.Drain, notBefore: p.NotBefore})
		w.backoffs = w.backoffs || p.NotBefore.After(now)
	}
	w.left = len(pending)
	return w
}

// finish writes the estimates' sentences.
func (w *walker) finish() []Estimate {
	for i := range w.out {
		w.out[i].Sentence = sentence(&w.out[i], w.q.turns(), w.now)
	}
	return w.out
}

// hold is a workload holding quota during the walk.
type hold struct {
	name     string
	cand     policy.Candidate
	use      []amount
	requests map[corev1.ResourceName]int64
	// since is when the walk saw it take the quota (now for the holders given).
	since time.Time
	// ends is when it ends by its runtime as the rules see it, counted from the second the API
	// keeps; finish is when it does end, from the instant the walk admitted it.
	ends, finish time.Time
	runtime      time.Duration
	drain        time.Duration
	gone         bool
	// step is the cycle of its cohort's walk that admitted it (cohortWalk.steps).
	step int
	// older: a workload of its priority queued before it may wait while it holds.
	older bool
	// pools are the pools it is in; stuckIn the priorities for which nothing makes it leave.
	pools   []pooledIn
	stuckIn []*byPriority
}

type amount struct {
	slot  int
	value int64
}

// waiting is a workload in the line: a pending one (out is its estimate) or one the walk rotated
// out (out is -1).
type waiting struct {
	out      int
	name     string
	requests map[corev1.ResourceName]int64
	pend     *policy.Pending
	cand     policy.Candidate
	runtime  time.Duration
	drain    time.Duration
	done     bool
	// rotated: it left its last hold for a time-sharing turn.
	rotated bool
	// checked is when it last did not fit with the pool of its priority: the walk's freed and its
	// pool's grown counts then.
	checked [3]int
	// least is the smallest amount it asks of any slot; ever: it fits in the whole capacity.
	least int64
	ever  bool
	// notBefore is Waiting.NotBefore: until then its queue does not offer it.
	notBefore time.Time
	// ask is what it takes in each group it needs, per flavor (see askOf); possible false when it
	// asks for a resource the ClusterQueue does not have.
	ask      [][][]amount
	possible bool
	// guarded: its last reclaim found a borrower protected for now (see walker.guarding).
	guarded bool
	// parkedAt is the instant at which it was its queue's head for a cycle and did not fit
	// (walker.parkAhead), parkedGen the cohort's requeue of its parked workloads then
	// (walker.parkedNow).
	parkedAt  time.Time
	parkedGen int
	// skippedAt is the last instant at which a cycle skipped it: nominated to fit, it no longer
	// did when its turn in the cycle came (cohortWalk.step).
	skippedAt time.Time
}

// release is when a hold leaves for a preemptor of one priority: at is the instant its quota is
// free for the next holder (before the handover), requeue whether it goes back to the line.
type release struct {
	at      time.Time
	requeue bool
	// turn: it leaves for a time-sharing turn, so it waits again at the back of the line.
	turn bool
	// own: it is evicted for one of this project's reasons, so its quota drains (hold.drain).
	own bool
	// end: only its promised end frees it, no rule lets such a preemptor take it.
	end bool
	h   *hold
	// from is the walker of another ClusterQueue whose hold it is (a reclaim); nil: this one's.
	from *walker
}

// freeAt is when the quota r.h leaves is free: after its Pods drain if it is evicted for one
// of this project's reasons (the scheduler holds the quota until then).
func (r release) freeAt() time.Time {
	if r.own && r.requeue {
		return r.at.Add(r.h.drain)
	}
	return r.at
}

type releases []release

func (r releases) Len() int           { return len(r) }
func (r releases) Less(i, j int) bool { return r[i].at.Before(r[j].at) }
func (r releases) Swap(i, j int)      { r[i], r[j] = r[j], r[i] }
func (r *releases) Push(x any)        { *r = append(*r, x.(release)) }
func (r *releases) Pop() any {
	old := *r
	x := old[len(old)-1]
	*r = old[:len(old)-1]
	return x
}

// byPriority is what the walk keeps for preemptors of one priority.
type byPriority struct {
	rep  *policy.Pending
	heap releases
	// unbounded are the holds nothing makes leave for such a preemptor, in the order seen.
	unbounded []*hold
	// pool are the holds that may leave for such a preemptor by now, soonest first, and pooled
	// the quota they hold by slot.
	pool   []release
	pooled []int64
	// turned is the part of pooled that leaves for a time-sharing turn; stuck is the quota of
	// the unbounded holds and of those that leave only by their promised end.
	turned, stuck []int64
	// first is where the pool's holders still holding begin; grown counts the holders pooled.
	first, grown int
	// older is rep queued before everyone: upstream preempts a same-priority holder queued after
	// the preemptor at once. newerHeap are the releases for older of the holds marked older,
	// where they come before rep's, and newer those due by now, newest first: each preemptor may
	// take those queued after it.
	older     *policy.Pending
	newerHeap releases
	newer     []release
	// reclaimable is walker.reclaimable at the cohort's version reclaimableAt.
	reclaimable   []int64
	reclaimableAt int
}

// line is the pending workloads of one priority, in turn order; rotated-out ones join its end.
type line struct {
	priority int64
	items    []*waiting
	first    int
}

type walker struct {
	q     *Queue
	now   time.Time
	t     time.Time
	limit time.Time
	slots map[resources.FlavorResource]int
	free  []int64
	// ending are the holds that end by a promised runtime, soonest first; ended is the last
	// that did, at endedAt.
	ending  releases
	ended   string
	endedAt time.Time
	// candidates is take's buffer.
	candidates []release
	// freed counts the holders that left; gone those of holds that compact has not dropped.
	freed, gone int
	// scratch is preemptFor's buffer, newer newerFor's, preemptor asPreemptor's.
	scratch   []int64
	newer     []release
	preemptor policy.Pending
	// instants is releaseOf's buffer.
	instants []time.Time
	// capacity is Queue.Capacity by slot; in a walk of the cohort, what the ClusterQueue could
	// use were nothing else used.
	capacity []int64
	// frs are the slots' flavors and resources; used is what the holds use of each slot, nominal
	// the ClusterQueue's nominal quota of it in a walk of the cohort.
	frs           []resources.FlavorResource
	used, nominal []int64
	// co is the walk of the cohort this walker is part of; nil when it walks its ClusterQueue
	// alone, on Queue.Capacity. failed is its last reclaim that found too little.
	co     *cohortWalk
	failed failedReclaim
	// triedGen is the cohort's requeue of parked workloads (cohortWalk.gen, which a new instant
	// starts too) in which its head last kept quota back for itself under BestEffortFIFO (see
	// cohortWalk.step); nevers are its pending workloads that never fit (see neverFirst).
	triedGen int
	nevers   []*waiting
	// guarding is the workload whose reclaim waits for a protected borrower: the preemptor's
	// Wait verdict (HoldQuota) keeps it the head of its queue and keeps the quota it waits for
	// back from the cohort in every cycle, until the protection ends or the cohort changes.
	guarding *waiting
	// protected is protectedBorrower's last answer; headTried: a workload of this step failed a
	// reclaim already (only the first, the cycle's head, may hold the queue).
	protected protectedAnswer
	headTried bool
	// cycleSpent: its step gave its cycle to a head that did not fit, parked (parkAhead),
	// admitting nothing.
	cycleSpent bool
	parked     *waiting
	// admitting: its last admission preempted, and is the scheduler's in the next cycle
	// (preempted); admittingUse is what that admission takes.
	admitting    bool
	admittingUse []amount
	// neverDue: a workload that never fits is due its cycle (neverFirst) after the one that
	// admits the preemptor.
	neverDue bool
	// startRoom is what it may take as a cycle of its cohort started, when the scheduler
	// nominated the cycle's heads (cohortWalk.nominatedRoom); empty outside a cycle.
	startRoom []int64
	// declined: its head's preemption no longer fit in this cycle of a cohort (take).
	declined bool
	// active is the queue's active preemptor (Queue.Preemptor) until the walk admits it or
	// another workload that preempts; preempting is the pending workload that is it, if any.
	active     policy.ActivePreemptor
	preempting *waiting
	// preemptWhileBorrowing: in a walk of the cohort, the flavor assigner lets its workloads
	// preempt in a flavor where they ask more than the nominal quota (preemptsIn).
	preemptWhileBorrowing bool
	// input is againstBorrowers' question to the policy, borrowsBuf its buffer.
	input      policy.Input
	borrowsBuf []bool
	lines      []*line
	prios      map[int64]*byPriority
	// last and first are the latest and earliest queue times of the pending workloads of each
	// priority, newest the latest of its holders.
	last, first, newest map[int64]time.Time
	holds               []*hold
	out                 []Estimate
	left                int
	// admissions counts the walk's admissions, to stop a rotation that never reaches a pending
	// workload.
	admissions, maxAdmissions int
	// backoffs: some pending workload waits out a requeue backoff (Waiting.NotBefore).
	backoffs bool
}

func newWalker(q *Queue, now time.Time, n int) *walker {
	w := &walker{q: q, now: now, t: now, limit: now.Add(Horizon), slots: map[resources.FlavorResource]int{}, prios: map[int64]*byPriority{}, last: map[int64]time.Time{}, first: map[int64]time.Time{}, newest: map[int64]time.Time{}}
	for _, g := range q.Groups {
		for _, f := range g.Flavors {
			for _, r := range g.Resources {
				fr := resources.FlavorResource{Flavor: f, Resource: r}
				if _, ok := w.slots[fr]; !ok {
					w.slots[fr] = len(w.free)
					w.free = append(w.free, max(q.Capacity[fr], 0))
					w.capacity = append(w.capacity, max(q.Capacity[fr], 0))
					w.frs = append(w.frs, fr)
					w.used = append(w.used, 0)
				}
			}
		}
	}
	w.maxAdmissions = 4*n + 16
	w.active = q.Preemptor
	return w
}

// isPreemptor reports whether wt is the queue's active preemptor; strict: at the generation it
// preempted with, as the cycle's order and reservations ask (upstream's ClusterQueue.IsPreemptor);
// not strict: as the queue's order asks.
func (w *walker) isPreemptor(wt *waiting, strict bool) bool {
	if wt.out < 0 {
		return false
	}
	if strict {
		return w.active.Is(wt.pend.Obj)
	}
	return w.active.Holds(wt.pend.Obj)
}

// stickyHead is the active preemptor, pending, where the queue keeps it at its head
// (BestEffortFIFO) and it has not had its cycle at this instant; nil otherwise.
func (w *walker) stickyHead() *waiting {
	p := w.preempting
	if p == nil || w.q.StrictFIFO || p.done || p.backsOff(w.t) || w.parkedNow(p) || !w.isPreemptor(p, false) {
		return nil
	}
	return p
}

func (w *walker) usage(u map[resources.FlavorResource]int64) []amount {
	out := make([]amount, 0, len(u))
	for fr, v := range u {
		if s, ok := w.slots[fr]; ok && v > 0 {
			out = append(out, amount{s, v})
		}
	}
	return out
}

// requestsOf is a holder's usage as requests, for when it waits again.
func requestsOf(u map[resources.FlavorResource]int64) map[corev1.ResourceName]int64 {
	out := make(map[corev1.ResourceName]int64, len(u))
	for fr, v := range u {
		out[fr.Resource] += v
	}
	return out
}

// hold adds h to the holders, taking its quota, and sorts it in for each priority seen.
func (w *walker) hold(h *hold) {
	for _, a := range h.use {
		w.free[a.slot] -= a.value
		w.used[a.slot] += a.value
	}
	if w.co != nil {
		h.step = w.co.steps
		w.co.held(w, h)
	}
	if p := h.cand.Priority; h.cand.QueuedAt.After(w.newest[p]) {
		w.newest[p] = h.cand.QueuedAt
	}
	w.holds = append(w.holds, h)
	if h.finish.IsZero() {
		h.finish = h.ends
	}
	if !h.finish.IsZero() {
		heap.Push(&w.ending, release{at: h.finish, h: h})
	}
	for _, bp := range w.prios {
		w.sortIn(bp, h)
	}
}

func (w *walker) sortIn(bp *byPriority, h *hold) {
	r, ok := w.releaseOf(h, bp.rep)
	if h.older {
		w.sortInNewer(bp, h, r, ok)
	}
	if ok {
		heap.Push(&bp.heap, r)
	} else {
		bp.unbounded = append(bp.unbounded, h)
	}
	// The preemptor's passing over asks the rules, which know no promised end: until it ends,
	// such a holder is in the way of a turn as one that never leaves.
	if !ok || r.end {
		h.stuckIn = append(h.stuckIn, bp)
		for _, a := range h.use {
			bp.stuck[a.slot] += a.value
		}
	}
}

// sortInNewer adds h's release for a preemptor queued before it, where it comes before r, rep's.
func (w *walker) sortInNewer(bp *byPriority, h *hold, r release, ok bool) {
	if p := bp.rep; h.cand.Priority != p.Priority || h.cand.QueuedAt.After(p.QueuedAt) {
		return
	}
	if n, nok := w.releaseOf(h, bp.older); nok && (!ok || n.at.Before(r.at)) {
		heap.Push(&bp.newerHeap, n)
	}
}

// waitsAgain lets wt, back in line at its queue time, preempt the holders of its priority
// queued after it that no workload in line was queued before.
func (w *walker) waitsAgain(wt *waiting) {
	bp := w.prios[wt.pend.Priority]
	for _, h := range w.holds {
		if h.gone || h.older || h.cand.Priority != wt.pend.Priority || !h.cand.QueuedAt.After(wt.pend.QueuedAt) {
			continue
		}
		h.older = true
		if bp != nil {
			r, ok := w.releaseOf(h, bp.rep)
			w.sortInNewer(bp, h, r, ok)
		}
	}
}

// canUseTurn reports whether wt could fit were every holder that the rules ever let it preempt
// gone; under BestEffortFIFO one that could not is passed over for turns (it keeps its place).
func (w *walker) canUseTurn(bp *byPriority, wt *waiting) bool {
	if w.q.StrictFIFO {
		return true
	}
	// Whose turn it is the preemptor decides when the cycle starts, before its heads keep room.
	start := w.free
	if w.co != nil {
		start = w.co.nominatedRoom(w)
	}
	free := w.scratch[:0]
	for s, v := range start {
		free = append(free, v+w.used[s]-bp.stuck[s])
	}
	w.scratch = free
	if fits := w.fits(free, wt); fits || w.co == nil || !w.reclaims() {
		return fits
	}
	// What it lent it may reclaim from those its rules will ever let it.
	reclaimable := w.reclaimable(bp)
	for s, v := range start {
		room := v + w.used[s]
		free[s] = max(room, min(w.nominal[s], room+reclaimable[s])) - bp.stuck[s]
	}
	return w.fits(free, wt)
}

// forPriority is what the walk keeps for preemptors like p, made on first use.
func (w *walker) forPriority(p *policy.Pending) *byPriority {
	if bp, ok := w.prios[p.Priority]; ok {
		return bp
	}
	rep := *p
	if last, ok := w.last[p.Priority]; ok {
		rep.QueuedAt = last
	}
	timebased.SetWaitingLonger(&rep, "")
	older := rep
	older.QueuedAt = time.Time{}
	bp := &byPriority{rep: &rep, older: &older, pooled: make([]int64, len(w.free)), turned: make([]int64, len(w.free)), stuck: make([]int64, len(w.free))}
	for _, h := range w.holds {
		if !h.gone {
			w.sortIn(bp, h)
		}
	}
	w.prios[p.Priority] = bp
	return bp
}

// releaseOf asks the policy for the first instant at which p may preempt h: the instants at which
// a decision about h changes are the only ones at which the answer can turn. A promised end
// that comes first wins; the notice period of the preemption's reason delays the eviction.
func (w *walker) releaseOf(h *hold, p *policy.Pending) (release, bool) {
	from := h.since
	if h.cand.Evicted {
		return release{at: from, requeue: true, h: h}, true
	}
	// Under notice, its room is promised to the notice's preemptor: it leaves at the deadline.
	if n := notice.Of(&h.cand); n != nil {
		return release{at: maxTime(from, n.Deadline), requeue: true, turn: n.Reason == tsapi.TimeBasedReason, own: policy.IsOwnReason(n.Reason), h: h}, true
	}
	instants := append(w.instants[:0], from)
	for _, ch := range policy.Changes(&h.cand, w.q.Wake) {
		if at := ch.Wake(); at.After(from) {
			instants = append(instants, at)
		}
	}
	slices.SortFunc(instants, time.Time.Compare)
	w.instants = instants
	in := policy.Input{Preemptor: p, Candidate: &h.cand, Scope: policy.SameClusterQueue, Policy: w.q.Within, Queue: &w.q.Resolved}
	for _, at := range instants {
		if !h.ends.IsZero() && at.After(h.ends) {
			break
		}
		in.Now = at
		if d := w.q.Policy.Decide(&in); d.Eligible {
			if w.q.Notice != nil {
				reason := cmp.Or(d.Reason, kueue.InClusterQueueReason)
				at = at.Add(min(max(w.q.Notice(reason), 0), Horizon))
			}
			// Preempted before its promised end, it waits again; at that end it is done (an
			// expected runtime is nominated just as it ends), and goes when it does.
			requeue := h.ends.IsZero() || in.Now.Before(h.ends)
			if !requeue {
				at = maxTime(at, h.finish)
			}
			return release{at: at, requeue: requeue, turn: d.Reason == tsapi.TimeBasedReason, own: policy.IsOwnReason(d.Reason), h: h}, true
		}
	}
	if !h.finish.IsZero() {
		return release{at: h.finish, end: true, h: h}, true
	}
	return release{}, false
}

// enqueue puts wt at the end of its priority's line.
func (w *walker) enqueue(wt *waiting) {
	if w.isPreemptor(wt, false) {
		w.preempting = wt
	}
	wt.ask, wt.possible = w.askOf(wt.requests)
	wt.least = math.MaxInt64
	for _, options := range wt.ask {
		for _, in := range options {
			for _, a := range in {
				wt.least = min(wt.least, a.value)
			}
		}
	}
	wt.checked = [3]int{-1, -1, -1}
	wt.ever = w.fits(w.capacity, wt)
	i, found := slices.BinarySearchFunc(w.lines, wt.pend.Priority, func(l *line, p int64) int { return cmp.Compare(p, l.priority) })
	if !found {
		w.lines = slices.Insert(w.lines, i, &line{priority: wt.pend.Priority})
	}
	l := w.lines[i]
	j := len(l.items)
	if wt.out < 0 {
		// One that waits again goes by its turn time (its queue time unless rotated out for a
		// turn), behind those of the same second that were not rotated out, then by UID.
		for j > l.first && turnPlaceOf(l.items[j-1]).Compare(turnPlaceOf(wt)) > 0 {
			j--
		}
	}
	l.items = slices.Insert(l.items, j, wt)
}

// turnPlaceOf is where wt stands in the turn order: the preemptor's own comparison
// (timebased.TurnPlace) of its turn time (the preemptor's, through Config.TurnTime).
func turnPlaceOf(wt *waiting) timebased.TurnPlace {
	return timebased.TurnPlace{At: wt.pend.QueuedAt, Left: wt.rotated, UID: types.UID(uidOf(wt.pend))}
}

func uidOf(p *policy.Pending) string {
	if p.Obj == nil {
		return ""
	}
	return string(p.Obj.UID)
}

// head is the first workload in line, or nil.
func (w *walker) head() *waiting {
	if p := w.stickyHead(); p != nil {
		return p
	}
	for _, l := range w.lines {
		for l.first < len(l.items) && l.items[l.first].done {
			l.first++
		}
		if l.first < len(l.items) {
			return l.items[l.first]
		}
	}
	return nil
}

// askOf is what requests take in each resource group that they need: per flavor, in the
// group's order, the amounts; ok false when they ask for a resource no group covers.
func (w *walker) askOf(requests map[corev1.ResourceName]int64) ([][][]amount, bool) {
	for r, v := range requests {
		if v > 0 && !w.covers(r) {
			return nil, false
		}
	}
	var ask [][][]amount
	for _, g := range w.q.Groups {
		var options [][]amount
		for _, f := range g.Flavors {
			var in []amount
			for _, r := range g.Resources {
				if v := requests[r]; v > 0 {
					in = append(in, amount{w.slots[resources.FlavorResource{Flavor: f, Resource: r}], v})
				}
			}
			if in == nil {
				break
			}
			options = append(options, in)
		}
		if options != nil {
			ask = append(ask, options)
		}
	}
	return ask, true
}

// fit is the quota wt takes in free, in the first flavor of each group where it fits; ok false
// when it does not fit.
func (w *walker) fit(free []int64, wt *waiting) ([]amount, bool) {
	return w.fitWhere(free, wt, false)
}

// fitWhere is fit; preempting: only in flavors where the flavor assigner lets wt preempt
// (w.preemptsIn).
func (w *walker) fitWhere(free []int64, wt *waiting, preempting bool) ([]amount, bool) {
	if !wt.possible {
		return nil, false
	}
	var chosen [8]int
	picks := chosen[:0]
	for _, options := range wt.ask {
		pick := -1
		for i, in := range options {
			if fitsIn(free, in) && (!preempting || w.preemptsIn(in)) {
				pick = i
				break
			}
		}
		if pick < 0 {
			return nil, false
		}
		picks = append(picks, pick)
	}
	var use []amount
	for i, options := range wt.ask {
		use = append(use, options[picks[i]]...)
	}
	return use, true
}

func fitsIn(free []int64, in []amount) bool {
	for _, a := range in {
		if free[a.slot] < a.value {
			return false
		}
	}
	return true
}

func (w *walker) covers(r corev1.ResourceName) bool {
	for _, g := range w.q.Groups {
		if slices.Contains(g.Resources, r) {
			return true
		}
	}
	return false
}

// admit gives wt the quota use at the walk's instant.
func (w *walker) admit(wt *waiting, use []amount, reason string) {
	w.admitAt(wt, use, reason, w.t, false)
}

// admitAt gives wt the quota use at t; preempts: it preempted for it.
func (w *walker) admitAt(wt *waiting, use []amount, reason string, t time.Time, preempts bool) {
	if wt == w.preempting {
		// Admitted, it leaves the queue, which forgets it as its preemptor.
		w.active, w.preempting = policy.ActivePreemptor{}, nil
	}
	wt.done = true
	w.admissions++
	if wt.out >= 0 {
		w.out[wt.out].When, w.out[wt.out].Reason = t, reason
		w.left--
	}
	c := wt.cand
	if c.Info != nil && c.Info.ClusterQueue != w.q.Name {
		// A pending workload's info may not name its ClusterQueue yet; the ordering keys read it.
		info := *c.Info
		info.ClusterQueue = w.q.Name
		c.Info = &info
	}
	// The API keeps condition times to the second, and windows count from them.
	at := t.Truncate(time.Second)
	c.Priority = wt.pend.Priority
	c.QuotaReservedAt, c.AdmittedAt, c.Admitted, c.Evicted, c.RunningSince, c.NotStarted = at, at, true, false, time.Time{}, false
	h := &hold{name: wt.name, cand: c, use: use, requests: wt.requests, since: t, runtime: wt.runtime, drain: wt.drain, older: w.queuedBefore(c.Priority, c.QueuedAt)}
	if wt.runtime > 0 {
		h.ends, h.finish = at.Add(min(wt.runtime, Horizon)), t.Add(min(wt.runtime, Horizon))
	}
	w.hold(h)
	if w.co != nil {
		w.co.note(w, wt, use, preempts)
	}
}

// queuedBefore reports whether a workload of priority prio queued before at waits in line.
func (w *walker) queuedBefore(prio int64, at time.Time) bool {
	i, found := slices.BinarySearchFunc(w.lines, prio, func(l *line, p int64) int { return cmp.Compare(p, l.priority) })
	if !found {
		return false
	}
	l := w.lines[i]
	return slices.ContainsFunc(l.items[l.first:], func(wt *waiting) bool { return !wt.done && wt.pend.QueuedAt.Before(at) })
}

// unknown ends wt's walk without an answer.
func (w *walker) unknown(wt *waiting, reason string) {
	wt.done = true
	if wt.out >= 0 {
		w.out[wt.out].Unknown, w.out[wt.out].Reason = true, reason
		w.left--
	}
}

// giveUp makes every pending workload still in line unknown.
func (w *walker) giveUp(reason string) {
	for wt := w.head(); wt != nil; wt = w.head() {
		w.unknown(wt, reason)
	}
}

// run walks from one instant to the next at which a holder may leave. At each, in turn order,
// a workload that fits in the free quota is admitted, and one that fits once the holders that
// may leave for it by then have left is admitted after them (and the handover); under StrictFIFO
// the first that fits neither way stops the others, as the queue's head does.
func (w *walker) run() {
	for w.left > 0 {
		w.endHolds()
		if w.admissions > w.maxAdmissions {
			w.giveUp("behind workloads that take turns without end")
			return
		}
		if w.step() {
			continue
		}
		next, ok := w.nextRelease()
		if !ok {
			w.noRelease()
			return
		}
		if !next.After(w.t) {
			w.giveUp(noProgress)
			return
		}
		if next.After(w.limit) {
			w.giveUp(fmt.Sprintf("not within %s", Horizon))
			return
		}
		w.t = next
	}
}

// noProgress is the reason given when the walk finds no later instant yet admits nothing now; it
// stops rather than loop.
const noProgress = "the estimate's walk stopped: nothing it foresees changes after now"

// step admits the first workload in line, in turn order, that fits in the free quota or once
// the holders that may leave for it by now have left; false when none does.
func (w *walker) step() bool {
	w.headTried = false
	// failed is the first workload this step tried that did not fit.
	var failed *waiting
	for _, l := range w.lines {
		for l.first < len(l.items) && l.items[l.first].done {
			l.first++
		}
		// Only the first of a priority may preempt for a time-sharing turn; one that waits for
		// windows to end keeps that turn.
		turn := 1
		held := w.turnNow(l)
		// Unless the one whose turn it is takes it now, the queue admits what fits in its own
		// order (by queue time, not turn time: a workload rotated out keeps its place there).
		// In a walk of a cohort the heads of a queue that takes no turns go in the line's own
		// order, one a cycle (parkAhead): one ahead may preempt for what it needs.
		if held == nil && !w.q.StrictFIFO && (!w.oneHeadACycle() || w.q.turns().TakesTurns()) {
			if wt := w.oldestFitting(l); wt != nil && !w.guardedAhead(l, wt) {
				if w.parkAhead(wt) {
					return true
				}
				use, _ := w.fit(w.free, wt)
				w.admit(wt, use, w.fitsNowFor(wt))
				return true
			}
		}
		if w.co != nil {
			w.co.work += len(l.items) - l.first
		}
		for i := l.first; i < len(l.items); i++ {
			wt := l.items[i]
			if wt.done || (wt.rotated && held != nil && held != wt) || wt.backsOff(w.t) {
				continue
			}
			if w.parkedNow(wt) {
				// Not offered in this cycle, it still holds the turn: the preemptor's line
				// lists every pending workload.
				if turn == 1 && wt.ever && w.canUseTurn(w.forPriority(wt.pend), wt) {
					turn = 0
				}
				continue
			}
			if !wt.ever {
				w.blocked(wt, fmt.Sprintf("does not fit in ClusterQueue %s even with every workload gone", w.q.Name))
				w.nevers = append(w.nevers, wt)
				if w.oneHeadACycle() && w.q.turns().TakesTurns() && w.poppedBefore(wt) {
					// First in turn order, it is not its queue's head: the cycle goes on.
					continue
				}
				return true
			}
			bp := w.forPriority(wt.pend)
			w.pool(bp)
			// One that cannot use a turn is passed over: the next one may take it.
			own := 0
			if turn == 1 && w.canUseTurn(bp, wt) {
				own, turn = 1, 0
			}
			// Nothing changed for it since it last did not fit.
			if wt.checked == [3]int{w.freed, bp.grown, own} {
				if w.q.StrictFIFO || wt.guarded {
					return false
				}
				continue
			}
			if use, ok := w.fit(w.free, wt); ok {
				if w.parkAhead(wt) {
					return true
				}
				w.admit(wt, use, w.fitsNowFor(wt))
				return true
			}
			// A queue offers one head a cycle: one before it that did not fit had this one, and
			// it comes in the next, without what the heads of this one keep back.
			if failed != nil && w.oneHeadACycle() && len(w.co.reserved) > 0 {
				w.park(failed)
				w.parkEquivalents(failed)
				w.cycleSpent, w.parked = true, failed
				return true
			}
			room, free, newer := w.preemptionRoom(bp, wt, own == 1)
			most := int64(0)
			for _, v := range free {
				most = max(most, v)
			}
			if _, ok := w.fitWhere(free, wt, true); ok && wt.least <= most {
				if w.take(bp, wt, room, free, own == 1, newer) {
					return true
				}
				w.declined = true
				return false
			}
			if w.co != nil && w.reclaim(bp, wt, own == 1, newer) {
				return true
			}
			wt.checked = [3]int{w.freed, bp.grown, own}
			if w.q.StrictFIFO || wt.guarded {
				return false
			}
			if failed == nil {
				failed = wt
				if w.co != nil && w.co.cycle && len(w.co.reserved) == 0 {
					// Those after it are tried in this cycle for the next, which the scheduler
					// starts with the quota as it is now.
					w.startRoom = append(w.startRoom[:0], w.free...)
				}
			}
		}
	}
	return false
}

// preemptionRoom is, for wt, the room the scheduler nominates it (cohortWalk.nominatedRoom) and
// all, the quota there once the holders that may leave for it by now have left (those that leave
// only for a turn if turn), with newer, the holders queued after it that it may take as well.
func (w *walker) preemptionRoom(bp *byPriority, wt *waiting, turn bool) (room, all []int64, newer []release) {
	room = w.free
	if w.co != nil {
		room = w.co.nominatedRoom(w)
	}
	all = w.scratch[:0]
	for s, v := range room {
		v += bp.pooled[s]
		if !turn {
			v -= bp.turned[s]
		}
		all = append(all, v)
	}
	w.scratch = all
	newer = w.newerFor(bp, wt, all, turn, w.newer[:0])
	w.newer = newer
	return room, all, newer
}

// pool moves into bp's pool the holders that may leave for its preemptors by now.
func (w *walker) pool(bp *byPriority) {
	for bp.heap.Len() > 0 && !bp.heap[0].at.After(w.t) {
		r := heap.Pop(&bp.heap).(release)
		if r.h.gone {
			continue
		}
		bp.pool = append(bp.pool, r)
		bp.grown++
		r.h.pools = append(r.h.pools, pooledIn{bp, r.turn})
		for _, a := range r.h.use {
			bp.pooled[a.slot] += a.value
			if r.turn {
				bp.turned[a.slot] += a.value
			}
		}
	}
	for bp.newerHeap.Len() > 0 && !bp.newerHeap[0].at.After(w.t) {
		r := heap.Pop(&bp.newerHeap).(release)
		if r.h.gone {
			continue
		}
		bp.newer = slices.DeleteFunc(bp.newer, func(r release) bool { return r.h.gone })
		i, _ := slices.BinarySearchFunc(bp.newer, r.h.cand.QueuedAt, func(e release, at time.Time) int { return at.Compare(e.h.cand.QueuedAt) })
		bp.newer = slices.Insert(bp.newer, i, r)
		bp.grown++
	}
}

// asPreemptor is wt as the policy sees it when it may take a holder queued after it.
func (w *walker) asPreemptor(wt *waiting) *policy.Pending {
	w.preemptor = *wt.pend
	timebased.SetWaitingLonger(&w.preemptor, "")
	return &w.preemptor
}

// newerFor adds to free the quota of the holders of bp.newer that wt may preempt (queued after
// it, and not in bp's pool already; for a turn only if turn) and appends their releases to out.
func (w *walker) newerFor(bp *byPriority, wt *waiting, free []int64, turn bool, out []release) []release {
	for len(bp.newer) > 0 && bp.newer[0].h.gone {
		bp.newer = bp.newer[1:]
	}
	if len(bp.newer) == 0 || !bp.newer[0].h.cand.QueuedAt.After(wt.pend.QueuedAt) {
		return out
	}
	p := w.asPreemptor(wt)
	in := policy.Input{Preemptor: p, Scope: policy.SameClusterQueue, Policy: w.q.Within, Queue: &w.q.Resolved, Now: w.t}
	for _, r := range bp.newer {
		if !r.h.cand.QueuedAt.After(p.QueuedAt) {
			break
		}
		// In bp's pool, it counts there unless it leaves that pool for a turn wt may not take.
		if r.h.gone || (r.turn && !turn) || slices.ContainsFunc(r.h.pools, func(pi pooledIn) bool { return pi.bp == bp && (turn || !pi.turn) }) {
			continue
		}
		in.Candidate = &r.h.cand
		if !w.q.Policy.Decide(&in).Eligible {
			continue
		}
		out = append(out, r)
		for _, a := range r.h.use {
			free[a.slot] += a.value
		}
	}
	return out
}

// take admits wt after the pooled holders it needs have left (victims). It chooses them on
// room, the quota as the scheduler nominated wt (cohortWalk.nominatedRoom), and reports false,
// taking nothing, when they no longer make room beside what the cycle's heads before it took or
// kept back.
func (w *walker) take(bp *byPriority, wt *waiting, room, all []int64, turn bool, newer []release) bool {
	taken, target := w.victims(bp, wt, room, all, turn, newer)
	if w.co != nil && w.co.cycle && !w.makeRoom(taken, target) {
		return false
	}
	// One queued after wt leaves for the reason wt gets: upstream's newer equal priority comes
	// before a turn, so it waits again at its queue time.
	for i, r := range taken {
		if r.h.cand.Priority != wt.pend.Priority || !r.h.cand.QueuedAt.After(wt.pend.QueuedAt) {
			continue
		}
		in := policy.Input{Preemptor: w.asPreemptor(wt), Candidate: &r.h.cand, Scope: policy.SameClusterQueue, Policy: w.q.Within, Queue: &w.q.Resolved, Now: w.t}
		if d := w.q.Policy.Decide(&in); d.Eligible {
			taken[i].turn, taken[i].own = d.Reason == tsapi.TimeBasedReason, policy.IsOwnReason(d.Reason)
		}
	}
	// The last to free its quota names the wait, even one that freed it before now.
	var latest time.Time
	last, evicted := "", w.t
	for _, r := range taken {
		if free := r.freeAt(); last == "" || !free.Before(latest) {
			latest, last = free, r.h.name
		}
		evicted = maxTime(evicted, r.at)
	}
	at := maxTime(w.t, latest)
	reason := "fits now"
	if len(taken) > 0 {
		at = at.Add(w.q.Handover)
		reason = "when " + last + " leaves"
	}
	w.evict(taken, evicted)
	use, _ := w.fit(w.free, wt)
	// Within its own ClusterQueue fair sharing preempts as without it.
	w.admitAt(wt, use, reason, at, false)
	w.preempted(len(taken) > 0)
	return true
}

// victims is what wt's preemption takes: the pooled holders (and newer, those queued after it)
// in the flavors it would take, in the order the preemptor removes them, then, as upstream's
// preemptor minimises, without any whose quota it turns out not to need; target is what wt
// takes where all is free.
func (w *walker) victims(bp *byPriority, wt *waiting, room, all []int64, turn bool, newer []release) (taken []release, target []amount) {
	target, _ = w.fitWhere(all, wt, true)
	free := slices.Clone(room)
	for bp.first < len(bp.pool) && bp.pool[bp.first].h.gone {
		bp.first++
	}
	candidates := w.candidates[:0]
	for _, r := range bp.pool[bp.first:] {
		if !r.h.gone && (turn || !r.turn) && overlaps(r.h.use, target) {
			candidates = append(candidates, r)
		}
	}
	for _, r := range newer {
		if overlaps(r.h.use, target) {
			candidates = append(candidates, r)
		}
	}
	// In the order the preemptor removes them (the policy's key table).
	order := &policy.OrderContext{ClusterQueue: w.q.Name, Queue: &w.q.Resolved, Now: w.t}
	slices.SortStableFunc(candidates, func(a, b release) int { return w.q.Policy.Compare(order, &a.h.cand, &b.h.cand) })
	w.candidates = candidates
	for _, r := range candidates {
		if fitsIn(free, target) {
			break
		}
		taken = append(taken, r)
		for _, a := range r.h.use {
			free[a.slot] += a.value
		}
	}
	for i := len(taken) - 1; i >= 0; i-- {
		for _, a := range taken[i].h.use {
			free[a.slot] -= a.value
		}
		if fitsIn(free, target) {
			taken = slices.Delete(taken, i, i+1)
			continue
		}
		for _, a := range taken[i].h.use {
			free[a.slot] += a.value
		}
	}
	return taken, target
}

// makeRoom reports whether target fits in the free quota once taken have left.
func (w *walker) makeRoom(taken []release, target []amount) bool {
	free := slices.Clone(w.free)
	for _, r := range taken {
		for _, a := range r.h.use {
			free[a.slot] += a.value
		}
	}
	return fitsIn(free, target)
}

// evict takes the holds of taken off the quota, each from its own ClusterQueue, and puts those
// that wait again back in line there; evicted is when the last of them is evicted.
func (w *walker) evict(taken []release, evicted time.Time) {
	for _, r := range taken {
		r.owner(w).leave(r.h)
	}
	for _, r := range taken {
		switch {
		case !r.requeue:
		case r.from != nil && w.co != nil && w.co.cycle:
			w.co.requeues = append(w.co.requeues, deferredRequeue{r, evicted})
		default:
			r.owner(w).requeue(r, evicted)
		}
	}
}

// owner is the walker whose hold r.h is, w unless another ClusterQueue's.
func (r release) owner(w *walker) *walker {
	if r.from != nil {
		return r.from
	}
	return w
}

// requeue puts r.h, evicted at evicted, back in line.
func (w *walker) requeue(r release, evicted time.Time) {
	// In a ClusterQueue that takes turns, one that leaves the quota for any reason waits
	// from then (preemption.turnTime).
	back := r.turn || w.q.turns().TakesTurns()
	cand := r.h.cand
	if r.own {
		// Our eviction ends the turn a charge shortened (policy.TurnChargeSpent).
		cand.TurnCharge = 0
	}
	wt := &waiting{out: -1, name: r.h.name, requests: r.h.requests, pend: w.pendingOf(r.h, evicted, back), cand: cand, runtime: r.h.runtime, drain: r.h.drain, rotated: back}
	if p := wt.pend.Priority; wt.pend.QueuedAt.After(w.last[p]) {
		// Back in line after every other workload of its priority, it is the last the walk
		// asks as (forPriority): a holder queued between is no longer newer.
		if w.newest[p].After(w.last[p]) {
			delete(w.prios, p)
		}
		w.last[p] = wt.pend.QueuedAt
	}
	w.enqueue(wt)
	if !back {
		w.waitsAgain(wt)
	}
}

// leave gives back h's quota and takes it out of every pool.
func (w *walker) leave(h *hold) {
	h.gone = true
	for _, a := range h.use {
		w.free[a.slot] += a.value
		w.used[a.slot] -= a.value
	}
	w.freed++
	w.gone++
	if w.co != nil {
		w.co.left(w, h)
	}
	for _, bp := range h.stuckIn {
		for _, a := range h.use {
			bp.stuck[a.slot] -= a.value
		}
	}
	for _, in := range h.pools {
		for _, a := range h.use {
			in.bp.pooled[a.slot] -= a.value
			if in.turn {
				in.bp.turned[a.slot] -= a.value
			}
		}
	}
}

// nextRelease is the first instant after now at which a holder may leave for a workload in line
// (under StrictFIFO, for the first in line).
func (w *walker) nextRelease() (time.Time, bool) {
	var next time.Time
	found := false
	if w.backoffs {
		// The end of a backoff offers a workload again.
		for _, l := range w.lines {
			for _, wt := range l.items[l.first:] {
				if !wt.done && wt.backsOff(w.t) && (!found || wt.notBefore.Before(next)) {
					next, found = wt.notBefore, true
				}
			}
		}
	}
	for w.ending.Len() > 0 && w.ending[0].h.gone {
		heap.Pop(&w.ending)
	}
	if w.ending.Len() > 0 {
		next, found = w.ending[0].at, true
	}
	for _, l := range w.lines {
		for i := l.first; i < len(l.items); i++ {
			wt := l.items[i]
			if wt.done {
				continue
			}
			bp := w.forPriority(wt.pend)
			// Releases due by now go to the pool (a head held its queue before this priority's
			// turn came): the next is after now.
			w.pool(bp)
			for bp.heap.Len() > 0 && bp.heap[0].h.gone {
				heap.Pop(&bp.heap)
			}
			if bp.heap.Len() > 0 && (!found || bp.heap[0].at.Before(next)) {
				next, found = bp.heap[0].at, true
			}
			for bp.newerHeap.Len() > 0 && bp.newerHeap[0].h.gone {
				heap.Pop(&bp.newerHeap)
			}
			if bp.newerHeap.Len() > 0 && (!found || bp.newerHeap[0].at.Before(next)) {
				next, found = bp.newerHeap[0].at, true
			}
			if w.q.StrictFIFO {
				return next, found
			}
			break // the others of this priority wait on the same holders
		}
	}
	return next, found
}

// noRelease ends the walk when nothing will leave: each workload still in line waits on a holder
// that never leaves.
func (w *walker) noRelease() {
	for wt := w.head(); wt != nil; wt = w.head() {
		w.blocked(wt, w.heldBy(w.forPriority(wt.pend)))
	}
}

// endsOf is when c ends by the runtime it promised, counted from its Pods' first readiness when
// known (ready), else from its runtime clock's start; zero when it promised none. One whose Pods
// are not ready yet by a PodsReady clock is counted as starting now.
func endsOf(c *policy.Candidate, runtime time.Duration, ready, now time.Time) time.Time {
	if runtime <= 0 {
		return time.Time{}
	}
	if !ready.IsZero() {
		return ready.Add(min(runtime, Horizon))
	}
	start := c.RunningSince
	if start.IsZero() {
		start = c.AdmittedAt
	}
	if c.NotStarted || start.IsZero() {
		start = now
	}
	return start.Add(min(runtime, Horizon))
}

// pendingOf is h as a preemptor once evicted at at: its turn time is its eviction if it goes to
// the back of the line (back), else its queue time.
func (w *walker) pendingOf(h *hold, at time.Time, back bool) *policy.Pending {
	p := &policy.Pending{ClusterQueue: w.q.Name, Priority: h.cand.Priority, QueuedAt: h.cand.QueuedAt}
	if back {
		p.QueuedAt = at.Truncate(time.Second)
	}
	if h.cand.Info != nil {
		p.Obj = h.cand.Info.Obj
	}
	return p
}

// blocked ends the walk of head, which cannot be admitted, for reason. Under StrictFIFO it blocks
// every workload behind it.
func (w *walker) blocked(head *waiting, reason string) {
	w.unknown(head, reason)
	if w.q.StrictFIFO {
		w.giveUp(fmt.Sprintf("behind %s in turn order (%s)", head.name, reason))
	}
}

// heldBy names a holder that nothing makes leave for the workload whose turn it is.
func (w *walker) heldBy(bp *byPriority) string {
	for _, h := range bp.unbounded {
		if h.gone {
			continue
		}
		if h.cand.Priority > bp.rep.Priority {
			return fmt.Sprintf("held by %s, of a higher priority, which declares no runtime", h.name)
		}
		return fmt.Sprintf("held by %s, which declares no runtime and has no window", h.name)
	}
	if w.co != nil {
		return fmt.Sprintf("waits for quota that other ClusterQueues of cohort %s hold with no declared runtime, and may not reclaim it", w.co.tree.Cohort)
	}
	return "does not fit in what the cohort leaves"
}

// sentence is e in words.
func sentence(e *Estimate, s timebased.Settings, now time.Time) string {
	var b []byte
	if e.Unknown {
		b = fmt.Appendf(b, "unknown (%s)", e.Reason)
	} else {
		layout := "15:04"
		if e.When.Sub(now) >= 24*time.Hour {
			layout = "Jan 2 15:04"
		}
		b = fmt.Appendf(b, "expected around %s", e.When.Format(layout))
	}
	b = fmt.Appendf(b, ", %s in turn order", ordinal(e.Position))
	if s.MinAdmitDuration > 0 {
		b = fmt.Appendf(b, "; turns are %s", shortDuration(s.MinAdmitDuration))
	}
	if e.Note != "" && !e.Unknown {
		b = append(b, noted(e.Note)...)
	}
	return string(b)
}

// Approximate is e with note, in its sentence too; an unknown e is unchanged.
func Approximate(e Estimate, note string) Estimate {
	if !e.Unknown && note != "" {
		e.Note, e.Sentence = note, e.Sentence+noted(note)
	}
	return e
}

func noted(note string) string { return "; " + note }

func ordinal(n int) string {
	suffix := "th"
	switch n % 10 {
	case 1:
		suffix = "st"
	case 2:
		suffix = "nd"
	case 3:
		suffix = "rd"
	}
	if n%100/10 == 1 {
		suffix = "th"
	}
	return fmt.Sprintf("%d%s", n, suffix)
}

// shortDuration writes 1h rather than 1h0m0s.
func shortDuration(d time.Duration) string {
	s := d.String()
	if strings.HasSuffix(s, "m0s") {
		s = s[:len(s)-2]
	}
	if strings.HasSuffix(s, "h0m") {
		s = s[:len(s)-2]
	}
	return s
}

func maxTime(a, b time.Time) time.Time {
	if a.After(b) {
		return a
	}
	return b
}

// overlaps reports whether use holds any of the slots of target.
func overlaps(use, target []amount) bool {
	for _, a := range use {
		for _, b := range target {
			if a.slot == b.slot {
				return true
			}
		}
	}
	return false
}

// fits is fit without the quota it would take.
func (w *walker) fits(free []int64, wt *waiting) bool {
	if !wt.possible {
		return false
	}
	for _, options := range wt.ask {
		if !slices.ContainsFunc(options, func(in []amount) bool { return fitsIn(free, in) }) {
			return false
		}
	}
	return true
}

// preemptsIn reports whether the flavor assigner lets a workload that asks in preempt there:
// in a walk of a cohort, only where the ask is within the ClusterQueue's nominal quota unless
// it may preempt while borrowing (upstream's fitsResourceQuota and canPreemptWhileBorrowing).
func (w *walker) preemptsIn(in []amount) bool {
	if w.co == nil || w.preemptWhileBorrowing {
		return true
	}
	return !slices.ContainsFunc(in, func(a amount) bool { return a.value > w.nominal[a.slot] })
}

// pooledIn is a pool a hold is in, and whether it leaves it for a turn.
type pooledIn struct {
	bp   *byPriority
	turn bool
}

// turnNow is the first workload of l if it can take its turn now, for which the workloads
// rotated out behind it are held back (VetoAdmission); nil when it must wait, so they may use
// the quota meanwhile.
func (w *walker) turnNow(l *line) *waiting {
	if !w.q.turns().TakesTurns() {
		return nil
	}
	for i := l.first; i < len(l.items); i++ {
		wt := l.items[i]
		if wt.done || !wt.ever {
			continue
		}
		bp := w.forPriority(wt.pend)
		if !w.canUseTurn(bp, wt) {
			continue
		}
		w.pool(bp)
		free := w.scratch[:0]
		for s, v := range w.free {
			free = append(free, v+bp.pooled[s])
		}
		w.scratch = free
		w.newer = w.newerFor(bp, wt, free, true, w.newer[:0])
		if w.fits(free, wt) {
			return wt
		}
		return nil
	}
	return nil
}

// guardedAhead reports whether, in a walk of the cohort, the first of l in queue order, queued
// before wt, waits or would wait for a protected borrower (walker.guarding): then it is tried
// first, as the head its queue kept.
func (w *walker) guardedAhead(l *line, wt *waiting) bool {
	if w.co == nil || !w.reclaims() {
		return false
	}
	var first *waiting
	for _, o := range l.items[l.first:] {
		if !o.done && !o.backsOff(w.t) && (first == nil || o.cand.QueuedAt.Before(first.cand.QueuedAt)) {
			first = o
		}
	}
	return first != wt && (first.guarded || first.possible && w.withinNominal(first) && w.protectedBorrower(first))
}

// parkAhead reports whether, in a walk of a cohort, a BestEffortFIFO queue's cycle goes to a
// workload ahead of wt that does not fit: each such is its queue's head for one scheduling cycle,
// and parked as inadmissible until something changes, before wt is; meanwhile the other
// ClusterQueues' heads take their cycles. It parks the first such until the next instant
// (walker.cycleSpent). Ahead is a higher priority, or queued before wt: in the queue's order, or
// where the queue takes turns in turn order, as the scheduler makes the workload whose turn it is
// the cycle's head (substituteHeads).
func (w *walker) parkAhead(wt *waiting) bool {
	if !w.oneHeadACycle() {
		return false
	}
	turns := w.q.turns().TakesTurns()
	queuedFirst := func(a, b *waiting) bool {
		if turns {
			return earlier(a.pend.QueuedAt, b.pend.QueuedAt, a, b)
		}
		return earlier(a.cand.QueuedAt, b.cand.QueuedAt, a, b)
	}
	// The queue keeps its active preemptor at its head, whatever its priority.
	if p := w.stickyHead(); p != nil && p != wt {
		w.park(p)
		w.cycleSpent, w.parked = true, p
		return true
	}
	var first *waiting
	for _, l := range w.lines {
		if l.priority < wt.pend.Priority {
			break
		}
		for _, o := range l.items[l.first:] {
			if o == wt || o.done || o.backsOff(w.t) || w.parkedNow(o) ||
				(l.priority == wt.pend.Priority && !queuedFirst(o, wt)) {
				continue
			}
			if first == nil || (o.pend.Priority == first.pend.Priority && queuedFirst(o, first)) {
				first = o
			}
		}
		if first != nil {
			break
		}
	}
	// One that never fits takes its cycle in the queue's order too, keeping nothing back; by
	// queue time even where the queue takes turns, as it never holds a turn to be put first for.
	for _, n := range w.nevers {
		if w.parkedNow(n) || n.backsOff(w.t) || n.pend.Priority < wt.pend.Priority ||
			(n.pend.Priority == wt.pend.Priority && !queuedAhead(n, wt)) || (turns && w.poppedBefore(n)) {
			continue
		}
		if first == nil || n.pend.Priority > first.pend.Priority || (n.pend.Priority == first.pend.Priority && queuedAhead(n, first)) {
			first = n
		}
	}
	if first == nil {
		return false
	}
	w.park(first)
	w.cycleSpent, w.parked = true, first
	w.parkEquivalents(first)
	return true
}

// poppedBefore reports whether, in a queue that takes turns, another workload waiting in it comes
// before n in the queue's own order (priority, then creation): the queue pops that one, which
// steps aside for the workload whose turn it is if it held quota before (SubstituteHead), and n,
// which never did, gets no cycle of its own then.
func (w *walker) poppedBefore(n *waiting) bool {
	for _, l := range w.lines {
		if l.priority < n.pend.Priority {
			break
		}
		for _, o := range l.items[l.first:] {
			if o != n && !o.done && !o.backsOff(w.t) && !w.parkedNow(o) &&
				(o.pend.Priority > n.pend.Priority || o.cand.QueuedAt.Before(n.cand.QueuedAt)) {
				return true
			}
		}
	}
	return false
}

// park notes that wt had its cycle at this instant and did not fit: its queue sets it aside as
// inadmissible until the cohort requeues its parked workloads.
func (w *walker) park(wt *waiting) {
	wt.parkedAt = w.t
	if w.co != nil {
		wt.parkedGen = w.co.gen
	}
}

// parkedNow reports whether wt is set aside (park) since the cohort last requeued its parked
// workloads: at each instant, and after a preemption's eviction (cohortWalk.step's first cycle).
func (w *walker) parkedNow(wt *waiting) bool {
	return wt.parkedAt.Equal(w.t) && (w.co == nil || wt.parkedGen == w.co.gen)
}

// parkEquivalents parks, with first, the workloads of its scheduling equivalence class: the
// queue sets them aside as inadmissible with it, untried (upstream's
// SchedulingEquivalenceHashing, handleInadmissibleHash), until the cohort next changes. Where
// the queue takes turns, only when first can never use one: otherwise the manager parks each
// alone (RefusalsDependOnWorkload).
func (w *walker) parkEquivalents(first *waiting) {
	h := schedulingHash(first)
	if h == "" || w.q.turns().TakesTurns() && first.ever && w.canUseTurn(w.forPriority(first.pend), first) {
		return
	}
	for _, l := range w.lines {
		for _, o := range l.items[l.first:] {
			if !o.done && schedulingHash(o) == h {
				w.park(o)
			}
		}
	}
	for _, n := range w.nevers {
		if schedulingHash(n) == h {
			w.park(n)
		}
	}
}

// schedulingHash is wt's scheduling equivalence class, empty when it is not known.
func schedulingHash(wt *waiting) workload.EquivalenceHash {
	if wt.cand.Info == nil || wt.cand.Info.SchedulingHash == workload.SchedulingHashUnknown {
		return ""
	}
	return wt.cand.Info.SchedulingHash
}

// preempted notes that the workload just admitted preempted (did, true): the scheduler admits it
// in a later cycle than the one that evicted its victims, and its ClusterQueue's head in the
// cycle between is that workload again, so the walk gives that cycle to no other (admitting).
func (w *walker) preempted(did bool) {
	w.admitting = did && w.co != nil && len(w.co.ws) > 1
	if w.admitting {
		// admitAt has just held it.
		w.admittingUse = w.holds[len(w.holds)-1].use
	}
	if did {
		// The queue keeps the last to preempt, which the walk admits at once (upstream's pw.set,
		// then its delete on admission).
		w.active, w.preempting = policy.ActivePreemptor{}, nil
	}
}

// oneHeadACycle reports whether the cycles in which the queue's heads are tried matter: in a walk
// of a cohort of several ClusterQueues, under BestEffortFIFO.
func (w *walker) oneHeadACycle() bool {
	return w.co != nil && len(w.co.ws) > 1 && !w.q.StrictFIFO
}

// oldestFitting is the workload of l first in the queue's order that fits in the free quota.
func (w *walker) oldestFitting(l *line) *waiting {
	if !slices.ContainsFunc(w.free, func(v int64) bool { return v > 0 }) {
		return nil
	}
	if p := w.stickyHead(); p != nil && p.pend.Priority == l.priority && w.fits(w.free, p) {
		return p
	}
	var oldest *waiting
	for _, wt := range l.items[l.first:] {
		if wt.done || wt.backsOff(w.t) || !w.fits(w.free, wt) {
			continue
		}
		if oldest == nil || earlier(wt.cand.QueuedAt, oldest.cand.QueuedAt, wt, oldest) {
			oldest = wt
		}
	}
	return oldest
}

// earlier reports whether a, queued at ta, comes before b, queued at tb: the earlier time, then
// the smaller UID.
func earlier(ta, tb time.Time, a, b *waiting) bool {
	return ta.Before(tb) || (ta.Equal(tb) && uidOf(a.pend) < uidOf(b.pend))
}

// endHolds gives back the quota of the holds whose promised runtime has ended, whoever waits.
func (w *walker) endHolds() {
	for w.ending.Len() > 0 && !w.ending[0].at.After(w.t) {
		if r := heap.Pop(&w.ending).(release); !r.h.gone {
			w.leave(r.h)
			w.ended, w.endedAt = r.h.name, w.t
			if w.co != nil {
				// Its quota may be what another member admits.
				for _, o := range w.co.ws {
					o.ended, o.endedAt = r.h.name, w.t
				}
			}
		}
	}
}

// backsOff reports whether wt's queue does not offer it at t, its requeue backoff not over.
func (wt *waiting) backsOff(t time.Time) bool {
	return wt.notBefore.After(t)
}

// fitsNowFor is why wt, which fits in the free quota now, is admitted: fitsNow, or the end of its
// backoff.
func (w *walker) fitsNowFor(wt *waiting) string {
	if !wt.notBefore.IsZero() && wt.notBefore.Equal(w.t) {
		return "when its requeue backoff ends"
	}
	return w.fitsNow()
}

// fitsNow is why a workload that fits in the free quota now is admitted.
func (w *walker) fitsNow() string {
	if w.ended != "" && w.endedAt.Equal(w.t) {
		return "when " + w.ended + " leaves"
	}
	return "fits now"
}
