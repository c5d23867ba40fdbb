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

const (
	msgBetterVariantAdmitted = "A more favorable variant is already admitted"
	msgPreemptionGated       = "Workload requires preemption, but it's gated"
	msgDeferredFit           = "Workload has overlapping preemption targets with another workload, but will fit after these preemptions complete"
	msgOverlappingTargets    = "Workload has overlapping preemption targets with another workload"
	msgNoLongerFits          = "Workload no longer fits after processing another workload"
	msgWaitingForPodsReady   = "waiting for all admitted workloads to be in PodsReady condition"
)

// processEntry takes one head, in the order the iterator chose, from its assignment to
// admission, preemption or a reason to wait. The usage it is granted is added to the
// snapshot, so later heads in the cycle see it.
// Upstream's original: (*Scheduler).processEntry in sigs.k8s.io/kueue/pkg/scheduler.
func (s *Scheduler) processEntry(ctx context.Context, e *entry, c *cycleState) {
	cq := c.snapshot.ClusterQueue(e.ClusterQueue)
	log := ctrl.LoggerFrom(ctx).WithValues("workload", klog.KObj(e.Obj), "clusterQueue", klog.KRef("", string(e.ClusterQueue)))
	if cq.HasParent() {
		log = log.WithValues("parentCohort", klog.KRef("", string(cq.Parent().GetName())), "rootCohort", klog.KRef("", string(cq.Parent().Root().GetName())))
	}
	ctx = ctrl.LoggerInto(ctx, log)
	log.V(2).Info("Attempting to schedule workload")

	isVariant := features.Enabled(features.ConcurrentAdmission) && concurrentadmission.IsVariant(e.Obj)
	if isVariant {
		if better := s.findAdmittedMoreFavorableSibling(&e.Info, c.snapshot); better != nil {
			log.V(3).Info("Skipping workload as a more favorable variant is already admitted", "moreFavorableVariant", klog.KObj(better.Obj))
			e.quotaReservedReason = kueue.WorkloadQuotaReservedReasonPendingEvaluation
			e.markSkipped(msgBetterVariantAdmitted)
			return
		}
	}

	usage, fits := s.updateAssignmentIfNeeded(ctx, log, e, c, cq)
	mode := e.assignment.RepresentativeMode()

	if features.Enabled(features.TASFailedNodeReplacementFailFast) && workload.HasTopologyAssignmentWithUnhealthyNode(e.Obj) && mode != flavorassigner.Fit {
		s.handleFailedTASReplacement(ctx, log, e)
		return
	}

	switch mode {
	case flavorassigner.NoFit:
		e.requeueReason = qcache.RequeueReasonNoFit
		e.quotaReservedReason = e.assignment.NoFitReason
		s.explainWait(ctx, e, c.snapshot)
		log.V(3).Info("Skipping workload as FlavorAssigner assigned NoFit mode")
		return
	case flavorassigner.Preempt:
		if victims := c.draining[e.ClusterQueue]; len(victims) > 0 {
			e.inadmissibleMsg = drainMessage(victims, string(workload.Key(e.Obj)))
			e.quotaReservedReason = kueue.WorkloadQuotaReservedReasonWaitingForPreemptedWorkloads
			// Inadmissible, not retried every cycle: the Job's update or the hold's deadline wakes
			// the ClusterQueue (drainHolds).
			e.requeueReason = qcache.RequeueReasonGeneric
			e.LastAssignment = nil
			log.V(3).Info("Waiting for preempted workloads' Pods to terminate", "victims", victims)
			return
		}
		if len(e.preemptionTargets) == 0 {
			e.requeueReason = qcache.RequeueReasonPreemptionNoCandidates
			e.quotaReservedReason = kueue.WorkloadQuotaReservedReasonWaitingForQuota
			s.explainWait(ctx, e, c.snapshot)
			s.reserveCapacityForUnreclaimablePreempt(ctx, log, e, cq, c.snapshot)
			return
		}
		preemptionGates := features.Enabled(features.ConcurrentAdmission) || features.Enabled(features.MultiKueueOrchestratedPreemption)
		if preemptionGates && workload.HasClosedPreemptionGate(e.Obj) {
			log.V(3).Info("Workload requires preemption, but it is gated", "workload", klog.KObj(e.Obj))
			e.quotaReservedReason = kueue.WorkloadAdmissionGated
			e.markPreemptionGated(msgPreemptionGated)
			return
		}
	case flavorassigner.DeferredFit:
		// It fits only once victims claimed by other heads are gone. Keep its share so
		// that nothing else takes it meanwhile, and retry every flavor next time: the
		// cluster will have changed.
		e.inadmissibleMsg = msgDeferredFit
		e.quotaReservedReason = kueue.WorkloadQuotaReservedReasonWaitingForPreemptedWorkloads
		e.requeueReason = qcache.RequeueReasonPendingPreemption
		e.LastAssignment = nil
		cq.AddUsage(usage)
		return
	}

	if c.preempted.HasAny(e.preemptionTargets) {
		e.markSkipped(msgOverlappingTargets)
		e.quotaReservedReason = kueue.WorkloadQuotaReservedReasonWaitingForQuota
		c.skipped[cq.Name]++
		return
	}
	if !fits {
		e.markSkipped(msgNoLongerFits)
		e.quotaReservedReason = kueue.WorkloadQuotaReservedReasonWaitingForQuota
		if mode == flavorassigner.Preempt {
			c.skipped[cq.Name]++
		}
		return
	}
	if mode == flavorassigner.Fit {
		if msg := s.admissionVeto(ctx, e, c.snapshot); msg != "" {
			// Still pending, not skipped: it must step aside (inadmissible) so that the
			// workload whose turn it is becomes the head, not come straight back to the heap.
			e.inadmissibleMsg = msg
			c.waited.Insert(cq.Name)
			e.requeueReason = qcache.RequeueReasonGeneric
			e.quotaReservedReason = kueue.WorkloadQuotaReservedReasonWaitingForQuota
			return
		}
	}
	c.preempted.Insert(e.preemptionTargets)
	cq.AddUsage(usage)

	// A scaled-up elastic workload lists the slice it replaces among its targets so that
	// flavor assignment accounts for it; that slice is finished, not preempted.
	victims, oldSlice := workloadslicing.FindReplacedSliceTarget(e.Obj, e.preemptionTargets)

	if mode == flavorassigner.Preempt {
		e.quotaReservedReason = kueue.WorkloadQuotaReservedReasonWaitingForPreemptedWorkloads
		preempted, failed, err := s.preemptor.IssuePreemptions(ctx, s.cache, &e.Info, victims, e.clusterQueueSnapshot)
		if err != nil && !heldBack(err) {
			log.Error(err, "Failed to preempt workloads")
		}
		if preempted > 0 {
			s.drains.record(ctx, &e.Info, victims)
		}
		e.markPreemptionOutcome(preempted, failed)
		s.parkRefusedPreemption(ctx, e, err)
		return
	}

	s.waitForPodsReadyIfNeeded(ctx, log, e)

	if features.Enabled(features.ElasticJobsViaWorkloadSlices) && oldSlice != nil {
		// MultiKueue places the new slice where the old one runs.
		e.Obj.Status.ClusterName = oldSlice.WorkloadInfo.Obj.Status.ClusterName
	}

	if isVariant {
		if worse := s.findAdmittedLessFavorableSibling(&e.Info, c.snapshot); worse != nil {
			if !s.isMigrationAllowed(cq, e, log) {
				e.quotaReservedReason = kueue.WorkloadQuotaReservedReasonPendingEvaluation
				return
			}
			e.quotaReservedReason = kueue.WorkloadQuotaReservedReasonWaitingForPreemptedWorkloads
			s.issueMigration(ctx, log, e, worse)
			return
		}
	}

	e.markNominated()
	if err := s.admit(ctx, e, cq, oldSlice); err != nil {
		e.inadmissibleMsg = fmt.Sprintf("Failed to admit workload: %v", err)
	}
}

