package scheduler

import (
	"context"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/klog/v2"
	ctrl "sigs.k8s.io/controller-runtime"

	kueue "sigs.k8s.io/kueue/apis/kueue/v1beta2"
	qcache "sigs.k8s.io/kueue/pkg/cache/queue"
	"sigs.k8s.io/kueue/pkg/util/api"
	"sigs.k8s.io/kueue/pkg/workload"
	workloadpatching "sigs.k8s.io/kueue/pkg/workload/patching"
)

// requeueReasonFor is the reason the queue manager gets. A head that got past nomination
// and failed without a more specific reason failed after nomination, which the queue uses
// to decide whether it may come back right away.
func requeueReasonFor(e *entry) qcache.RequeueReason {
	if e.status != notNominated && e.requeueReason == qcache.RequeueReasonGeneric {
		return qcache.RequeueReasonFailedAfterNomination
	}
	return e.requeueReason
}

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

// writesCondition reports whether a head requeued with this status gets its QuotaReserved
// condition (and a warning event) updated. Nominated and assumed heads are handled by the
// admission path.
func writesCondition(status entryStatus) bool {
	return status == notNominated || status == skipped || status == preemptionGated
}

// requeueAndUpdate gives an unadmitted head back to its queue (or to the second-pass queue)
// and tells the user why it waits.
// Upstream's original: (*Scheduler).requeueAndUpdate in sigs.k8s.io/kueue/pkg/scheduler.
func (s *Scheduler) requeueAndUpdate(ctx context.Context, e entry) {
	log := ctrl.LoggerFrom(ctx)
	e.requeueReason = s.withoutEquivalenceParking(requeueReasonFor(&e), e.ClusterQueue)
	wlRef := klog.KObj(e.Obj)
	cqRef := klog.KRef("", string(e.ClusterQueue))
	lqRef := klog.KRef(e.Obj.Namespace, string(e.Obj.Spec.QueueName))

	if s.queues.QueueSecondPassIfNeeded(ctx, e.Obj, e.SecondPassIteration) {
		log.V(2).Info("Workload re-queued for second pass", "workload", wlRef, "clusterQueue", cqRef, "queue", lqRef, "requeueReason", e.requeueReason, "status", e.status)
		s.recorder.Eventf(e.Obj, nil, corev1.EventTypeWarning, "SecondPassFailed", "SecondPassFailed", api.TruncateEventMessage(e.inadmissibleMsg))
		return
	}

	added := s.queues.RequeueWorkload(ctx, &e.Info, e.requeueReason, qcache.QuotaReservedReason(e.quotaReservedReason))
	log.V(2).Info("Workload re-queued", "workload", wlRef, "clusterQueue", cqRef, "queue", lqRef, "requeueReason", e.requeueReason, "added", added, "status", e.status)
	if !writesCondition(e.status) {
		return
	}
	if e.skipStatusUpdate {
		log.V(3).Info("Skipping Workload status update", "workload", wlRef, "reason", e.inadmissibleMsg)
		return
	}
	reason := workload.UnadmittedWorkloadReasonWithFallback(e.quotaReservedReason, "Pending")
	wl := e.Obj.DeepCopy()
	now := s.clock.Now
	err := workloadpatching.PatchAdmissionStatus(ctx, s.client, wl, s.clock, func(wl *kueue.Workload) (bool, error) {
		changed := workload.UnsetQuotaReservationWithCondition(wl, reason, e.inadmissibleMsg, now())
		if workload.PropagateResourceRequests(wl, &e.Info, s.resourceFormatter) {
			changed = true
		}
		if e.status == preemptionGated {
			changed = workload.SetBlockedOnPreemptionGatesCondition(wl, now(), kueue.PreemptionGated, e.inadmissibleMsg)
		}
		return changed, nil
	}, workloadpatching.WithLooseOnApply(), workloadpatching.WithRetryOnConflict())
	if err != nil {
		log.Error(err, "Could not update Workload status")
	}
	s.recorder.Eventf(e.Obj, nil, corev1.EventTypeWarning, reason, reason, api.TruncateEventMessage(e.inadmissibleMsg))
}
