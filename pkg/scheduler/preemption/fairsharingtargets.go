package preemption

import (
	"math"

	"k8s.io/apimachinery/pkg/util/sets"
	"k8s.io/klog/v2"

	kueue "sigs.k8s.io/kueue/apis/kueue/v1beta2"
	schdcache "sigs.k8s.io/kueue/pkg/cache/scheduler"
	"sigs.k8s.io/kueue/pkg/features"
	"sigs.k8s.io/kueue/pkg/resources"
	"sigs.k8s.io/kueue/pkg/scheduler/preemption/fairsharing"
	"sigs.k8s.io/kueue/pkg/workload"

	"github.com/kueue-timeshare/kueue-timeshare/pkg/policy"
)

// fairPreemptions preempts from the ClusterQueues with the highest dominant resource share first,
// as long as the configured strategy says the preemption makes shares fairer.
// Upstream's original: (*Preemptor).fairPreemptions in sigs.k8s.io/kueue/pkg/scheduler/preemption.
func (p *Preemptor) fairPreemptions(s *search) []*Target {
	cands := p.fairCandidates(s)
	if len(cands) == 0 {
		return nil
	}
	p.sortCandidates(s, cands)
	infos := make([]*workload.Info, len(cands))
	// Reasons other than the strategy's own are rare: keep a map only when the policy gave one.
	var reasons map[*workload.Info]string
	for i, c := range cands {
		infos[i] = c.Info
		if c.reason != "" {
			if reasons == nil {
				reasons = map[*workload.Info]string{}
			}
			reasons[c.Info] = c.reason
		}
	}
	if logV := s.log.V(5); logV.Enabled() {
		logV.Info("Simulating fair preemption", "candidates", workload.References(infos),
			"resourcesRequiringPreemption", s.contested.UnsortedList(), "preemptingWorkload", klog.KObj(s.info.Obj))
	}

	// Shares are computed as if the pending workload were already admitted.
	revert := s.cq.SimulateUsageAddition(s.usage)
	byShare := map[*workload.Info]bool{}
	fits, targets, retry := p.runFirstFsStrategy(s, infos, reasons, p.fsStrategies[0], byShare)
	if !fits && len(p.fsStrategies) > 1 {
		fits, targets = p.runSecondFsStrategy(s, retry, reasons, targets, byShare)
	}
	revert()
	if !fits {
		restoreSnapshot(s.snapshot, targets)
		return nil
	}
	keep := ownTurnsBeforeShareTargets(s.cq, targets, byShare)
	targets = s.minimizeKeeping(targets, keep, func() bool { return s.workloadFits(true) })
	restoreSnapshot(s.snapshot, targets)
	return targets
}

// ownTurnsBeforeShareTargets lists the targets in the preemptor's own ClusterQueue that only this
// project's rules made eligible (a turn that ended, an expected runtime exceeded) and that were
// chosen before a target of another ClusterQueue that the strategy allowed. The strategy compared
// shares with them gone: putting one back leaves the preemptor's queue borrowing as much as the
// victim's did, the victim wins the next cycle's order on the tie and is admitted again, and the
// preemptor evicts it again, every cycle. Upstream's own in-queue targets keep upstream's
// minimisation (parity).
func ownTurnsBeforeShareTargets(cq *schdcache.ClusterQueueSnapshot, targets []*Target, byShare map[*workload.Info]bool) map[*workload.Info]bool {
	keep := map[*workload.Info]bool{}
	shareAfter := false
	for i := len(targets) - 1; i >= 0; i-- {
		t := targets[i]
		if byShare[t.WorkloadInfo] {
			shareAfter = true
			continue
		}
		if shareAfter && t.WorkloadCq == cq && policy.IsOwnReason(t.Reason) {
			keep[t.WorkloadInfo] = true
		}
	}
	return keep
}

// fitsWithoutSelf checks the fit with the pending workload's simulated usage taken out again.
func (s *search) fitsWithoutSelf() bool {
	revert := s.cq.SimulateUsageRemoval(s.usage)
	defer revert()
	return s.workloadFits(true)
}

func reasonOr(reasons map[*workload.Info]string, info *workload.Info, def string) string {
	if r := reasons[info]; r != "" {
		return r
	}
	return def
}

