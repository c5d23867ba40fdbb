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

// requeueAndUpdate gives an unadmitted head back to its queue (or to the second-pass queue)
// and tells the user why it waits.
// Upstream's original: (*Scheduler).requeueAndUpdate in sigs.k8s.io/kueue/pkg/scheduler.
func (s *Scheduler) requeueAndUpdate(ctx context.Context, e entry) {
	log := ctrl.LoggerFrom(ctx)
	if e.status != notNominated && e.requeueReason == qcache.RequeueReasonGeneric {
		// The queue decides from this whether the workload may come back at once.
		e.requeueReason = qcache.RequeueReasonFailedAfterNomination
	}
	// timeshare: the preemptor's refusals may depend on the workload, not only on its equivalence class.
	e.requeueReason = s.withoutEquivalenceParking(e.requeueReason, e.ClusterQueue)
	if s.queues.QueueSecondPassIfNeeded(ctx, e.Obj, e.SecondPassIteration) {
		log.V(2).
			Info("Workload re-queued for second pass", "workload", klog.KObj(e.Obj), "clusterQueue", klog.KRef("", string(e.ClusterQueue)), "queue", klog.KRef(e.Obj.Namespace, string(e.Obj.Spec.QueueName)), "requeueReason", e.requeueReason, "status", e.status)
		s.recorder.Eventf(e.Obj, nil, corev1.EventTypeWarning, "SecondPassFailed", "SecondPassFailed", api.TruncateEventMessage(e.inadmissibleMsg))
		return
	}
	added := s.queues.RequeueWorkload(ctx, &e.Info, e.requeueReason, qcache.QuotaReservedReason(e.quotaReservedReason))
	log.V(2).
		Info("Workload re-queued", "workload", klog.KObj(e.Obj), "clusterQueue", klog.KRef("", string(e.ClusterQueue)), "queue", klog.KRef(e.Obj.Namespace, string(e.Obj.Spec.QueueName)), "requeueReason", e.requeueReason, "added", added, "status", e.status)
	if e.status == notNominated || e.status == skipped || e.status == preemptionGated {
		if e.skipStatusUpdate {
			log.V(3).Info("Skipping Workload status update", "workload", klog.KObj(e.Obj), "reason", e.inadmissibleMsg)
			return
		}
		wl := e.Obj.DeepCopy()
		condReason := workload.UnadmittedWorkloadReasonWithFallback(e.quotaReservedReason, "Pending")
		if err := workloadpatching.PatchAdmissionStatus(ctx, s.client, wl, s.clock, func(wl *kueue.Workload) (bool, error) {
			updated := workload.UnsetQuotaReservationWithCondition(wl, condReason, e.inadmissibleMsg, s.clock.Now())
			if workload.PropagateResourceRequests(wl, &e.Info, s.resourceFormatter) {
				updated = true
			}
			if e.status == preemptionGated {
				updated = workload.SetBlockedOnPreemptionGatesCondition(wl, s.clock.Now(), kueue.PreemptionGated, e.inadmissibleMsg)
			}
			return updated, nil
		}, workloadpatching.WithLooseOnApply(), workloadpatching.WithRetryOnConflict()); err != nil {
			log.Error(err, "Could not update Workload status")
		}
		s.recorder.Eventf(e.Obj, nil, corev1.EventTypeWarning, condReason, condReason, api.TruncateEventMessage(e.inadmissibleMsg))
	}
}
