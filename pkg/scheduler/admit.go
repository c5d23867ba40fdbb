package scheduler

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"time"

	"github.com/go-logr/logr"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/klog/v2"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"

	kueue "sigs.k8s.io/kueue/apis/kueue/v1beta2"
	schdcache "sigs.k8s.io/kueue/pkg/cache/scheduler"
	controllerconstants "sigs.k8s.io/kueue/pkg/controller/constants"
	"sigs.k8s.io/kueue/pkg/features"
	"sigs.k8s.io/kueue/pkg/metrics"
	"sigs.k8s.io/kueue/pkg/scheduler/flavorassigner"
	"sigs.k8s.io/kueue/pkg/scheduler/preemption"
	"sigs.k8s.io/kueue/pkg/util/api"
	utilqueue "sigs.k8s.io/kueue/pkg/util/queue"
	"sigs.k8s.io/kueue/pkg/workload"
	workloadfinish "sigs.k8s.io/kueue/pkg/workload/finish"
	workloadpatching "sigs.k8s.io/kueue/pkg/workload/patching"
)

const msgAdmitWriteFailed = "Could not admit Workload and assign flavors in apiserver"

// admit reserves quota for the head: it is assumed in the cache at once, so the next cycle
// counts it, and the API is written asynchronously. A failed write takes it out of the
// cache again and requeues it. Reserving quota does not by itself admit the workload: that
// waits for its admission checks.
// Upstream's original: (*Scheduler).admit in sigs.k8s.io/kueue/pkg/scheduler.
func (s *Scheduler) admit(ctx context.Context, e *entry, cq *schdcache.ClusterQueueSnapshot, oldSlice *preemption.Target) error {
	log := ctrl.LoggerFrom(ctx)
	admission := &kueue.Admission{
		ClusterQueue:      e.ClusterQueue,
		PodSetAssignments: e.assignment.ToAPI(log),
	}
	flavorsTried := flavorassigner.FormatFlavorAssignmentAttemptsForEvents(e.assignment)

	assumedWl := e.Obj.DeepCopy()
	s.prepareWorkload(log, assumedWl, cq, admission)
	if !s.cache.AddOrUpdateWorkload(log, assumedWl) {
		return fmt.Errorf("workload %s/%s could not be added to the cache", assumedWl.Namespace, assumedWl.Name)
	}
	e.status = assumed
	log.V(2).Info("Workload assumed in the cache")
	penalized := s.shouldApplyEntryPenalty(e)
	if penalized {
		s.updateEntryPenalty(log, e, add)
		// Lets the LocalQueue reconciler pick the pending penalty up.
		s.queues.NotifyWorkloadUpdateWatchers(e.Obj, assumedWl)
	}

	written := e.Obj.DeepCopy()
	s.admissionRoutineWrapper.Run(func() {
		err := workloadpatching.PatchAdmissionStatus(ctx, s.client, written, s.clock, func(wl *kueue.Workload) (bool, error) {
			s.prepareWorkload(log, wl, cq, admission)
			if features.Enabled(features.TopologyAwareScheduling) && workload.HasUnhealthyNodes(e.Obj) {
				log.V(5).Info("Clearing the topology assignment recovery field from the workload status after successful recovery")
				wl.Status.UnhealthyNodes = nil
			}
			return true, nil
		}, workloadpatching.WithLooseOnApply(), workloadpatching.WithRetryOnConflict())
		if err == nil {
			s.admitted(ctx, log, e, written, admission, flavorsTried, oldSlice)
			return
		}
		// The write may have been applied although the request failed (a timeout, a 5xx, a
		// dropped connection): ask the API server; a reservation it holds is kept, not written
		// again with a new start.
		var latest *kueue.Workload
		if writeMayHaveHappened(err) {
			latest = s.reservedInAPIServer(ctx, written)
		}
		// The workload or its ClusterQueue may be gone already; nothing to do then.
		_ = s.cache.DeleteWorkload(log, workload.Key(assumedWl))
		if latest == nil {
			// Without an answer from the API server, the informer's: read after the workload
			// left the cache, it covers the watch event being handled before or after.
			latest = s.reservedDespiteError(ctx, assumedWl)
		}
		if latest != nil {
			// Keep counting the quota it holds, or nothing would: the queue does not take
			// back a workload that holds quota.
			s.cache.AddOrUpdateWorkload(log, latest)
			log.V(2).Info("Quota reservation written although the request failed", "error", err.Error())
			if latest.Status.Admission.ClusterQueue == admission.ClusterQueue {
				s.admitted(ctx, log, e, latest, admission, flavorsTried, oldSlice)
			}
			return
		}
		s.queues.NotifyWorkloadUpdateWatchers(assumedWl, nil)
		if penalized {
			s.updateEntryPenalty(log, e, subtract)
		}
		if apierrors.IsNotFound(err) {
			log.V(2).Info("Workload not admitted because it was deleted")
			return
		}
		log.Error(err, msgAdmitWriteFailed)
		s.requeueAndUpdate(ctx, *e)
	})
	return nil
}

