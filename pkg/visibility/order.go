package visibility

import (
	"github.com/go-logr/logr"

	kueue "sigs.k8s.io/kueue/apis/kueue/v1beta2"
	utilqueue "sigs.k8s.io/kueue/pkg/util/queue"
	"sigs.k8s.io/kueue/pkg/workload"

	"github.com/kueue-timeshare/kueue-timeshare/pkg/scheduler/preemption"
)

// TurnOrdered shows the pending workloads of ClusterQueues that take time-sharing turns in the
// order the scheduler takes them, and those of other ClusterQueues in the queue's own order.
type TurnOrdered struct {
	// Queues lists pending workloads in the queue's own order (upstream's queue manager).
	Queues Pending
	// TakesTurns reports whether a ClusterQueue takes time-sharing turns (a minAdmitDuration with
	// the feature on).
	TakesTurns func(kueue.ClusterQueueReference) bool
	// Ordering is the queue's ordering, for the queue time of workloads never rotated out.
	Ordering workload.Ordering
	Log      logr.Logger
}

var _ Pending = TurnOrdered{}

func (t TurnOrdered) PendingWorkloadsInfo(cq kueue.ClusterQueueReference) []*workload.Info {
	pending := t.Queues.PendingWorkloadsInfo(cq)
	if pending == nil || !t.TakesTurns(cq) {
		return pending
	}
	return preemption.TurnOrder(t.Log, pending, t.Ordering)
}

func (t TurnOrdered) ClusterQueueFromLocalQueue(lq utilqueue.LocalQueueReference) (kueue.ClusterQueueReference, bool) {
	return t.Queues.ClusterQueueFromLocalQueue(lq)
}
