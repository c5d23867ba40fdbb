package scheduler

import (
	"context"
	"errors"
	"fmt"

	"k8s.io/klog/v2"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"

	kueue "sigs.k8s.io/kueue/apis/kueue/v1beta2"
	qcache "sigs.k8s.io/kueue/pkg/cache/queue"
	schdcache "sigs.k8s.io/kueue/pkg/cache/scheduler"
	"sigs.k8s.io/kueue/pkg/features"
	"sigs.k8s.io/kueue/pkg/scheduler/flavorassigner"
	"sigs.k8s.io/kueue/pkg/scheduler/preemption"
	"sigs.k8s.io/kueue/pkg/workload"
	"sigs.k8s.io/kueue/pkg/workloadslicing"
)

// nominate computes an assignment for every head that may be admitted. Heads that cannot
// be considered at all come back in rejected, with the reason already set; heads the
// cache already accounts for (and that need no second pass) are dropped.
// Upstream's original: (*Scheduler).nominate in sigs.k8s.io/kueue/pkg/scheduler.
func (s *Scheduler) nominate(ctx context.Context, heads []qcache.Head, snap *schdcache.Snapshot) (candidates, rejected []entry) {
	log := ctrl.LoggerFrom(ctx)
	candidates = make([]entry, 0, len(heads))
	for _, h := range heads {
		log := log.WithValues("workload", klog.KObj(h.Obj), "clusterQueue", klog.KRef("", string(h.ClusterQueue)))
		e := entry{Head: h, clusterQueueSnapshot: snap.ClusterQueue(h.ClusterQueue)}
		if !workload.NeedsSecondPass(h.Obj) && s.cache.IsAdded(h.Info) {
			log.Info("Workload skipped from admission because it's already accounted in cache, and it does not need second pass", "workload", klog.KObj(h.Obj))
			continue
		}
		if s.screen(ctx, log, &e, snap) {
			a, targets := s.getAssignments(ctx, &e.Info, snap)
			e.recordAssignment(a, targets)
			candidates = append(candidates, e)
			continue
		}
		rejected = append(rejected, e)
	}
	return candidates, rejected
}

// screen runs the checks that do not depend on quota. It reports whether the head may go on
// to flavor assignment, and otherwise fills in why not.
func (s *Scheduler) screen(ctx context.Context, log klog.Logger, e *entry, snap *schdcache.Snapshot) bool {
	switch {
	case workload.HasRetryChecks(e.Obj) || workload.HasRejectedChecks(e.Obj):
		e.inadmissibleMsg = "The workload has failed admission checks"
		e.quotaReservedReason = kueue.WorkloadQuotaReservedReasonPendingEvaluation
		return false
	case snap.InactiveClusterQueueSets.Has(e.ClusterQueue):
		e.inadmissibleMsg = fmt.Sprintf("ClusterQueue %s is inactive", e.ClusterQueue)
		e.quotaReservedReason = kueue.WorkloadQuotaReservedReasonSuspended
		return false
	case e.clusterQueueSnapshot == nil:
		e.inadmissibleMsg = fmt.Sprintf("ClusterQueue %s not found", e.ClusterQueue)
		e.quotaReservedReason = kueue.WorkloadQuotaReservedReasonMisconfigured
		return false
	}
	err := workload.ValidateAdmissibility(ctx, s.client, &e.Info, e.clusterQueueSnapshot.NamespaceSelector)
	if err == nil {
		return true
	}
	e.inadmissibleMsg = err.Error()
	if errors.Is(err, workload.ErrInternal) {
		// A failed lookup says nothing about the workload: leave its condition alone.
		log.Error(err, "Failed to validate workload admissibility")
		e.skipStatusUpdate = true
		return false
	}
	e.quotaReservedReason = kueue.WorkloadQuotaReservedReasonMisconfigured
	if errors.Is(err, workload.ErrNamespaceMismatch) {
		e.requeueReason = qcache.RequeueReasonNamespaceMismatch
	}
	return false
}

