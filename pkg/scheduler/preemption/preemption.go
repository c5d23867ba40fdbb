package preemption

import (
	"context"
	"math"

	"github.com/go-logr/logr"
	"k8s.io/apimachinery/pkg/util/sets"
	"k8s.io/klog/v2"
	"k8s.io/utils/clock"

	configapi "sigs.k8s.io/kueue/apis/config/v1beta2"
	kueue "sigs.k8s.io/kueue/apis/kueue/v1beta2"
	schdcache "sigs.k8s.io/kueue/pkg/cache/scheduler"
	"sigs.k8s.io/kueue/pkg/features"
	"sigs.k8s.io/kueue/pkg/resources"
	"sigs.k8s.io/kueue/pkg/scheduler/flavorassigner"
	preemptioncommon "sigs.k8s.io/kueue/pkg/scheduler/preemption/common"
	"sigs.k8s.io/kueue/pkg/scheduler/preemption/fairsharing"
	"sigs.k8s.io/kueue/pkg/util/logging"
	"sigs.k8s.io/kueue/pkg/workload"

	"github.com/kueue-timeshare/kueue-timeshare/pkg/scheduler/preemption/classical"
)

// preemptionCtx is one preemption problem: a pending workload, the quota it needs, and a
// snapshot that the search edits and always restores.
type preemptionCtx struct {
	ctx               context.Context
	clock             clock.Clock
	log               logr.Logger
	preemptor         workload.Info
	preemptorCQ       *schdcache.ClusterQueueSnapshot
	snapshot          *schdcache.Snapshot
	workloadUsage     workload.Usage
	tasRequests       schdcache.WorkloadTASRequests
	frsNeedPreemption sets.Set[resources.FlavorResource]
	// search is the victim policy's side of the problem, which embeds this one.
	search *search
}

// getTargets runs the classical or the fair-sharing search.
// Upstream's original: (*Preemptor).getTargets in sigs.k8s.io/kueue/pkg/scheduler/preemption.
func (p *Preemptor) getTargets(preemptionCtx *preemptionCtx) []*Target {
	if p.enableFairSharing {
		return p.fairPreemptions(preemptionCtx, p.fsStrategies)
	}
	return p.classicalPreemptions(preemptionCtx)
}

// preemptionAttemptOpts is one pass of the classical search.
type preemptionAttemptOpts struct {
	borrowing bool
}

