package preemption

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/go-logr/logr"
	apimeta "k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/klog/v2"
	ctrllog "sigs.k8s.io/controller-runtime/pkg/log"

	kueue "sigs.k8s.io/kueue/apis/kueue/v1beta2"
	schdcache "sigs.k8s.io/kueue/pkg/cache/scheduler"
	"sigs.k8s.io/kueue/pkg/util/priority"
	"sigs.k8s.io/kueue/pkg/workload"

	"github.com/kueue-timeshare/kueue-timeshare/pkg/plugins/timebased"
	"github.com/kueue-timeshare/kueue-timeshare/pkg/policy"
)

// turnTime is when a pending workload started waiting for its turn: when it last left the quota,
// for whatever reason (rotated out, preempted, deactivated, evicted by an admission check or a
// PodsReady timeout), or else its queue-order timestamp. The queue itself orders by creation, which
// would hand the quota straight back to a workload that left it, whether rotated out or evicted on
// its owner's request (spec.active), ahead of those that waited meanwhile.
func turnTime(wl *kueue.Workload, ordering workload.Ordering) time.Time {
	queued := ordering.GetQueueOrderTimestamp(wl).Time
	if c := leftQuota(wl); c != nil && c.LastTransitionTime.After(queued) {
		return c.LastTransitionTime.Time
	}
	return queued
}

// TurnTime is a pending workload's turn time (turnTime), for the admission estimate: one home for the turn order.
func TurnTime(wl *kueue.Workload, ordering workload.Ordering) time.Time {
	return turnTime(wl, ordering)
}

// compareTurns orders two same-priority pending workloads by turn (timebased.TurnPlace).
func compareTurns(a, b *kueue.Workload, ordering workload.Ordering) int {
	return turnOf(a, ordering).Compare(turnOf(b, ordering))
}

// turnOf is what compareTurns reads of a workload, read once.
func turnOf(wl *kueue.Workload, ordering workload.Ordering) timebased.TurnPlace {
	return timebased.TurnPlace{At: turnTime(wl, ordering), Left: leftQuota(wl) != nil, UID: wl.UID}
}

// leftQuota returns the condition saying that a pending workload left the quota and has not had
// it back since: Evicted, for any reason, or Preempted for time-sharing (both are set False when
// quota is reserved again). Upstream sets Evicted on a pending workload that is deactivated too:
// it then waits from its deactivation.
func leftQuota(wl *kueue.Workload) *metav1.Condition {
	if c := apimeta.FindStatusCondition(wl.Status.Conditions, kueue.WorkloadEvicted); c != nil && c.Status == metav1.ConditionTrue {
		return c
	}
	return timeBasedPreemption(wl)
}

// timeBasedPreemption returns the Preempted condition of a workload rotated out for time-sharing.
func timeBasedPreemption(wl *kueue.Workload) *metav1.Condition {
	c := apimeta.FindStatusCondition(wl.Status.Conditions, kueue.WorkloadPreempted)
	if c == nil || c.Status != metav1.ConditionTrue || c.Reason != timebased.Reason {
		return nil
	}
	return c
}

// applyTurns adjusts the preemptor's facts in a ClusterQueue with minAdmitDuration: it waits
// since its turn time, so a workload rotated out does not count as older than those that took
// their turn after it and preempt them back at once (upstream's "newer equal priority" rule
// compares queue times), and, with turns, it may take a time-based turn only if nobody waited
// longer.
func (p *Preemptor) applyTurns(s *search, turns bool) {
	if !p.settings(s.info.ClusterQueue).TakesTurns() {
		return
	}
	s.preemptor.QueuedAt = turnTime(s.info.Obj, p.workloadOrdering)
	if turns {
		timebased.SetWaitingLonger(s.preemptor, p.waitingLonger(s))
	}
}

