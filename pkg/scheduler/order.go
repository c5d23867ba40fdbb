package scheduler

import (
	"cmp"
	"context"
	"slices"

	"github.com/go-logr/logr"
	ctrl "sigs.k8s.io/controller-runtime"

	"sigs.k8s.io/kueue/pkg/features"
	"sigs.k8s.io/kueue/pkg/util/priority"
	"sigs.k8s.io/kueue/pkg/workload"
)

// entryIterator yields a cycle's entries in the order they are processed.
type entryIterator interface {
	pop() *entry
	hasNext() bool
}

// makeIterator orders by fair sharing's tournament when it is on, else sorts once, in place, so
// that the requeue pass sees the same order.
// Upstream's original: makeIterator in sigs.k8s.io/kueue/pkg/scheduler.
func makeIterator(ctx context.Context, entries []entry, workloadOrdering workload.Ordering, enableFairSharing bool) entryIterator {
	if enableFairSharing {
		return makeFairSharingIterator(ctx, entries, workloadOrdering)
	}
	return makeClassicalIterator(ctrl.LoggerFrom(ctx), entries, workloadOrdering)
}

// classicalIterator hands out entries already sorted by makeClassicalIterator.
type classicalIterator struct {
	entries []entry
}

// Upstream's original: (*classicalIterator).hasNext in sigs.k8s.io/kueue/pkg/scheduler.
func (co *classicalIterator) hasNext() bool {
	return len(co.entries) > 0
}

// Upstream's original: (*classicalIterator).pop in sigs.k8s.io/kueue/pkg/scheduler.
func (co *classicalIterator) pop() *entry {
	head := &co.entries[0]
	co.entries = co.entries[1:]
	return head
}

// makeClassicalIterator orders heads from different ClusterQueues of a cycle by:
//  1. quota already reserved (a second pass) first;
//  2. active preemptors first (PrioritizePreemptorWorkloads);
//  3. lower borrowing height first, so nominal quota is served before borrowing;
//  4. higher effective priority first (PrioritySortingWithinCohort);
//  5. earlier queue-order timestamp first.
//
// Upstream's original: makeClassicalIterator in sigs.k8s.io/kueue/pkg/scheduler.
func makeClassicalIterator(log logr.Logger, entries []entry, workloadOrdering workload.Ordering) *classicalIterator {
	slices.SortFunc(entries, func(a, b entry) int {
		aHasQuota := workload.HasQuotaReservation(a.Obj)
		bHasQuota := workload.HasQuotaReservation(b.Obj)
		if aHasQuota != bHasQuota {
			if aHasQuota {
				return -1
			}
			return 1
		}
		if features.Enabled(features.PrioritizePreemptorWorkloads) {
			if a.IsPreemptor != b.IsPreemptor {
				if a.IsPreemptor {
					return -1
				}
				return 1
			}
		}
		aBorrows := a.assignment.Borrows()
		bBorrows := b.assignment.Borrows()
		if aBorrows != bBorrows {
			return cmp.Compare(aBorrows, bBorrows)
		}
		if features.Enabled(features.PrioritySortingWithinCohort) {
			p1 := priority.EffectivePriority(log, a.Obj)
			p2 := priority.EffectivePriority(log, b.Obj)
			if p1 != p2 {
				// Reversed: the higher priority comes first.
				return cmp.Compare(p2, p1)
			}
		}
		aComparisonTimestamp := workloadOrdering.GetQueueOrderTimestamp(a.Obj)
		bComparisonTimestamp := workloadOrdering.GetQueueOrderTimestamp(b.Obj)
		if aComparisonTimestamp.Before(bComparisonTimestamp) {
			return -1
		}
		if bComparisonTimestamp.Before(aComparisonTimestamp) {
			return 1
		}
		return 0
	})
	return &classicalIterator{
		entries: entries,
	}
}