// writeMayHaveHappened reports whether a failed request may still have been applied: the server
// timed out or failed (5xx), or never answered. A 4xx answer (a conflict, throttling, a rejection)
// says it was not.
func writeMayHaveHappened(err error) bool {
	var status apierrors.APIStatus
	if errors.As(err, &status) {
		code := status.Status().Code
		return code == 0 || code >= http.StatusInternalServerError
	}
	return true
}

// reservedInAPIServer reads wl from the API server, when the scheduler has a reader for it, and
// returns it if it holds a quota reservation there; nil if it does not or cannot be read.
func (s *Scheduler) reservedInAPIServer(ctx context.Context, wl *kueue.Workload) *kueue.Workload {
	if s.apiReader == nil {
		return nil
	}
	var latest kueue.Workload
	if err := s.apiReader.Get(ctx, client.ObjectKeyFromObject(wl), &latest); err != nil {
		return nil
	}
	return reservedVersion(wl, &latest)
}

// reservedVersion returns latest if it is wl (same UID) holding a quota reservation, unfinished.
func reservedVersion(wl, latest *kueue.Workload) *kueue.Workload {
	if latest.UID != wl.UID || !workload.HasQuotaReservation(latest) || latest.Status.Admission == nil || workloadfinish.IsFinished(latest) {
		return nil
	}
	return latest
}

// reservedDespiteError returns the workload as the manager last saw it from the API server if it
// holds a quota reservation there, after the request writing that reservation failed. Read after
// the workload left the cache, it covers both orders of the failure and the watch event: an event
// seen before this read is in the result; one seen after adds the workload to the cache itself.
func (s *Scheduler) reservedDespiteError(ctx context.Context, wl *kueue.Workload) *kueue.Workload {
	var latest kueue.Workload
	if err := s.client.Get(ctx, client.ObjectKeyFromObject(wl), &latest); err != nil {
		return nil
	}
	return reservedVersion(wl, &latest)
}

// prepareWorkload writes the admission into wl, and the Admitted condition when no admission
// check is left to wait for.
// Upstream's original: (*Scheduler).prepareWorkload in sigs.k8s.io/kueue/pkg/scheduler.
func (s *Scheduler) prepareWorkload(log logr.Logger, wl *kueue.Workload, cq *schdcache.ClusterQueueSnapshot, admission *kueue.Admission) {
	workload.SetQuotaReservation(wl, admission, s.clock)
	if workload.HasAllRequiredChecks(log, wl, cq.AdmissionChecks) {
		_ = workload.SyncAdmittedCondition(wl, s.clock.Now())
	}
}

// admitted runs once the admission is written.
// Upstream's original: (*Scheduler).recordWorkloadAdmissionMetrics in sigs.k8s.io/kueue/pkg/scheduler.
func (s *Scheduler) admitted(ctx context.Context, log logr.Logger, e *entry, wl *kueue.Workload, admission *kueue.Admission, flavorsTried string, oldSlice *preemption.Target) {
	// The preemptor may still wait on evictions made for this workload (kueue#11480).
	s.preemptor.SatisfyPreemptionExpectation(log, wl)
	wait := workload.QueuedWaitTime(wl, s.clock)
	s.recordQuotaReservationMetrics(log, wl, e.Obj, admission, wait, flavorsTried)
	s.recordWorkloadAdmissionEvents(log, wl, e.Obj, admission, wait)
	log.V(2).Info("Workload successfully admitted and assigned flavors", "assignments", admission.PodSetAssignments)

	if features.Enabled(features.ElasticJobsViaWorkloadSlices) && oldSlice != nil {
		// On failure the job reconciler finds both slices admitted and finishes the old one.
		if err := s.replaceWorkloadSlice(ctx, oldSlice.WorkloadInfo.ClusterQueue, wl, oldSlice.WorkloadInfo.Obj.DeepCopy()); err != nil {
			log.Error(err, "Failed to finish old workload slice after admitting replacement; job reconciler will handle recovery")
		}
	}
}

