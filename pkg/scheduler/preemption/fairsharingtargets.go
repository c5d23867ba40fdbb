package preemption

import (
	schdcache "sigs.k8s.io/kueue/pkg/cache/scheduler"
	"sigs.k8s.io/kueue/pkg/workload"

	"github.com/kueue-timeshare/kueue-timeshare/pkg/policy"
)

// ownTurnsBeforeShareTargets lists the targets in the preemptor's own ClusterQueue that only this
// project's rules made eligible (a turn that ended, an expected runtime exceeded) and that were
// chosen before a target of another ClusterQueue that the strategy allowed. The strategy compared
// shares with them gone: putting one back leaves the preemptor's queue borrowing as much as the
// victim's did, the victim wins the next cycle's order on the tie and is admitted again, and the
// preemptor evicts it again, every cycle. Upstream's own in-queue targets keep upstream's
// minimisation (parity).
func ownTurnsBeforeShareTargets(cq *schdcache.ClusterQueueSnapshot, targets []*Target, byShare map[*workload.Info]bool) map[*workload.Info]bool {
	keep := map[*workload.Info]bool{}
	shareAfter := false
	for i := len(targets) - 1; i >= 0; i-- {
		t := targets[i]
		if byShare[t.WorkloadInfo] {
			shareAfter = true
			continue
		}
		if shareAfter && t.WorkloadCq == cq && policy.IsOwnReason(t.Reason) {
			keep[t.WorkloadInfo] = true
		}
	}
	return keep
}
