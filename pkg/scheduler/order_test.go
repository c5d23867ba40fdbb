package scheduler

import (
	"context"
	"fmt"
	"slices"
	"testing"
	"time"

	"github.com/go-logr/logr"
	"github.com/google/go-cmp/cmp"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/component-base/featuregate"

	configapi "sigs.k8s.io/kueue/apis/config/v1beta2"
	kueue "sigs.k8s.io/kueue/apis/kueue/v1beta2"
	qcache "sigs.k8s.io/kueue/pkg/cache/queue"
	"sigs.k8s.io/kueue/pkg/features"
	"sigs.k8s.io/kueue/pkg/scheduler/flavorassigner"
	utiltesting "sigs.k8s.io/kueue/pkg/util/testing/v1beta2"
	"sigs.k8s.io/kueue/pkg/workload"
)

var t0 = time.Date(2026, 1, 1, 10, 0, 0, 0, time.UTC)

// head builds an entry for wl with the given borrowing height.
func head(wl *kueue.Workload, borrowing int, preemptor bool) entry {
	return entry{
		Head:       qcache.Head{Info: workload.Info{Obj: wl}, IsPreemptor: preemptor},
		assignment: flavorassigner.Assignment{Borrowing: borrowing},
	}
}

func names(entries []entry) []string {
	out := make([]string, len(entries))
	for i := range entries {
		out[i] = entries[i].Obj.Name
	}
	return out
}