// settings are cq's time-sharing settings, from time-based preemption's source; none while the
// feature is off.
func (p *Preemptor) settings(cq kueue.ClusterQueueReference) timebased.Settings {
	if !p.on(timebased.Feature) {
		return timebased.Settings{}
	}
	src, ok := policy.SourceOf[timebased.Source](p.sources)
	if !ok {
		return timebased.Settings{}
	}
	return timebased.SettingsOf(src, cq)
}

// waitingLonger returns a same-priority pending workload of the preemptor's queue whose turn comes
// before the preemptor's and that can use it, or "" when the preemptor has the turn.
func (p *Preemptor) waitingLonger(s *search) string {
	if first := p.firstTurn(s.log, s.snapshot, s.info, s.preemptor.Priority, p.canHoldTurn(s.ctx, s.snapshot, s.info)); first != nil {
		return klog.KObj(first.Obj).String()
	}
	return ""
}

// pendingCycle keeps the ClusterQueues' pending workloads for one scheduling cycle, known by its
// snapshot: the queue manager sorts a ClusterQueue's whole list on every read, and a cycle reads
// it for every search (oracle, targets, explanation) of every head; with hundreds pending per
// queue that sort was a large part of the scheduler's CPU.
type pendingCycle struct {
	mu       sync.Mutex
	snapshot *schdcache.Snapshot
	// lines is, per ClusterQueue and priority, its pending workloads in turn order (turnLine),
	// and holders the first of them that may hold the turn (holders).
	lines   map[lineKey][]turnEntry
	holders map[lineKey][]turnEntry
	// large keeps the pending lists of ClusterQueues with more than largeQueue pending beyond
	// the cycle, for largeListAge.
	large map[kueue.ClusterQueueReference]largeList
	// use is, by UID, whether a pending workload could use a turn (turnUseOf).
	use map[types.UID]turnUse
	// states is, per ClusterQueue, its queueState in this cycle.
	states map[kueue.ClusterQueueReference]uint64
	// rooms is, per ClusterQueue, its cohortRoom in this cycle.
	rooms map[kueue.ClusterQueueReference]*cohortRoom
	// useless remembers, beyond the cycle, which pending workloads cannot use a turn, for as long
	// as neither they nor their ClusterQueue change (see uselessFor).
	useless uselessMemo
}

type lineKey struct {
	cq   kueue.ClusterQueueReference
	prio int64
}

// turnEntry is a pending workload in a turn line, with its place read once.
type turnEntry struct {
	info  *workload.Info
	place timebased.TurnPlace
}

type largeList struct {
	at time.Time
	// age is how long the lines are kept (largeListAge).
	age   time.Duration
	lines map[int64][]turnEntry
	// holders keeps, per priority, the holders found in the lines, with the queueState they were
	// found in: while the lines and the state are the same, so are they.
	holders map[int64]heldBy
}

type heldBy struct {
	state   uint64
	holders []turnEntry
}

const (
	// largeQueue and largeQueueAge bound what a flood of pending workloads costs the scheduler:
	// the queue manager sorts a ClusterQueue's whole pending list on every read, so the turn
	// lines of a ClusterQueue with more than largeQueue pending are read again at most every
	// largeQueueAge per largeQueue of them (largeListAge), not at every cycle. Until then a
	// workload that joined the line meanwhile (at its back) is not yet in it, and one admitted or
	// deleted meanwhile is passed over by firstTurn.
	largeQueue    = 1000
	largeQueueAge = time.Second
	// maxLargeQueueAge bounds how late a workload that joined a large line is seen.
	maxLargeQueueAge = 10 * time.Second
)

// largeListAge is how long the lines of a ClusterQueue with n pending are kept: a read sorts all
// n, so the cost per second stays about the same however large the flood.
func largeListAge(n int) time.Duration {
	return min(largeQueueAge*time.Duration(max(n/largeQueue, 1)), maxLargeQueueAge)
}