// runFirstFsStrategy walks target ClusterQueues by share. It returns whether the workload fits, the
// targets chosen, and the candidates the strategy refused, for the second strategy.
// Targets the strategy allowed are added to byShare.
// Upstream's original: runFirstFsStrategy in sigs.k8s.io/kueue/pkg/scheduler/preemption.
func (p *Preemptor) runFirstFsStrategy(s *search, cands []*workload.Info, reasons map[*workload.Info]string, strategy fairsharing.Strategy, byShare map[*workload.Info]bool) (bool, []*Target, []*workload.Info) {
	order := fairsharing.MakeClusterQueueOrdering(s.cq, cands, s.log, p.clock)
	var targets []*Target
	var retry []*workload.Info
	// A preemptor within its nominal quota is entitled to it, whatever the shares say.
	entitled := features.Enabled(features.FairSharingPreemptWithinNominal) && s.queueWithinNominalInResourcesNeedingPreemption()
	take := func(t *fairsharing.TargetClusterQueue, info *workload.Info, reason string) bool {
		s.snapshot.RemoveWorkload(info)
		targets = append(targets, &Target{WorkloadInfo: info, Reason: reasonOr(reasons, info, reason), WorkloadCq: t.GetTargetCq()})
		return s.fitsWithoutSelf()
	}
	for t := range order.Iter() {
		if t.InClusterQueuePreemption() {
			if take(t, t.PopWorkload(), kueue.InClusterQueueReason) {
				return true, targets, nil
			}
			continue
		}
		if entitled {
			if take(t, t.PopWorkload(), kueue.InCohortReclamationReason) {
				return true, targets, nil
			}
			continue
		}
		preemptorShare, targetShare := t.ComputeShares()
		if fsStrategyUnsatisfiable(preemptorShare, targetShare) {
			for t.HasWorkload() {
				retry = append(retry, t.PopWorkload())
			}
			continue
		}
		for t.HasWorkload() {
			info := t.PopWorkload()
			after := t.ComputeTargetShareAfterRemoval(info)
			passed := strategy(preemptorShare, targetShare, after)
			if logV := s.log.V(5); logV.Enabled() {
				logV.Info("Fair sharing strategy", "targetWorkload", klog.KObj(info.Obj), "targetClusterQueue", klog.KRef("", string(t.GetTargetCq().Name)),
					"preemptorNewShare", schdcache.DRS(preemptorShare).PreciseWeightedShareSerialized(),
					"targetOldShare", schdcache.DRS(targetShare).PreciseWeightedShareSerialized(),
					"targetNewShare", schdcache.DRS(after).PreciseWeightedShareSerialized(), "passed", passed)
			}
			if !passed {
				retry = append(retry, info)
				continue
			}
			byShare[info] = true
			if take(t, info, kueue.InCohortFairSharingReason) {
				return true, targets, nil
			}
			// Shares changed: pick the next target ClusterQueue afresh.
			break
		}
	}
	return false, targets, retry
}

// fsStrategyUnsatisfiable: a preemptor with an infinite share (borrowing on a zero weight) loses to every
// target whose share is finite, under either strategy, so the per-workload check can be skipped.
// Upstream's original: fsStrategyUnsatisfiable in sigs.k8s.io/kueue/pkg/scheduler/preemption.
func fsStrategyUnsatisfiable(preemptorNewShare fairsharing.PreemptorNewShare, targetOldShare fairsharing.TargetOldShare) bool {
	return math.IsInf(schdcache.DRS(preemptorNewShare).PreciseWeightedShare(), 1) &&
		!math.IsInf(schdcache.DRS(targetOldShare).PreciseWeightedShare(), 1)
}

// runSecondFsStrategy retries the refused candidates with LessThanInitialShare, at most one per
// ClusterQueue: the strategy only compares queue shares, so a second one would not pass either.
// Upstream's original: runSecondFsStrategy in sigs.k8s.io/kueue/pkg/scheduler/preemption.
func (p *Preemptor) runSecondFsStrategy(s *search, retry []*workload.Info, reasons map[*workload.Info]string, targets []*Target, byShare map[*workload.Info]bool) (bool, []*Target) {
	order := fairsharing.MakeClusterQueueOrdering(s.cq, retry, s.log, p.clock)
	for t := range order.Iter() {
		preemptorShare, targetShare := t.ComputeShares()
		info := t.PopWorkload()
		if fairsharing.LessThanInitialShare(preemptorShare, targetShare, fairsharing.TargetNewShare{}) {
			byShare[info] = true
			s.snapshot.RemoveWorkload(info)
			targets = append(targets, &Target{WorkloadInfo: info, Reason: reasonOr(reasons, info, kueue.InCohortFairSharingReason), WorkloadCq: t.GetTargetCq()})
			if s.fitsWithoutSelf() {
				return true, targets
			}
		}
		order.DropQueue(t)
	}
	return false, targets
}

// fairCandidates are the eligible workloads of the preemptor's queue, and of the queues in its
// cohort tree that borrow a contested resource.
func (p *Preemptor) fairCandidates(s *search) []*candidate {
	keep := func(*candidate) bool { return true }
	var out []*candidate
	if s.cq.Preemption.WithinClusterQueue != kueue.PreemptionPolicyNever {
		out = p.eligibleIn(s, s.cq, keep, out)
	}
	if !s.cq.HasParent() || s.cq.Preemption.ReclaimWithinCohort == kueue.PreemptionPolicyNever {
		return out
	}
	for _, other := range s.cq.Parent().Root().SubtreeClusterQueues() {
		if other == s.cq || !cqIsBorrowing(other, s.contested) {
			continue
		}
		out = p.eligibleIn(s, other, keep, out)
	}
	return out
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

// queueWithinNominalInResourcesNeedingPreemption: the preemptor's queue, with the workload counted, stays within nominal
// quota for every contested flavor/resource.
// Upstream's original: queueWithinNominalInResourcesNeedingPreemption in sigs.k8s.io/kueue/pkg/scheduler/preemption.
func (s *search) queueWithinNominalInResourcesNeedingPreemption() bool {
	for fr := range s.contested {
		if s.cq.Borrowing(fr) {
			return false
		}
	}
	return true
}