// classicalPreemptions removes candidates in order until the workload fits, then puts back the
// ones it does not need. Whether the workload may borrow after preempting is tried in an order
// that depends on borrowWithinCohort and on where the candidates are.
// Upstream's original: (*Preemptor).classicalPreemptions in sigs.k8s.io/kueue/pkg/scheduler/preemption.
func (p *Preemptor) classicalPreemptions(preemptionCtx *preemptionCtx) []*Target {
	hierarchicalReclaimCtx := &classical.HierarchicalPreemptionCtx{
		Log:               preemptionCtx.log,
		Wl:                preemptionCtx.preemptor.Obj,
		Cq:                preemptionCtx.preemptorCQ,
		FrsNeedPreemption: preemptionCtx.frsNeedPreemption,
		Requests:          preemptionCtx.workloadUsage.Quota,
		WorkloadOrdering:  p.workloadOrdering,
		Judge:             preemptionCtx.search, // timeshare: the victim policy judges and orders the candidates.
	}
	// Three kinds of candidates, each with its preemption reason: workloads of the preemptor's own
	// ClusterQueue; workloads of ClusterQueues over their quota in a subtree where the preemptor's
	// ClusterQueue has the prior claim (reclaim); and workloads of other borrowing ClusterQueues,
	// which it may take only if it ends within its nominal quota, or, with borrowWithinCohort,
	// below the priority threshold. The iterator yields those already being evicted first (they
	// cost nothing more), then the kinds in that order, each in the candidate order.
	candidatesGenerator := classical.NewCandidateIterator(hierarchicalReclaimCtx, p.enabledAfs, preemptionCtx.frsNeedPreemption, preemptionCtx.snapshot, p.clock, preemptioncommon.CandidatesOrdering)
	var attemptPossibleOpts []preemptionAttemptOpts
	borrowWithinCohortForbidden, _ := classical.IsBorrowingWithinCohortForbidden(preemptionCtx.preemptorCQ)
	// A pass either lets the preemptor borrow once it fits or requires it to end within nominal
	// quota; the borrowing pass skips the candidates only the second allows, so each may succeed
	// where the other fails. One borrowing pass when there is nothing outside its ClusterQueue, or
	// when it cannot end within nominal anyway; within nominal first when only that pass can take
	// others' workloads (so its own are spared); else borrowing first.
	switch {
	case candidatesGenerator.NoCandidateFromOtherQueues || (borrowWithinCohortForbidden && !queueUnderNominalInResourcesNeedingPreemption(preemptionCtx)):
		attemptPossibleOpts = []preemptionAttemptOpts{{true}}
	case borrowWithinCohortForbidden && candidatesGenerator.NoCandidateForHierarchicalReclaim:
		attemptPossibleOpts = []preemptionAttemptOpts{{false}, {true}}
	default:
		attemptPossibleOpts = []preemptionAttemptOpts{{true}, {false}}
	}

	// Each pass takes candidates out of the snapshot until the preemptor fits, then puts back those
	// it did not need; the snapshot is restored whatever the outcome: the search only answers.
	for _, attemptOpts := range attemptPossibleOpts {
		var targets []*Target
		candidatesGenerator.Reset()
		for candidate, reason := candidatesGenerator.Next(attemptOpts.borrowing); candidate != nil; candidate, reason = candidatesGenerator.Next(attemptOpts.borrowing) {
			preemptionCtx.snapshot.RemoveWorkload(candidate)
			targets = append(targets, &Target{
				WorkloadInfo: candidate,
				Reason:       reason,
				WorkloadCq:   preemptionCtx.snapshot.ClusterQueue(candidate.ClusterQueue),
			})
			if workloadFits(preemptionCtx, attemptOpts.borrowing) {
				targets = fillBackWorkloads(preemptionCtx, targets, attemptOpts.borrowing)
				restoreSnapshot(preemptionCtx.snapshot, targets)
				return targets
			}
		}
		restoreSnapshot(preemptionCtx.snapshot, targets)
	}
	return nil
}

// fillBackWorkloads puts targets back, last chosen first, while the workload still fits without
// them, so that no more workloads are evicted than needed. The snapshot ends with the kept
// targets removed.
// Upstream's original: fillBackWorkloads in sigs.k8s.io/kueue/pkg/scheduler/preemption.
func fillBackWorkloads(preemptionCtx *preemptionCtx, targets []*Target, allowBorrowing bool) []*Target {
	for i := len(targets) - 2; i >= 0; i-- {
		// timeshare: targets the fair-sharing search must keep (see ownTurnsBeforeShareTargets).
		if preemptionCtx.search.keep[targets[i].WorkloadInfo] {
			continue
		}
		preemptionCtx.snapshot.AddWorkload(targets[i].WorkloadInfo)
		if workloadFits(preemptionCtx, allowBorrowing) {
			targets[i] = targets[len(targets)-1]
			targets = targets[:len(targets)-1]
		} else {
			preemptionCtx.snapshot.RemoveWorkload(targets[i].WorkloadInfo)
		}
	}
	return targets
}

// Upstream's original: restoreSnapshot in sigs.k8s.io/kueue/pkg/scheduler/preemption.
func restoreSnapshot(snapshot *schdcache.Snapshot, targets []*Target) {
	for _, t := range targets {
		snapshot.AddWorkload(t.WorkloadInfo)
	}
}

// Upstream's original: parseStrategies in sigs.k8s.io/kueue/pkg/scheduler/preemption.
func parseStrategies(fs *configapi.FairSharing) []fairsharing.Strategy {
	if fs == nil || len(fs.PreemptionStrategies) == 0 {
		return []fairsharing.Strategy{fairsharing.LessThanOrEqualToFinalShare, fairsharing.LessThanInitialShare}
	}
	strategies := make([]fairsharing.Strategy, len(fs.PreemptionStrategies))
	for i, strategy := range fs.PreemptionStrategies {
		switch strategy {
		case configapi.LessThanOrEqualToFinalShare:
			strategies[i] = fairsharing.LessThanOrEqualToFinalShare
		case configapi.LessThanInitialShare:
			strategies[i] = fairsharing.LessThanInitialShare
		}
	}
	return strategies
}

