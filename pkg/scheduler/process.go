package scheduler

import (
	"context"
	"fmt"
	"maps"
	"slices"
	"strings"

	"github.com/go-logr/logr"
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
	"sigs.k8s.io/kueue/pkg/workload/concurrentadmission"
	workloadevict "sigs.k8s.io/kueue/pkg/workload/evict"
	workloadpatching "sigs.k8s.io/kueue/pkg/workload/patching"
	"sigs.k8s.io/kueue/pkg/workloadslicing"
)

// processEntry takes one head, in the order the iterator chose, from its assignment to
// admission, preemption or a reason to wait. The usage it is granted is added to the
// snapshot, so later heads in the cycle see it.
// Upstream's original: (*Scheduler).processEntry in sigs.k8s.io/kueue/pkg/scheduler.
func (s *Scheduler) processEntry(
	ctx context.Context,
	e *entry,
	snapshot *schdcache.Snapshot,
	preemptedWorkloads preemption.PreemptedWorkloads,
	skippedPreemptions map[kueue.ClusterQueueReference]int,
) {
	cq := snapshot.ClusterQueue(e.ClusterQueue)
	log := ctrl.LoggerFrom(ctx).WithValues("workload", klog.KObj(e.Obj), "clusterQueue", klog.KRef("", string(e.ClusterQueue)))
	if cq.HasParent() {
		log = log.WithValues("parentCohort", klog.KRef("", string(cq.Parent().GetName())), "rootCohort", klog.KRef("", string(cq.Parent().Root().GetName())))
	}
	ctx = ctrl.LoggerInto(ctx, log)
	log.V(2).Info("Attempting to schedule workload")

	if features.Enabled(features.ConcurrentAdmission) && concurrentadmission.IsVariant(e.Obj) {
		if moreFavorableSibling := s.findAdmittedMoreFavorableSibling(&e.Info, snapshot); moreFavorableSibling != nil {
			log.V(3).Info("Skipping workload as a more favorable variant is already admitted", "moreFavorableVariant", klog.KObj(moreFavorableSibling.Obj))
			e.quotaReservedReason = kueue.WorkloadQuotaReservedReasonPendingEvaluation
			e.markSkipped("A more favorable variant is already admitted")
			return
		}
	}

	usage, fits := s.updateAssignmentIfNeeded(ctx, log, e, snapshot, cq, preemptedWorkloads)
	mode := e.assignment.RepresentativeMode()

	if features.Enabled(features.TASFailedNodeReplacementFailFast) && workload.HasTopologyAssignmentWithUnhealthyNode(e.Obj) && mode != flavorassigner.Fit {
		s.handleFailedTASReplacement(ctx, log, e)
		return
	}

	if mode == flavorassigner.NoFit {
		e.requeueReason = qcache.RequeueReasonNoFit
		log.V(3).Info("Skipping workload as FlavorAssigner assigned NoFit mode")
		e.quotaReservedReason = e.assignment.NoFitReason
		// timeshare: the preemptor says why the head waits.
		s.explainWait(ctx, e, snapshot)
		return
	}

	if mode == flavorassigner.Preempt {
		// timeshare: no new preemption in a ClusterQueue whose victims of ours are still draining.
		if s.waitForDrainingVictims(log, e) {
			return
		}
		if len(e.preemptionTargets) == 0 {
			e.requeueReason = qcache.RequeueReasonPreemptionNoCandidates
			e.quotaReservedReason = kueue.WorkloadQuotaReservedReasonWaitingForQuota
			// timeshare: the preemptor says why the head waits and whether it holds the quota.
			s.explainWait(ctx, e, snapshot)
			s.reserveCapacityForUnreclaimablePreempt(log, e, cq)
			return
		}
		if (features.Enabled(features.ConcurrentAdmission) || features.Enabled(features.MultiKueueOrchestratedPreemption)) && workload.HasClosedPreemptionGate(e.Obj) {
			gatedMsg := "Workload requires preemption, but it's gated"
			log.V(3).Info("Workload requires preemption, but it is gated", "workload", klog.KObj(e.Obj))
			e.quotaReservedReason = kueue.WorkloadAdmissionGated
			e.markPreemptionGated(gatedMsg)
			return
		}
	}

	if mode == flavorassigner.DeferredFit {
		e.inadmissibleMsg = "Workload has overlapping preemption targets with another workload, but will fit after these preemptions complete"
		e.quotaReservedReason = kueue.WorkloadQuotaReservedReasonWaitingForPreemptedWorkloads
		e.requeueReason = qcache.RequeueReasonPendingPreemption

		e.LastAssignment = nil
		cq.AddUsage(usage)
		return
	}

	if preemptedWorkloads.HasAny(e.preemptionTargets) {
		e.markSkipped("Workload has overlapping preemption targets with another workload")
		e.quotaReservedReason = kueue.WorkloadQuotaReservedReasonWaitingForQuota
		skippedPreemptions[cq.Name]++
		return
	}

	if !fits {
		e.markSkipped("Workload no longer fits after processing another workload")
		e.quotaReservedReason = kueue.WorkloadQuotaReservedReasonWaitingForQuota
		if mode == flavorassigner.Preempt {
			skippedPreemptions[cq.Name]++
		}
		return
	}
	// timeshare: a head that fits may still have to wait for the workload whose turn it is.
	if s.vetoAdmission(ctx, e, snapshot, mode) {
		return
	}
	preemptedWorkloads.Insert(e.preemptionTargets)
	cq.AddUsage(usage)

	preemptionTargets, oldWorkloadSlice := workloadslicing.FindReplacedSliceTarget(e.Obj, e.preemptionTargets)

	if mode == flavorassigner.Preempt {
		e.quotaReservedReason = kueue.WorkloadQuotaReservedReasonWaitingForPreemptedWorkloads
		s.issuePreemptions(ctx, log, e, preemptionTargets)
		return
	}

	s.waitForPodsReadyIfNeeded(ctx, log, e)

	if features.Enabled(features.ElasticJobsViaWorkloadSlices) && oldWorkloadSlice != nil {
		e.Obj.Status.ClusterName = oldWorkloadSlice.WorkloadInfo.Obj.Status.ClusterName
	}

	if features.Enabled(features.ConcurrentAdmission) && concurrentadmission.IsVariant(e.Obj) {
		if lessFavorableSibling := s.findAdmittedLessFavorableSibling(&e.Info, snapshot); lessFavorableSibling != nil {
			if !s.isMigrationAllowed(cq, e, log) {
				e.quotaReservedReason = kueue.WorkloadQuotaReservedReasonPendingEvaluation
				return
			}
			e.quotaReservedReason = kueue.WorkloadQuotaReservedReasonWaitingForPreemptedWorkloads
			s.issueMigration(ctx, log, e, lessFavorableSibling)
			return
		}
	}

	e.markNominated()
	if err := s.admit(ctx, e, cq, oldWorkloadSlice); err != nil {
		e.inadmissibleMsg = fmt.Sprintf("Failed to admit workload: %v", err)
	}
}

