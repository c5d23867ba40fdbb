package scheduler

import (
	"context"
	"errors"
	"fmt"

	"k8s.io/klog/v2"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/log"

	kueue "sigs.k8s.io/kueue/apis/kueue/v1beta2"
	qcache "sigs.k8s.io/kueue/pkg/cache/queue"
	schdcache "sigs.k8s.io/kueue/pkg/cache/scheduler"
	"sigs.k8s.io/kueue/pkg/features"
	"sigs.k8s.io/kueue/pkg/scheduler/flavorassigner"
	"sigs.k8s.io/kueue/pkg/scheduler/preemption"
	"sigs.k8s.io/kueue/pkg/scheduler/preemption/fairsharing"
	"sigs.k8s.io/kueue/pkg/workload"
	"sigs.k8s.io/kueue/pkg/workloadslicing"
)

// nominate computes an assignment for every head that may be admitted. Heads that cannot
// be considered at all come back in rejected, with the reason already set; heads the
// cache already accounts for (and that need no second pass) are dropped.
// Upstream's original: (*Scheduler).nominate in sigs.k8s.io/kueue/pkg/scheduler.
func (s *Scheduler) nominate(ctx context.Context, heads []qcache.Head, snap *schdcache.Snapshot) ([]entry, []entry) {
	log := ctrl.LoggerFrom(ctx)
	entries := make([]entry, 0, len(heads))
	var inadmissibleEntries []entry
	for _, h := range heads {
		log := log.WithValues("workload", klog.KObj(h.Obj), "clusterQueue", klog.KRef("", string(h.ClusterQueue)))
		e := entry{Head: h}
		e.clusterQueueSnapshot = snap.ClusterQueue(h.ClusterQueue)
		if !workload.NeedsSecondPass(h.Obj) && s.cache.IsAdded(h.Info) {
			log.Info("Workload skipped from admission because it's already accounted in cache, and it does not need second pass", "workload", klog.KObj(h.Obj))
			continue
		} else if workload.HasRetryChecks(h.Obj) || workload.HasRejectedChecks(h.Obj) {
			e.inadmissibleMsg = "The workload has failed admission checks"
			e.quotaReservedReason = kueue.WorkloadQuotaReservedReasonPendingEvaluation
		} else if snap.InactiveClusterQueueSets.Has(h.ClusterQueue) {
			e.inadmissibleMsg = fmt.Sprintf("ClusterQueue %s is inactive", h.ClusterQueue)
			e.quotaReservedReason = kueue.WorkloadQuotaReservedReasonSuspended
		} else if e.clusterQueueSnapshot == nil {
			e.inadmissibleMsg = fmt.Sprintf("ClusterQueue %s not found", h.ClusterQueue)
			e.quotaReservedReason = kueue.WorkloadQuotaReservedReasonMisconfigured
		} else if err := workload.ValidateAdmissibility(ctx, s.client, &h.Info, e.clusterQueueSnapshot.NamespaceSelector); err != nil {
			e.inadmissibleMsg = err.Error()
			if errors.Is(err, workload.ErrInternal) {
				log.Error(err, "Failed to validate workload admissibility")
				e.skipStatusUpdate = true
			} else {
				e.quotaReservedReason = kueue.WorkloadQuotaReservedReasonMisconfigured
				if errors.Is(err, workload.ErrNamespaceMismatch) {
					e.requeueReason = qcache.RequeueReasonNamespaceMismatch
				}
			}
		} else {
			assignment, targets := s.getAssignments(ctx, &e.Info, snap)
			e.recordAssignment(assignment, targets)
			entries = append(entries, e)
			continue
		}
		inadmissibleEntries = append(inadmissibleEntries, e)
	}
	return entries, inadmissibleEntries
}

