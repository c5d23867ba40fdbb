package scheduler

import (
	"context"

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
// them (an admission frees no quota), and a workload held back may fit in what is left.
func (s *Scheduler) retryAfterTurns(waited sets.Set[kueue.ClusterQueueReference], admitted []entry) {
	wake := sets.New[kueue.ClusterQueueReference]()
	for i := range admitted {
		if admitted[i].status == assumed && waited.Has(admitted[i].ClusterQueue) {
			wake.Insert(admitted[i].ClusterQueue)
		}
	}
	if wake.Len() > 0 {
		qcache.NotifyRetryInadmissible(s.queues, wake)
	}
}
