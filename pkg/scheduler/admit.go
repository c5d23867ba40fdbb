package scheduler

import (
	"context"
	"errors"
	"net/http"

	"github.com/go-logr/logr"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"sigs.k8s.io/controller-runtime/pkg/client"

	kueue "sigs.k8s.io/kueue/apis/kueue/v1beta2"
	"sigs.k8s.io/kueue/pkg/features"
	"sigs.k8s.io/kueue/pkg/scheduler/preemption"
	"sigs.k8s.io/kueue/pkg/workload"
	workloadfinish "sigs.k8s.io/kueue/pkg/workload/finish"
)

const errCouldNotAdmitWL = "Could not admit Workload and assign flavors in apiserver"

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
	if latest.UID != wl.UID || !HoldsQuota(latest) {
		return nil
	}
	return latest
}

// HoldsQuota reports whether wl holds quota the scheduler's cache counts: a reservation with its
// admission, and not finished.
func HoldsQuota(wl *kueue.Workload) bool {
	return workload.HasQuotaReservation(wl) && wl.Status.Admission != nil && !workloadfinish.IsFinished(wl)
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

// freeAssumedQuota gives the quota counted for wl, whose reservation was not written, back to the
// workloads that were found not to fit while it was counted: they are put back in their queues,
// as after any release of quota. Without it a workload parked behind a reservation that then
// failed waits until something else changes in its ClusterQueue or cohort, which may be never.
func (s *Scheduler) freeAssumedQuota(ctx context.Context, wl *kueue.Workload) {
	s.queues.QueueAssociatedInadmissibleWorkloadsAfter(ctx, workload.Key(wl), nil)
}
