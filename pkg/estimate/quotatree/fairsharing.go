package quotatree

import (
	"cmp"
	"math"
	"time"

	corev1 "k8s.io/api/core/v1"

	kueue "sigs.k8s.io/kueue/apis/kueue/v1beta2"
	"sigs.k8s.io/kueue/pkg/features"
	"sigs.k8s.io/kueue/pkg/resources"
)

// dominantResourceShareNode is a node whose share of its Cohort's lendable quota can be computed.
type dominantResourceShareNode interface {
	fairWeight() float64
	hierarchicalResourceNode
}

// DRS is a node's dominant resource share, as upstream's scheduler cache computes it (its DRS
// keeps these fields unexported, so the copy has its own).
type DRS struct {
	fairWeight       float64
	unweightedRatio  float64
	dominantResource corev1.ResourceName
	borrowing        bool
	borrowedFRs      []resources.FlavorResource
}

// Upstream's original: (DRS).IsZero in sigs.k8s.io/kueue/pkg/cache/scheduler.
func (d DRS) IsZero() bool {
	return d.unweightedRatio == 0
}

// Upstream's original: (DRS).IsBorrowingOn in sigs.k8s.io/kueue/pkg/cache/scheduler.
func (d DRS) IsBorrowingOn(requestedFRs resources.FlavorResourceQuantities) bool {
	for _, fr := range d.borrowedFRs {
		if requestedFRs[fr].CmpInt64(0) > 0 {
			return true
		}
	}
	return false
}

// Upstream's original: (DRS).isWeightZero in sigs.k8s.io/kueue/pkg/cache/scheduler.
func (d DRS) isWeightZero() bool {
	return d.fairWeight == 0
}

// Upstream's original: (DRS).PreciseWeightedShare in sigs.k8s.io/kueue/pkg/cache/scheduler.
func (d DRS) PreciseWeightedShare() float64 {
	if d.IsZero() {
		return 0.0
	}
	if d.isWeightZero() {
		return math.Inf(1)
	}
	return d.unweightedRatio / d.fairWeight
}

// Upstream's original: CompareDRS in sigs.k8s.io/kueue/pkg/cache/scheduler.
func CompareDRS(a, b DRS) int {
	switch {
	case a.zeroWeightBorrows() && b.zeroWeightBorrows():
		return cmp.Compare(a.unweightedRatio, b.unweightedRatio)
	case a.zeroWeightBorrows():
		return 1
	case b.zeroWeightBorrows():
		return -1
	default:
		return cmp.Compare(a.PreciseWeightedShare(), b.PreciseWeightedShare())
	}
}

// Upstream's original: (DRS).zeroWeightBorrows in sigs.k8s.io/kueue/pkg/cache/scheduler.
func (d DRS) zeroWeightBorrows() bool {
	return d.isWeightZero() && !d.IsZero()
}

// Upstream's original: dominantResourceShare in sigs.k8s.io/kueue/pkg/cache/scheduler.
func dominantResourceShare(node dominantResourceShareNode, wlReq resources.FlavorResourceQuantities) DRS {
	drs := DRS{fairWeight: node.fairWeight(), unweightedRatio: 0, dominantResource: "", borrowing: false}
	if !node.HasParent() {
		return drs
	}

	var borrowedFRs []resources.FlavorResource
	borrowing := make(map[corev1.ResourceName]resources.Amount, len(node.getResourceNode().SubtreeQuota))
	for fr, quota := range node.getResourceNode().SubtreeQuota {
		amountBorrowed := wlReq[fr].Add(node.getResourceNode().Usage[fr]).Sub(quota)
		if amountBorrowed.CmpInt64(0) > 0 {
			borrowing[fr.Resource] = borrowing[fr.Resource].Add(amountBorrowed)
			borrowedFRs = append(borrowedFRs, fr)
		}
	}
	if len(borrowing) == 0 {
		return drs
	}
	drs.borrowing = true
	drs.borrowedFRs = borrowedFRs

	lendable := calculateLendable(node.parentHRN())
	for rName, b := range borrowing {
		if lr := lendable[rName]; lr.CmpInt64(0) > 0 {
			ratio := float64(b.Int64()) * 1000.0 / float64(lr.Int64())
			// Use alphabetical order to get a deterministic resource name.
			if ratio > drs.unweightedRatio || (ratio == drs.unweightedRatio && rName < drs.dominantResource) {
				drs.unweightedRatio = ratio
				drs.dominantResource = rName
			}
		}
	}
	return drs
}

