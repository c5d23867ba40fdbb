package queuesettings

import (
	"fmt"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/types"
	kueue "sigs.k8s.io/kueue/apis/kueue/v1beta2"

	tsconfig "github.com/kueue-timeshare/kueue-timeshare/apis/config/v1alpha1"
	tsapi "github.com/kueue-timeshare/kueue-timeshare/apis/kueue/v1beta2"
	"github.com/kueue-timeshare/kueue-timeshare/pkg/plugins/budget"
)

// TestBudgetsOf: a victim needs a token from every budget on its path, each counting the
// preemptions below it; the default applies where the path has none; perWorkload is the nearest.
func TestBudgetsOf(t *testing.T) {
	t0 := time.Date(2026, 1, 1, 12, 0, 0, 0, time.UTC)
	obj := func(kind, name, parentField, parent string, budget map[string]any) *unstructured.Unstructured {
		u := &unstructured.Unstructured{Object: map[string]any{"spec": map[string]any{parentField: parent}}}
		u.SetGroupVersionKind(kueue.SchemeGroupVersion.WithKind(kind))
		u.SetName(name)
		if budget != nil {
			u.Object["spec"].(map[string]any)["preemption"] = map[string]any{"preemptionBudget": budget}
		}
		return u
	}
	twoPerHour := map[string]any{"maxPreemptions": int64(2), "period": "1h"}
	wl := func(uid, cq string) *kueue.Workload {
		w := &kueue.Workload{ObjectMeta: metav1.ObjectMeta{UID: types.UID(uid)}}
		w.Status.Admission = &kueue.Admission{ClusterQueue: kueue.ClusterQueueReference(cq)}
		return w
	}
	hourly := budget.Budget{Max: 2, Period: time.Hour, Burst: 2}
	cases := map[string]struct {
		cqs, cohorts []*unstructured.Unstructured
		def          *tsapi.PreemptionBudget
		// preempted are the victims entered, each at t0, by ClusterQueue.
		preempted map[string]string
		// later are ClusterQueues set again after the preemptions were entered.
		later  []*unstructured.Unstructured
		victim *kueue.Workload
		want   *budget.Budgets
	}{
		"no budget anywhere": {
			cqs:    []*unstructured.Unstructured{obj("ClusterQueue", "a", "cohortName", "org", nil)},
			victim: wl("v", "a"),
		},
		"a Cohort's budget counts the preemptions below it, of every ClusterQueue": {
			cqs: []*unstructured.Unstructured{obj("ClusterQueue", "a", "cohortName", "org", nil),
				obj("ClusterQueue", "b", "cohortName", "org", nil), obj("ClusterQueue", "c", "cohortName", "", nil)},
			cohorts:   []*unstructured.Unstructured{obj("Cohort", "org", "parentName", "", twoPerHour)},
			preempted: map[string]string{"x": "a", "y": "b", "z": "c"},
			victim:    wl("v", "a"),
			want:      &budget.Budgets{Buckets: []budget.Bucket{{Owner: "Cohort org", Budget: hourly, Spent: []time.Time{t0, t0}}}},
		},
		"every budget on the path, nearest first, each with its own preemptions": {
			cqs: []*unstructured.Unstructured{obj("ClusterQueue", "a", "cohortName", "team", twoPerHour),
				obj("ClusterQueue", "b", "cohortName", "team", nil)},
			cohorts: []*unstructured.Unstructured{obj("Cohort", "team", "parentName", "org", nil),
				obj("Cohort", "org", "parentName", "", map[string]any{"maxPreemptions": int64(5), "period": "1h", "burst": int64(10)})},
			preempted: map[string]string{"x": "a", "y": "b"},
			victim:    wl("v", "a"),
			want: &budget.Budgets{Buckets: []budget.Bucket{
				{Owner: "ClusterQueue a", Budget: hourly, Spent: []time.Time{t0}},
				{Owner: "Cohort org", Budget: budget.Budget{Max: 5, Period: time.Hour, Burst: 10}, Spent: []time.Time{t0, t0}},
			}},
		},
		"the default: one bucket per ClusterQueue with no budget on its path": {
			cqs: []*unstructured.Unstructured{obj("ClusterQueue", "a", "cohortName", "", nil),
				obj("ClusterQueue", "b", "cohortName", "", nil)},
			def:       &tsapi.PreemptionBudget{MaxPreemptions: 2, Period: metav1.Duration{Duration: time.Hour}},
			preempted: map[string]string{"x": "a", "y": "b"},
			victim:    wl("v", "a"),
			want: &budget.Budgets{Buckets: []budget.Bucket{
				{Owner: "ClusterQueue a (the manager configuration's preemptionBudget)", Budget: hourly, Spent: []time.Time{t0}},
			}},
		},
		"perWorkload: the nearest, counting the victim's own preemptions": {
			cqs: []*unstructured.Unstructured{obj("ClusterQueue", "a", "cohortName", "org", nil)},
			cohorts: []*unstructured.Unstructured{obj("Cohort", "org", "parentName", "", map[string]any{"maxPreemptions": int64(2), "period": "1h",
				"perWorkload": map[string]any{"maxPreemptions": int64(1), "period": "24h"}})},
			preempted: map[string]string{"v": "a", "y": "a"},
			victim:    wl("v", "a"),
			want: &budget.Budgets{Buckets: []budget.Bucket{
				{Owner: "perWorkload of Cohort org", Budget: budget.Budget{Max: 1, Period: 24 * time.Hour, Burst: 1}, Spent: []time.Time{t0}},
				{Owner: "Cohort org", Budget: hourly, Spent: []time.Time{t0, t0}},
			}},
		},
		"preemptions below no budget are not kept: a budget set later counts from then": {
			cqs:       []*unstructured.Unstructured{obj("ClusterQueue", "a", "cohortName", "", nil)},
			preempted: map[string]string{"x": "a"},
			later:     []*unstructured.Unstructured{obj("ClusterQueue", "a", "cohortName", "", twoPerHour)},
			victim:    wl("v", "a"),
			want:      &budget.Budgets{Buckets: []budget.Bucket{{Owner: "ClusterQueue a", Budget: hourly}}},
		},
		"an invalid budget is none": {
			cqs:    []*unstructured.Unstructured{obj("ClusterQueue", "a", "cohortName", "", map[string]any{"maxPreemptions": int64(0), "period": "1h"})},
			victim: wl("v", "a"),
		},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			s := NewStore()
			s.Configure(&tsconfig.Configuration{PreemptionBudget: tc.def})
			for _, u := range tc.cqs {
				_ = s.SetClusterQueue(u)
			}
			for _, u := range tc.cohorts {
				_ = s.SetCohort(u)
			}
			for uid, cq := range tc.preempted {
				s.RecordPreemption(wl(uid, cq), kueue.ClusterQueueReference(cq), t0)
			}
			for _, u := range tc.later {
				_ = s.SetClusterQueue(u)
			}
			if diff := cmp.Diff(tc.want, s.BudgetsOf(tc.victim)); diff != "" {
				t.Errorf("BudgetsOf (-want +got):\n%s", diff)
			}
		})
	}
}