// getAssignments chooses flavors for wl and, when it needs preemption, the victims.
// Upstream's original: (*Scheduler).getAssignments in sigs.k8s.io/kueue/pkg/scheduler.
func (s *Scheduler) getAssignments(ctx context.Context, wl *workload.Info, snap *schdcache.Snapshot) (flavorassigner.Assignment, []*preemption.Target) {
	cq := snap.ClusterQueue(wl.ClusterQueue)

	if wl.LastAssignment != nil && lastAssignmentOutdated(wl.LastAssignment, cq.AllocatableResourceGeneration, s.schedulingCycle, wl.SchedulingHash) {
		log.FromContext(ctx).V(6).Info("Clearing Workload's last assignment because it was outdated",
			"cq.AllocatableResourceGeneration", cq.AllocatableResourceGeneration,
			"wl.LastAssignment.ClusterQueueGeneration", wl.LastAssignment.ClusterQueueGeneration)
		wl.LastAssignment = nil
	}
	// timeshare: a resumed flavor scan that finds nothing usable may be run again from the first flavor.
	resumed := wl.LastAssignment != nil && wl.LastAssignment.PendingFlavors()
	assignment, targets := s.getInitialAssignments(ctx, wl, snap)
	// timeshare: (see rescanIfResumedScanFailed)
	assignment, targets = s.rescanIfResumedScanFailed(ctx, wl, snap, resumed, assignment, targets)
	updateAssignmentForTAS(ctx, snap, cq, wl, &assignment, targets)
	return assignment, targets
}

// rescanIfResumedScanFailed scans all flavors again when the scan resumed past flavors this head
// lost only to other heads and the rest give it nothing. Those flavors are still its best: scan
// them all, as the next cycle would. Else the outcome, and the pending message written with it,
// alternates every cycle while another head keeps taking the first flavor (a head holding quota
// it waits for).
func (s *Scheduler) rescanIfResumedScanFailed(ctx context.Context, wl *workload.Info, snap *schdcache.Snapshot, resumed bool, a flavorassigner.Assignment, targets []*preemption.Target) (flavorassigner.Assignment, []*preemption.Target) {
	if !resumed || usable(a, targets) || !s.retriedEveryCycle(ctx, wl.ClusterQueue) {
		return a, targets
	}
	ctrl.LoggerFrom(ctx).V(3).Info("Resumed flavor scan found no usable flavor; scanning from the first", "workload", klog.KObj(wl.Obj))
	wl.LastAssignment = nil
	return s.getInitialAssignments(ctx, wl, snap)
}

// retriedEveryCycle reports whether the queue of the ClusterQueue gives a head back for the next
// cycle whatever its outcome: StrictFIFO never sets a head aside. Elsewhere a second scan could
// decide that: the queue parks a head as inadmissible once its progress says every flavor was
// tried, and retries it at once while flavors are left, which a scan from the first one leaves.
func (s *Scheduler) retriedEveryCycle(ctx context.Context, name kueue.ClusterQueueReference) bool {
	var cq kueue.ClusterQueue
	if err := s.client.Get(ctx, client.ObjectKey{Name: string(name)}, &cq); err != nil {
		// Without the strategy, do as upstream's loop does: keep the resumed scan.
		return false
	}
	return cq.Spec.QueueingStrategy == kueue.StrictFIFO
}

// usable reports whether an assignment lets the workload in: it fits, or its victims are known.
func usable(a flavorassigner.Assignment, targets []*preemption.Target) bool {
	switch a.RepresentativeMode() {
	case flavorassigner.Fit:
		return true
	case flavorassigner.Preempt:
		return len(targets) > 0
	}
	return false
}

// lastAssignmentOutdated reports whether a recorded flavor scan no longer applies, so that the
// scan has to start from the first flavor.
// Upstream's original: lastAssignmentOutdated in sigs.k8s.io/kueue/pkg/scheduler.
func lastAssignmentOutdated(last *workload.AssignmentClusterQueueState, currentCQGeneration, currentSchedulingCycle int64, currentSchedulingHash workload.EquivalenceHash) bool {
	if features.Enabled(features.FlavorFungibilityPreserveScanProgress) {

		if !last.MatchesSchedulingShape(currentSchedulingHash) {
			return true
		}

		if currentSchedulingCycle-last.SchedulingCycle <= 1 {
			return false
		}
	}
	return currentCQGeneration > last.ClusterQueueGeneration
}

// partialAssignment is one candidate of the partial admission search.
type partialAssignment struct {
	assignment        flavorassigner.Assignment
	preemptionTargets []*preemption.Target
}