// waitForDrainingVictims holds back a head that needs preemption while victims of ours in its
// ClusterQueue still terminate: their quota is held, so preempting again would take more than
// is needed.
func (s *Scheduler) waitForDrainingVictims(log logr.Logger, e *entry) bool {
	victims := s.draining[e.ClusterQueue]
	if len(victims) == 0 {
		return false
	}
	e.inadmissibleMsg = drainMessage(victims, string(workload.Key(e.Obj)))
	e.quotaReservedReason = kueue.WorkloadQuotaReservedReasonWaitingForPreemptedWorkloads
	// Inadmissible, not retried every cycle: the Job's update or the hold's deadline wakes
	// the ClusterQueue (drainHolds).
	e.requeueReason = qcache.RequeueReasonGeneric
	e.LastAssignment = nil
	log.V(3).Info("Waiting for preempted workloads' Pods to terminate", "victims", victims)
	return true
}

// vetoAdmission holds back a head that fits when the preemptor's hook says another workload
// waited longer for its turn. It stays pending, not skipped: it must step aside (inadmissible)
// so that the workload whose turn it is becomes the head, not come straight back to the heap.
func (s *Scheduler) vetoAdmission(ctx context.Context, e *entry, snapshot *schdcache.Snapshot, mode flavorassigner.FlavorAssignmentMode) bool {
	if mode != flavorassigner.Fit {
		return false
	}
	msg := s.admissionVeto(ctx, e, snapshot)
	if msg == "" {
		return false
	}
	e.inadmissibleMsg = msg
	s.waitedForTurn.Insert(e.ClusterQueue)
	e.requeueReason = qcache.RequeueReasonGeneric
	e.quotaReservedReason = kueue.WorkloadQuotaReservedReasonWaitingForQuota
	return true
}