// runFirstFsStrategy walks the target ClusterQueues by share. It returns whether the workload
// fits, the targets chosen, and the candidates the strategy refused, for the second strategy.
// Upstream's original: runFirstFsStrategy in sigs.k8s.io/kueue/pkg/scheduler/preemption.
func runFirstFsStrategy(preemptionCtx *preemptionCtx, candidates []*workload.Info, strategy fairsharing.Strategy) (bool, []*Target, []*workload.Info) {
	ordering := fairsharing.MakeClusterQueueOrdering(preemptionCtx.preemptorCQ, candidates, preemptionCtx.log, preemptionCtx.clock)

	var targets []*Target
	var retryCandidates []*workload.Info

	preemptorWithinNominal := features.Enabled(features.FairSharingPreemptWithinNominal) &&
		queueWithinNominalInResourcesNeedingPreemption(preemptionCtx)
	// The ordering yields the ClusterQueue with the highest share first. Its own ClusterQueue's
	// candidates need no share check; with FairSharingPreemptWithinNominal a preemptor within
	// nominal quota takes back what is its own; any other target must pass the strategy, which
	// compares the shares before and after; a ClusterQueue gives at most one target per visit,
	// so that the next visit goes to whichever has the highest share then.
	for candCQ := range ordering.Iter() {
		if candCQ.InClusterQueuePreemption() {
			candWl := candCQ.PopWorkload()
			preemptionCtx.snapshot.RemoveWorkload(candWl)
			targets = append(targets, &Target{
				WorkloadInfo: candWl,
				Reason:       preemptionCtx.search.reasonOr(candWl, kueue.InClusterQueueReason), // timeshare: a reason the victim policy gave.
				WorkloadCq:   candCQ.GetTargetCq(),
			})
			if workloadFitsForFairSharing(preemptionCtx) {
				return true, targets, nil
			}
			continue
		}

		if preemptorWithinNominal {
			candWl := candCQ.PopWorkload()
			preemptionCtx.snapshot.RemoveWorkload(candWl)
			targets = append(targets, &Target{
				WorkloadInfo: candWl,
				Reason:       preemptionCtx.search.reasonOr(candWl, kueue.InCohortReclamationReason), // timeshare: a reason the victim policy gave.
				WorkloadCq:   candCQ.GetTargetCq(),
			})
			if workloadFitsForFairSharing(preemptionCtx) {
				return true, targets, nil
			}
			continue
		}

		preemptorNewShare, targetOldShare := candCQ.ComputeShares()
		if fsStrategyUnsatisfiable(preemptorNewShare, targetOldShare) {
			if logV := preemptionCtx.log.V(4); logV.Enabled() {
				logV.Info("Skipping FairSharing strategy evaluation, no candidate can pass",
					"preemptorNewShare", schdcache.DRS(preemptorNewShare).PreciseWeightedShareSerialized(),
					"targetClusterQueue", klog.KRef("", string(candCQ.GetTargetCq().Name)),
					"targetOldShare", schdcache.DRS(targetOldShare).PreciseWeightedShareSerialized())
			}
			for candCQ.HasWorkload() {
				retryCandidates = append(retryCandidates, candCQ.PopWorkload())
			}
			continue
		}
		strategyLog := newFsStrategyLog(preemptionCtx.log, candCQ, preemptorNewShare, targetOldShare)
		for candCQ.HasWorkload() {
			candWl := candCQ.PopWorkload()
			targetNewShare := candCQ.ComputeTargetShareAfterRemoval(candWl)
			passed := strategy(preemptorNewShare, targetOldShare, targetNewShare)
			strategyLog.record(candWl, targetNewShare, passed)
			if passed {
				// timeshare: which targets the strategy allowed decides which fillBackWorkloads keeps.
				preemptionCtx.search.allowedByShare(candWl)
				preemptionCtx.snapshot.RemoveWorkload(candWl)
				targets = append(targets, &Target{
					WorkloadInfo: candWl,
					Reason:       preemptionCtx.search.reasonOr(candWl, kueue.InCohortFairSharingReason), // timeshare: a reason the victim policy gave.
					WorkloadCq:   candCQ.GetTargetCq(),
				})
				if workloadFitsForFairSharing(preemptionCtx) {
					strategyLog.flush()
					return true, targets, nil
				}
				break
			} else {
				retryCandidates = append(retryCandidates, candWl)
			}
		}
		strategyLog.flush()
	}
	return false, targets, retryCandidates
}