// recordQuotaReservationMetrics emits the QuotaReserved event and metrics, once per reservation.
// Upstream's original: (*Scheduler).recordQuotaReservationMetrics in sigs.k8s.io/kueue/pkg/scheduler.
func (s *Scheduler) recordQuotaReservationMetrics(log logr.Logger, wl, before *kueue.Workload, admission *kueue.Admission, wait time.Duration, flavorsTried string) {
	if workload.HasQuotaReservation(before) {
		return
	}
	msg := fmt.Sprintf("Quota reserved in ClusterQueue %s, wait time since queued was %.0fs", admission.ClusterQueue, wait.Seconds())
	if flavorsTried != "" {
		msg += "; Flavors considered: " + flavorsTried
	}
	s.recorder.Eventf(wl, nil, corev1.EventTypeNormal, "QuotaReserved", "QuotaReserved", api.TruncateEventMessage(msg))

	cqName := admission.ClusterQueue
	pc := workloadpatching.PriorityClassName(wl)
	metrics.QuotaReservedWorkload(cqName, pc, wait, s.customLabels.CQGet(cqName), s.roleTracker)
	if s.cache.ShouldExposeLocalQueueMetricsForWorkload(log, wl) {
		metrics.LocalQueueQuotaReservedWorkload(metrics.LQRefFromWorkload(wl), pc, wait, s.customLabels.LQGet(utilqueue.KeyFromWorkload(wl)), s.roleTracker)
	}
}

// recordWorkloadAdmissionEvents emits the Admitted event and metrics when the reservation also admitted
// the workload. A workload recovering from a failed node was admitted before: no event.
// Upstream's original: (*Scheduler).recordWorkloadAdmissionEvents in sigs.k8s.io/kueue/pkg/scheduler.
func (s *Scheduler) recordWorkloadAdmissionEvents(log logr.Logger, wl, before *kueue.Workload, admission *kueue.Admission, wait time.Duration) {
	if !workload.IsAdmitted(wl) || workload.HasUnhealthyNodes(before) {
		return
	}
	cqName := admission.ClusterQueue
	s.recorder.Eventf(wl, nil, corev1.EventTypeNormal, "Admitted", "Admitted", "Admitted by ClusterQueue %s, wait time since reservation was 0s", cqName)

	pc := workloadpatching.PriorityClassName(wl)
	cqLabels := s.customLabels.CQGet(cqName)
	s.cache.ReportCohortSubtreeAdmittedWorkload(log, wl)
	metrics.AdmittedWorkload(cqName, pc, wait, cqLabels, s.roleTracker)
	lqMetrics := s.cache.ShouldExposeLocalQueueMetricsForWorkload(log, wl)
	lqRef := metrics.LQRefFromWorkload(wl)
	if lqMetrics {
		metrics.LocalQueueAdmittedWorkload(lqRef, pc, wait, s.customLabels.LQGet(utilqueue.KeyFromWorkload(wl)), s.roleTracker)
	}
	if len(wl.Status.AdmissionChecks) == 0 {
		return
	}
	// Admitted in the same write as reserved: no time was spent on checks.
	metrics.ReportAdmissionChecksWaitTime(cqName, pc, 0, cqLabels, s.roleTracker)
	if lqMetrics {
		metrics.ReportLocalQueueAdmissionChecksWaitTime(lqRef, pc, 0, s.customLabels.LQGet(utilqueue.KeyFromWorkload(wl)), s.roleTracker)
	}
}

// replaceWorkloadSlice finishes the slice an admitted elastic workload replaces.
// Upstream's original: (*Scheduler).replaceWorkloadSlice in sigs.k8s.io/kueue/pkg/scheduler.
func (s *Scheduler) replaceWorkloadSlice(ctx context.Context, oldCQ kueue.ClusterQueueReference, newSlice, oldSlice *kueue.Workload) error {
	log := ctrl.LoggerFrom(ctx)
	if workloadfinish.IsFinished(oldSlice) {
		log.V(3).Info("Workload slice already finished", "old-slice", klog.KObj(oldSlice), "new-slice", klog.KObj(newSlice))
		return nil
	}
	reason := kueue.WorkloadSliceReplaced
	msg := fmt.Sprintf("Replaced to accommodate a workload (UID: %s, JobUID: %s) due to workload slice aggregation", newSlice.UID, newSlice.Labels[controllerconstants.JobUIDLabel])
	if err := workloadfinish.Finish(ctx, s.client, oldSlice, reason, msg, s.clock); err != nil {
		return fmt.Errorf("failed to replace workload slice: %w", err)
	}
	log.V(3).Info("Replaced", "old slice", klog.KObj(oldSlice), "new slice", klog.KObj(newSlice), "reason", reason, "message", msg, "old-queue", klog.KRef("", string(oldCQ)))
	s.recorder.Eventf(oldSlice, nil, corev1.EventTypeNormal, reason, "Replaced", msg)
	metrics.ReportReplacedWorkloadSlices(oldCQ, s.customLabels.CQGet(oldCQ), s.roleTracker)
	return nil
}