// updateAssignmentIfNeeded checks the nominated assignment against the snapshot as earlier heads
// left it, and computes it again when that may help: a TAS assignment that no longer fits
// (TASRecomputeAssignmentWithinSchedulingCycle), or victims already claimed by another head
// (RecomputeAssignmentUponPreemptionTargetsOverlap). Nominations are computed per head on
// the same snapshot, so without this later ClusterQueues keep losing to earlier ones.
// Upstream's original: (*Scheduler).updateAssignmentIfNeeded in sigs.k8s.io/kueue/pkg/scheduler.
func (s *Scheduler) updateAssignmentIfNeeded(ctx context.Context, log logr.Logger, e *entry, c *cycleState, cq *schdcache.ClusterQueueSnapshot) (workload.Usage, bool) {
	usage := e.assignmentUsage(log)
	check := fits(c.snapshot, cq, &usage, c.preempted, e.preemptionTargets)

	overlap := features.Enabled(features.RecomputeAssignmentUponPreemptionTargetsOverlap) && c.preempted.HasAny(e.preemptionTargets)
	tasConflict := features.Enabled(features.TASRecomputeAssignmentWithinSchedulingCycle) && check == schdcache.FitsCheckNoTAS
	if !overlap && !tasConflict {
		return usage, check == schdcache.FitsCheckOk
	}

	var restore func()
	if overlap {
		log.V(2).Info("Re-computing the assignment as preemption targets overlap")
		// Assign on the cluster as it will be once the claimed victims are gone.
		restore = c.snapshot.SimulateWorkloadRemoval(slices.Collect(maps.Values(c.preempted)))
	} else {
		log.V(2).Info("Re-computing the assignment as it doesn't fit for TAS")
	}
	// Start the scan from the first flavor, steered by the flavors nominated.
	e.LastAssignment = nil
	e.NominationMapping = e.readResourceToFlavorMapping()
	a, targets := s.getAssignments(ctx, &e.Info, c.snapshot)
	e.recordAssignment(a, targets)
	if overlap {
		restore()
		// A fit that depends on other heads' victims has to wait for them.
		if e.assignment.RepresentativeMode() == flavorassigner.Fit {
			e.assignment.SetRepresentativeMode(flavorassigner.DeferredFit)
		}
	}
	usage = e.assignmentUsage(log)
	check = fits(c.snapshot, cq, &usage, c.preempted, targets)
	log.V(3).Info("Re-computed assignment", "newMode", a.RepresentativeMode(), "fitsCheck", check)
	// The mapping only steers this cycle's recomputation.
	e.NominationMapping = nil
	return usage, check == schdcache.FitsCheckOk
}

