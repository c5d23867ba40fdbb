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

const errCouldNotAdmitWL = "Could not admit Workload and assign flavors in apiserver"

// admit reserves quota for the head: it is assumed in the cache at once, so the next cycle
// counts it, and the API is written asynchronously. A failed write takes it out of the
// cache again and requeues it. Reserving quota does not by itself admit the workload: that
// waits for its admission checks.
// Upstream's original: (*Scheduler).admit in sigs.k8s.io/kueue/pkg/scheduler.
func (s *Scheduler) admit(ctx context.Context, e *entry, cq *schdcache.ClusterQueueSnapshot, oldWorkloadSlice *preemption.Target) error {
	log := ctrl.LoggerFrom(ctx)
	admission := &kueue.Admission{
		ClusterQueue:      e.ClusterQueue,
		PodSetAssignments: e.assignment.ToAPI(log),
	}
	consideredStr := flavorassigner.FormatFlavorAssignmentAttemptsForEvents(e.assignment)
	cacheWl, err := s.assumeWorkload(log, e, cq, admission)
	if err != nil {
		return err
	}
	newWorkload := e.Obj.DeepCopy()
	s.admissionRoutineWrapper.Run(func() {
		err := workloadpatching.PatchAdmissionStatus(ctx, s.client, newWorkload, s.clock, func(wl *kueue.Workload) (bool, error) {
			s.prepareWorkload(log, wl, cq, admission)
			if features.Enabled(features.TopologyAwareScheduling) && workload.HasUnhealthyNodes(e.Obj) {
				log.V(5).Info("Clearing the topology assignment recovery field from the workload status after successful recovery")
				wl.Status.UnhealthyNodes = nil
			}
			return true, nil
		}, workloadpatching.WithLooseOnApply(), workloadpatching.WithRetryOnConflict())
		if err == nil {
			// The preemptor may still wait on evictions made for this workload (kueue#11480).
			s.preemptor.SatisfyPreemptionExpectation(log, newWorkload)
			s.recordWorkloadAdmissionMetrics(log, newWorkload, e.Obj, admission, consideredStr)
			log.V(2).Info("Workload successfully admitted and assigned flavors", "assignments", admission.PodSetAssignments)
			if features.Enabled(features.ElasticJobsViaWorkloadSlices) && oldWorkloadSlice != nil {
				s.replaceOldWorkloadSlice(ctx, log, e, oldWorkloadSlice)
			}
			return
		}
		// timeshare: a write that failed may still have been applied; the API server is asked first.
		if s.keepWrittenReservation(ctx, log, e, s.reservedInAPIServerIfWritten(ctx, newWorkload, err), admission, consideredStr, oldWorkloadSlice, err) {
			return
		}
		// The workload or its ClusterQueue may be gone already; nothing to do then.
		_ = s.cache.DeleteWorkload(log, workload.Key(cacheWl))
		// timeshare: then the informer, read after the workload left the cache.
		if s.keepWrittenReservation(ctx, log, e, s.reservedDespiteError(ctx, cacheWl), admission, consideredStr, oldWorkloadSlice, err) {
			return
		}
		s.queues.NotifyWorkloadUpdateWatchers(cacheWl, nil)
		if s.shouldApplyEntryPenalty(e) {
			s.updateEntryPenalty(log, e, subtract)
		}
		if apierrors.IsNotFound(err) {
			log.V(2).Info("Workload not admitted because it was deleted")
			return
		}
		log.Error(err, errCouldNotAdmitWL)
		s.requeueAndUpdate(ctx, *e)
	})
	return nil
}

// keepWrittenReservation keeps latest, the workload holding the quota reservation whose write
// failed (nil when it does not hold one), in the cache, so that its quota keeps being counted:
// the queue does not take back a workload that holds quota. It reports whether it did. The
// reservation is recorded as admit records it when it was written to the same ClusterQueue.
func (s *Scheduler) keepWrittenReservation(ctx context.Context, log logr.Logger, e *entry, latest *kueue.Workload, admission *kueue.Admission, consideredStr string, oldWorkloadSlice *preemption.Target, err error) bool {
	if latest == nil {
		return false
	}
	_ = s.cache.DeleteWorkload(log, workload.Key(latest))
	s.cache.AddOrUpdateWorkload(log, latest)
	log.V(2).Info("Quota reservation written although the request failed", "error", err.Error())
	if latest.Status.Admission.ClusterQueue != admission.ClusterQueue {
		return true
	}
	s.preemptor.SatisfyPreemptionExpectation(log, latest)
	s.recordWorkloadAdmissionMetrics(log, latest, e.Obj, admission, consideredStr)
	log.V(2).Info("Workload successfully admitted and assigned flavors", "assignments", admission.PodSetAssignments)
	if features.Enabled(features.ElasticJobsViaWorkloadSlices) && oldWorkloadSlice != nil {
		s.replaceOldWorkloadSlice(ctx, log, e, oldWorkloadSlice)
	}
	return true
}