func TestRecordPreemption(t *testing.T) {
	t0 := time.Date(2026, 1, 1, 12, 0, 0, 0, time.UTC)
	admitted := func(at time.Time) *kueue.Workload {
		w := &kueue.Workload{ObjectMeta: metav1.ObjectMeta{UID: "v"}}
		w.Status.Conditions = []metav1.Condition{{Type: kueue.WorkloadQuotaReserved, Status: metav1.ConditionTrue, LastTransitionTime: metav1.NewTime(at)}}
		return w
	}
	cases := map[string]struct {
		// records are (admitted, preempted) pairs, minutes after t0.
		records [][2]int
		want    []time.Time
	}{
		"one admission, entered once": {records: [][2]int{{0, 10}, {0, 11}}, want: []time.Time{t0.Add(10 * time.Minute)}},
		"two admissions, two preemptions": {records: [][2]int{{0, 10}, {20, 30}},
			want: []time.Time{t0.Add(10 * time.Minute), t0.Add(30 * time.Minute)}},
		"forgotten once no bucket can remember it": {records: [][2]int{{0, 10}, {8 * 24 * 60, 8*24*60 + 5}},
			want: []time.Time{t0.Add(8*24*time.Hour + 5*time.Minute)}},
		"forgotten once the slowest bucket has refilled (an hour here), not after a week": {records: [][2]int{{0, 10}, {120, 125}},
			want: []time.Time{t0.Add(125 * time.Minute)}},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			s := NewStore()
			s.Configure(&tsconfig.Configuration{PreemptionBudget: &tsapi.PreemptionBudget{MaxPreemptions: 1, Period: metav1.Duration{Duration: time.Hour},
				PerWorkload: &tsapi.WorkloadBudget{MaxPreemptions: 5, Period: metav1.Duration{Duration: time.Hour}}}})
			for _, r := range tc.records {
				s.RecordPreemption(admitted(t0.Add(time.Duration(r[0])*time.Minute)), "a", t0.Add(time.Duration(r[1])*time.Minute))
			}
			w := admitted(t0)
			w.Status.Admission = &kueue.Admission{ClusterQueue: "a"}
			got := s.BudgetsOf(w).Buckets[0].Spent
			if diff := cmp.Diff(tc.want, got); diff != "" {
				t.Errorf("the victim's preemptions (-want +got):\n%s", diff)
			}
		})
	}
}

