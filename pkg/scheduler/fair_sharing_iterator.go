package scheduler

import (
	"context"
	"slices"
	"strings"

	"github.com/go-logr/logr"
	"k8s.io/klog/v2"
	ctrl "sigs.k8s.io/controller-runtime"

	kueue "sigs.k8s.io/kueue/apis/kueue/v1beta2"
	schdcache "sigs.k8s.io/kueue/pkg/cache/scheduler"
	"sigs.k8s.io/kueue/pkg/features"
	"sigs.k8s.io/kueue/pkg/resources"
	"sigs.k8s.io/kueue/pkg/util/priority"
	"sigs.k8s.io/kueue/pkg/workload"
)

// fairSharingIterator picks, one at a time, the head whose admission leaves its part of the
// cohort tree with the lowest dominant resource share (see runTournament). Shares are computed
// again for every pick, as they are only meaningful for the heads still waiting.
//
// Which tree is served first is not defined; within a tree the order is deterministic up to
// full ties.
type fairSharingIterator struct {
	cqToEntry     map[*schdcache.ClusterQueueSnapshot]*entry
	entryComparer entryComparer
	log           logr.Logger
}

// Upstream's original: makeFairSharingIterator in sigs.k8s.io/kueue/pkg/scheduler.
func makeFairSharingIterator(ctx context.Context, entries []entry, workloadOrdering workload.Ordering) *fairSharingIterator {
	log := ctrl.LoggerFrom(ctx)
	f := fairSharingIterator{
		cqToEntry: make(map[*schdcache.ClusterQueueSnapshot]*entry, len(entries)),
		entryComparer: entryComparer{
			log:              log,
			workloadOrdering: workloadOrdering,
		},
		log: log,
	}
	for i := range entries {
		f.cqToEntry[entries[i].clusterQueueSnapshot] = &entries[i]
	}
	return &f
}

// Upstream's original: (*fairSharingIterator).hasNext in sigs.k8s.io/kueue/pkg/scheduler.
func (f *fairSharingIterator) hasNext() bool {
	return len(f.cqToEntry) > 0
}

// Upstream's original: (*fairSharingIterator).pop in sigs.k8s.io/kueue/pkg/scheduler.
func (f *fairSharingIterator) pop() *entry {
	cq := f.getCq()
	if !cq.HasParent() {
		entry := f.cqToEntry[cq]
		f.log.V(3).Info("Returning workload from ClusterQueue without Cohort",
			"clusterQueue", klog.KRef("", string(cq.GetName())),
			"workload", klog.KObj(entry.Obj))
		delete(f.cqToEntry, cq)
		return entry
	}
	root := cq.Parent().Root()
	log := f.log.WithValues("rootCohort", klog.KRef("", string(root.GetName())))
	log.V(5).Info("Computing DominantResourceShare for tournament")
	f.entryComparer.computeDRS(root, f.cqToEntry)
	log.V(3).Info("Running tournament to decide next workload to consider in scheduling cycle")
	entry := runTournament(root, f.entryComparer, f.cqToEntry)
	log = log.WithValues(
		"cohort", klog.KRef("", string(entry.clusterQueueSnapshot.Parent().GetName())),
		"clusterQueue", klog.KRef("", string(entry.clusterQueueSnapshot.GetName())),
		"winningWorkload", klog.KObj(entry.Obj))
	log.V(3).Info("Determined tournament winner")
	f.entryComparer.logDrsValuesWhenVerbose(log)
	delete(f.cqToEntry, entry.clusterQueueSnapshot)
	return entry
}

// getCq returns any ClusterQueue that still has a head waiting; map order decides which.
// Upstream's original: (*fairSharingIterator).getCq in sigs.k8s.io/kueue/pkg/scheduler.
func (f *fairSharingIterator) getCq() *schdcache.ClusterQueueSnapshot {
	for cq := range f.cqToEntry {
		return cq
	}
	return nil
}

// runTournament returns the winner among the heads under cohort, or nil when none is left: every
// cohort forwards the best head among its children (child cohorts' winners first, then its own
// ClusterQueues' heads), judged by the share the child would have, seen from that cohort, with
// the head admitted. The first of equals wins.
// Upstream's original: runTournament in sigs.k8s.io/kueue/pkg/scheduler.
func runTournament(cohort *schdcache.CohortSnapshot, ec entryComparer, cqToEntry map[*schdcache.ClusterQueueSnapshot]*entry) *entry {
	candidates := make([]*entry, 0, cohort.ChildCount())
	for _, childCohort := range cohort.ChildCohorts() {
		if candidate := runTournament(childCohort, ec, cqToEntry); candidate != nil {
			candidates = append(candidates, candidate)
		}
	}
	for _, childCq := range cohort.ChildCQs() {
		if candidate, ok := cqToEntry[childCq]; ok {
			candidates = append(candidates, candidate)
		}
	}
	if len(candidates) == 0 {
		return nil
	}
	best := candidates[0]
	for _, current := range candidates[1:] {
		if ec.less(current, best, cohort.GetName()) {
			best = current
		}
	}
	return best
}

// drsKey is a head's workload, as seen from one cohort above it.
type drsKey struct {
	parentCohort kueue.CohortReference
	workloadKey  workload.Reference
}

