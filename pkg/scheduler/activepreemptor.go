package scheduler

import (
	"sync"
	"time"

	kueue "sigs.k8s.io/kueue/apis/kueue/v1beta2"
	qcache "sigs.k8s.io/kueue/pkg/cache/queue"
	"sigs.k8s.io/kueue/pkg/workload"

	"github.com/kueue-timeshare/kueue-timeshare/pkg/policy"
)

// ActivePreemptor is a ClusterQueue's preemptor as the queue manager keeps it. The queue manager
// shows it only on a cycle's heads; the admission estimates need it between cycles.
type ActivePreemptor = policy.ActivePreemptor

// activePreemptors follows what the queue manager sets (upstream's ClusterQueue.requeueIfNotPresent,
// pw.set), per ClusterQueue. The queue clears it when the workload leaves the queue, admitted or
// deleted (ClusterQueue.delete); a reader tells that from the workload (admitted since At).
type activePreemptors struct {
	mu   sync.Mutex
	byCQ map[kueue.ClusterQueueReference]ActivePreemptor
}

// requeued notes info, requeued in cq at at for reason, as cq's preemptor when the queue keeps it
// so: waiting for its preemptions or a migration.
func (a *activePreemptors) requeued(cq kueue.ClusterQueueReference, info *workload.Info, reason qcache.RequeueReason, at time.Time) {
	if reason != qcache.RequeueReasonPendingPreemption && reason != qcache.RequeueReasonPendingMigration {
		return
	}
	a.mu.Lock()
	defer a.mu.Unlock()
	if a.byCQ == nil {
		a.byCQ = map[kueue.ClusterQueueReference]ActivePreemptor{}
	}
	a.byCQ[cq] = ActivePreemptor{UID: info.Obj.UID, Generation: info.LastEvaluatedGeneration, At: at}
}

// ActivePreemptor is cq's active preemptor; false when it has none.
func (s *Scheduler) ActivePreemptor(cq kueue.ClusterQueueReference) (ActivePreemptor, bool) {
	s.preemptors.mu.Lock()
	defer s.preemptors.mu.Unlock()
	p, ok := s.preemptors.byCQ[cq]
	return p, ok
}