// fits checks usage against cq with this cycle's victims and targets removed.
// Upstream's original: fits in sigs.k8s.io/kueue/pkg/scheduler.
func fits(snap *schdcache.Snapshot, cq *schdcache.ClusterQueueSnapshot, usage *workload.Usage, claimed preemption.PreemptedWorkloads, targets []*preemption.Target) schdcache.FitsCheck {
	gone := claimed.MergeWithTargets(targets).Workloads()
	restore := snap.SimulateWorkloadUsageRemoval(gone)
	defer restore()
	return cq.Fits(*usage)
}

// reserveCapacityForUnreclaimablePreempt runs when a head needs preemption and nothing may be preempted.
// Unless the ClusterQueue can always reclaim its quota later, it keeps the quota it is
// waiting for (up to what its limits allow) out of reach of the rest of the cohort for this
// cycle, so that lower-priority work elsewhere does not take it first. An active preemptor
// (PrioritizePreemptorWorkloads) always holds it: its victims are on their way out.
// Upstream's original: (*Scheduler).reserveCapacityForUnreclaimablePreempt in sigs.k8s.io/kueue/pkg/scheduler.
func (s *Scheduler) reserveCapacityForUnreclaimablePreempt(ctx context.Context, log logr.Logger, e *entry, cq *schdcache.ClusterQueueSnapshot, snap *schdcache.Snapshot) {
	log.V(2).Info("Workload requires preemption, but there are no candidate workloads allowed for preemption", "preemption", cq.Preemption)
	activePreemptor := features.Enabled(features.PrioritizePreemptorWorkloads) && e.IsPreemptor
	blocked := e.holdQuota
	if blocked {
		// Not parked with the inadmissible workloads: it must hold the quota in every cycle.
		e.requeueReason = qcache.RequeueReasonFailedAfterNomination
	}
	if preemption.CanAlwaysReclaim(cq) && !activePreemptor && !blocked {
		return
	}
	cq.AddUsage(resourcesToReserve(log, e, cq))
}

