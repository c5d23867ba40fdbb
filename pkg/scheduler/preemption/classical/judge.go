// Package classical holds the mirrors of upstream's classical candidate search (the candidate
// iterator and hierarchical reclaim) under upstream's package name, so that the preemptor's
// mirrors call them as upstream's do. Which workloads are candidates, and their order, is the
// victim policy's: the mirrors ask a Judge where upstream applies its preemption policy and
// candidate ordering.
package classical

import (
	kueue "sigs.k8s.io/kueue/apis/kueue/v1beta2"
	schdcache "sigs.k8s.io/kueue/pkg/cache/scheduler"
	"sigs.k8s.io/kueue/pkg/scheduler/preemption/classical"
	"sigs.k8s.io/kueue/pkg/workload"

	"github.com/kueue-timeshare/kueue-timeshare/pkg/policy"
)

// Upstream's functions of this package that are used as they are.
var (
	WorkloadUsesResources             = classical.WorkloadUsesResources
	IsBorrowingWithinCohortForbidden  = classical.IsBorrowingWithinCohortForbidden
	FindHeightOfLowestSubtreeThatFits = classical.FindHeightOfLowestSubtreeThatFits
)

// Judge is the victim policy, asked in place of upstream's preemption policy check and candidate
// ordering.
type Judge interface {
	// Queue readies the judging of cq's workloads; false leaves them all out.
	Queue(cq *schdcache.ClusterQueueSnapshot) bool
	// Eligible judges wl, of the queue last readied, under preemptionPolicy. An eligible
	// workload comes with the policy's view of it, which stays valid for the search, and the
	// preemption reason the policy gave, if any.
	Eligible(wl *workload.Info, preemptionPolicy kueue.PreemptionPolicy) (c *policy.Candidate, reason string, ok bool)
	// Compare orders two eligible candidates, the first to preempt first.
	Compare(a, b *policy.Candidate) int
}

// satisfiesPreemptionPolicy asks the judge about wl and keeps its answer for the candidate
// getCandidatesFromCQ builds.
func (ctx *HierarchicalPreemptionCtx) satisfiesPreemptionPolicy(wl *workload.Info, preemptionPolicy kueue.PreemptionPolicy) bool {
	var ok bool
	ctx.judged, ctx.reason, ok = ctx.Judge.Eligible(wl, preemptionPolicy)
	return ok
}
