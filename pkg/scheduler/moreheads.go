package scheduler

import (
	"context"

	"k8s.io/apimachinery/pkg/util/sets"
	"k8s.io/klog/v2"
	ctrl "sigs.k8s.io/controller-runtime"

	kueue "sigs.k8s.io/kueue/apis/kueue/v1beta2"
	qcache "sigs.k8s.io/kueue/pkg/cache/queue"
	schdcache "sigs.k8s.io/kueue/pkg/cache/scheduler"
	"sigs.k8s.io/kueue/pkg/scheduler/preemption"
	"sigs.k8s.io/kueue/pkg/scheduler/preemption/fairsharing"
	"sigs.k8s.io/kueue/pkg/workload"
)

// moreHeads goes on after the cycle's heads, in rounds: each ClusterQueue all of whose workloads
// in the last round were admitted gives its next one, and the round goes through the steps of
// the heads (turn substitution, nomination, the cycle's order, processEntry) on the same
// snapshot, which holds the admissions so far. A ClusterQueue leaves at its first workload not
// admitted, or once it gave headsPerCycle; the rounds end when one did something the snapshot
// does not show (a preemption or migration issued, an eviction, a failed admission). It returns
// entries and inadmissible with the rounds' entries added, for the cycle to requeue and log.
func (s *Scheduler) moreHeads(ctx context.Context, entries, inadmissible []entry, snapshot *schdcache.Snapshot, preempted preemption.PreemptedWorkloads, skipped map[kueue.ClusterQueueReference]int) ([]entry, []entry) {
	if s.headsPerCycle <= 1 {
		return entries, inadmissible
	}
	log := ctrl.LoggerFrom(ctx)
	s.takenInCycle = sets.New[workload.Reference]()
	s.headCursors = headCursors{}
	given := make(map[kueue.ClusterQueueReference]int)
	for _, list := range [][]entry{entries, inadmissible} {
		for i := range list {
			s.takenInCycle.Insert(workload.Key(list[i].Obj))
			given[list[i].ClusterQueue]++
		}
	}
	round, roundInadmissible := entries, inadmissible
	for n := 1; ; n++ {
		if len(preempted) > 0 || needsFreshSnapshot(round) {
			return entries, inadmissible
		}
		heads := s.nextHeadsOf(ctx, admittedAll(round, roundInadmissible), given)
		if len(heads) == 0 {
			return entries, inadmissible
		}
		log.V(3).Info("Taking more heads", "round", n, "headCount", len(heads))
		heads = s.substituteHeads(ctx, heads, snapshot, s.waitedForTurn)
		for i := range heads {
			s.takenInCycle.Insert(workload.Key(heads[i].Obj))
		}
		round, roundInadmissible = s.nominate(ctx, heads, snapshot)
		iterator := makeIterator(ctx, round, s.workloadOrdering, fairsharing.Enabled(s.fairSharing))
		for iterator.hasNext() {
			s.processEntry(ctx, iterator.pop(), snapshot, preempted, skipped)
		}
		entries = append(entries, round...)
		inadmissible = append(inadmissible, roundInadmissible...)
	}
}

// needsFreshSnapshot reports whether a round did something the snapshot does not show: evicted a
// workload, issued a preemption or migration, or failed to admit one it tried.
func needsFreshSnapshot(round []entry) bool {
	for i := range round {
		e := &round[i]
		switch {
		case e.status == evicted, e.status == nominated:
			return true
		case e.requeueReason == qcache.RequeueReasonPendingPreemption,
			e.requeueReason == qcache.RequeueReasonPreemptionFailed,
			e.requeueReason == qcache.RequeueReasonPendingMigration:
			return true
		}
	}
	return false
}

// admittedAll lists, in the order of the round, the ClusterQueues that had every workload of the
// round admitted.
func admittedAll(round, inadmissible []entry) []kueue.ClusterQueueReference {
	waiting := sets.New[kueue.ClusterQueueReference]()
	for i := range inadmissible {
		waiting.Insert(inadmissible[i].ClusterQueue)
	}
	for i := range round {
		if round[i].status != assumed {
			waiting.Insert(round[i].ClusterQueue)
		}
	}
	var cqs []kueue.ClusterQueueReference
	for i := range round {
		if cq := round[i].ClusterQueue; !waiting.Has(cq) {
			cqs = append(cqs, cq)
			waiting.Insert(cq)
		}
	}
	return cqs
}

// nextHeadsOf takes the next workload of each ClusterQueue of cqs that has given fewer than
// headsPerCycle this cycle out of its queue, as the queue's own pop would: the first in queue
// order that is still in the queue's active heap (a workload the queue parked as inadmissible
// stays parked) and not taken yet. given counts what each ClusterQueue gave.
func (s *Scheduler) nextHeadsOf(ctx context.Context, cqs []kueue.ClusterQueueReference, given map[kueue.ClusterQueueReference]int) []qcache.Head {
	log := ctrl.LoggerFrom(ctx)
	var heads []qcache.Head
	var active map[kueue.ClusterQueueReference][]workload.Reference
	for _, cq := range cqs {
		if given[cq] >= s.headsPerCycle {
			continue
		}
		if active == nil {
			active = s.queues.Dump()
		}
		info := s.headCursors.next(cq, sets.New(active[cq]...), s.takenInCycle, s.queues.PendingWorkloadsInfo)
		if info == nil {
			continue
		}
		key := workload.Key(info.Obj)
		s.queues.DeleteWorkload(log, key)
		s.takenInCycle.Insert(key)
		given[cq]++
		h := qcache.Head{Info: *info}
		h.ClusterQueue = cq
		h.LastEvaluatedGeneration = info.Obj.Generation
		log.V(3).Info("Next head of the ClusterQueue", "workload", klog.KObj(info.Obj), "clusterQueue", klog.KRef("", string(cq)), "given", given[cq])
		heads = append(heads, h)
	}
	return heads
}

// headCursors walk each ClusterQueue's pending workloads in queue order once per cycle: sorting
// the whole queue for every extra head cost more than the heads gained on deep queues.
type headCursors map[kueue.ClusterQueueReference]*headCursor

// headCursor is a ClusterQueue's pending workloads in queue order, as of when the cycle first
// asked, and how many at its front the cycle took.
type headCursor struct {
	infos []*workload.Info
	known sets.Set[workload.Reference]
	pos   int
}

// next returns the first workload of cq's queue order that is in active (the queue's heap now)
// and not taken, or nil. A workload in active that the cycle's order does not hold arrived since
// it was taken: the order is taken again, so that the newcomer gets its place. One not in active
// (parked, or gone) is passed over but kept, since the queue may bring it back.
func (c headCursors) next(cq kueue.ClusterQueueReference, active, taken sets.Set[workload.Reference], pending func(kueue.ClusterQueueReference) []*workload.Info) *workload.Info {
	cur := c[cq]
	if cur == nil || !cur.known.IsSuperset(active) {
		cur = &headCursor{infos: pending(cq), known: sets.New[workload.Reference]()}
		for _, info := range cur.infos {
			cur.known.Insert(workload.Key(info.Obj))
		}
		c[cq] = cur
	}
	for ; cur.pos < len(cur.infos) && taken.Has(workload.Key(cur.infos[cur.pos].Obj)); cur.pos++ {
	}
	for _, info := range cur.infos[cur.pos:] {
		if key := workload.Key(info.Obj); !taken.Has(key) && active.Has(key) {
			return info
		}
	}
	return nil
}
