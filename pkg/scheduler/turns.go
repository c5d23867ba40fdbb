package scheduler

import (
	"context"

	"k8s.io/klog/v2"
	ctrl "sigs.k8s.io/controller-runtime"

	qcache "sigs.k8s.io/kueue/pkg/cache/queue"
	"sigs.k8s.io/kueue/pkg/workload"
)

// HeadSubstituter is implemented by preemptors that keep a turn order of their own in some
// ClusterQueues. For a queue head that must wait for its turn, SubstituteHead returns the pending
// workload of the same ClusterQueue to try instead, or nil to keep the head.
type HeadSubstituter interface {
	SubstituteHead(ctx context.Context, head *workload.Info) *workload.Info
}

// substituteHeads puts back each head the preemptor wants to step aside and takes the workload
// whose turn it is out of the queue in its place, as the queue's own pop would.
func (s *Scheduler) substituteHeads(ctx context.Context, heads []qcache.Head) []qcache.Head {
	sub, ok := s.preemptor.(HeadSubstituter)
	if !ok {
		return heads
	}
	log := ctrl.LoggerFrom(ctx)
	for i := range heads {
		h := &heads[i]
		turn := sub.SubstituteHead(ctx, &h.Info)
		if turn == nil || turn.Obj.UID == h.Obj.UID {
			continue
		}
		cq := h.ClusterQueue
		// The queue manager refreshes the Info it requeues from the API object; give it a copy.
		back := h.Info
		s.queues.RequeueWorkload(ctx, &back, qcache.RequeueReasonGeneric, qcache.QuotaReservedReasonGeneric)
		s.queues.DeleteWorkload(log, workload.Key(turn.Obj))
		log.V(3).Info("Queue head steps aside for the workload whose turn it is", "head", klog.KObj(h.Obj), "turn", klog.KObj(turn.Obj), "clusterQueue", cq)
		info := *turn
		info.ClusterQueue = cq
		*h = qcache.Head{Info: info}
	}
	return heads
}
