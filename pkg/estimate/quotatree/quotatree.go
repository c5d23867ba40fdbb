// Package quotatree is a copy of a cohort tree's quotas and usage that the admission estimate
// changes as its walk admits and evicts workloads: the scheduler's snapshot is shared by other
// walks and only read. What a ClusterQueue may use is upstream's arithmetic (available,
// addUsage, removeUsage in its cache), mirrored here over the copy.
package quotatree

import (
	"iter"
	"maps"
	"slices"

	kueue "sigs.k8s.io/kueue/apis/kueue/v1beta2"
	schdcache "sigs.k8s.io/kueue/pkg/cache/scheduler"
	"sigs.k8s.io/kueue/pkg/resources"
)

// resourceNode is a node's quotas and usage, as the snapshot has them.
type resourceNode struct {
	Quotas       map[resources.FlavorResource]schdcache.ResourceQuota
	SubtreeQuota resources.FlavorResourceQuantities
	Usage        resources.FlavorResourceQuantities
}

type flatResourceNode interface {
	getResourceNode() resourceNode
}

type hierarchicalResourceNode interface {
	flatResourceNode
	HasParent() bool
	parentHRN() hierarchicalResourceNode
}

// node is a ClusterQueue or a Cohort of the copy.
type node struct {
	ResourceNode resourceNode
	parent       *node
	// weight is the node's fair-sharing weight; children are a Cohort's Cohorts and ClusterQueues.
	weight   float64
	children []*node
	cohort   bool
}

func (n *node) getResourceNode() resourceNode { return n.ResourceNode }

func (n *node) HasParent() bool { return n.parent != nil }

func (n *node) parentHRN() hierarchicalResourceNode { return n.parent }

func (n *node) fairWeight() float64 { return n.weight }

// Tree is the copy of the cohort tree a ClusterQueue belongs to (of the ClusterQueue alone when
// it has no Cohort).
type Tree struct {
	cqs   map[kueue.ClusterQueueReference]*node
	names []kueue.ClusterQueueReference
	nodes []*node
	root  *node
	// Cohort is the root Cohort's name, empty for a ClusterQueue without one.
	Cohort kueue.CohortReference
}

// Usage is what Save keeps of a Tree: every node's usage.
type Usage []resources.FlavorResourceQuantities

// FromSnapshot copies the tree cq belongs to, from its root Cohort down.
func FromSnapshot(cq *schdcache.ClusterQueueSnapshot) *Tree {
	t := &Tree{cqs: map[kueue.ClusterQueueReference]*node{}}
	if !cq.HasParent() {
		t.addClusterQueue(cq, nil)
		t.root = t.nodes[0]
		return t
	}
	root := cq.Parent().Root()
	t.Cohort = root.Name
	t.addCohort(root, nil)
	t.root = t.nodes[0]
	slices.Sort(t.names)
	return t
}

func (t *Tree) addCohort(c *schdcache.CohortSnapshot, parent *node) {
	n := t.newNode(c.ResourceNode.Quotas, c.ResourceNode.SubtreeQuota, c.ResourceNode.Usage, parent)
	n.weight, n.cohort = c.FairWeight, true
	// The snapshot's children are sets; the copy's order does not matter to the arithmetic.
	for _, child := range c.ChildCohorts() {
		t.addCohort(child, n)
	}
	for _, child := range c.ChildCQs() {
		t.addClusterQueue(child, n)
	}
}

func (t *Tree) addClusterQueue(cq *schdcache.ClusterQueueSnapshot, parent *node) {
	n := t.newNode(cq.ResourceNode.Quotas, cq.ResourceNode.SubtreeQuota, cq.ResourceNode.Usage, parent)
	n.weight = cq.FairWeight
	t.cqs[cq.Name] = n
	t.names = append(t.names, cq.Name)
}

func (t *Tree) newNode(quotas map[resources.FlavorResource]schdcache.ResourceQuota, subtree, usage resources.FlavorResourceQuantities, parent *node) *node {
	n := &node{ResourceNode: resourceNode{Quotas: quotas, SubtreeQuota: subtree, Usage: maps.Clone(usage)}, parent: parent}
	if n.ResourceNode.Usage == nil {
		n.ResourceNode.Usage = resources.FlavorResourceQuantities{}
	}
	t.nodes = append(t.nodes, n)
	if parent != nil {
		parent.children = append(parent.children, n)
	}
	return n
}

// ClusterQueues are the tree's ClusterQueues, by name.
func (t *Tree) ClusterQueues() []kueue.ClusterQueueReference { return t.names }

// Available is what cq may still take of fr, borrowing included (upstream's
// ClusterQueueSnapshot.Available).
func (t *Tree) Available(cq kueue.ClusterQueueReference, fr resources.FlavorResource) int64 {
	n := t.cqs[cq]
	if n == nil {
		return 0
	}
	return resources.MaxAmount(resources.NewAmount(0), available(n, fr)).Int64()
}

