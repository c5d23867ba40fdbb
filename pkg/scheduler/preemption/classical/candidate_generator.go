package classical

import (
	"slices"
	"sort"
	"time"

	"github.com/go-logr/logr"
	"k8s.io/apimachinery/pkg/util/sets"
	"k8s.io/utils/clock"

	kueue "sigs.k8s.io/kueue/apis/kueue/v1beta2"
	schdcache "sigs.k8s.io/kueue/pkg/cache/scheduler"
	"sigs.k8s.io/kueue/pkg/resources"
	"sigs.k8s.io/kueue/pkg/workload"
	workloadevict "sigs.k8s.io/kueue/pkg/workload/evict"

	"github.com/kueue-timeshare/kueue-timeshare/pkg/policy"
)

// candidateIterator yields the candidates in the order they are tried, once per attempt (with
// and without borrowing), skipping those the attempt or earlier removals made invalid.
type candidateIterator struct {
	candidates                        []*candidateElem
	runIndex                          int
	frsNeedPreemption                 sets.Set[resources.FlavorResource]
	snapshot                          *schdcache.Snapshot
	NoCandidateFromOtherQueues        bool
	NoCandidateForHierarchicalReclaim bool
	hierarchicalReclaimCtx            *HierarchicalPreemptionCtx
}

// candidateElem is a candidate with how it may be preempted.
type candidateElem struct {
	wl *workload.Info
	// lca is where the candidate's and the preemptor's paths meet in the cohort tree.
	lca               *schdcache.CohortSnapshot
	preemptionVariant preemptionVariant
	// judged is the victim policy's view of the candidate, and reason the preemption reason it
	// gave, if any.
	judged *policy.Candidate
	reason string
}

// splitEvicted splits candidates sorted evicted first (the first key of the victim policy's
// order, as of upstream's) into the evicted and the others.
// Upstream's original: splitEvicted in sigs.k8s.io/kueue/pkg/scheduler/preemption/classical.
func splitEvicted(workloads []*candidateElem) ([]*candidateElem, []*candidateElem) {
	firstFalse := sort.Search(len(workloads), func(i int) bool {
		return !workloadevict.IsEvicted(workloads[i].wl.Obj)
	})
	return workloads[:firstFalse], workloads[firstFalse:]
}

// NewCandidateIterator collects the candidates of the preemptor's queue and of the cohort tree,
// each group in the victim policy's order, the evicted ones of every group first.
// Upstream's original: NewCandidateIterator in sigs.k8s.io/kueue/pkg/scheduler/preemption/classical.
func NewCandidateIterator(
	hierarchicalReclaimCtx *HierarchicalPreemptionCtx,
	enabledAfs bool,
	frsNeedPreemption sets.Set[resources.FlavorResource],
	snapshot *schdcache.Snapshot,
	clock clock.Clock,
	ordering func(logr.Logger, bool, *workload.Info, *workload.Info, kueue.ClusterQueueReference, time.Time) int,
) *candidateIterator {
	sameQueueCandidates := collectSameQueueCandidates(hierarchicalReclaimCtx)
	hierarchyCandidates, priorityCandidates := collectCandidatesForHierarchicalReclaim(hierarchicalReclaimCtx)
	// timeshare: the victim policy's order, which extends upstream's.
	slices.SortFunc(sameQueueCandidates, func(a, b *candidateElem) int {
		return hierarchicalReclaimCtx.Judge.Compare(a.judged, b.judged)
	})
	// timeshare: the victim policy's order, which extends upstream's.
	slices.SortFunc(priorityCandidates, func(a, b *candidateElem) int {
		return hierarchicalReclaimCtx.Judge.Compare(a.judged, b.judged)
	})
	// timeshare: the victim policy's order, which extends upstream's.
	slices.SortFunc(hierarchyCandidates, func(a, b *candidateElem) int {
		return hierarchicalReclaimCtx.Judge.Compare(a.judged, b.judged)
	})

	evictedHierarchicalReclaimCandidates, nonEvictedHierarchicalReclaimCandidates := splitEvicted(hierarchyCandidates)
	evictedSTCandidates, nonEvictedSTCandidates := splitEvicted(priorityCandidates)
	evictedSameQueueCandidates, nonEvictedSameQueueCandidates := splitEvicted(sameQueueCandidates)
	allCandidates := make([]*candidateElem, 0, len(hierarchyCandidates)+len(priorityCandidates)+len(sameQueueCandidates))
	allCandidates = append(allCandidates, evictedHierarchicalReclaimCandidates...)
	allCandidates = append(allCandidates, evictedSTCandidates...)
	allCandidates = append(allCandidates, evictedSameQueueCandidates...)
	allCandidates = append(allCandidates, nonEvictedHierarchicalReclaimCandidates...)
	allCandidates = append(allCandidates, nonEvictedSTCandidates...)
	allCandidates = append(allCandidates, nonEvictedSameQueueCandidates...)
	return &candidateIterator{
		runIndex:                          0,
		frsNeedPreemption:                 frsNeedPreemption,
		snapshot:                          snapshot,
		candidates:                        allCandidates,
		NoCandidateFromOtherQueues:        len(hierarchyCandidates) == 0 && len(priorityCandidates) == 0,
		NoCandidateForHierarchicalReclaim: len(hierarchyCandidates) == 0,
		hierarchicalReclaimCtx:            hierarchicalReclaimCtx,
	}
}

// Next returns the next valid candidate of this attempt and its preemption reason, or nil.
// Upstream's original: (*candidateIterator).Next in sigs.k8s.io/kueue/pkg/scheduler/preemption/classical.
func (c *candidateIterator) Next(borrow bool) (*workload.Info, string) {
	if c.runIndex >= len(c.candidates) {
		return nil, ""
	}
	candidate := c.candidates[c.runIndex]
	c.runIndex++
	if !c.candidateIsValid(candidate, borrow) {
		return c.Next(borrow)
	}
	// timeshare: a reason the victim policy gave replaces the variant's.
	if candidate.reason != "" {
		return candidate.wl, candidate.reason
	}
	return candidate.wl, candidate.preemptionVariant.PreemptionReason()
}

// candidateIsValid rechecks a candidate from another ClusterQueue against the snapshot as the
// search has changed it: once its queue (or a cohort on the way to the common ancestor) is back
// within nominal quota, there is nothing left to reclaim from it.
// Upstream's original: (*candidateIterator).candidateIsValid in sigs.k8s.io/kueue/pkg/scheduler/preemption/classical.
func (c *candidateIterator) candidateIsValid(candidate *candidateElem, borrow bool) bool {
	if c.hierarchicalReclaimCtx.Cq.Name == candidate.wl.ClusterQueue {
		return true
	}
	if borrow && candidate.preemptionVariant == ReclaimWithoutBorrowing {
		return false
	}
	cq := c.snapshot.ClusterQueue(candidate.wl.ClusterQueue)
	if schdcache.IsWithinNominalInResources(cq, c.frsNeedPreemption) {
		return false
	}
	for node := range cq.PathParentToRoot() {
		if node == candidate.lca {
			break
		}
		if schdcache.IsWithinNominalInResources(node, c.frsNeedPreemption) {
			return false
		}
	}
	return true
}

// Reset starts the next attempt from the first candidate.
// Upstream's original: (*candidateIterator).Reset in sigs.k8s.io/kueue/pkg/scheduler/preemption/classical.
func (c *candidateIterator) Reset() {
	c.runIndex = 0
}