// updateAssignmentIfNeeded checks the nominated assignment against the snapshot as earlier heads
// left it, and computes it again when that may help: a TAS assignment that no longer fits
// (TASRecomputeAssignmentWithinSchedulingCycle), or victims already claimed by another head
// (RecomputeAssignmentUponPreemptionTargetsOverlap). Nominations are computed per head on
// the same snapshot, so without this later ClusterQueues keep losing to earlier ones.
// Upstream's original: (*Scheduler).updateAssignmentIfNeeded in sigs.k8s.io/kueue/pkg/scheduler.
func (s *Scheduler) updateAssignmentIfNeeded(
	ctx context.Context,
	log logr.Logger,
	e *entry,
	snapshot *schdcache.Snapshot,
	cq *schdcache.ClusterQueueSnapshot,
	preemptedWorkloads preemption.PreemptedWorkloads) (workload.Usage, bool) {
	usage := e.assignmentUsage(log)
	fitsCheck := fits(snapshot, cq, &usage, preemptedWorkloads, e.preemptionTargets)

	needsTASRecompute := fitsCheck == schdcache.FitsCheckNoTAS && features.Enabled(features.TASRecomputeAssignmentWithinSchedulingCycle)
	needsOverlapRecompute := preemptedWorkloads.HasAny(e.preemptionTargets) && features.Enabled(features.RecomputeAssignmentUponPreemptionTargetsOverlap)

	var revertRemoval func()
	switch {
	case needsOverlapRecompute:
		log.V(2).Info("Re-computing the assignment as preemption targets overlap")

		victimsOfOtherPreemptions := slices.Collect(maps.Values(preemptedWorkloads))
		revertRemoval = snapshot.SimulateWorkloadRemoval(victimsOfOtherPreemptions)
	case needsTASRecompute:
		log.V(2).Info("Re-computing the assignment as it doesn't fit for TAS")
	default:

		return usage, schdcache.FitsCheckOk == fitsCheck
	}

	e.LastAssignment = nil
	e.NominationMapping = e.readResourceToFlavorMapping()
	newAssignment, newTargets := s.getAssignments(ctx, &e.Info, snapshot)
	e.recordAssignment(newAssignment, newTargets)
	if needsOverlapRecompute {
		if revertRemoval != nil {
			revertRemoval()
		}
		if e.assignment.RepresentativeMode() == flavorassigner.Fit {
			e.assignment.SetRepresentativeMode(flavorassigner.DeferredFit)
		}
	}
	usage = e.assignmentUsage(log)
	fitsCheck = fits(snapshot, cq, &usage, preemptedWorkloads, newTargets)
	log.V(3).Info("Re-computed assignment", "newMode", newAssignment.RepresentativeMode(), "fitsCheck", fitsCheck)

	e.NominationMapping = nil

	return usage, schdcache.FitsCheckOk == fitsCheck
}

// fits checks usage against cq with this cycle's victims and targets removed.
// Upstream's original: fits in sigs.k8s.io/kueue/pkg/scheduler.
func fits(snapshot *schdcache.Snapshot, cq *schdcache.ClusterQueueSnapshot, usage *workload.Usage, preemptedWorkloads preemption.PreemptedWorkloads,
	newTargets []*preemption.Target) schdcache.FitsCheck {
	merged := preemptedWorkloads.MergeWithTargets(newTargets)
	revertUsage := snapshot.SimulateWorkloadUsageRemoval(merged.Workloads())
	defer revertUsage()
	return cq.Fits(*usage)
}

// handleFailedTASReplacement evicts a TAS workload on an unhealthy node for which no
// replacement fits (TASFailedNodeReplacementFailFast).
// Upstream's original: (*Scheduler).handleFailedTASReplacement in sigs.k8s.io/kueue/pkg/scheduler.
func (s *Scheduler) handleFailedTASReplacement(ctx context.Context, log logr.Logger, e *entry) {
	if err := s.evictWorkloadAfterFailedTASReplacement(ctx, log, e.Obj.DeepCopy()); client.IgnoreNotFound(err) != nil {
		log.V(2).Error(err, "Failed to evict workload")
		return
	}
	e.markEvicted()
}

// reserveCapacityForUnreclaimablePreempt runs when a head needs preemption and nothing may be preempted.
// Unless the ClusterQueue can always reclaim its quota later, it keeps the quota it is
// waiting for (up to what its limits allow) out of reach of the rest of the cohort for this
// cycle, so that lower-priority work elsewhere does not take it first. An active preemptor
// (PrioritizePreemptorWorkloads) always holds it: its victims are on their way out.
// Upstream's original: (*Scheduler).reserveCapacityForUnreclaimablePreempt in sigs.k8s.io/kueue/pkg/scheduler.
func (s *Scheduler) reserveCapacityForUnreclaimablePreempt(log logr.Logger, e *entry, cq *schdcache.ClusterQueueSnapshot) {
	log.V(2).Info("Workload requires preemption, but there are no candidate workloads allowed for preemption", "preemption", cq.Preemption)
	// timeshare: a head the preemptor says must hold the quota it waits for holds it in every cycle.
	if s.holdQuotaWhileBlocked(log, e, cq) {
		return
	}
	if !preemption.CanAlwaysReclaim(cq) || (features.Enabled(features.PrioritizePreemptorWorkloads) && e.IsPreemptor) {
		cq.AddUsage(resourcesToReserve(log, e, cq))
	}
}

