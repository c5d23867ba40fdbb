package scheduler

import (
	kueue "sigs.k8s.io/kueue/apis/kueue/v1beta2"
	qcache "sigs.k8s.io/kueue/pkg/cache/queue"
)

// withoutEquivalenceParking swaps a reason that parks equivalent workloads for a generic one
// when the preemptor's refusals depend on the workload.
func (s *Scheduler) withoutEquivalenceParking(reason qcache.RequeueReason, cq kueue.ClusterQueueReference) qcache.RequeueReason {
	if reason != qcache.RequeueReasonNoFit && reason != qcache.RequeueReasonPreemptionNoCandidates {
		return reason
	}
	if s.hooks.RefusalsDependOnWorkload != nil && s.hooks.RefusalsDependOnWorkload(cq) {
		return qcache.RequeueReasonGeneric
	}
	return reason
}
