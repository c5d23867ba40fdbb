package preemption

import (
	kueue "sigs.k8s.io/kueue/apis/kueue/v1beta2"
	schdcache "sigs.k8s.io/kueue/pkg/cache/scheduler"
)

// variant is how a candidate may be preempted, which decides when it is valid and its reason.
type variant int

const (
	// inQueue: the candidate is in the preemptor's ClusterQueue.
	inQueue variant = iota
	// hierarchical: the preemptor's side of the tree has unused nominal quota the candidate borrows,
	// so it is reclaimed whatever its priority.
	hierarchical
	// reclaimNoBorrow: reclaim allowed only if the preemptor then fits without borrowing.
	reclaimNoBorrow
	// reclaimBorrowing: reclaim allowed even if the preemptor borrows afterwards (borrowWithinCohort).
	reclaimBorrowing
)

func (v variant) reason() string {
	switch v {
	case inQueue:
		return kueue.InClusterQueueReason
	case reclaimBorrowing:
		return kueue.InCohortReclaimWhileBorrowingReason
	default:
		return kueue.InCohortReclamationReason
	}
}

// candidateSet is the classical search's input: eligible candidates in the order they are tried,
// and what the choice between borrowing and not borrowing depends on.
type candidateSet struct {
	ordered           []*candidate
	noneOutsideQueue  bool
	noneHierarchical  bool
	borrowingForbids  bool
	preemptorUnderNom bool
}

// classicalPreemptions removes candidates in order until the workload fits, then puts back the ones
// it does not need. Whether the workload may borrow after preempting is tried in the order that
// keeps upstream's results.
// Upstream's original: (*Preemptor).classicalPreemptions in sigs.k8s.io/kueue/pkg/scheduler/preemption.
func (p *Preemptor) classicalPreemptions(s *search) []*Target {
	set := p.classicalCandidates(s)
	var attempts []bool // allowBorrowing per attempt
	switch {
	case set.noneOutsideQueue || (set.borrowingForbids && !set.preemptorUnderNom):
		attempts = []bool{true}
	case set.borrowingForbids && set.noneHierarchical:
		attempts = []bool{false, true}
	default:
		attempts = []bool{true, false}
	}
	for _, borrow := range attempts {
		var targets []*Target
		for _, c := range set.ordered {
			if !s.candidateIsValid(c, borrow) {
				continue
			}
			s.snapshot.RemoveWorkload(c.Info)
			targets = append(targets, &Target{WorkloadInfo: c.Info, Reason: c.preemptionReason(), WorkloadCq: s.snapshot.ClusterQueue(c.Info.ClusterQueue)})
			if s.workloadFits(borrow) {
				targets = s.fillBackWorkloads(targets, func() bool { return s.workloadFits(borrow) })
				restoreSnapshot(s.snapshot, targets)
				return targets
			}
		}
		restoreSnapshot(s.snapshot, targets)
	}
	return nil
}

// candidateIsValid rechecks a candidate from another ClusterQueue against the snapshot as the search
// has changed it: once its queue (or a cohort on the way to the common ancestor) is back within
// nominal quota, there is nothing left to reclaim from it.
// Upstream's original: (*candidateIterator).candidateIsValid in sigs.k8s.io/kueue/pkg/scheduler/preemption/classical.
func (s *search) candidateIsValid(c *candidate, borrow bool) bool {
	if c.Info.ClusterQueue == s.cq.Name {
		return true
	}
	if borrow && c.variant == reclaimNoBorrow {
		return false
	}
	cq := s.snapshot.ClusterQueue(c.Info.ClusterQueue)
	if schdcache.IsWithinNominalInResources(cq, s.contested) {
		return false
	}
	for node := range cq.PathParentToRoot() {
		if node == c.lca {
			break
		}
		if schdcache.IsWithinNominalInResources(node, s.contested) {
			return false
		}
	}
	return true
}

// classicalCandidates collects eligible candidates from the preemptor's queue and from the
// cohort tree, each group ordered by the policy, evicted ones of every group first.
func (p *Preemptor) classicalCandidates(s *search) candidateSet {
	set := candidateSet{borrowingForbids: s.borrowForbidden, preemptorUnderNom: s.queueUnderNominalInResourcesNeedingPreemption()}

	var sameQueue []*candidate
	if s.cq.Preemption.WithinClusterQueue != kueue.PreemptionPolicyNever {
		sameQueue = p.getCandidatesFromCQ(s, s.cq, nil, false, nil)
	}
	hierarchy, byPriority := p.collectCandidatesForHierarchicalReclaim(s)
	set.noneOutsideQueue = len(hierarchy) == 0 && len(byPriority) == 0
	set.noneHierarchical = len(hierarchy) == 0

	groups := [][]*candidate{hierarchy, byPriority, sameQueue}
	for _, g := range groups {
		p.sortCandidates(s, g)
	}
	for _, evicted := range []bool{true, false} {
		for _, g := range groups {
			for _, c := range g {
				if c.Evicted == evicted {
					set.ordered = append(set.ordered, c)
				}
			}
		}
	}
	return set
}

