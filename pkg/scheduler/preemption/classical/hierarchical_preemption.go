package classical

import (
	"github.com/go-logr/logr"
	"k8s.io/apimachinery/pkg/util/sets"

	kueue "sigs.k8s.io/kueue/apis/kueue/v1beta2"
	schdcache "sigs.k8s.io/kueue/pkg/cache/scheduler"
	"sigs.k8s.io/kueue/pkg/resources"
	"sigs.k8s.io/kueue/pkg/util/priority"
	"sigs.k8s.io/kueue/pkg/workload"

	"github.com/kueue-timeshare/kueue-timeshare/pkg/policy"
)

// preemptionVariant is how a candidate may be preempted, which decides when it is valid and the
// reason recorded.
type preemptionVariant int

const (
	// Never: not a candidate.
	Never preemptionVariant = iota
	// WithinCQ: in the preemptor's ClusterQueue.
	WithinCQ
	// HiearchicalReclaim (upstream's spelling): the preemptor's side of the cohort tree has unused
	// nominal quota the candidate borrows, so it is reclaimed whatever its priority.
	HiearchicalReclaim
	// ReclaimWithoutBorrowing: reclaimed only if the preemptor then fits without borrowing.
	ReclaimWithoutBorrowing
	// ReclaimWhileBorrowing: reclaimed even if the preemptor borrows afterwards
	// (borrowWithinCohort).
	ReclaimWhileBorrowing
)

// Upstream's original: (preemptionVariant).PreemptionReason in sigs.k8s.io/kueue/pkg/scheduler/preemption/classical.
func (m preemptionVariant) PreemptionReason() string {
	switch m {
	case WithinCQ:
		return kueue.InClusterQueueReason
	case HiearchicalReclaim:
		return kueue.InCohortReclamationReason
	case ReclaimWhileBorrowing:
		return kueue.InCohortReclaimWhileBorrowingReason
	case ReclaimWithoutBorrowing:
		return kueue.InCohortReclamationReason
	}
	return "Unknown"
}

// HierarchicalPreemptionCtx is what the candidate search reads about the preemptor.
type HierarchicalPreemptionCtx struct {
	Log               logr.Logger
	Wl                *kueue.Workload
	Cq                *schdcache.ClusterQueueSnapshot
	FrsNeedPreemption sets.Set[resources.FlavorResource]
	Requests          resources.FlavorResourceQuantities
	WorkloadOrdering  workload.Ordering
	// Judge is the victim policy.
	Judge Judge
	// judged and reason are the judge's answer about the workload classified last.
	judged *policy.Candidate
	reason string
}

// classifyPreemptionVariant says whether and how wl may be preempted.
// Upstream's original: classifyPreemptionVariant in sigs.k8s.io/kueue/pkg/scheduler/preemption/classical.
func classifyPreemptionVariant(ctx *HierarchicalPreemptionCtx, wl *workload.Info, haveHierarchicalAdvantage bool) preemptionVariant {
	if !WorkloadUsesResources(wl, ctx.FrsNeedPreemption) {
		return Never
	}

	var preemptionPolicy kueue.PreemptionPolicy
	if wl.ClusterQueue == ctx.Cq.Name {
		preemptionPolicy = ctx.Cq.Preemption.WithinClusterQueue
	} else {
		preemptionPolicy = ctx.Cq.Preemption.ReclaimWithinCohort
	}

	// timeshare: the victim policy decides; its standard rules are upstream's.
	if !ctx.satisfiesPreemptionPolicy(wl, preemptionPolicy) {
		return Never
	}

	if wl.ClusterQueue == ctx.Cq.Name {
		return WithinCQ
	}
	if haveHierarchicalAdvantage {
		return HiearchicalReclaim
	}
	borrowWithinCohortForbidden, borrowWithinCohortThreshold := IsBorrowingWithinCohortForbidden(ctx.Cq)
	if borrowWithinCohortForbidden {
		return ReclaimWithoutBorrowing
	}
	candidatePriority := priority.EffectivePriority(ctx.Log, wl.Obj)
	incomingPriority := priority.EffectivePriority(ctx.Log, ctx.Wl)
	if isAboveBorrowingThreshold(candidatePriority, incomingPriority, borrowWithinCohortThreshold) {
		return ReclaimWithoutBorrowing
	}
	return ReclaimWhileBorrowing
}

// isAboveBorrowingThreshold: a candidate of equal or higher priority than the preemptor, or above
// maxPriorityThreshold, may only be reclaimed if the preemptor does not borrow afterwards.
// Upstream's original: isAboveBorrowingThreshold in sigs.k8s.io/kueue/pkg/scheduler/preemption/classical.
func isAboveBorrowingThreshold(candidatePriority, incomingPriority int64, borrowWithinCohortThreshold *int32) bool {
	if candidatePriority >= incomingPriority {
		return true
	}
	if borrowWithinCohortThreshold == nil {
		return false
	}
	return candidatePriority > int64(*borrowWithinCohortThreshold)
}