func TestSortClassical(t *testing.T) {
	podsReadyEviction := metav1.Condition{
		Type: kueue.WorkloadEvicted, Status: metav1.ConditionTrue, Reason: kueue.WorkloadEvictedByPodsReadyTimeout,
		LastTransitionTime: metav1.NewTime(t0.Add(10 * time.Minute)),
	}
	cases := map[string]struct {
		gates    map[featuregate.Feature]bool
		ordering workload.Ordering
		entries  []entry
		want     []string
	}{
		"older first": {
			entries: []entry{
				head(utiltesting.MakeWorkload("new", "ns").Creation(t0.Add(time.Second)).Obj(), 0, false),
				head(utiltesting.MakeWorkload("old", "ns").Creation(t0).Obj(), 0, false),
			},
			want: []string{"old", "new"},
		},
		"higher priority before older": {
			entries: []entry{
				head(utiltesting.MakeWorkload("old-low", "ns").Creation(t0).Priority(1).Obj(), 0, false),
				head(utiltesting.MakeWorkload("new-high", "ns").Creation(t0.Add(time.Second)).Priority(10).Obj(), 0, false),
			},
			want: []string{"new-high", "old-low"},
		},
		"priority ignored without PrioritySortingWithinCohort": {
			gates: map[featuregate.Feature]bool{features.PrioritySortingWithinCohort: false},
			entries: []entry{
				head(utiltesting.MakeWorkload("new-high", "ns").Creation(t0.Add(time.Second)).Priority(10).Obj(), 0, false),
				head(utiltesting.MakeWorkload("old-low", "ns").Creation(t0).Priority(1).Obj(), 0, false),
			},
			want: []string{"old-low", "new-high"},
		},
		"nominal quota before borrowing, whatever the priority": {
			entries: []entry{
				head(utiltesting.MakeWorkload("borrows-2", "ns").Creation(t0).Priority(100).Obj(), 2, false),
				head(utiltesting.MakeWorkload("borrows-1", "ns").Creation(t0).Priority(100).Obj(), 1, false),
				head(utiltesting.MakeWorkload("nominal", "ns").Creation(t0.Add(time.Hour)).Priority(1).Obj(), 0, false),
			},
			want: []string{"nominal", "borrows-1", "borrows-2"},
		},
		"reserved quota (second pass) first": {
			entries: []entry{
				head(utiltesting.MakeWorkload("fresh", "ns").Creation(t0).Priority(100).Obj(), 0, false),
				head(utiltesting.MakeWorkload("reserved", "ns").Creation(t0.Add(time.Hour)).
					ReserveQuotaAt(utiltesting.MakeAdmission("cq").Obj(), t0).Obj(), 3, false),
			},
			want: []string{"reserved", "fresh"},
		},
		"preemptor flag ignored by default": {
			entries: []entry{
				head(utiltesting.MakeWorkload("preemptor", "ns").Creation(t0.Add(time.Second)).Obj(), 0, true),
				head(utiltesting.MakeWorkload("other", "ns").Creation(t0).Obj(), 0, false),
			},
			want: []string{"other", "preemptor"},
		},
		"active preemptor first with PrioritizePreemptorWorkloads": {
			gates: map[featuregate.Feature]bool{features.PrioritizePreemptorWorkloads: true},
			entries: []entry{
				head(utiltesting.MakeWorkload("other", "ns").Creation(t0).Priority(100).Obj(), 0, false),
				head(utiltesting.MakeWorkload("preemptor", "ns").Creation(t0.Add(time.Second)).Obj(), 1, true),
			},
			want: []string{"preemptor", "other"},
		},
		"PodsReady eviction time orders a requeued workload": {
			ordering: workload.Ordering{PodsReadyRequeuingTimestamp: configapi.EvictionTimestamp},
			entries: []entry{
				head(utiltesting.MakeWorkload("requeued", "ns").Creation(t0).Condition(podsReadyEviction).Obj(), 0, false),
				head(utiltesting.MakeWorkload("later", "ns").Creation(t0.Add(time.Minute)).Obj(), 0, false),
			},
			want: []string{"later", "requeued"},
		},
		"creation time orders a requeued workload with the Creation timestamp": {
			ordering: workload.Ordering{PodsReadyRequeuingTimestamp: configapi.CreationTimestamp},
			entries: []entry{
				head(utiltesting.MakeWorkload("later", "ns").Creation(t0.Add(time.Minute)).Obj(), 0, false),
				head(utiltesting.MakeWorkload("requeued", "ns").Creation(t0).Condition(podsReadyEviction).Obj(), 0, false),
			},
			want: []string{"requeued", "later"},
		},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			features.SetFeatureGatesDuringTest(t, tc.gates)
			it := makeIterator(context.Background(), tc.entries, tc.ordering, false)
			var got []string
			for it.hasNext() {
				got = append(got, it.pop().Obj.Name)
			}
			if diff := cmp.Diff(tc.want, got); diff != "" {
				t.Errorf("order (-want +got):\n%s", diff)
			}
			// Sorting is in place: the requeue pass sees the same order.
			if diff := cmp.Diff(tc.want, names(tc.entries)); diff != "" {
				t.Errorf("entries after sorting (-want +got):\n%s", diff)
			}
		})
	}
}

// The classical order must not depend on the order the heads come in, or it is undefined.
func TestClassicalOrderIndependentOfInput(t *testing.T) {
	features.SetFeatureGateDuringTest(t, features.PrioritizePreemptorWorkloads, true)
	var entries []entry
	for i, p := range []int32{1, 5, 5, 9} {
		for _, borrowing := range []int{0, 1} {
			for _, preemptor := range []bool{false, true} {
				wl := utiltesting.MakeWorkload("w", "ns").Creation(t0.Add(time.Duration(i%2) * time.Second)).Priority(p).Obj()
				entries = append(entries, head(wl, borrowing, preemptor))
			}
		}
	}
	keys := func(in []entry) []string {
		it := makeClassicalIterator(logr.Discard(), in, workload.Ordering{})
		var out []string
		for it.hasNext() {
			e := it.pop()
			out = append(out, fmt.Sprintf("preemptor=%v borrowing=%d priority=%d created=%s", e.IsPreemptor, e.assignment.Borrowing, *e.Obj.Spec.Priority, e.Obj.CreationTimestamp.UTC()))
		}
		return out
	}
	forward := keys(slices.Clone(entries))
	reversed := slices.Clone(entries)
	slices.Reverse(reversed)
	if diff := cmp.Diff(forward, keys(reversed)); diff != "" {
		t.Errorf("order of reversed input (-forward +reversed):\n%s", diff)
	}
}
