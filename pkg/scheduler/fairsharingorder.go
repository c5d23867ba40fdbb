package scheduler

import (
	"cmp"
	"slices"

	"github.com/go-logr/logr"
	"k8s.io/klog/v2"

	kueue "sigs.k8s.io/kueue/apis/kueue/v1beta2"
	schdcache "sigs.k8s.io/kueue/pkg/cache/scheduler"
	"sigs.k8s.io/kueue/pkg/features"
	"sigs.k8s.io/kueue/pkg/resources"
	"sigs.k8s.io/kueue/pkg/util/priority"
	"sigs.k8s.io/kueue/pkg/workload"
)

// fairSharingOrder picks, one at a time, the head whose admission leaves its part of the
// cohort tree with the lowest dominant resource share. Each pick is a knockout over the
// tree of the cohort: every cohort forwards the best head among its children (child
// cohorts' winners and its own ClusterQueues' heads), judged by the share the child would
// have, as seen from that cohort, with the head admitted. Shares are computed again for
// every pick, as they are only meaningful for the heads still waiting.
//
// Which tree is served first is not defined; within a tree the order is deterministic
// up to full ties.
type fairSharingOrder struct {
	log      logr.Logger
	ordering workload.Ordering
	waiting  map[*schdcache.ClusterQueueSnapshot]*entry

	// Per pick: share of each child of a cohort with the head's usage added, keyed by
	// that cohort; and what each head asks for, for the non-borrowing preference.
	shares    map[shareKey]schdcache.DRS
	requested map[workload.Reference]resources.FlavorResourceQuantities
}

type shareKey struct {
	cohort kueue.CohortReference
	wl     workload.Reference
}

// Upstream's original: makeFairSharingIterator and runTournament in sigs.k8s.io/kueue/pkg/scheduler.
func newFairSharingOrder(log logr.Logger, entries []entry, ordering workload.Ordering) *fairSharingOrder {
	o := &fairSharingOrder{
		log:      log,
		ordering: ordering,
		waiting:  make(map[*schdcache.ClusterQueueSnapshot]*entry, len(entries)),
	}
	for i := range entries {
		o.waiting[entries[i].clusterQueueSnapshot] = &entries[i]
	}
	return o
}

func (o *fairSharingOrder) next() *entry {
	var cq *schdcache.ClusterQueueSnapshot
	for cq = range o.waiting {
		break
	}
	if cq == nil {
		return nil
	}
	if !cq.HasParent() {
		e := o.waiting[cq]
		delete(o.waiting, cq)
		o.log.V(3).Info("Returning workload from ClusterQueue without Cohort", "clusterQueue", klog.KRef("", string(cq.GetName())), "workload", klog.KObj(e.Obj))
		return e
	}
	root := cq.Parent().Root()
	log := o.log.WithValues("rootCohort", klog.KRef("", string(root.GetName())))
	log.V(5).Info("Computing DominantResourceShare for tournament")
	o.measure(root)
	log.V(3).Info("Running tournament to decide next workload to consider in scheduling cycle")
	winner := o.bestUnder(root)
	delete(o.waiting, winner.clusterQueueSnapshot)
	log = log.WithValues(
		"cohort", klog.KRef("", string(winner.clusterQueueSnapshot.Parent().GetName())),
		"clusterQueue", klog.KRef("", string(winner.clusterQueueSnapshot.GetName())),
		"winningWorkload", klog.KObj(winner.Obj))
	log.V(3).Info("Determined tournament winner")
	o.logShares(log)
	return winner
}