// fsStrategyUnsatisfiable: a preemptor with an infinite share (borrowing on a zero weight) loses
// to every target whose share is finite, under either strategy.
// Upstream's original: fsStrategyUnsatisfiable in sigs.k8s.io/kueue/pkg/scheduler/preemption.
func fsStrategyUnsatisfiable(preemptorNewShare fairsharing.PreemptorNewShare, targetOldShare fairsharing.TargetOldShare) bool {
	return math.IsInf(schdcache.DRS(preemptorNewShare).PreciseWeightedShare(), 1) &&
		!math.IsInf(schdcache.DRS(targetOldShare).PreciseWeightedShare(), 1)
}

// runSecondFsStrategy retries the refused candidates with LessThanInitialShare, at most one per
// ClusterQueue: the strategy only compares queue shares, so a second one would not pass either.
// Upstream's original: runSecondFsStrategy in sigs.k8s.io/kueue/pkg/scheduler/preemption.
func runSecondFsStrategy(retryCandidates []*workload.Info, preemptionCtx *preemptionCtx, targets []*Target) (bool, []*Target) {
	ordering := fairsharing.MakeClusterQueueOrdering(preemptionCtx.preemptorCQ, retryCandidates, preemptionCtx.log, preemptionCtx.clock)
	for candCQ := range ordering.Iter() {
		preemptorNewShare, targetOldShare := candCQ.ComputeShares()
		passed := fairsharing.LessThanInitialShare(preemptorNewShare, targetOldShare, fairsharing.TargetNewShare{})
		candWl := candCQ.PopWorkload()
		if logV := preemptionCtx.log.V(4); logV.Enabled() {
			logV.Info("Evaluating FairSharing strategy",
				"preemptorNewShare", schdcache.DRS(preemptorNewShare).PreciseWeightedShareSerialized(),
				"targetClusterQueue", klog.KRef("", string(candCQ.GetTargetCq().Name)),
				"targetWorkload", klog.KObj(candWl.Obj),
				"targetOldShare", schdcache.DRS(targetOldShare).PreciseWeightedShareSerialized(),
				"strategyPassed", passed)
		}
		if passed {
			// timeshare: which targets the strategy allowed decides which fillBackWorkloads keeps.
			preemptionCtx.search.allowedByShare(candWl)
			preemptionCtx.snapshot.RemoveWorkload(candWl)
			targets = append(targets, &Target{
				WorkloadInfo: candWl,
				Reason:       preemptionCtx.search.reasonOr(candWl, kueue.InCohortFairSharingReason), // timeshare: a reason the victim policy gave.
				WorkloadCq:   candCQ.GetTargetCq(),
			})
			if workloadFitsForFairSharing(preemptionCtx) {
				return true, targets
			}
		}
		ordering.DropQueue(candCQ)
	}
	return false, targets
}

