package scheduler

import (
	"context"

	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/sets"
	"k8s.io/klog/v2"
	ctrl "sigs.k8s.io/controller-runtime"

	kueue "sigs.k8s.io/kueue/apis/kueue/v1beta2"
	qcache "sigs.k8s.io/kueue/pkg/cache/queue"
	schdcache "sigs.k8s.io/kueue/pkg/cache/scheduler"
	"sigs.k8s.io/kueue/pkg/workload"
)

// substituteHeads puts back each head the preemptor wants to step aside and takes the workload
// whose turn it is out of the queue in its place, as the queue's own pop would.
// The ClusterQueues where a head stepped aside are added to steppedAside.
func (s *Scheduler) substituteHeads(ctx context.Context, heads []qcache.Head, snap *schdcache.Snapshot, steppedAside sets.Set[kueue.ClusterQueueReference]) []qcache.Head {
	if s.hooks.SubstituteHead == nil {
		return heads
	}
	log := ctrl.LoggerFrom(ctx)
	for i := range heads {
		h := &heads[i]
		turn := s.hooks.SubstituteHead(ctx, &h.Info, snap)
		// A workload the cycle already took (admitted, say) is no longer the queue's to give.
		if turn == nil || turn.Obj.UID == h.Obj.UID || s.takenInCycle.Has(workload.Key(turn.Obj)) {
			continue
		}
		cq := h.ClusterQueue
		// The queue manager refreshes the Info it requeues from the API object; give it a copy.
		back := h.Info
		s.queues.RequeueWorkload(ctx, &back, qcache.RequeueReasonGeneric, qcache.QuotaReservedReasonGeneric)
		s.queues.DeleteWorkload(log, workload.Key(turn.Obj))
		log.V(3).Info("Queue head steps aside for the workload whose turn it is", "head", klog.KObj(h.Obj), "turn", klog.KObj(turn.Obj), "clusterQueue", cq)
		steppedAside.Insert(cq)
		if s.steppedAsideFor == nil {
			s.steppedAsideFor = map[kueue.ClusterQueueReference]types.UID{}
		}
		s.steppedAsideFor[cq] = turn.Obj.UID
		info := *turn
		info.ClusterQueue = cq
		// The queue marks only the heads it pops as its preemptor; the one taken in its place
		// keeps that standing, and goes first among the cycle's heads with it.
		p, _ := s.ActivePreemptor(cq)
		*h = qcache.Head{Info: info, IsPreemptor: p.Is(info.Obj)}
	}
	return heads
}

// retryAfterTurns wakes the workloads parked in ClusterQueues where a workload stepped aside or
// was held back for the one whose turn it was, once that one is admitted: nothing else would wake
// them (an admission frees no quota), and a workload held back may fit in what is left. It wakes
// them too when the one a head stepped aside for is found unable to use the turn after all (the
// quota it counted on went elsewhere): the turn passes it over, and the head that stepped aside
// may fit now.
func (s *Scheduler) retryAfterTurns(waited sets.Set[kueue.ClusterQueueReference], entries, inadmissible []entry) {
	wake := sets.New[kueue.ClusterQueueReference]()
	for _, list := range [][]entry{entries, inadmissible} {
		for i := range list {
			e := &list[i]
			uid, ok := s.steppedAsideFor[e.ClusterQueue]
			stood := ok && uid == e.Obj.UID
			admitted := e.status == assumed
			if !(admitted && waited.Has(e.ClusterQueue)) && !(stood && (admitted || s.cannotUseTurn(&e.Info))) {
				continue
			}
			wake.Insert(e.ClusterQueue)
			if stood {
				delete(s.steppedAsideFor, e.ClusterQueue)
			}
		}
	}
	if wake.Len() > 0 {
		qcache.NotifyRetryInadmissible(s.queues, wake)
	}
}

// cannotUseTurn asks the preemptor whether this cycle found wl unable to use a turn.
func (s *Scheduler) cannotUseTurn(wl *workload.Info) bool {
	return s.hooks.CannotUseTurn != nil && s.hooks.CannotUseTurn(wl)
}
