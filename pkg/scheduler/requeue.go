package scheduler

import (
	qcache "sigs.k8s.io/kueue/pkg/cache/queue"
	"sigs.k8s.io/kueue/pkg/workload"
)

// withoutEquivalenceParking swaps a reason that parks equivalent workloads for a generic one
// when the preemptor's refusal of wl depends on the workload.
func (s *Scheduler) withoutEquivalenceParking(reason qcache.RequeueReason, wl *workload.Info) qcache.RequeueReason {
	if reason != qcache.RequeueReasonNoFit && reason != qcache.RequeueReasonPreemptionNoCandidates {
		return reason
	}
	if s.hooks.RefusalsDependOnWorkload != nil && s.hooks.RefusalsDependOnWorkload(wl) {
		return qcache.RequeueReasonGeneric
	}
	return reason
}