// holdQuotaWhileBlocked keeps the quota a blocked head waits for (WaitVerdict.HoldQuota). It is
// not parked with the inadmissible workloads: it must hold the quota in every cycle.
func (s *Scheduler) holdQuotaWhileBlocked(log logr.Logger, e *entry, cq *schdcache.ClusterQueueSnapshot) bool {
	if !e.holdQuota {
		return false
	}
	e.requeueReason = qcache.RequeueReasonFailedAfterNomination
	cq.AddUsage(resourcesToReserve(log, e, cq))
	return true
}

// Upstream's original: (*Scheduler).issuePreemptions in sigs.k8s.io/kueue/pkg/scheduler.
func (s *Scheduler) issuePreemptions(ctx context.Context, log logr.Logger, e *entry, preemptionTargets []*preemption.Target) {
	preempted, errors, err := s.preemptor.IssuePreemptions(ctx, s.cache, &e.Info, preemptionTargets, e.clusterQueueSnapshot)
	// timeshare: our victims' drains are tracked; a refusal already reported is no failure to log.
	refusal, err := s.trackPreemptions(ctx, e, preemptionTargets, preempted, err)
	if err != nil {
		log.Error(err, "Failed to preempt workloads")
	}
	e.markPreemptionOutcome(preempted, errors)
	// timeshare: a refused preemption parks the head until it may be tried again.
	s.parkRefusedPreemption(ctx, e, refusal)
}

// trackPreemptions records the victims whose Pods the loop waits for, and splits err into the
// refusal it may carry and what is left to log.
func (s *Scheduler) trackPreemptions(ctx context.Context, e *entry, targets []*preemption.Target, preempted int, err error) (refusal, toLog error) {
	if preempted > 0 {
		s.drains.record(ctx, &e.Info, targets)
	}
	if heldBack(err) {
		return err, nil
	}
	return err, err
}

// waitForPodsReadyIfNeeded implements waitForPodsReady.blockAdmission: admission waits until
// every admitted workload is ready. A second pass is exempt: its quota is already held
// and it would wait on itself.
// Upstream's original: (*Scheduler).waitForPodsReadyIfNeeded in sigs.k8s.io/kueue/pkg/scheduler.
func (s *Scheduler) waitForPodsReadyIfNeeded(ctx context.Context, log logr.Logger, e *entry) {
	if workload.NeedsSecondPass(e.Obj) {
		return
	}
	if s.cache.PodsReadyForAllAdmittedWorkloads(log) {
		return
	}
	log.V(5).Info("Waiting for all admitted workloads to be in the PodsReady condition")
	wl := e.Obj.DeepCopy()
	if err := workloadpatching.PatchAdmissionStatus(ctx, s.client, wl, s.clock, func(wl *kueue.Workload) (bool, error) {
		reason := workload.UnadmittedWorkloadReasonWithFallback(
			kueue.WorkloadQuotaReservedReasonWaitingForPodsReady,
			kueue.WorkloadWaiting, //nolint:staticcheck // the fallback upstream uses
		)
		return workload.UnsetQuotaReservationWithCondition(wl, reason, "waiting for all admitted workloads to be in PodsReady condition", s.clock.Now()), nil
	}, workloadpatching.WithLooseOnApply(), workloadpatching.WithRetryOnConflict()); err != nil {
		log.Error(err, "Could not update Workload status")
	}
	s.cache.WaitForPodsReady(ctx)
	log.V(5).Info("Finished waiting for all admitted workloads to be in the PodsReady condition")
}

// evictWorkloadAfterFailedTASReplacement evicts wl, whose unhealthy nodes have no replacement.
// Upstream's original: (*Scheduler).evictWorkloadAfterFailedTASReplacement in sigs.k8s.io/kueue/pkg/scheduler.
func (s *Scheduler) evictWorkloadAfterFailedTASReplacement(ctx context.Context, log logr.Logger, wl *kueue.Workload) error {
	unhealthyNodes := workload.UnhealthyNodeNames(wl)
	unhealthyNodesCsv := strings.Join(unhealthyNodes, ",")
	log.V(3).Info("Evicting workload after failed try to find a node replacement; TASFailedNodeReplacementFailFast enabled", "unhealthyNodes", unhealthyNodes)
	msg := fmt.Sprintf("Workload was evicted as there was no replacement for unhealthy node(s): %s", unhealthyNodesCsv)
	exposeLqMetrics := s.cache.ShouldExposeLocalQueueMetricsForWorkload(log, wl)
	if err := workloadevict.Evict(
		ctx, s.client, s.recorder, wl, kueue.WorkloadEvictedDueToNodeFailures, msg, "", s.clock, exposeLqMetrics, s.roleTracker, s.customLabels,
		workloadevict.WithLooseOnApply(), workloadevict.WithRetryOnConflict(),
	); err != nil {
		return fmt.Errorf("failed to evict workload after failed try to find a replacement for unhealthy nodes: %s, %w", unhealthyNodesCsv, err)
	}
	return nil
}
