package visibility

import (
	kueue "sigs.k8s.io/kueue/apis/kueue/v1beta2"
	utilqueue "sigs.k8s.io/kueue/pkg/util/queue"
	"sigs.k8s.io/kueue/pkg/workload"
)

// Ordered shows each ClusterQueue's pending workloads in the order the scheduler takes them,
// which may differ from the queue's own (time-sharing turns).
type Ordered struct {
	// Queues lists pending workloads in the queue's own order (upstream's queue manager).
	Queues Pending
	// Order puts a ClusterQueue's pending workloads, in the queue's order, in the scheduler's;
	// nil: the queue's order is the scheduler's.
	Order func(cq kueue.ClusterQueueReference, pending []*workload.Info) []*workload.Info
}

var _ Pending = Ordered{}

func (o Ordered) PendingWorkloadsInfo(cq kueue.ClusterQueueReference) []*workload.Info {
	pending := o.Queues.PendingWorkloadsInfo(cq)
	if o.Order == nil {
		return pending
	}
	return o.Order(cq, pending)
}

func (o Ordered) ClusterQueueFromLocalQueue(lq utilqueue.LocalQueueReference) (kueue.ClusterQueueReference, bool) {
	return o.Queues.ClusterQueueFromLocalQueue(lq)
}