// fairPreemptions preempts from the ClusterQueues with the highest dominant resource share first,
// as long as the strategies say the preemption makes shares fairer.
// Upstream's original: (*Preemptor).fairPreemptions in sigs.k8s.io/kueue/pkg/scheduler/preemption.
func (p *Preemptor) fairPreemptions(preemptionCtx *preemptionCtx, strategies []fairsharing.Strategy) []*Target {
	// timeshare: the victim policy judges the candidates.
	candidates := p.findCandidates(preemptionCtx.log, preemptionCtx.preemptor.Obj, preemptionCtx.preemptorCQ, preemptionCtx.frsNeedPreemption, preemptionCtx.search)
	if len(candidates) == 0 {
		return nil
	}
	// timeshare: the victim policy's order, which extends upstream's.
	candidates = preemptionCtx.search.sortCandidates(candidates)
	if logV := preemptionCtx.log.V(5); logV.Enabled() {
		logV.Info(
			"Simulating fair preemption",
			"candidates",
			workload.References(candidates),
			"resourcesRequiringPreemption",
			preemptionCtx.frsNeedPreemption.UnsortedList(),
			"preemptingWorkload",
			klog.KObj(preemptionCtx.preemptor.Obj),
		)
	}

	revertSimulation := preemptionCtx.preemptorCQ.SimulateUsageAddition(preemptionCtx.workloadUsage)

	fits, targets, retryCandidates := runFirstFsStrategy(preemptionCtx, candidates, strategies[0])
	if !fits && len(strategies) > 1 {
		if logV := preemptionCtx.log.V(6); logV.Enabled() {
			logV.Info("First fair sharing strategy failed, trying second strategy",
				"preemptingWorkload", klog.KObj(preemptionCtx.preemptor.Obj),
				"targets", logging.GetObjectReferences(targets),
				"retryCandidates", workload.References(retryCandidates))
		}
		fits, targets = runSecondFsStrategy(retryCandidates, preemptionCtx, targets)
	}

	revertSimulation()
	if !fits {
		if logV := preemptionCtx.log.V(6); logV.Enabled() {
			logV.Info("All fair sharing strategies failed",
				"preemptingWorkload", klog.KObj(preemptionCtx.preemptor.Obj),
				"targets", logging.GetObjectReferences(targets))
		}
		restoreSnapshot(preemptionCtx.snapshot, targets)
		return nil
	}
	// timeshare: targets of ours chosen before a share target stay (see ownTurnsBeforeShareTargets).
	preemptionCtx.search.keep = ownTurnsBeforeShareTargets(preemptionCtx.preemptorCQ, targets, preemptionCtx.search.byShare)
	targets = fillBackWorkloads(preemptionCtx, targets, true)
	restoreSnapshot(preemptionCtx.snapshot, targets)

	if logV := preemptionCtx.log.V(6); logV.Enabled() {
		logV.Info("Fair sharing strategies succeeded",
			"preemptingWorkload", klog.KObj(preemptionCtx.preemptor.Obj),
			"targets", logging.GetObjectReferences(targets))
	}
	return targets
}

// flavorResourcesNeedPreemption lists the flavor/resources the assignment gets only by preempting.
// Upstream's original: flavorResourcesNeedPreemption in sigs.k8s.io/kueue/pkg/scheduler/preemption.
func flavorResourcesNeedPreemption(assignment flavorassigner.Assignment) sets.Set[resources.FlavorResource] {
	resPerFlavor := sets.New[resources.FlavorResource]()
	for _, ps := range assignment.PodSets {
		for res, flvAssignment := range ps.Flavors {
			if flvAssignment.Mode == flavorassigner.Preempt {
				resPerFlavor.Insert(resources.FlavorResource{Flavor: flvAssignment.Name, Resource: res})
			}
		}
	}
	return resPerFlavor
}

// findCandidatesForPolicy returns the workloads of workloadsToFilter that hold contested quota
// and that the victim policy lets the preemptor preempt.
// Upstream's original: findCandidatesForPolicy in sigs.k8s.io/kueue/pkg/scheduler/preemption.
// timeshare: judge is the victim policy, readied for the workloads' queue.
func findCandidatesForPolicy(
	log logr.Logger,
	wl *kueue.Workload,
	workloadsToFilter map[workload.Reference]*workload.Info,
	policy kueue.PreemptionPolicy,
	frsNeedPreemption sets.Set[resources.FlavorResource],
	workloadOrdering workload.Ordering,
	judge *search,
) []*workload.Info {
	var candidates []*workload.Info
	for _, candidateWl := range workloadsToFilter {
		// timeshare: the victim policy decides; its standard rules are upstream's.
		if !judge.fairCandidate(candidateWl, policy) {
			continue
		}

		if !classical.WorkloadUsesResources(candidateWl, frsNeedPreemption) {
			continue
		}
		candidates = append(candidates, candidateWl)
	}
	return candidates
}