// getAssignments chooses flavors for wl and, when it needs preemption, the victims.
// Upstream's original: (*Scheduler).getAssignments in sigs.k8s.io/kueue/pkg/scheduler.
func (s *Scheduler) getAssignments(ctx context.Context, wl *workload.Info, snap *schdcache.Snapshot) (flavorassigner.Assignment, []*preemption.Target) {
	cq := snap.ClusterQueue(wl.ClusterQueue)
	// Decided once per workload and cycle, not inside the assigner, which runs again for
	// every reduced count under partial admission.
	if last := wl.LastAssignment; last != nil && lastAssignmentOutdated(last, cq.AllocatableResourceGeneration, s.schedulingCycle, wl.SchedulingHash) {
		ctrl.LoggerFrom(ctx).V(6).Info("Clearing Workload's last assignment because it was outdated",
			"cq.AllocatableResourceGeneration", cq.AllocatableResourceGeneration,
			"wl.LastAssignment.ClusterQueueGeneration", last.ClusterQueueGeneration)
		wl.LastAssignment = nil
	}
	resumed := wl.LastAssignment != nil && wl.LastAssignment.PendingFlavors()
	a, targets := s.getInitialAssignments(ctx, wl, snap, cq)
	if resumed && !usable(a, targets) && s.retriedEveryCycle(ctx, cq.Name) {
		// The scan resumed past flavors this head lost only to other heads, and the rest give it
		// nothing. Those flavors are still its best: scan them all, as the next cycle would. Else
		// the outcome, and the pending message written with it, alternates every cycle while
		// another head keeps taking the first flavor (a head holding quota it waits for).
		ctrl.LoggerFrom(ctx).V(3).Info("Resumed flavor scan found no usable flavor; scanning from the first", "workload", klog.KObj(wl.Obj))
		wl.LastAssignment = nil
		a, targets = s.getInitialAssignments(ctx, wl, snap, cq)
	}
	updateAssignmentForTAS(ctx, snap, cq, wl, &a, targets)
	return a, targets
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
func lastAssignmentOutdated(last *workload.AssignmentClusterQueueState, cqGeneration, cycle int64, hash workload.EquivalenceHash) bool {
	if features.Enabled(features.FlavorFungibilityPreserveScanProgress) {
		// A changed shape invalidates the recorded flavor indices whatever their age.
		if !last.MatchesSchedulingShape(hash) {
			return true
		}
		// Progress from this or the previous cycle survives ClusterQueue generation bumps,
		// which on a busy cohort happen every cycle.
		if cycle-last.SchedulingCycle <= 1 {
			return false
		}
	}
	return cqGeneration > last.ClusterQueueGeneration
}

// partialAssignment is one candidate of the partial admission search.
type partialAssignment struct {
	assignment        flavorassigner.Assignment
	preemptionTargets []*preemption.Target
}

// getInitialAssignments tries the full pod counts first, then, if the workload allows it, smaller
// counts. An elastic workload's replaced slice is always among the targets.
// Upstream's original: (*Scheduler).getInitialAssignments in sigs.k8s.io/kueue/pkg/scheduler.
func (s *Scheduler) getInitialAssignments(ctx context.Context, wl *workload.Info, snap *schdcache.Snapshot, cq *schdcache.ClusterQueueSnapshot) (flavorassigner.Assignment, []*preemption.Target) {
	sliceTargets, replacedSlice := workloadslicing.ReplacedWorkloadSlice(wl, snap)
	assigner := flavorassigner.New(wl, cq, snap.ResourceFlavors, s.fairSharingEnabled(),
		s.preemptor.Oracle(snap), replacedSlice, s.quotaCheckStrategy, s.resourceFormatter, s.schedulingCycle)

	// try returns the assignment for counts (nil: full counts) when it fits or has victims.
	try := func(counts []int32) (partialAssignment, bool) {
		a := assigner.Assign(ctx, counts)
		switch a.RepresentativeMode() {
		case flavorassigner.Fit:
			return partialAssignment{assignment: a}, true
		case flavorassigner.Preempt:
			if targets := s.preemptor.GetTargets(ctx, *wl, a, snap); len(targets) > 0 {
				return partialAssignment{assignment: a, preemptionTargets: targets}, true
			}
		}
		return partialAssignment{assignment: a}, false
	}

	full, ok := try(nil)
	if ok {
		return full.assignment, append(sliceTargets, full.preemptionTargets...)
	}
	if features.Enabled(features.PartialAdmission) && wl.CanBePartiallyAdmitted() {
		search := flavorassigner.NewPodSetReducer(wl.Obj.Spec.PodSets, try)
		if r, found := search.Search(); found {
			return r.assignment, append(sliceTargets, r.preemptionTargets...)
		}
	}
	return full.assignment, nil
}

// updateAssignmentForTAS gives a TAS workload that must preempt a topology
// assignment: on the snapshot without its victims, or, with no victims, on an empty
// cluster, so that the capacity it waits for is held against lower-priority workloads.
// Upstream's original: updateAssignmentForTAS in sigs.k8s.io/kueue/pkg/scheduler.
func updateAssignmentForTAS(ctx context.Context, snap *schdcache.Snapshot, cq *schdcache.ClusterQueueSnapshot, wl *workload.Info, a *flavorassigner.Assignment, targets []*preemption.Target) {
	if !features.Enabled(features.TopologyAwareScheduling) || a.RepresentativeMode() != flavorassigner.Preempt {
		return
	}
	if !workload.IsExplicitlyRequestingTAS(wl.Obj.Spec.PodSets...) && !cq.IsTASOnly() {
		return
	}
	if workload.HasTopologyAssignmentWithUnhealthyNode(wl.Obj) {
		return
	}
	log := ctrl.LoggerFrom(ctx)
	requests := a.WorkloadsTopologyRequests(log, wl, cq)
	log = log.WithValues("workload", klog.KRef(wl.Obj.Namespace, wl.Obj.Name))
	var result schdcache.TASAssignmentsResult
	if len(targets) == 0 {
		result = cq.FindTopologyAssignmentsForWorkload(ctx, requests, schdcache.WithSimulateEmpty(true), schdcache.WithWorkload(wl.Obj))
	} else {
		victims := make([]*workload.Info, 0, len(targets))
		for _, t := range targets {
			victims = append(victims, t.WorkloadInfo)
		}
		restore := snap.SimulateWorkloadUsageRemoval(victims)
		result = cq.FindTopologyAssignmentsForWorkload(ctx, requests, schdcache.WithWorkload(wl.Obj))
		restore()
	}
	a.UpdateForTASResult(log, cq, wl, result)
}