// turnLine returns cq's pending workloads of priority prio in turn order (compareTurns), read
// and sorted once per cycle of snapshot (see largeQueue for the large ones): a question about
// turns reads only the part of the line in front of the asker, not the whole queue.
func (p *Preemptor) turnLine(log logr.Logger, snapshot *schdcache.Snapshot, cq kueue.ClusterQueueReference, prio int64) []turnEntry {
	if p.pending == nil {
		return nil
	}
	if snapshot == nil {
		return turnLines(log, p.pending(cq), p.workloadOrdering)[prio]
	}
	c := &p.pendingCycle
	c.mu.Lock()
	if c.snapshot != snapshot {
		c.reset(snapshot, p.clock.Now())
	}
	line, ok := c.lines[lineKey{cq, prio}]
	if ok {
		c.mu.Unlock()
		return line
	}
	now := p.clock.Now()
	if l, ok := c.large[cq]; ok && now.Sub(l.at) < l.age {
		c.mu.Unlock()
		return l.lines[prio]
	}
	c.mu.Unlock()
	pending := p.pending(cq)
	lines := turnLines(log, pending, p.workloadOrdering)
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.snapshot == snapshot {
		for pr, line := range lines {
			c.lines[lineKey{cq, pr}] = line
		}
		if _, ok := lines[prio]; !ok {
			c.lines[lineKey{cq, prio}] = nil
		}
	}
	if len(pending) > largeQueue {
		c.large[cq] = largeList{at: now, age: largeListAge(len(pending)), lines: lines, holders: map[int64]heldBy{}}
	} else {
		delete(c.large, cq)
	}
	return lines[prio]
}

// turnLines splits pending by priority, each part in turn order.
func turnLines(log logr.Logger, pending []*workload.Info, ordering workload.Ordering) map[int64][]turnEntry {
	lines := map[int64][]turnEntry{}
	for _, info := range pending {
		prio := priority.EffectivePriority(log, info.Obj)
		lines[prio] = append(lines[prio], turnEntry{info: info, place: turnOf(info.Obj, ordering)})
	}
	for _, line := range lines {
		slices.SortFunc(line, func(a, b turnEntry) int { return a.place.Compare(b.place) })
	}
	return lines
}

// firstTurn returns the workload of wl's ClusterQueue with priority prio whose turn comes first,
// if it comes before wl's; nil otherwise. With canHold, only workloads it accepts are considered.
// Workloads the snapshot has admitted (a line kept from an earlier cycle may still list them) are
// passed over.
func (p *Preemptor) firstTurn(log logr.Logger, snapshot *schdcache.Snapshot, wl *workload.Info, prio int64, canHold func(*workload.Info) bool) *workload.Info {
	asker := turnOf(wl.Obj, p.workloadOrdering)
	for _, other := range p.holders(log, snapshot, wl.ClusterQueue, prio, canHold) {
		if other.place.UID == asker.UID {
			continue
		}
		if other.place.Compare(asker) < 0 {
			return other.info
		}
		return nil
	}
	return nil
}