// Upstream's original: collectSameQueueCandidates in sigs.k8s.io/kueue/pkg/scheduler/preemption/classical.
func collectSameQueueCandidates(ctx *HierarchicalPreemptionCtx) []*candidateElem {
	if ctx.Cq.Preemption.WithinClusterQueue == kueue.PreemptionPolicyNever {
		return []*candidateElem{}
	}
	return getCandidatesFromCQ(ctx.Cq, nil, ctx, false)
}

// getCandidatesFromCQ returns the candidates of cq, classified; lca is where cq's and the
// preemptor's paths meet in the cohort tree.
// Upstream's original: getCandidatesFromCQ in sigs.k8s.io/kueue/pkg/scheduler/preemption/classical.
func getCandidatesFromCQ(cq *schdcache.ClusterQueueSnapshot, lca *schdcache.CohortSnapshot, ctx *HierarchicalPreemptionCtx, hasHiearchicalAdvantage bool) []*candidateElem {
	candidates := []*candidateElem{}
	// timeshare: a queue whose settings are not read yet has no candidates.
	if !ctx.Judge.Queue(cq) {
		return candidates
	}
	for _, candidateWl := range cq.Workloads {
		preemptionVariant := classifyPreemptionVariant(ctx, candidateWl, hasHiearchicalAdvantage)
		if preemptionVariant == Never {
			continue
		}
		candidates = append(candidates,
			&candidateElem{
				wl:                candidateWl,
				lca:               lca,
				preemptionVariant: preemptionVariant,
				judged:            ctx.judged, // timeshare: the victim policy's view, for the order.
				reason:            ctx.reason, // timeshare: the victim policy's reason, if it gave one.
			})
	}
	return candidates
}

// collectCandidatesForHierarchicalReclaim walks from the preemptor's parent to the root. At each
// level it looks at the subtrees not yet visited; candidates there are hierarchical once the
// preemptor's requests fit in the quota of the levels walked so far, and stay so further up.
// Upstream's original: collectCandidatesForHierarchicalReclaim in sigs.k8s.io/kueue/pkg/scheduler/preemption/classical.
func collectCandidatesForHierarchicalReclaim(ctx *HierarchicalPreemptionCtx) ([]*candidateElem, []*candidateElem) {
	hierarchyCandidates := []*candidateElem{}
	priorityCandidates := []*candidateElem{}
	if !ctx.Cq.HasParent() || ctx.Cq.Preemption.ReclaimWithinCohort == kueue.PreemptionPolicyNever {
		return hierarchyCandidates, priorityCandidates
	}
	var previousSubtreeRoot *schdcache.CohortSnapshot
	var candidateList *[]*candidateElem
	var fits bool
	hasHierarchicalAdvantage, remainingRequests := schdcache.QuantitiesFitInQuota(ctx.Cq, ctx.Requests)
	for currentSubtreeRoot := range ctx.Cq.PathParentToRoot() {
		if hasHierarchicalAdvantage {
			candidateList = &hierarchyCandidates
		} else {
			candidateList = &priorityCandidates
		}
		collectCandidatesInSubtree(ctx, currentSubtreeRoot, currentSubtreeRoot, previousSubtreeRoot, hasHierarchicalAdvantage, candidateList)
		fits, remainingRequests = schdcache.QuantitiesFitInQuota(currentSubtreeRoot, remainingRequests)
		hasHierarchicalAdvantage = hasHierarchicalAdvantage || fits
		previousSubtreeRoot = currentSubtreeRoot
	}
	return hierarchyCandidates, priorityCandidates
}

// collectCandidatesInSubtree appends to result the candidates under currentCohort, skipping the
// subtree already visited and any cohort or ClusterQueue within its nominal quota (it borrows
// nothing that could be reclaimed).
// Upstream's original: collectCandidatesInSubtree in sigs.k8s.io/kueue/pkg/scheduler/preemption/classical.
func collectCandidatesInSubtree(
	ctx *HierarchicalPreemptionCtx,
	currentCohort *schdcache.CohortSnapshot,
	subtreeRoot *schdcache.CohortSnapshot,
	skipSubtree *schdcache.CohortSnapshot,
	hasHierarchicalAdvantage bool,
	result *[]*candidateElem,
) {
	for _, childCohort := range currentCohort.ChildCohorts() {
		if childCohort == skipSubtree {
			continue
		}
		if schdcache.IsWithinNominalInResources(childCohort, ctx.FrsNeedPreemption) {
			continue
		}
		collectCandidatesInSubtree(ctx, childCohort, subtreeRoot, skipSubtree, hasHierarchicalAdvantage, result)
	}
	for _, childCq := range currentCohort.ChildCQs() {
		if childCq == ctx.Cq {
			continue
		}
		if !schdcache.IsWithinNominalInResources(childCq, ctx.FrsNeedPreemption) {
			*result = append(*result, getCandidatesFromCQ(childCq, subtreeRoot, ctx, hasHierarchicalAdvantage)...)
		}
	}
}
