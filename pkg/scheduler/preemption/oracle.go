package preemption

import (
	"context"

	"k8s.io/apimachinery/pkg/util/sets"

	schdcache "sigs.k8s.io/kueue/pkg/cache/scheduler"
	"sigs.k8s.io/kueue/pkg/resources"
	"sigs.k8s.io/kueue/pkg/scheduler/preemption/classical"
	preemptioncommon "sigs.k8s.io/kueue/pkg/scheduler/preemption/common"
	"sigs.k8s.io/kueue/pkg/workload"
)

// Oracle answers the flavor assigner's question "could preemption make room for this much of one
// flavor/resource?" with the same search and victim policy that GetTargets uses, so the flavor
// chosen and the victims chosen agree.
type Oracle struct {
	p        *Preemptor
	snapshot *schdcache.Snapshot
}

// Oracle returns the oracle for one scheduling cycle's snapshot.
func (p *Preemptor) Oracle(snapshot *schdcache.Snapshot) *Oracle {
	return &Oracle{p: p, snapshot: snapshot}
}

// SimulatePreemption reports whether candidates exist (and whether any is in cq itself), and how
// high in the cohort tree the workload would borrow once they are gone.
func (o *Oracle) SimulatePreemption(ctx context.Context, cq *schdcache.ClusterQueueSnapshot, wl workload.Info, fr resources.FlavorResource, quantity resources.Amount) (preemptioncommon.PreemptionPossibility, int) {
	s := o.p.newSearch(ctx, &wl, o.snapshot, sets.New(fr), workload.Usage{Quota: resources.FlavorResourceQuantities{fr: quantity}})
	targets := o.p.targets(s)
	if len(targets) == 0 {
		height, _ := classical.FindHeightOfLowestSubtreeThatFits(cq, fr, quantity)
		return preemptioncommon.NoCandidates, height
	}
	victims := make([]*workload.Info, len(targets))
	inQueue := false
	for i, t := range targets {
		victims[i] = t.WorkloadInfo
		inQueue = inQueue || t.WorkloadInfo.ClusterQueue == cq.Name
	}
	revert := o.snapshot.SimulateWorkloadUsageRemoval(victims)
	height, _ := classical.FindHeightOfLowestSubtreeThatFits(cq, fr, quantity)
	revert()
	if inQueue {
		return preemptioncommon.Preempt, height
	}
	return preemptioncommon.Reclaim, height
}