// findCandidates returns the candidates of the preemptor's queue, and of the queues in its
// cohort tree that borrow a contested resource.
// Upstream's original: (*Preemptor).findCandidates in sigs.k8s.io/kueue/pkg/scheduler/preemption.
// timeshare: judge is the search's victim policy.
func (p *Preemptor) findCandidates(log logr.Logger, wl *kueue.Workload, cq *schdcache.ClusterQueueSnapshot, frsNeedPreemption sets.Set[resources.FlavorResource], judge *search) []*workload.Info {
	var candidates []*workload.Info

	if cq.Preemption.WithinClusterQueue != kueue.PreemptionPolicyNever {
		// timeshare: the victim policy judges cq's workloads.
		newCandidates := findCandidatesForPolicy(log, wl, cq.Workloads, cq.Preemption.WithinClusterQueue, frsNeedPreemption, p.workloadOrdering, judge.queue(cq))
		candidates = append(candidates, newCandidates...)
	}

	if cq.HasParent() && cq.Preemption.ReclaimWithinCohort != kueue.PreemptionPolicyNever {
		for _, cohortCQ := range cq.Parent().Root().SubtreeClusterQueues() {
			if cq == cohortCQ || !cqIsBorrowing(cohortCQ, frsNeedPreemption) {
				continue
			}
			// timeshare: the victim policy judges cohortCQ's workloads.
			newCandidates := findCandidatesForPolicy(log, wl, cohortCQ.Workloads, cq.Preemption.ReclaimWithinCohort, frsNeedPreemption, p.workloadOrdering, judge.queue(cohortCQ))
			candidates = append(candidates, newCandidates...)
		}
	}
	return candidates
}

// Upstream's original: cqIsBorrowing in sigs.k8s.io/kueue/pkg/scheduler/preemption.
func cqIsBorrowing(cq *schdcache.ClusterQueueSnapshot, frsNeedPreemption sets.Set[resources.FlavorResource]) bool {
	if !cq.HasParent() {
		return false
	}
	for fr := range frsNeedPreemption {
		if cq.Borrowing(fr) {
			return true
		}
	}
	return false
}

// workloadFits reports whether the pending workload fits in the snapshot as it stands,
// optionally without borrowing, including its topology requests.
// Upstream's original: workloadFits in sigs.k8s.io/kueue/pkg/scheduler/preemption.
func workloadFits(preemptionCtx *preemptionCtx, allowBorrowing bool) bool {
	for fr, v := range preemptionCtx.workloadUsage.Quota {
		if !allowBorrowing && preemptionCtx.preemptorCQ.BorrowingWith(fr, v) {
			return false
		}
		if v.Cmp(preemptionCtx.preemptorCQ.Available(fr)) > 0 {
			return false
		}
	}
	tasResult := preemptionCtx.preemptorCQ.FindTopologyAssignmentsForWorkload(
		preemptionCtx.ctx,
		preemptionCtx.tasRequests,
		schdcache.WithWorkload(preemptionCtx.preemptor.Obj),
	)
	return tasResult.Failure() == nil
}

// workloadFitsForFairSharing checks the fit with the pending workload's simulated usage taken
// out again.
// Upstream's original: workloadFitsForFairSharing in sigs.k8s.io/kueue/pkg/scheduler/preemption.
func workloadFitsForFairSharing(preemptionCtx *preemptionCtx) bool {
	revertSimulation := preemptionCtx.preemptorCQ.SimulateUsageRemoval(preemptionCtx.workloadUsage)
	res := workloadFits(preemptionCtx, true)
	revertSimulation()
	return res
}

// queueUnderNominalInResourcesNeedingPreemption reports whether the preemptor's queue uses
// strictly less than its nominal quota of every contested flavor/resource.
// Upstream's original: queueUnderNominalInResourcesNeedingPreemption in sigs.k8s.io/kueue/pkg/scheduler/preemption.
func queueUnderNominalInResourcesNeedingPreemption(preemptionCtx *preemptionCtx) bool {
	for fr := range preemptionCtx.frsNeedPreemption {
		if preemptionCtx.preemptorCQ.QuotaFor(fr).Nominal.Cmp(preemptionCtx.preemptorCQ.ResourceNode.Usage[fr]) <= 0 {
			return false
		}
	}
	return true
}

// queueWithinNominalInResourcesNeedingPreemption: the preemptor's queue, with the workload
// counted, stays within nominal quota for every contested flavor/resource.
// Upstream's original: queueWithinNominalInResourcesNeedingPreemption in sigs.k8s.io/kueue/pkg/scheduler/preemption.
func queueWithinNominalInResourcesNeedingPreemption(preemptionCtx *preemptionCtx) bool {
	for fr := range preemptionCtx.frsNeedPreemption {
		if preemptionCtx.preemptorCQ.Borrowing(fr) {
			return false
		}
	}
	return true
}