// holders returns the first two workloads of a turn line that may hold the turn: not admitted,
// and accepted by canHold. Which workloads canHold accepts depends on their ClusterQueue, not on
// who asks, so the line is read once per cycle for every asker (the second serves the first when
// it asks itself), and a flood of workloads that cannot hold a turn costs one pass per cycle.
func (p *Preemptor) holders(log logr.Logger, snapshot *schdcache.Snapshot, cq kueue.ClusterQueueReference, prio int64, canHold func(*workload.Info) bool) []turnEntry {
	key := lineKey{cq, prio}
	if snapshot != nil {
		c := &p.pendingCycle
		c.mu.Lock()
		if c.snapshot == snapshot {
			if h, ok := c.holders[key]; ok {
				c.mu.Unlock()
				return h
			}
		}
		c.mu.Unlock()
	}
	var admitted map[workload.Reference]*workload.Info
	var state uint64
	if snapshot != nil {
		if cqs := snapshot.ClusterQueue(cq); cqs != nil {
			admitted = cqs.Workloads
		}
		state = p.queueState(snapshot, cq)
		c := &p.pendingCycle
		c.mu.Lock()
		// The holders depend only on the kept lines and on the queue's state, which covers the
		// admitted workloads passed over: they are kept as long as the lines are.
		if l, ok := c.large[cq]; ok && p.clock.Now().Sub(l.at) < l.age {
			if h, ok := l.holders[prio]; ok && h.state == state {
				if c.snapshot == snapshot {
					c.holders[key] = h.holders
				}
				c.mu.Unlock()
				return h.holders
			}
		}
		c.mu.Unlock()
	}
	var out []turnEntry
	for _, e := range p.turnLine(log, snapshot, cq, prio) {
		if _, ok := admitted[workload.Key(e.info.Obj)]; ok {
			continue
		}
		if canHold == nil || canHold(e.info) {
			if out = append(out, e); len(out) == 2 {
				break
			}
		}
	}
	if snapshot != nil {
		c := &p.pendingCycle
		c.mu.Lock()
		if c.snapshot == snapshot {
			c.holders[key] = out
		}
		if l, ok := c.large[cq]; ok {
			l.holders[prio] = heldBy{state: state, holders: out}
		}
		c.mu.Unlock()
	}
	return out
}

// SubstituteHead lets a queue head that left the quota (rotated out for time-sharing, or evicted for
// another reason) step aside for the same-priority workload of its ClusterQueue whose turn comes
// first. Without it a StrictFIFO queue, which orders by creation, would keep that workload at its
// head and block the others.
// Under BestEffortFIFO a workload that cannot use a turn (see turnUse) is passed over.
func (p *Preemptor) SubstituteHead(ctx context.Context, head *workload.Info, snapshot *schdcache.Snapshot) *workload.Info {
	if !p.settings(head.ClusterQueue).TakesTurns() || leftQuota(head.Obj) == nil {
		return nil
	}
	log := ctrllog.FromContext(ctx)
	if p.pending == nil {
		return nil
	}
	first := p.firstTurn(log, snapshot, head, priority.EffectivePriority(log, head.Obj), p.canHoldTurn(ctx, snapshot, head))
	if first == nil || !p.takesTurnNow(ctx, snapshot, head, first) {
		return nil
	}
	return first
}

// takesTurnNow reports whether first, whose turn it is in wl's ClusterQueue, can take it now.
// Under BestEffortFIFO one that must wait for windows or protections to end does not hold back a
// rotated-out workload that fits in quota nobody else can use meanwhile; under StrictFIFO it does.
func (p *Preemptor) takesTurnNow(ctx context.Context, snapshot *schdcache.Snapshot, wl, first *workload.Info) bool {
	if snapshot == nil || !p.passesOver(wl) {
		return true
	}
	o := *first
	o.ClusterQueue = wl.ClusterQueue
	return p.turnUseOf(ctx, &o, snapshot) == turnNow
}

// CannotUseTurn reports whether this cycle found that info cannot use a turn (turnUse).
func (p *Preemptor) CannotUseTurn(info *workload.Info) bool {
	return p.pending != nil && p.settings(info.ClusterQueue).TakesTurns() && p.foundUseless(info)
}

// RefusalsDependOnWorkload reports whether another pending workload of info's shape and priority
// in its ClusterQueue could get an answer other than the one info got in this cycle: it can when
// turns are taken there (whose turn it is), unless info was found unable to use a turn at all,
// an answer that depends only on its shape, priority and queue (uselessFor).
func (p *Preemptor) RefusalsDependOnWorkload(info *workload.Info) bool {
	if p.pending == nil || !p.settings(info.ClusterQueue).TakesTurns() {
		return false
	}
	return !p.foundUseless(info)
}

