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
	if e.assignment.RepresentativeMode() != flavorassigner.Preempt {
		return e.assignment.Usage.Quota
	}
	reservedUsage := make(resources.FlavorResourceQuantities)
	for fr, usage := range e.assignment.Usage.Quota {
		cqQuota := cq.QuotaFor(fr)
		if e.assignment.Borrowing > 0 {
			if cqQuota.BorrowingLimit == nil {
				reservedUsage[fr] = usage
			} else {
				reservedUsage[fr] = resources.MinAmount(usage, cqQuota.Nominal.Add(*cqQuota.BorrowingLimit).Sub(cq.ResourceNode.Usage[fr]))
			}
		} else {
			reservedUsage[fr] = resources.MaxAmount(resources.NewAmount(0), resources.MinAmount(usage, cqQuota.Nominal.Sub(cq.ResourceNode.Usage[fr])))
		}
	}
	return reservedUsage
}