// getInitialAssignments tries the full pod counts first, then, if the workload allows it, smaller
// counts. An elastic workload's replaced slice is always among the targets.
// Upstream's original: (*Scheduler).getInitialAssignments in sigs.k8s.io/kueue/pkg/scheduler.
func (s *Scheduler) getInitialAssignments(ctx context.Context, wl *workload.Info, snap *schdcache.Snapshot) (flavorassigner.Assignment, []*preemption.Target) {
	cq := snap.ClusterQueue(wl.ClusterQueue)

	preemptionTargets, replaceableWorkloadSlice := workloadslicing.ReplacedWorkloadSlice(wl, snap)
	flvAssigner := flavorassigner.New(
		wl, cq, snap.ResourceFlavors, fairsharing.Enabled(s.fairSharing),
		// timeshare: the oracle is the preemptor's own.
		s.preemptor.Oracle(snap), replaceableWorkloadSlice,
		s.quotaCheckStrategy, s.resourceFormatter, s.schedulingCycle,
	)
	fullAssignment := flvAssigner.Assign(ctx, nil)

	arm := fullAssignment.RepresentativeMode()
	if arm == flavorassigner.Fit {
		return fullAssignment, preemptionTargets
	}

	if arm == flavorassigner.Preempt {
		faPreemptionTargets := s.preemptor.GetTargets(ctx, *wl, fullAssignment, snap)
		if len(faPreemptionTargets) > 0 {
			return fullAssignment, append(preemptionTargets, faPreemptionTargets...)
		}
	}

	if features.Enabled(features.PartialAdmission) && wl.CanBePartiallyAdmitted() {
		reducer := flavorassigner.NewPodSetReducer(wl.Obj.Spec.PodSets, func(nextCounts []int32) (*partialAssignment, bool) {
			assignment := flvAssigner.Assign(ctx, nextCounts)
			mode := assignment.RepresentativeMode()
			if mode == flavorassigner.Fit {
				return &partialAssignment{assignment: assignment}, true
			}

			if mode == flavorassigner.Preempt {
				preemptionTargets := s.preemptor.GetTargets(ctx, *wl, assignment, snap)
				if len(preemptionTargets) > 0 {
					return &partialAssignment{assignment: assignment, preemptionTargets: preemptionTargets}, true
				}
			}
			return nil, false
		})
		if pa, found := reducer.Search(); found {
			return pa.assignment, append(preemptionTargets, pa.preemptionTargets...)
		}
	}
	return fullAssignment, nil
}

// updateAssignmentForTAS gives a TAS workload that must preempt a topology
// assignment: on the snapshot without its victims, or, with no victims, on an empty
// cluster, so that the capacity it waits for is held against lower-priority workloads.
// Upstream's original: updateAssignmentForTAS in sigs.k8s.io/kueue/pkg/scheduler.
func updateAssignmentForTAS(
	ctx context.Context,
	snapshot *schdcache.Snapshot,
	cq *schdcache.ClusterQueueSnapshot,
	wl *workload.Info,
	assignment *flavorassigner.Assignment,
	targets []*preemption.Target,
) {
	log := log.FromContext(ctx)

	if features.Enabled(features.TopologyAwareScheduling) && assignment.RepresentativeMode() == flavorassigner.Preempt &&
		(workload.IsExplicitlyRequestingTAS(wl.Obj.Spec.PodSets...) || cq.IsTASOnly()) && !workload.HasTopologyAssignmentWithUnhealthyNode(wl.Obj) {
		tasRequests := assignment.WorkloadsTopologyRequests(log, wl, cq)
		var tasResult schdcache.TASAssignmentsResult
		log = log.WithValues("workload", klog.KRef(wl.Obj.Namespace, wl.Obj.Name))

		if len(targets) > 0 {
			var targetWorkloads []*workload.Info
			for _, target := range targets {
				targetWorkloads = append(targetWorkloads, target.WorkloadInfo)
			}
			revertUsage := snapshot.SimulateWorkloadUsageRemoval(targetWorkloads)
			tasResult = cq.FindTopologyAssignmentsForWorkload(
				ctx,
				tasRequests,
				schdcache.WithWorkload(wl.Obj),
			)
			revertUsage()
		} else {

			tasResult = cq.FindTopologyAssignmentsForWorkload(
				ctx,
				tasRequests,
				schdcache.WithSimulateEmpty(true),
				schdcache.WithWorkload(wl.Obj),
			)
		}
		assignment.UpdateForTASResult(log, cq, wl, tasResult)
	}
}
