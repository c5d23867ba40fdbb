package policy

import (
	"time"

	apimeta "k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/apimachinery/pkg/types"

	kueue "sigs.k8s.io/kueue/apis/kueue/v1beta2"
)

// ActivePreemptor is the workload Kueue's queue manager keeps as a ClusterQueue's preemptor: the
// last one requeued there waiting for its preemptions (or a migration), with the generation the
// queue evaluated it at. While it is pending it is its queue's head under BestEffortFIFO and, at
// that generation, goes first among a cycle's heads and keeps its room back
// (PrioritizePreemptorWorkloads). The scheduler follows it; the admission estimates read it.
type ActivePreemptor struct {
	UID        types.UID
	Generation int64
	// At is when it was requeued so; the queue forgets it once it is admitted.
	At time.Time
}

// Holds reports whether the queue still keeps wl as its preemptor, at whatever generation: the
// same workload, not admitted since (the queue forgets it then). This is what the queue's order
// asks.
func (p ActivePreemptor) Holds(wl *kueue.Workload) bool {
	return p.UID != "" && wl != nil && wl.UID == p.UID && !QuotaReservedSince(wl, p.At)
}

// Is reports whether the queue keeps wl as its preemptor at the generation it was evaluated at
// (upstream's ClusterQueue.IsPreemptor), as a cycle's order and reservations ask.
func (p ActivePreemptor) Is(wl *kueue.Workload) bool {
	return p.Holds(wl) && wl.Generation == p.Generation
}

// QuotaReservedSince reports whether wl's QuotaReserved condition changed after at, to the second
// the API keeps: it was admitted, and maybe evicted again, since.
func QuotaReservedSince(wl *kueue.Workload, at time.Time) bool {
	c := apimeta.FindStatusCondition(wl.Status.Conditions, kueue.WorkloadQuotaReserved)
	return c != nil && c.LastTransitionTime.After(at.Truncate(time.Second))
}