// entryComparer holds, per pick, the share of each child of a cohort with its head's usage
// added, and what each head asks for (for the non-borrowing preference).
type entryComparer struct {
	log              logr.Logger
	drsValues        map[drsKey]schdcache.DRS
	requestedFRs     map[workload.Reference]resources.FlavorResourceQuantities
	workloadOrdering workload.Ordering
}

// less reports whether a wins over b in parentCohort:
//  1. an active preemptor first (PrioritizePreemptorWorkloads);
//  2. a head whose side of the cohort does not borrow the flavors it asks for
//     (FairSharingPrioritizeNonBorrowing);
//  3. the lower share with the head admitted;
//  4. the higher effective priority (PrioritySortingWithinCohort);
//  5. the earlier queue-order timestamp.
//
// Upstream's original: (*entryComparer).less in sigs.k8s.io/kueue/pkg/scheduler.
func (e *entryComparer) less(a, b *entry, parentCohort kueue.CohortReference) bool {
	if features.Enabled(features.PrioritizePreemptorWorkloads) {
		if a.IsPreemptor != b.IsPreemptor {
			return a.IsPreemptor
		}
	}
	aDrs := e.drsValues[drsKey{parentCohort: parentCohort, workloadKey: workload.Key(a.Obj)}]
	bDrs := e.drsValues[drsKey{parentCohort: parentCohort, workloadKey: workload.Key(b.Obj)}]
	if features.Enabled(features.FairSharingPrioritizeNonBorrowing) {
		aBorrowing := aDrs.IsBorrowingOn(e.requestedFRs[workload.Key(a.Obj)])
		bBorrowing := bDrs.IsBorrowingOn(e.requestedFRs[workload.Key(b.Obj)])
		if aBorrowing != bBorrowing {
			return !aBorrowing
		}
	}
	if cmp := schdcache.CompareDRS(aDrs, bDrs); cmp != 0 {
		return cmp == -1
	}
	if features.Enabled(features.PrioritySortingWithinCohort) {
		p1 := priority.EffectivePriority(e.log, a.Obj)
		p2 := priority.EffectivePriority(e.log, b.Obj)
		if p1 != p2 {
			return p1 > p2
		}
	}
	aComparisonTimestamp := e.workloadOrdering.GetQueueOrderTimestamp(a.Obj)
	bComparisonTimestamp := e.workloadOrdering.GetQueueOrderTimestamp(b.Obj)
	return aComparisonTimestamp.Before(bComparisonTimestamp)
}

// computeDRS records, for every waiting head under rootCohort, the share its ClusterQueue and
// each ancestor cohort would have with the head admitted, keyed by the cohort they are compared in.
// Upstream's original: (*entryComparer).computeDRS in sigs.k8s.io/kueue/pkg/scheduler.
func (e *entryComparer) computeDRS(rootCohort *schdcache.CohortSnapshot, cqToEntry map[*schdcache.ClusterQueueSnapshot]*entry) {
	e.drsValues = make(map[drsKey]schdcache.DRS)
	if features.Enabled(features.FairSharingPrioritizeNonBorrowing) {
		e.requestedFRs = make(map[workload.Reference]resources.FlavorResourceQuantities)
	}
	for _, cq := range rootCohort.SubtreeClusterQueues() {
		entry, ok := cqToEntry[cq]
		if !ok {
			continue
		}
		log := e.log.WithValues(
			"workload", klog.KObj(entry.Obj),
			"clusterQueue", klog.KRef("", string(cq.Name)),
		)
		usage := entry.assignmentUsage(log)
		revert := cq.SimulateUsageAddition(usage)
		wlKey := workload.Key(entry.Obj)
		if e.requestedFRs != nil {
			e.requestedFRs[wlKey] = usage.Quota
		}
		dominantResourceShare := cq.DominantResourceShare()
		for ancestor := range cq.PathParentToRoot() {
			e.drsValues[drsKey{parentCohort: ancestor.GetName(), workloadKey: wlKey}] = dominantResourceShare
			dominantResourceShare = ancestor.DominantResourceShare()
		}
		revert()
	}
}

// drsLogEntry is one share, as logged.
type drsLogEntry struct {
	ParentCohort string `json:"parentCohort"`
	Workload     string `json:"workload"`
	DRS          string `json:"drs"`
}

// Upstream's original: (*entryComparer).logDrsValuesWhenVerbose in sigs.k8s.io/kueue/pkg/scheduler.
func (e *entryComparer) logDrsValuesWhenVerbose(log logr.Logger) {
	if logV := log.V(4); logV.Enabled() {
		entries := make([]drsLogEntry, 0, len(e.drsValues))
		for k, v := range e.drsValues {
			drs := v.PreciseWeightedShareSerialized()
			entries = append(entries, drsLogEntry{
				ParentCohort: string(k.parentCohort),
				Workload:     string(k.workloadKey),
				DRS:          drs,
			})
		}
		slices.SortFunc(entries, func(a, b drsLogEntry) int {
			if c := strings.Compare(a.ParentCohort, b.ParentCohort); c != 0 {
				return c
			}
			return strings.Compare(a.Workload, b.Workload)
		})
		logV.Info(
			"DominantResourceShare values used during tournament",
			"drsValues", entries,
		)
	}
}