// Wait is the preemptor's verdict on a workload that found no victims (scheduler.WaitVerdict):
// why it waits, as far as our features are the cause (turns and minAdmitDuration windows,
// notices, min-runtime protection and tolerations), and whether a protected borrower in its
// cohort tree keeps its ClusterQueue from reclaiming, so that it holds the quota it waits for.
// One protection survey serves both.
func (p *Preemptor) Wait(ctx context.Context, wl *workload.Info, snapshot *schdcache.Snapshot) (note string, holdQuota bool) {
	survey := p.protectionSurvey(ctx, wl, snapshot)
	return p.explainWait(ctx, wl, snapshot, survey), survey.reclaim > 0
}

// ExplainWait is Wait's note.
func (p *Preemptor) ExplainWait(ctx context.Context, wl *workload.Info, snapshot *schdcache.Snapshot) string {
	note, _ := p.Wait(ctx, wl, snapshot)
	return note
}

func (p *Preemptor) explainWait(ctx context.Context, wl *workload.Info, snapshot *schdcache.Snapshot, survey *protectedTally) string {
	if unread := p.unread(snapshot.ClusterQueue(wl.ClusterQueue), wl.ClusterQueue); unread != "" {
		return fmt.Sprintf("kueue-timeshare has not read %s's settings yet", unread)
	}
	var notes []string
	for w := range pluginsOn[policy.Waiter](p) {
		if note := w.ExplainWait(p.handleAt(ctx), wl, snapshot); note != "" {
			return note
		}
	}
	for _, note := range []string{p.explainTurn(ctx, wl, snapshot), survey.message()} {
		if note != "" {
			notes = append(notes, note)
		}
	}
	return strings.Join(notes, "; ")
}

// explainTurn says why a workload of a ClusterQueue with minAdmitDuration found no victims: another
// workload has the turn, or the same-priority workloads holding quota are still protected and
// the first of them becomes preemptible after a given time.
func (p *Preemptor) explainTurn(ctx context.Context, wl *workload.Info, snapshot *schdcache.Snapshot) string {
	settings := p.settings(wl.ClusterQueue)
	cq := snapshot.ClusterQueue(wl.ClusterQueue)
	if !settings.TakesTurns() || cq == nil || cq.Preemption.WithinClusterQueue != kueue.PreemptionPolicyLowerOrNewerEqualPriority {
		return ""
	}
	if why := p.explainPassedOver(ctx, wl, snapshot); why != "" {
		return why
	}
	s := p.newSearch(ctx, wl, snapshot, nil, workload.Usage{})
	// Naming the next in turn would change every pending workload's message, and so cost a
	// status write for each, at every handover; the turn order is in the visibility API.
	if timebased.WaitingLonger(s.preemptor) != "" {
		return waitingForTurn
	}
	var first time.Time
	for _, info := range cq.Workloads {
		c := policy.NewCandidate(s.log, info, p.workloadOrdering)
		if c.Priority != s.preemptor.Priority || c.QuotaReservedAt.IsZero() {
			continue
		}
		end := settings.TurnEnds(&c)
		if end.Before(s.now) {
			continue
		}
		if first.IsZero() || end.Before(first) {
			first = end
		}
	}
	if first.IsZero() {
		return ""
	}
	return fmt.Sprintf("same-priority workloads are protected by minAdmitDuration %s; the first becomes preemptible after %s",
		settings.MinAdmitDuration, first.UTC().Format(time.RFC3339))
}

// The pending messages of a workload waiting for its turn. They name no workload: see explainTurn.
const (
	waitingForTurn = "waiting for a time-sharing turn: same-priority workloads that have waited longer go first"
	heldForTurn    = "Workload was preempted for time-sharing and waits for its turn: same-priority workloads that have waited longer go first"
	// heldAfterEviction: a workload that left the quota for another reason (deactivated, evicted,
	// preempted) waits from then, as one rotated out does.
	heldAfterEviction = "Workload left the quota and waits for its turn from then: same-priority workloads that have waited longer go first"
)