// collectCandidatesForHierarchicalReclaim walks from the preemptor's parent to the root. At each level it looks at the
// subtrees not yet visited; candidates there are hierarchical once the preemptor's requests fit
// in the quota of the levels walked so far.
// Upstream's original: collectCandidatesForHierarchicalReclaim in sigs.k8s.io/kueue/pkg/scheduler/preemption/classical.
func (p *Preemptor) collectCandidatesForHierarchicalReclaim(s *search) (hierarchy, byPriority []*candidate) {
	if !s.cq.HasParent() || s.cq.Preemption.ReclaimWithinCohort == kueue.PreemptionPolicyNever {
		return nil, nil
	}
	advantage, remaining := schdcache.QuantitiesFitInQuota(s.cq, s.usage.Quota)
	var visited *schdcache.CohortSnapshot
	for root := range s.cq.PathParentToRoot() {
		if advantage {
			hierarchy = p.collectCandidatesInSubtree(s, root, root, visited, advantage, hierarchy)
		} else {
			byPriority = p.collectCandidatesInSubtree(s, root, root, visited, advantage, byPriority)
		}
		var fits bool
		fits, remaining = schdcache.QuantitiesFitInQuota(root, remaining)
		advantage = advantage || fits
		visited = root
	}
	return hierarchy, byPriority
}

// collectCandidatesInSubtree appends to out the candidates under node, skipping the subtree already
// visited and any cohort or ClusterQueue within its nominal quota (it borrows nothing that could
// be reclaimed).
// Upstream's original: collectCandidatesInSubtree in sigs.k8s.io/kueue/pkg/scheduler/preemption/classical.
func (p *Preemptor) collectCandidatesInSubtree(s *search, node, lca, skip *schdcache.CohortSnapshot, advantage bool, out []*candidate) []*candidate {
	for _, child := range node.ChildCohorts() {
		if child == skip || schdcache.IsWithinNominalInResources(child, s.contested) {
			continue
		}
		out = p.collectCandidatesInSubtree(s, child, lca, skip, advantage, out)
	}
	for _, cq := range node.ChildCQs() {
		if cq == s.cq || schdcache.IsWithinNominalInResources(cq, s.contested) {
			continue
		}
		out = p.getCandidatesFromCQ(s, cq, lca, advantage, out)
	}
	return out
}

// getCandidatesFromCQ appends to out the eligible candidates of cq, classified.
// Upstream's original: getCandidatesFromCQ in sigs.k8s.io/kueue/pkg/scheduler/preemption/classical.
func (p *Preemptor) getCandidatesFromCQ(s *search, cq *schdcache.ClusterQueueSnapshot, lca *schdcache.CohortSnapshot, advantage bool, out []*candidate) []*candidate {
	return p.eligibleIn(s, cq, func(c *candidate) bool {
		c.lca = lca
		c.variant = s.classifyPreemptionVariant(c, advantage)
		return true
	}, out)
}

// classifyPreemptionVariant says how an eligible candidate may be preempted.
// Upstream's original: classifyPreemptionVariant in sigs.k8s.io/kueue/pkg/scheduler/preemption/classical.
func (s *search) classifyPreemptionVariant(c *candidate, advantage bool) variant {
	switch {
	case c.Info.ClusterQueue == s.cq.Name:
		return inQueue
	case advantage:
		return hierarchical
	}
	// A candidate of equal or higher priority, or above maxPriorityThreshold, may only be reclaimed
	// if the preemptor does not borrow afterwards.
	if s.borrowForbidden || c.Priority >= s.preemptor.Priority || (s.borrowThreshold != nil && c.Priority > int64(*s.borrowThreshold)) {
		return reclaimNoBorrow
	}
	return reclaimBorrowing
}

// queueUnderNominalInResourcesNeedingPreemption reports whether the preemptor's queue uses strictly less than its nominal quota
// of every contested flavor/resource.
// Upstream's original: queueUnderNominalInResourcesNeedingPreemption in sigs.k8s.io/kueue/pkg/scheduler/preemption.
func (s *search) queueUnderNominalInResourcesNeedingPreemption() bool {
	for fr := range s.contested {
		if s.cq.QuotaFor(fr).Nominal.Cmp(s.cq.ResourceNode.Usage[fr]) <= 0 {
			return false
		}
	}
	return true
}