// reservedInAPIServerIfWritten asks the API server when err leaves open whether the write happened.
func (s *Scheduler) reservedInAPIServerIfWritten(ctx context.Context, wl *kueue.Workload, err error) *kueue.Workload {
	if !writeMayHaveHappened(err) {
		return nil
	}
	return s.reservedInAPIServer(ctx, wl)
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

// assumeWorkload counts the head in the cache at once, so that the next cycle sees its usage
// before the API write lands.
// Upstream's original: (*Scheduler).assumeWorkload in sigs.k8s.io/kueue/pkg/scheduler.
func (s *Scheduler) assumeWorkload(log logr.Logger, e *entry, cq *schdcache.ClusterQueueSnapshot, admission *kueue.Admission) (*kueue.Workload, error) {
	cacheWl := e.Obj.DeepCopy()
	s.prepareWorkload(log, cacheWl, cq, admission)
	if added := s.cache.AddOrUpdateWorkload(log, cacheWl); !added {
		return nil, fmt.Errorf("workload %s/%s could not be added to the cache", cacheWl.Namespace, cacheWl.Name)
	}
	e.markAssumed()
	log.V(2).Info("Workload assumed in the cache")
	if s.shouldApplyEntryPenalty(e) {
		s.updateEntryPenalty(log, e, add)
		// Lets the LocalQueue reconciler pick the pending penalty up.
		s.queues.NotifyWorkloadUpdateWatchers(e.Obj, cacheWl)
	}
	return cacheWl, nil
}

// recordWorkloadAdmissionMetrics records a written reservation and, when no check is left, the admission.
// Upstream's original: (*Scheduler).recordWorkloadAdmissionMetrics in sigs.k8s.io/kueue/pkg/scheduler.
func (s *Scheduler) recordWorkloadAdmissionMetrics(log logr.Logger, newWorkload, originalWorkload *kueue.Workload, admission *kueue.Admission, consideredFlavors string) {
	waitTime := workload.QueuedWaitTime(newWorkload, s.clock)
	s.recordQuotaReservationMetrics(log, newWorkload, originalWorkload, admission, waitTime, consideredFlavors)
	s.recordWorkloadAdmissionEvents(log, newWorkload, originalWorkload, admission, waitTime)
}

// replaceOldWorkloadSlice finishes the slice the admitted one replaces. On failure the job
// reconciler finds both slices admitted and finishes the old one.
// Upstream's original: (*Scheduler).replaceOldWorkloadSlice in sigs.k8s.io/kueue/pkg/scheduler.
func (s *Scheduler) replaceOldWorkloadSlice(ctx context.Context, log logr.Logger, e *entry, oldWorkloadSlice *preemption.Target) {
	if err := s.replaceWorkloadSlice(ctx, oldWorkloadSlice.WorkloadInfo.ClusterQueue, e.Obj, oldWorkloadSlice.WorkloadInfo.Obj.DeepCopy()); err != nil {
		log.Error(err, "Failed to finish old workload slice after admitting replacement; job reconciler will handle recovery")
	}
}

// recordQuotaReservationMetrics emits the QuotaReserved event and metrics, once per reservation.
// Upstream's original: (*Scheduler).recordQuotaReservationMetrics in sigs.k8s.io/kueue/pkg/scheduler.
func (s *Scheduler) recordQuotaReservationMetrics(log logr.Logger, newWorkload, originalWorkload *kueue.Workload, admission *kueue.Admission, waitTime time.Duration, consideredFlavors string) {
	if workload.HasQuotaReservation(originalWorkload) {
		return
	}

	quotaReservedEventMessage := fmt.Sprintf("Quota reserved in ClusterQueue %s, wait time since queued was %.0fs", admission.ClusterQueue, waitTime.Seconds())
	if consideredFlavors != "" {
		quotaReservedEventMessage += fmt.Sprintf("; Flavors considered: %s", consideredFlavors)
	}

	s.recorder.Eventf(newWorkload, nil, corev1.EventTypeNormal, "QuotaReserved", "QuotaReserved", api.TruncateEventMessage(quotaReservedEventMessage))

	priorityClassName := workloadpatching.PriorityClassName(newWorkload)
	metrics.QuotaReservedWorkload(admission.ClusterQueue, priorityClassName, waitTime, s.customLabels.CQGet(admission.ClusterQueue), s.roleTracker)
	lqRef := metrics.LQRefFromWorkload(newWorkload)
	if s.cache.ShouldExposeLocalQueueMetricsForWorkload(log, newWorkload) {
		metrics.LocalQueueQuotaReservedWorkload(lqRef, priorityClassName, waitTime, s.customLabels.LQGet(utilqueue.KeyFromWorkload(newWorkload)), s.roleTracker)
	}
}

// recordWorkloadAdmissionEvents emits the Admitted event and metrics when the reservation also admitted
// the workload. A workload recovering from a failed node was admitted before: no event.
// Upstream's original: (*Scheduler).recordWorkloadAdmissionEvents in sigs.k8s.io/kueue/pkg/scheduler.
func (s *Scheduler) recordWorkloadAdmissionEvents(log logr.Logger, newWorkload, originalWorkload *kueue.Workload, admission *kueue.Admission, waitTime time.Duration) {
	if !workload.IsAdmitted(newWorkload) || workload.HasUnhealthyNodes(originalWorkload) {
		return
	}

	s.recorder.Eventf(newWorkload, nil, corev1.EventTypeNormal, "Admitted", "Admitted", "Admitted by ClusterQueue %s, wait time since reservation was 0s", admission.ClusterQueue)

	priorityClassName := workloadpatching.PriorityClassName(newWorkload)
	cqCustomLabels := s.customLabels.CQGet(admission.ClusterQueue)
	s.cache.ReportCohortSubtreeAdmittedWorkload(log, newWorkload)
	metrics.AdmittedWorkload(admission.ClusterQueue, priorityClassName, waitTime, cqCustomLabels, s.roleTracker)
	shouldExposeLqMetrics := s.cache.ShouldExposeLocalQueueMetricsForWorkload(log, newWorkload)
	if shouldExposeLqMetrics {
		lqRef := metrics.LQRefFromWorkload(newWorkload)
		lqCustomLabels := s.customLabels.LQGet(utilqueue.KeyFromWorkload(newWorkload))
		metrics.LocalQueueAdmittedWorkload(lqRef, priorityClassName, waitTime, lqCustomLabels, s.roleTracker)
	}

	if len(newWorkload.Status.AdmissionChecks) > 0 {
		metrics.ReportAdmissionChecksWaitTime(admission.ClusterQueue, priorityClassName, 0, cqCustomLabels, s.roleTracker)
		if shouldExposeLqMetrics {
			lqRef := metrics.LQRefFromWorkload(newWorkload)
			metrics.ReportLocalQueueAdmissionChecksWaitTime(lqRef, priorityClassName, 0, s.customLabels.LQGet(utilqueue.KeyFromWorkload(newWorkload)), s.roleTracker)
		}
	}
}

// replaceWorkloadSlice finishes the slice an admitted elastic workload replaces.
// Upstream's original: (*Scheduler).replaceWorkloadSlice in sigs.k8s.io/kueue/pkg/scheduler.
func (s *Scheduler) replaceWorkloadSlice(ctx context.Context, oldQueue kueue.ClusterQueueReference, newSlice, oldSlice *kueue.Workload) error {
	log := ctrl.LoggerFrom(ctx)
	if workloadfinish.IsFinished(oldSlice) {
		log.V(3).Info("Workload slice already finished", "old-slice", klog.KObj(oldSlice), "new-slice", klog.KObj(newSlice))
		return nil
	}
	reason := kueue.WorkloadSliceReplaced
	message := fmt.Sprintf("Replaced to accommodate a workload (UID: %s, JobUID: %s) due to workload slice aggregation", newSlice.UID, newSlice.Labels[controllerconstants.JobUIDLabel])
	if err := workloadfinish.Finish(ctx, s.client, oldSlice, reason, message, s.clock); err != nil {
		return fmt.Errorf("failed to replace workload slice: %w", err)
	}

	log.V(3).Info("Replaced", "old slice", klog.KObj(oldSlice), "new slice", klog.KObj(newSlice), "reason", reason, "message", message, "old-queue", klog.KRef("", string(oldQueue)))
	s.recorder.Eventf(oldSlice, nil, corev1.EventTypeNormal, reason, "Replaced", message)
	metrics.ReportReplacedWorkloadSlices(oldQueue, s.customLabels.CQGet(oldQueue), s.roleTracker)
	return nil
}