// measure records, for every waiting head under root, the share its ClusterQueue and each
// ancestor cohort would have with the head admitted, keyed by the cohort they are
// compared in.
func (o *fairSharingOrder) measure(root *schdcache.CohortSnapshot) {
	o.shares = make(map[shareKey]schdcache.DRS)
	o.requested = nil
	if features.Enabled(features.FairSharingPrioritizeNonBorrowing) {
		o.requested = make(map[workload.Reference]resources.FlavorResourceQuantities)
	}
	for _, cq := range root.SubtreeClusterQueues() {
		e, ok := o.waiting[cq]
		if !ok {
			continue
		}
		u := e.assignmentUsage(o.log.WithValues("workload", klog.KObj(e.Obj), "clusterQueue", klog.KRef("", string(cq.Name))))
		key := workload.Key(e.Obj)
		if o.requested != nil {
			o.requested[key] = u.Quota
		}
		undo := cq.SimulateUsageAddition(u)
		share := cq.DominantResourceShare()
		for cohort := range cq.PathParentToRoot() {
			o.shares[shareKey{cohort: cohort.GetName(), wl: key}] = share
			share = cohort.DominantResourceShare()
		}
		undo()
	}
}

// bestUnder returns the winner among the heads under cohort, or nil when none is left.
// Child cohorts' winners come before the cohort's own ClusterQueues' heads, and the first
// of equals wins.
func (o *fairSharingOrder) bestUnder(cohort *schdcache.CohortSnapshot) *entry {
	var best *entry
	consider := func(e *entry) {
		if e != nil && (best == nil || o.before(e, best, cohort.GetName())) {
			best = e
		}
	}
	for _, child := range cohort.ChildCohorts() {
		consider(o.bestUnder(child))
	}
	for _, cq := range cohort.ChildCQs() {
		consider(o.waiting[cq])
	}
	return best
}

// before reports whether a wins over b in cohort:
//  1. an active preemptor first (PrioritizePreemptorWorkloads);
//  2. a head whose side of the cohort does not borrow the flavors it asks for
//     (FairSharingPrioritizeNonBorrowing);
//  3. the lower share with the head admitted;
//  4. the higher effective priority (PrioritySortingWithinCohort);
//  5. the earlier queue-order timestamp.
func (o *fairSharingOrder) before(a, b *entry, cohort kueue.CohortReference) bool {
	if features.Enabled(features.PrioritizePreemptorWorkloads) && a.IsPreemptor != b.IsPreemptor {
		return a.IsPreemptor
	}
	ka, kb := workload.Key(a.Obj), workload.Key(b.Obj)
	sa := o.shares[shareKey{cohort: cohort, wl: ka}]
	sb := o.shares[shareKey{cohort: cohort, wl: kb}]
	if features.Enabled(features.FairSharingPrioritizeNonBorrowing) {
		if ba, bb := sa.IsBorrowingOn(o.requested[ka]), sb.IsBorrowingOn(o.requested[kb]); ba != bb {
			return !ba
		}
	}
	if c := schdcache.CompareDRS(sa, sb); c != 0 {
		return c < 0
	}
	if features.Enabled(features.PrioritySortingWithinCohort) {
		if pa, pb := priority.EffectivePriority(o.log, a.Obj), priority.EffectivePriority(o.log, b.Obj); pa != pb {
			return pa > pb
		}
	}
	return compareTime(o.ordering, a, b) < 0
}

func (o *fairSharingOrder) logShares(log logr.Logger) {
	v := log.V(4)
	if !v.Enabled() {
		return
	}
	type shareLog struct {
		ParentCohort string `json:"parentCohort"`
		Workload     string `json:"workload"`
		DRS          string `json:"drs"`
	}
	out := make([]shareLog, 0, len(o.shares))
	for k, d := range o.shares {
		out = append(out, shareLog{ParentCohort: string(k.cohort), Workload: string(k.wl), DRS: d.PreciseWeightedShareSerialized()})
	}
	slices.SortFunc(out, func(a, b shareLog) int {
		return cmp.Or(cmp.Compare(a.ParentCohort, b.ParentCohort), cmp.Compare(a.Workload, b.Workload))
	})
	v.Info("DominantResourceShare values used during tournament", "drsValues", out)
}