// waitForPodsReadyIfNeeded implements waitForPodsReady.blockAdmission: admission waits until
// every admitted workload is ready. A second pass is exempt: its quota is already held
// and it would wait on itself.
// Upstream's original: (*Scheduler).waitForPodsReadyIfNeeded in sigs.k8s.io/kueue/pkg/scheduler.
func (s *Scheduler) waitForPodsReadyIfNeeded(ctx context.Context, log logr.Logger, e *entry) {
	if workload.NeedsSecondPass(e.Obj) || s.cache.PodsReadyForAllAdmittedWorkloads(log) {
		return
	}
	log.V(5).Info("Waiting for all admitted workloads to be in the PodsReady condition")
	wl := e.Obj.DeepCopy()
	err := workloadpatching.PatchAdmissionStatus(ctx, s.client, wl, s.clock, func(wl *kueue.Workload) (bool, error) {
		reason := workload.UnadmittedWorkloadReasonWithFallback(
			kueue.WorkloadQuotaReservedReasonWaitingForPodsReady,
			kueue.WorkloadWaiting, //nolint:staticcheck // the fallback upstream uses
		)
		return workload.UnsetQuotaReservationWithCondition(wl, reason, msgWaitingForPodsReady, s.clock.Now()), nil
	}, workloadpatching.WithLooseOnApply(), workloadpatching.WithRetryOnConflict())
	if err != nil {
		log.Error(err, "Could not update Workload status")
	}
	s.cache.WaitForPodsReady(ctx)
	log.V(5).Info("Finished waiting for all admitted workloads to be in the PodsReady condition")
}

// handleFailedTASReplacement evicts a TAS workload on an unhealthy node for which no
// replacement fits (TASFailedNodeReplacementFailFast).
// Upstream's original: (*Scheduler).handleFailedTASReplacement and (*Scheduler).evictWorkloadAfterFailedTASReplacement in sigs.k8s.io/kueue/pkg/scheduler.
func (s *Scheduler) handleFailedTASReplacement(ctx context.Context, log logr.Logger, e *entry) {
	wl := e.Obj.DeepCopy()
	nodes := workload.UnhealthyNodeNames(wl)
	csv := strings.Join(nodes, ",")
	log.V(3).Info("Evicting workload after failed try to find a node replacement; TASFailedNodeReplacementFailFast enabled", "unhealthyNodes", nodes)
	msg := fmt.Sprintf("Workload was evicted as there was no replacement for unhealthy node(s): %s", csv)
	err := workloadevict.Evict(ctx, s.client, s.recorder, wl, kueue.WorkloadEvictedDueToNodeFailures, msg, "", s.clock,
		s.cache.ShouldExposeLocalQueueMetricsForWorkload(log, wl), s.roleTracker, s.customLabels,
		workloadevict.WithLooseOnApply(), workloadevict.WithRetryOnConflict())
	if client.IgnoreNotFound(err) != nil {
		err = fmt.Errorf("failed to evict workload after failed try to find a replacement for unhealthy nodes: %s, %w", csv, err)
		log.V(2).Error(err, "Failed to evict workload")
		return
	}
	e.markEvicted()
}