// BenchmarkRecordPreemption enters n preemptions of n victims in 100 ClusterQueues under one
// budgeted Cohort, as LoadPreemptions does at start, then reads one victim's buckets: the ledger
// grows by a constant per entry and a read does not scan it.
func BenchmarkRecordPreemption(b *testing.B) {
	t0 := time.Date(2026, 1, 1, 12, 0, 0, 0, time.UTC)
	for _, n := range []int{1000, 10000, 100000} {
		b.Run(fmt.Sprint(n), func(b *testing.B) {
			for range b.N {
				s := NewStore()
				org := &unstructured.Unstructured{Object: map[string]any{"spec": map[string]any{
					"preemption": map[string]any{"preemptionBudget": map[string]any{"maxPreemptions": int64(1000), "period": "24h", "burst": int64(100000)}}}}}
				org.SetGroupVersionKind(kueue.SchemeGroupVersion.WithKind("Cohort"))
				org.SetName("org")
				_ = s.SetCohort(org)
				for q := range 100 {
					cq := &unstructured.Unstructured{Object: map[string]any{"spec": map[string]any{"cohortName": "org"}}}
					cq.SetGroupVersionKind(kueue.SchemeGroupVersion.WithKind("ClusterQueue"))
					cq.SetName(fmt.Sprintf("cq-%d", q))
					_ = s.SetClusterQueue(cq)
				}
				for i := range n {
					w := &kueue.Workload{ObjectMeta: metav1.ObjectMeta{UID: types.UID(fmt.Sprint(i))}}
					s.RecordPreemption(w, kueue.ClusterQueueReference(fmt.Sprintf("cq-%d", i%100)), t0.Add(time.Duration(i)*time.Second))
				}
				victim := &kueue.Workload{ObjectMeta: metav1.ObjectMeta{UID: "v"}}
				victim.Status.Admission = &kueue.Admission{ClusterQueue: "cq-0"}
				if got := len(s.BudgetsOf(victim).Buckets[0].Spent); got != n {
					b.Fatalf("%d preemptions counted, want %d", got, n)
				}
			}
		})
	}
}
