package scheduler

import (
	"cmp"
	"context"
	"slices"

	"github.com/go-logr/logr"
	ctrl "sigs.k8s.io/controller-runtime"

	"sigs.k8s.io/kueue/pkg/features"
	cmputil "sigs.k8s.io/kueue/pkg/util/cmp"
	"sigs.k8s.io/kueue/pkg/util/priority"
	"sigs.k8s.io/kueue/pkg/workload"
)

// orderEntries returns a function that yields the entries in the order they are processed,
// then nil. With fair sharing the order is decided per pick (see fairSharingOrder);
// otherwise entries are sorted once, in place.
// Upstream's original: makeIterator in sigs.k8s.io/kueue/pkg/scheduler.
func (s *Scheduler) orderEntries(ctx context.Context, entries []entry) func() *entry {
	if s.fairSharingEnabled() {
		return newFairSharingOrder(ctrl.LoggerFrom(ctx), entries, s.workloadOrdering).next
	}
	sortClassical(ctrl.LoggerFrom(ctx), entries, s.workloadOrdering)
	i := 0
	return func() *entry {
		if i == len(entries) {
			return nil
		}
		i++
		return &entries[i-1]
	}
}

// sortClassical orders heads from different ClusterQueues of a cycle by:
//  1. quota already reserved (a second pass) first;
//  2. active preemptors first (PrioritizePreemptorWorkloads);
//  3. lower borrowing height first, so nominal quota is served before borrowing;
//  4. higher effective priority first (PrioritySortingWithinCohort);
//  5. earlier queue-order timestamp first.
//
// Upstream's original: makeClassicalIterator in sigs.k8s.io/kueue/pkg/scheduler.
func sortClassical(log logr.Logger, entries []entry, ordering workload.Ordering) {
	slices.SortFunc(entries, func(a, b entry) int {
		return classicalCompare(log, &a, &b, ordering)
	})
}

func classicalCompare(log logr.Logger, a, b *entry, ordering workload.Ordering) int {
	if c := cmputil.CompareBool(workload.HasQuotaReservation(a.Obj), workload.HasQuotaReservation(b.Obj)); c != 0 {
		return c
	}
	if features.Enabled(features.PrioritizePreemptorWorkloads) {
		if c := cmputil.CompareBool(a.IsPreemptor, b.IsPreemptor); c != 0 {
			return c
		}
	}
	if c := cmp.Compare(a.assignment.Borrows(), b.assignment.Borrows()); c != 0 {
		return c
	}
	if features.Enabled(features.PrioritySortingWithinCohort) {
		// Reversed: the higher priority comes first.
		if c := cmp.Compare(priority.EffectivePriority(log, b.Obj), priority.EffectivePriority(log, a.Obj)); c != 0 {
			return c
		}
	}
	return compareTime(ordering, a, b)
}

// compareTime compares queue-order timestamps; equal times compare equal.
func compareTime(ordering workload.Ordering, a, b *entry) int {
	ta := ordering.GetQueueOrderTimestamp(a.Obj)
	tb := ordering.GetQueueOrderTimestamp(b.Obj)
	switch {
	case ta.Before(tb):
		return -1
	case tb.Before(ta):
		return 1
	default:
		return 0
	}
}