// Upstream's original: calculateLendable in sigs.k8s.io/kueue/pkg/cache/scheduler.
func calculateLendable(node hierarchicalResourceNode) map[corev1.ResourceName]resources.Amount {
	// walk to root
	root := node
	for root.HasParent() {
		root = root.parentHRN()
	}

	lendable := make(map[corev1.ResourceName]resources.Amount, len(root.getResourceNode().SubtreeQuota))
	// The root's SubtreeQuota contains all FlavorResources,
	// as we accumulate even 0s in accumulateFromChild.
	for fr := range root.getResourceNode().SubtreeQuota {
		lendable[fr.Resource] = lendable[fr.Resource].Add(potentialAvailable(node, fr))
	}
	return lendable
}

// Share is cq's dominant resource share now (upstream's ClusterQueueSnapshot.DominantResourceShare).
func (t *Tree) Share(cq kueue.ClusterQueueReference) DRS {
	n := t.cqs[cq]
	if n == nil {
		return DRS{}
	}
	return dominantResourceShare(n, nil)
}

// Entrant is one ClusterQueue's head in a scheduling cycle under fair sharing: the quota it would
// take, and what breaks ties.
type Entrant struct {
	ClusterQueue kueue.ClusterQueueReference
	Use          resources.FlavorResourceQuantities
	Priority     int64
	QueuedAt     time.Time
	// Preemptor: it is its ClusterQueue's active preemptor, which goes first
	// (PrioritizePreemptorWorkloads).
	Preemptor bool
}

// First is which of es, heads of this tree's ClusterQueues (one each), upstream's fair-sharing
// iterator takes first with the tree's usage as it is: as its entryComparer.computeDRS and
// runTournament do, each Cohort from the leaves up keeps the entrant whose side (the child node
// it comes through) would have the lowest share with it admitted; a side that would not borrow
// what it asks for goes first (FairSharingPrioritizeNonBorrowing), then the lower share, the
// higher priority (PrioritySortingWithinCohort), the earlier queue time. -1 when es is empty.
func (t *Tree) First(es []Entrant) int {
	if len(es) == 0 {
		return -1
	}
	if t.root.parent == nil && len(t.root.children) == 0 {
		return 0
	}
	type key struct {
		parent *node
		i      int
	}
	shares := make(map[key]DRS, len(es)*2)
	at := make(map[*node]int, len(es))
	for i, e := range es {
		n := t.cqs[e.ClusterQueue]
		if n == nil {
			continue
		}
		at[n] = i
		for fr, v := range e.Use {
			addUsage(n, fr, v)
		}
		share := dominantResourceShare(n, nil)
		for p := n.parent; p != nil; p = p.parent {
			shares[key{p, i}] = share
			share = dominantResourceShare(p, nil)
		}
		for fr, v := range e.Use {
			removeUsage(n, fr, v)
		}
	}
	less := func(a, b int, parent *node) bool {
		if features.Enabled(features.PrioritizePreemptorWorkloads) && es[a].Preemptor != es[b].Preemptor {
			return es[a].Preemptor
		}
		sa, sb := shares[key{parent, a}], shares[key{parent, b}]
		if features.Enabled(features.FairSharingPrioritizeNonBorrowing) {
			if ba, bb := sa.IsBorrowingOn(es[a].Use), sb.IsBorrowingOn(es[b].Use); ba != bb {
				return !ba
			}
		}
		if c := CompareDRS(sa, sb); c != 0 {
			return c < 0
		}
		if features.Enabled(features.PrioritySortingWithinCohort) && es[a].Priority != es[b].Priority {
			return es[a].Priority > es[b].Priority
		}
		return es[a].QueuedAt.Before(es[b].QueuedAt)
	}
	var tournament func(c *node) int
	tournament = func(c *node) int {
		best := -1
		for _, child := range c.children {
			cand := -1
			if i, ok := at[child]; ok {
				cand = i
			} else if len(child.children) > 0 {
				cand = tournament(child)
			}
			if cand >= 0 && (best < 0 || less(cand, best, c)) {
				best = cand
			}
		}
		return best
	}
	if i := tournament(t.root); i >= 0 {
		return i
	}
	return 0
}
