package scheduler

import (
	"github.com/go-logr/logr"

	schdcache "sigs.k8s.io/kueue/pkg/cache/scheduler"
	"sigs.k8s.io/kueue/pkg/resources"
	"sigs.k8s.io/kueue/pkg/scheduler/flavorassigner"
	"sigs.k8s.io/kueue/pkg/workload"
)

// resourcesToReserve is the usage a head that cannot preempt keeps for itself this cycle.
// Upstream's original: resourcesToReserve in sigs.k8s.io/kueue/pkg/scheduler.
func resourcesToReserve(log logr.Logger, e *entry, cq *schdcache.ClusterQueueSnapshot) workload.Usage {
	return netUsage(log, e, quotaResourcesToReserve(e, cq))
}

// quotaResourcesToReserve is the quota a head that cannot preempt keeps for itself this cycle. A head
// that fits outright holds all it asked for. Otherwise it holds, per flavor and resource,
// no more than its ClusterQueue could still reach: up to the borrowing limit when the
// assignment borrows (everything when there is no limit), up to nominal quota when not.
// Upstream's original: quotaResourcesToReserve in sigs.k8s.io/kueue/pkg/scheduler.
func quotaResourcesToReserve(e *entry, cq *schdcache.ClusterQueueSnapshot) resources.FlavorResourceQuantities {
	requested := e.assignment.Usage.Quota
	if e.assignment.RepresentativeMode() != flavorassigner.Preempt {
		return requested
	}
	borrows := e.assignment.Borrowing > 0
	held := make(resources.FlavorResourceQuantities, len(requested))
	for fr, want := range requested {
		quota := cq.QuotaFor(fr)
		used := cq.ResourceNode.Usage[fr]
		switch {
		case borrows && quota.BorrowingLimit == nil:
			held[fr] = want
		case borrows:
			held[fr] = resources.MinAmount(want, quota.Nominal.Add(*quota.BorrowingLimit).Sub(used))
		default:
			held[fr] = resources.MaxAmount(resources.NewAmount(0), resources.MinAmount(want, quota.Nominal.Sub(used)))
		}
	}
	return held
}