// Room is Available without its floor at zero: negative when the cohort lends more than it has
// (a reservation, or quota taken back), so that what a preemption frees adds up.
func (t *Tree) Room(cq kueue.ClusterQueueReference, fr resources.FlavorResource) int64 {
	n := t.cqs[cq]
	if n == nil {
		return 0
	}
	return available(n, fr).Int64()
}

// PotentialAvailable is the most cq could use of fr were nothing else used (upstream's
// ClusterQueueSnapshot.PotentialAvailable).
func (t *Tree) PotentialAvailable(cq kueue.ClusterQueueReference, fr resources.FlavorResource) int64 {
	n := t.cqs[cq]
	if n == nil {
		return 0
	}
	return potentialAvailable(n, fr).Int64()
}

// Nominal is cq's nominal quota of fr.
func (t *Tree) Nominal(cq kueue.ClusterQueueReference, fr resources.FlavorResource) int64 {
	if n := t.cqs[cq]; n != nil {
		return n.ResourceNode.Quotas[fr].Nominal.Int64()
	}
	return 0
}

// BorrowingLimit is cq's borrowing limit of fr; false when it has none.
func (t *Tree) BorrowingLimit(cq kueue.ClusterQueueReference, fr resources.FlavorResource) (int64, bool) {
	if n := t.cqs[cq]; n != nil {
		if l := n.ResourceNode.Quotas[fr].BorrowingLimit; l != nil {
			return l.Int64(), true
		}
	}
	return 0, false
}

// Used is what cq's workloads use of fr.
func (t *Tree) Used(cq kueue.ClusterQueueReference, fr resources.FlavorResource) int64 {
	if n := t.cqs[cq]; n != nil {
		return n.ResourceNode.Usage[fr].Int64()
	}
	return 0
}

// Borrowing reports whether cq uses more of fr than its nominal quota.
func (t *Tree) Borrowing(cq kueue.ClusterQueueReference, fr resources.FlavorResource) bool {
	return t.Used(cq, fr) > t.Nominal(cq, fr)
}

// FindHeightOfLowestSubtreeThatFits is how far up the tree cq goes for v more of fr: 0 within
// its nominal quota, else the height of the lowest Cohort whose subtree has room for it, or the
// root's when none has (the borrowing level of upstream's flavor assignment, which orders a
// cycle's heads).
func (t *Tree) FindHeightOfLowestSubtreeThatFits(cq kueue.ClusterQueueReference, fr resources.FlavorResource, v int64) int {
	n := t.cqs[cq]
	if n == nil {
		return 0
	}
	height, _ := findHeightOfLowestSubtreeThatFits(n, fr, resources.NewAmount(v))
	return height
}

// Upstream's original: FindHeightOfLowestSubtreeThatFits in sigs.k8s.io/kueue/pkg/scheduler/preemption/classical.
// timeshare: over this package's copy of the tree, its nodes and LocalAvailable.
func findHeightOfLowestSubtreeThatFits(c *node, fr resources.FlavorResource, val resources.Amount) (int, bool) {
	if !c.BorrowingWith(fr, val) || !c.HasParent() {
		return 0, c.HasParent()
	}
	remaining := val.Sub(LocalAvailable(c, fr)) // timeshare: this package's LocalAvailable.
	for trackingNode := range c.PathParentToRoot() {
		if !trackingNode.BorrowingWith(fr, remaining) {
			return getNodeHeight(trackingNode), trackingNode.HasParent()
		}
		remaining = remaining.Sub(LocalAvailable(trackingNode, fr)) // timeshare: this package's LocalAvailable.
	}
	// no fit found
	return getNodeHeight(c.Parent().Root()), false
}

// Upstream's original: getNodeHeight in sigs.k8s.io/kueue/pkg/scheduler/preemption/classical.
// timeshare: over this package's copy of the tree.
func getNodeHeight(node *node) int {
	maxHeight := min(node.ChildCount(), 1)
	for _, childCohort := range node.ChildCohorts() {
		maxHeight = max(maxHeight, getNodeHeight(childCohort)+1)
	}
	return maxHeight
}

// BorrowingWith reports whether val more of fr takes n beyond its quota: a ClusterQueue's
// nominal, a Cohort's subtree (upstream's BorrowingWith of either snapshot).
func (n *node) BorrowingWith(fr resources.FlavorResource, val resources.Amount) bool {
	quota := n.ResourceNode.SubtreeQuota[fr]
	if !n.cohort {
		quota = n.ResourceNode.Quotas[fr].Nominal
	}
	return quota.Cmp(n.ResourceNode.Usage[fr].Add(val)) < 0
}

// PathParentToRoot yields n's Cohorts from its parent up to the root.
func (n *node) PathParentToRoot() iter.Seq[*node] {
	return func(yield func(*node) bool) {
		for a := n.parent; a != nil; a = a.parent {
			if !yield(a) {
				return
			}
		}
	}
}

// Parent is the Cohort n is in, nil at the root.
func (n *node) Parent() *node { return n.parent }

// Root is the root of the tree n is in.
func (n *node) Root() *node {
	for n.parent != nil {
		n = n.parent
	}
	return n
}

// ChildCount counts n's children, Cohorts and ClusterQueues.
func (n *node) ChildCount() int { return len(n.children) }

