package scheduler

import (
	"fmt"

	"github.com/go-logr/logr"
	"k8s.io/utils/ptr"

	qcache "sigs.k8s.io/kueue/pkg/cache/queue"
	schdcache "sigs.k8s.io/kueue/pkg/cache/scheduler"
	"sigs.k8s.io/kueue/pkg/features"
	"sigs.k8s.io/kueue/pkg/resources"
	"sigs.k8s.io/kueue/pkg/scheduler/flavorassigner"
	"sigs.k8s.io/kueue/pkg/scheduler/preemption"
	"sigs.k8s.io/kueue/pkg/workload"
)

// entryStatus is where a head got to in this cycle. It decides how the head is requeued
// and whether its QuotaReserved condition is written.
type entryStatus string

const (
	// notNominated: never got past the checks before admission (the zero value).
	notNominated entryStatus = ""
	// nominated: admission was attempted.
	nominated entryStatus = "nominated"
	// skipped: lost to another head in this cycle.
	skipped entryStatus = "skipped"
	// preemptionGated: needs preemption, which its preemption gate forbids for now.
	preemptionGated entryStatus = "preemptionGated"
	// evicted: the scheduler evicted it (failed node replacement).
	evicted entryStatus = "evicted"
	// assumed: admitted in the cache; the API write is in flight.
	assumed entryStatus = "assumed"
)

// entry is a head with what this cycle decided for it.
type entry struct {
	qcache.Head
	clusterQueueSnapshot *schdcache.ClusterQueueSnapshot
	assignment           flavorassigner.Assignment
	preemptionTargets    []*preemption.Target

	status entryStatus
	// inadmissibleMsg and quotaReservedReason go into the QuotaReserved condition when the head
	// is requeued without admission.
	inadmissibleMsg     string
	quotaReservedReason string
	requeueReason       qcache.RequeueReason
	// skipStatusUpdate keeps the condition untouched after an internal error.
	skipStatusUpdate bool
	// holdQuota is the preemptor's verdict that a head with no victims keeps the quota it waits
	// for (WaitVerdict.HoldQuota).
	holdQuota bool
}

// Upstream's original: (*entry).markEvicted in sigs.k8s.io/kueue/pkg/scheduler.
func (e *entry) markEvicted() {
	e.status = evicted
}

// Upstream's original: (*entry).markNominated in sigs.k8s.io/kueue/pkg/scheduler.
func (e *entry) markNominated() {
	e.status = nominated
}

// Upstream's original: (*entry).markAssumed in sigs.k8s.io/kueue/pkg/scheduler.
func (e *entry) markAssumed() {
	e.status = assumed
}

// recordAssignment records a computed assignment and its scan progress, from which a requeued
// head resumes. The progress is held apart from the entry because entries move when sorted.
// Upstream's original: (*entry).recordAssignment in sigs.k8s.io/kueue/pkg/scheduler.
func (e *entry) recordAssignment(a flavorassigner.Assignment, targets []*preemption.Target) {
	e.assignment = a
	e.preemptionTargets = targets
	e.inadmissibleMsg = e.assignment.Message()
	e.LastAssignment = &e.assignment.LastState
	// timeshare: upstream's pointer into e.assignment would follow the slot, not the entry, once
	// the iterator sorts the entries; a copy stays with the workload.
	e.LastAssignment = ptr.To(e.assignment.LastState)
}

// markSkipped marks a head that lost to another one this cycle. The flavor scan progress is kept
// under FlavorFungibilityPreserveScanProgress: the head lost on contention, not on the
// flavor, so what was tried is still the best information.
// Upstream's original: (*entry).markSkipped in sigs.k8s.io/kueue/pkg/scheduler.
func (e *entry) markSkipped(msg string) {
	e.status = skipped
	e.inadmissibleMsg = msg
	if !features.Enabled(features.FlavorFungibilityPreserveScanProgress) {
		e.LastAssignment = nil
	}
}

// markPreemptionGated marks a head whose preemption is held by a closed preemption gate; all flavors are
// tried again next time.
// Upstream's original: (*entry).markPreemptionGated in sigs.k8s.io/kueue/pkg/scheduler.
func (e *entry) markPreemptionGated(msg string) {
	e.status = preemptionGated
	e.inadmissibleMsg = msg
	e.requeueReason = qcache.RequeueReasonPreemptionGated
	e.LastAssignment = nil
}

// markPreemptionOutcome records what IssuePreemptions did. Victims change the picture, so the
// flavor scan starts over next time.
// Upstream's original: (*entry).markPreemptionOutcome in sigs.k8s.io/kueue/pkg/scheduler.
func (e *entry) markPreemptionOutcome(preempted, errors int) {
	e.LastAssignment = nil
	if preempted != 0 {
		e.inadmissibleMsg += fmt.Sprintf(". Pending the preemption of %d workload(s)", preempted)
		e.requeueReason = qcache.RequeueReasonPendingPreemption
	} else if errors > 0 {
		e.inadmissibleMsg += fmt.Sprintf(". Preempting %d workload(s) failed, will retry.", errors)
		e.requeueReason = qcache.RequeueReasonPreemptionFailed
	}
}

// assignmentUsage is the quota and topology this head adds to its ClusterQueue when admitted.
// Upstream's original: (*entry).assignmentUsage in sigs.k8s.io/kueue/pkg/scheduler.
func (e *entry) assignmentUsage(log logr.Logger) workload.Usage {
	return netUsage(log, e, e.assignment.Usage.Quota)
}

// netUsage adds what is new: a head that already holds quota (second pass) brings only its
// topology usage.
// Upstream's original: netUsage in sigs.k8s.io/kueue/pkg/scheduler.
func netUsage(log logr.Logger, e *entry, netQuota resources.FlavorResourceQuantities) workload.Usage {
	result := workload.Usage{}
	if features.Enabled(features.TopologyAwareScheduling) {
		result.TAS = e.assignment.ComputeTASNetUsage(log, e.clusterQueueSnapshot, &e.Info, e.Obj.Status.Admission)
	}
	if !workload.HasQuotaReservation(e.Obj) {
		result.Quota = netQuota
	}
	return result
}

// readResourceToFlavorMapping maps each pod set's resources to the flavors of the current assignment.
// Upstream's original: (*entry).readResourceToFlavorMapping in sigs.k8s.io/kueue/pkg/scheduler.
func (e *entry) readResourceToFlavorMapping() workload.PodSetResourcesToFlavors {
	flavors := make(workload.PodSetResourcesToFlavors, len(e.assignment.PodSets))
	for _, ps := range e.assignment.PodSets {
		flavors[ps.Name] = make(workload.ResourceToFlavor)
		for resName, flavor := range ps.Flavors {
			flavors[ps.Name][resName] = flavor.Name
		}
	}
	return flavors
}