// VetoAdmission holds back a workload that left the quota (rotated out for time-sharing, or evicted
// for another reason) while a same-priority workload of its ClusterQueue has waited longer for a
// turn and can take it now: it goes behind them, as if it had joined the queue when it left. When
// the one whose turn it is must still wait for windows or protections to end, the quota the
// workload fits in would stay idle meanwhile, so it is admitted.
func (p *Preemptor) VetoAdmission(ctx context.Context, wl *workload.Info, snapshot *schdcache.Snapshot) string {
	settings := p.settings(wl.ClusterQueue)
	if !settings.TakesTurns() || leftQuota(wl.Obj) == nil || p.pending == nil {
		return ""
	}
	log := ctrllog.FromContext(ctx)
	first := p.firstTurn(log, snapshot, wl, priority.EffectivePriority(log, wl.Obj), p.canHoldTurn(ctx, snapshot, wl))
	if first == nil || !p.takesTurnNow(ctx, snapshot, wl, first) {
		return ""
	}
	log.V(3).Info("Workload that left the quota held back for the one whose turn it is", "workload", klog.KObj(wl.Obj), "turn", klog.KObj(first.Obj))
	if timeBasedPreemption(wl.Obj) == nil {
		return heldAfterEviction
	}
	return heldForTurn
}

// WaitingSince gives when each pending workload of cq started waiting for a turn (TurnTime); nil
// where cq takes no turns, whose workloads wait from their queue-order time.
func (p *Preemptor) WaitingSince(cq kueue.ClusterQueueReference, ordering workload.Ordering) func(*kueue.Workload) time.Time {
	if !p.settings(cq).TakesTurns() {
		return nil
	}
	return func(wl *kueue.Workload) time.Time { return TurnTime(wl, ordering) }
}

// PendingOrder is cq's pending workloads in the order the scheduler takes them: turn order where
// cq takes turns, else as given (the queue's own order).
func (p *Preemptor) PendingOrder(log logr.Logger, cq kueue.ClusterQueueReference, pending []*workload.Info, ordering workload.Ordering) []*workload.Info {
	if pending == nil || !p.settings(cq).TakesTurns() {
		return pending
	}
	return TurnOrder(log, pending, ordering)
}

// TurnOrder returns a ClusterQueue's pending workloads, given in the queue's own order, in the
// order the scheduler takes them when the ClusterQueue has a minAdmitDuration: the first one left
// goes next, unless it left the quota (leftQuota) and a same-priority workload's turn comes first,
// in which case that one goes next (SubstituteHead). The visibility API shows this order.
// pending is not changed.
func TurnOrder(log logr.Logger, pending []*workload.Info, ordering workload.Ordering) []*workload.Info {
	prio := make([]int64, len(pending))
	// Per priority, the indexes of the workloads by turn (compareTurns), consumed from the front.
	byPrio := map[int64][]int{}
	for i, info := range pending {
		prio[i] = priority.EffectivePriority(log, info.Obj)
		byPrio[prio[i]] = append(byPrio[prio[i]], i)
	}
	for _, list := range byPrio {
		slices.SortFunc(list, func(a, b int) int { return compareTurns(pending[a].Obj, pending[b].Obj, ordering) })
	}
	taken := make([]bool, len(pending))
	// firstTurn drops the taken entries at the front of a priority's list and returns its first.
	firstTurn := func(p int64) int {
		list := byPrio[p]
		for taken[list[0]] {
			list = list[1:]
		}
		byPrio[p] = list
		return list[0]
	}
	out := make([]*workload.Info, 0, len(pending))
	next := 0
	for len(out) < len(pending) {
		for taken[next] {
			next++
		}
		pick := next
		if leftQuota(pending[next].Obj) != nil {
			pick = firstTurn(prio[next])
		}
		taken[pick] = true
		out = append(out, pending[pick])
	}
	return out
}