// ChildCohorts are n's children that are Cohorts.
func (n *node) ChildCohorts() []*node {
	var out []*node
	for _, c := range n.children {
		if c.cohort {
			out = append(out, c)
		}
	}
	return out
}

// Add counts v more of fr used by cq.
func (t *Tree) Add(cq kueue.ClusterQueueReference, fr resources.FlavorResource, v int64) {
	if n := t.cqs[cq]; n != nil && v > 0 {
		addUsage(n, fr, resources.NewAmount(v))
	}
}

// Remove counts v less of fr used by cq.
func (t *Tree) Remove(cq kueue.ClusterQueueReference, fr resources.FlavorResource, v int64) {
	if n := t.cqs[cq]; n != nil && v > 0 {
		removeUsage(n, fr, resources.NewAmount(v))
	}
}

// Save is every node's usage now, for Restore.
func (t *Tree) Save() Usage {
	out := make(Usage, len(t.nodes))
	for i, n := range t.nodes {
		out[i] = maps.Clone(n.ResourceNode.Usage)
	}
	return out
}

// Restore puts back the usage Save kept.
func (t *Tree) Restore(u Usage) {
	for i, n := range t.nodes {
		clear(n.ResourceNode.Usage)
		maps.Copy(n.ResourceNode.Usage, u[i])
	}
}

// Upstream's original: (resourceNode).localQuota in sigs.k8s.io/kueue/pkg/cache/scheduler.
func (r resourceNode) localQuota(fr resources.FlavorResource) resources.Amount {
	if lendingLimit := r.Quotas[fr].LendingLimit; lendingLimit != nil {
		return resources.MaxAmount(resources.NewAmount(0), r.SubtreeQuota[fr].Sub(*lendingLimit))
	}
	return resources.NewAmount(0)
}

// Upstream's original: LocalAvailable in sigs.k8s.io/kueue/pkg/cache/scheduler.
func LocalAvailable(node flatResourceNode, fr resources.FlavorResource) resources.Amount {
	r := node.getResourceNode()
	return resources.MaxAmount(resources.NewAmount(0), r.localQuota(fr).Sub(r.Usage[fr]))
}

// Upstream's original: available in sigs.k8s.io/kueue/pkg/cache/scheduler.
func available(node hierarchicalResourceNode, fr resources.FlavorResource) resources.Amount {
	r := node.getResourceNode()
	if !node.HasParent() {
		return r.SubtreeQuota[fr].Sub(r.Usage[fr])
	}
	parentAvailable := available(node.parentHRN(), fr)

	if borrowingLimit := r.Quotas[fr].BorrowingLimit; borrowingLimit != nil {
		lq := r.localQuota(fr)
		storedInParent := r.SubtreeQuota[fr].Sub(lq)
		usedInParent := resources.MaxAmount(resources.NewAmount(0), r.Usage[fr].Sub(lq))
		withMaxFromParent := storedInParent.Sub(usedInParent).Add(*borrowingLimit)
		parentAvailable = resources.MinAmount(withMaxFromParent, parentAvailable)
	}
	return LocalAvailable(node, fr).Add(parentAvailable)
}

// Upstream's original: potentialAvailable in sigs.k8s.io/kueue/pkg/cache/scheduler.
func potentialAvailable(node hierarchicalResourceNode, fr resources.FlavorResource) resources.Amount {
	r := node.getResourceNode()
	if !node.HasParent() {
		return r.SubtreeQuota[fr]
	}
	avail := r.localQuota(fr).Add(potentialAvailable(node.parentHRN(), fr))
	if borrowingLimit := r.Quotas[fr].BorrowingLimit; borrowingLimit != nil {
		maxWithBorrowing := r.SubtreeQuota[fr].Add(*borrowingLimit)
		avail = resources.MinAmount(maxWithBorrowing, avail)
	}
	return avail
}

// Upstream's original: addUsage in sigs.k8s.io/kueue/pkg/cache/scheduler.
func addUsage(node hierarchicalResourceNode, fr resources.FlavorResource, val resources.Amount) {
	r := node.getResourceNode()
	localAvailable := LocalAvailable(node, fr)
	r.Usage[fr] = r.Usage[fr].Add(val)
	if node.HasParent() && val.Cmp(localAvailable) > 0 {
		deltaParentUsage := val.Sub(localAvailable)
		addUsage(node.parentHRN(), fr, deltaParentUsage)
	}
}

// Upstream's original: removeUsage in sigs.k8s.io/kueue/pkg/cache/scheduler.
func removeUsage(node hierarchicalResourceNode, fr resources.FlavorResource, val resources.Amount) {
	r := node.getResourceNode()
	usageStoredInParent := r.Usage[fr].Sub(r.localQuota(fr))
	r.Usage[fr] = r.Usage[fr].Sub(val)
	if usageStoredInParent.CmpInt64(0) <= 0 || !node.HasParent() {
		return
	}
	deltaParentUsage := resources.MinAmount(val, usageStoredInParent)
	removeUsage(node.parentHRN(), fr, deltaParentUsage)
}
