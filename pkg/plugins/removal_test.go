package plugins

import (
	"slices"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/google/go-cmp/cmp/cmpopts"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	kueue "sigs.k8s.io/kueue/apis/kueue/v1beta2"
	"sigs.k8s.io/kueue/pkg/workload"

	"github.com/kueue-timeshare/kueue-timeshare/apis/annotations"
	"github.com/kueue-timeshare/kueue-timeshare/pkg/plugins/budget"
	"github.com/kueue-timeshare/kueue-timeshare/pkg/plugins/expectedruntime"
	"github.com/kueue-timeshare/kueue-timeshare/pkg/plugins/minruntime"
	"github.com/kueue-timeshare/kueue-timeshare/pkg/plugins/notice"
	"github.com/kueue-timeshare/kueue-timeshare/pkg/plugins/timebased"
	"github.com/kueue-timeshare/kueue-timeshare/pkg/plugins/toleration"
	"github.com/kueue-timeshare/kueue-timeshare/pkg/policy"
)

// fixture is one question to the policy: the input, and the candidate's Workload and the sources
// its facts are read from, by the units as the preemptor reads them.
type fixture struct {
	in  *policy.Input
	wl  *kueue.Workload
	src policy.Sources
}

type tweak func(*fixture)

// TestFeatureRemoval registers the table without each feature in turn: the policy, its timing
// and its fact reading still build from it, the decisions where the removed feature does not
// apply are the full table's, and where it applies they are what upstream's rules alone give
// (or, where another feature applies too, that feature's).
func TestFeatureRemoval(t *testing.T) {
	t0 := time.Date(2026, 1, 1, 12, 0, 0, 0, time.UTC)
	tolerates := &toleration.Toleration{Toleration: annotations.Toleration{MinimumPreemptablePriority: 10, Duration: time.Hour}, Source: "WorkloadPriorityClass keep"}
	spent := &budget.Budgets{Buckets: []budget.Bucket{{Owner: "ClusterQueue cq", Budget: budget.Budget{Max: 1, Period: time.Hour, Burst: 1},
		Spent: []time.Time{t0.Add(-time.Minute)}}}}
	refilled := &budget.Budgets{Buckets: []budget.Bucket{{Owner: "ClusterQueue cq", Budget: budget.Budget{Max: 1, Period: time.Hour, Burst: 1},
		Spent: []time.Time{t0.Add(-2 * time.Hour)}}}}
	expects := func(f *fixture) { f.wl.Annotations[annotations.ExpectedRuntime] = "1m" }
	tolerating := func(f *fixture) {
		f.wl.Spec.PriorityClassRef = &kueue.PriorityClassRef{Name: "keep"}
		f.src = append(f.src, classTolerations{"keep": tolerates})
	}
	// noticed gives the candidate a notice for the preemptor of uid.
	noticed := func(uid string) tweak {
		return func(f *fixture) {
			n := &annotations.Notice{Start: t0.Add(-time.Minute), Deadline: t0.Add(50 * time.Minute), Reason: kueue.InClusterQueueReason,
				Preemptor: "ns/other", PreemptorUID: "other"}
			if uid != "" {
				n.PreemptorUID = f.in.Preemptor.Obj.UID
			}
			f.wl.Status.Conditions = append(f.wl.Status.Conditions, notice.ConditionOf(n, 1))
		}
	}
	byOther := noticed("")
	byThis := noticed("this")
	withBudget := func(b *budget.Budgets) tweak {
		return func(f *fixture) { f.src = append(f.src, budgetSource{b}) }
	}
	minRuntime := func(d time.Duration) tweak {
		return func(f *fixture) { minruntime.Into(f.in.Queue, minruntime.Protection{MinRuntime: d}) }
	}
	cases := map[string]struct {
		tweaks []tweak
		// applies lists the features that decide, or would once the one that decides is removed.
		applies []policy.Feature
		// without is the decision without a feature of applies when it is not upstream's.
		without map[policy.Feature]string
	}{
		"lower priority, no feature applies": {},
		"same priority, Never": {
			tweaks: []tweak{samePriority, func(f *fixture) { f.in.Policy = kueue.PreemptionPolicyNever }},
		},
		"same priority past minAdmitDuration": {
			tweaks:  []tweak{samePriority, window},
			applies: []policy.Feature{timebased.Feature},
		},
		"same priority past minAdmitDuration, another workload has the turn": {
			tweaks:  []tweak{samePriority, window, func(f *fixture) { timebased.SetWaitingLonger(f.in.Preemptor, "ns/first") }},
			applies: []policy.Feature{timebased.Feature},
		},
		"same priority past its expected runtime": {
			tweaks:  []tweak{samePriority, expects},
			applies: []policy.Feature{expectedruntime.Feature},
		},
		"past its expected runtime in another ClusterQueue": {
			tweaks: []tweak{samePriority, otherQueue, expects},
		},
		"lower priority inside its min-runtime": {
			tweaks:  []tweak{minRuntime(time.Hour)},
			applies: []policy.Feature{minruntime.Feature},
		},
		"lower priority past its min-runtime": {
			tweaks: []tweak{minRuntime(time.Minute)},
		},
		"lower priority, its class tolerates the preemptor": {
			tweaks:  []tweak{tolerating},
			applies: []policy.Feature{toleration.Feature},
		},
		"lower priority under notice for another preemptor": {
			tweaks:  []tweak{byOther},
			applies: []policy.Feature{notice.Feature},
		},
		"lower priority under notice for this preemptor": {
			tweaks: []tweak{byThis},
		},
		"lower priority under notice for another preemptor, already evicted": {
			tweaks: []tweak{byOther, func(f *fixture) { f.in.Candidate.Evicted = true }},
		},
		"same priority under notice for another preemptor": {
			tweaks: []tweak{samePriority, byOther},
		},
		"past minAdmitDuration and under notice": {
			tweaks:  []tweak{samePriority, window, byOther},
			applies: []policy.Feature{timebased.Feature, notice.Feature},
			without: map[policy.Feature]string{notice.Feature: timebased.RuleExpired},
		},
		"past its expected runtime and under notice": {
			tweaks:  []tweak{samePriority, expects, byOther},
			applies: []policy.Feature{expectedruntime.Feature, notice.Feature},
			without: map[policy.Feature]string{notice.Feature: expectedruntime.Rule},
		},
		"lower priority, tolerating and under notice": {
			tweaks:  []tweak{tolerating, byOther},
			applies: []policy.Feature{toleration.Feature, notice.Feature},
			without: map[policy.Feature]string{toleration.Feature: notice.Rule, notice.Feature: toleration.RuleTolerates},
		},
		"past minAdmitDuration and tolerating": {
			tweaks:  []tweak{samePriority, window, tolerating},
			applies: []policy.Feature{timebased.Feature, toleration.Feature},
			without: map[policy.Feature]string{toleration.Feature: timebased.RuleExpired},
		},
		"past its expected runtime inside its min-runtime": {
			tweaks:  []tweak{samePriority, expects, minRuntime(time.Hour)},
			applies: []policy.Feature{expectedruntime.Feature, minruntime.Feature},
			without: map[policy.Feature]string{minruntime.Feature: expectedruntime.Rule},
		},
		"inside its min-runtime and under notice": {
			tweaks:  []tweak{byOther, minRuntime(time.Hour)},
			applies: []policy.Feature{minruntime.Feature, notice.Feature},
			without: map[policy.Feature]string{minruntime.Feature: notice.Rule, notice.Feature: minruntime.Rule},
		},
		"lower priority, its budget spent": {
			tweaks:  []tweak{withBudget(spent)},
			applies: []policy.Feature{budget.Feature},
		},
		"lower priority, its budget refilled": {
			tweaks: []tweak{withBudget(refilled)},
		},
		"past minAdmitDuration, its budget spent: a turn does not wait": {
			tweaks:  []tweak{samePriority, window, withBudget(spent)},
			applies: []policy.Feature{timebased.Feature},
		},
		"inside its min-runtime, its budget spent": {
			tweaks:  []tweak{withBudget(spent), minRuntime(time.Hour)},
			applies: []policy.Feature{minruntime.Feature, budget.Feature},
			without: map[policy.Feature]string{minruntime.Feature: budget.RuleSpent, budget.Feature: minruntime.Rule},
		},
	}
	full := Units()
	// input is the question with the candidate's facts read by every unit, as the preemptor reads
	// them; every candidate holds quota and runs since two minutes ago, in the preemptor's
	// ClusterQueue unless said otherwise; the preemptor has priority 5.
	input := func(tweaks []tweak) *policy.Input {
		c := policy.Candidate{Info: &workload.Info{ClusterQueue: "cq"}, Priority: 1, QueuedAt: t0.Add(-time.Hour),
			QuotaReservedAt: t0.Add(-2 * time.Minute), Admitted: true, AdmittedAt: t0.Add(-2 * time.Minute)}
		f := &fixture{
			in: &policy.Input{Preemptor: &policy.Pending{Obj: &kueue.Workload{ObjectMeta: metav1.ObjectMeta{UID: "preemptor"}}, ClusterQueue: "cq",
				Priority: 5, QueuedAt: t0}, Candidate: &c, Scope: policy.SameClusterQueue, Policy: kueue.PreemptionPolicyLowerOrNewerEqualPriority, Queue: &policy.QueueFacts{}, Now: t0},
			wl: &kueue.Workload{ObjectMeta: metav1.ObjectMeta{Annotations: map[string]string{}}},
		}
		for _, tw := range tweaks {
			tw(f)
		}
		full.ReadFacts(f.in.Candidate, f.wl, f.src, nil, false)
		return f.in
	}
	if got, want := len(full), 6; got != want {
		t.Fatalf("%d features registered, want %d", got, want)
	}
	all := policy.New(policy.Options{}, full.With(full.Features()...))
	upstream := policy.New(policy.Options{})
	for _, removed := range full {
		t.Run(string(removed.Feature), func(t *testing.T) {
			table := full.Without(removed.Feature)
			if slices.Contains(table.Features(), removed.Feature) || len(table) != len(full)-1 {
				t.Fatalf("table without %s: %v", removed.Feature, table.Features())
			}
			p := policy.New(policy.Options{}, table.With(table.Features()...))
			for name, tc := range cases {
				t.Run(name, func(t *testing.T) {
					want := all.Explain(input(tc.tweaks))
					if slices.Contains(tc.applies, removed.Feature) {
						want = upstream.Explain(input(tc.tweaks))
						if rule, ok := tc.without[removed.Feature]; ok {
							want = p.Explain(input(tc.tweaks))
							if want.Rule != rule {
								t.Fatalf("without %s: rule %s, want %s", removed.Feature, want.Rule, rule)
							}
						}
					}
					if diff := cmp.Diff(want, p.Explain(input(tc.tweaks))); diff != "" {
						t.Errorf("decision without %s (-want +got):\n%s", removed.Feature, diff)
					}
					// The removed feature applies exactly where the case says so.
					decided := all.Decide(input(tc.tweaks)) != upstream.Decide(input(tc.tweaks)) || len(tc.applies) > 1
					if decided != (len(tc.applies) > 0) {
						t.Errorf("the full table decides %v, upstream's %v; the case says features %v apply",
							all.Decide(input(tc.tweaks)), upstream.Decide(input(tc.tweaks)), tc.applies)
					}

					// Its timing is gone, the others' stay.
					in := input(tc.tweaks)
					ws := policy.WakeSettings{Queue: map[policy.Feature]any{timebased.Feature: timebased.Of(in)}, Lengths: []time.Duration{minruntime.Of(in).MinRuntime}, Units: full}
					wsWithout, wsOnly := ws, ws
					wsWithout.Units, wsOnly.Units = table, policy.Table{removed}
					wantChanges := policy.Changes(in.Candidate, ws)
					for _, ch := range policy.Changes(in.Candidate, wsOnly) {
						i := slices.Index(wantChanges, ch)
						if i < 0 {
							t.Fatalf("change %v of %s is not among the full table's %v", ch, removed.Feature, wantChanges)
						}
						wantChanges = slices.Delete(wantChanges, i, i+1)
					}
					sortChanges := cmpopts.SortSlices(func(a, b policy.Change) bool { return a.At.Before(b.At) })
					if diff := cmp.Diff(wantChanges, policy.Changes(in.Candidate, wsWithout), sortChanges, cmpopts.EquateEmpty()); diff != "" {
						t.Errorf("changes without %s (-want +got):\n%s", removed.Feature, diff)
					}
				})
			}
		})
	}
}

// TestFeatureRemovalFacts: without a feature's unit its facts are not read, and the others' are.
func TestFeatureRemovalFacts(t *testing.T) {
	t0 := time.Date(2026, 1, 1, 12, 0, 0, 0, time.UTC)
	n := &annotations.Notice{Start: t0, Deadline: t0.Add(time.Hour), Reason: kueue.InClusterQueueReason, Preemptor: "ns/p", PreemptorUID: "p"}
	wl := &kueue.Workload{
		ObjectMeta: metav1.ObjectMeta{Annotations: map[string]string{annotations.ExpectedRuntime: "1h"}},
		Spec:       kueue.WorkloadSpec{PriorityClassRef: &kueue.PriorityClassRef{Name: "keep"}},
		Status:     kueue.WorkloadStatus{Conditions: []metav1.Condition{notice.ConditionOf(n, 1)}},
	}
	tol := &toleration.Toleration{Toleration: annotations.Toleration{MinimumPreemptablePriority: 10, Forever: true}, Source: "WorkloadPriorityClass keep"}
	b := &budget.Budgets{Buckets: []budget.Bucket{{Owner: "ClusterQueue cq", Budget: budget.Budget{Max: 1, Period: time.Hour, Burst: 1}}}}
	src := policy.Sources{classTolerations{"keep": tol}, budgetSource{b}}
	fact := map[policy.Feature]func(*policy.Candidate) any{
		expectedruntime.Feature: func(c *policy.Candidate) any { return expectedruntime.Of(c) },
		toleration.Feature:      func(c *policy.Candidate) any { return toleration.Of(c) },
		notice.Feature:          func(c *policy.Candidate) any { return notice.Of(c) },
		budget.Feature:          func(c *policy.Candidate) any { return budget.BucketsOf(c) },
	}
	var all policy.Candidate
	policy.WakeSettings{Units: Units()}.ReadFacts(&all, wl, src)
	for f, get := range fact {
		if reflectNil(get(&all)) {
			t.Fatalf("the full table did not read the facts of %s", f)
		}
	}
	for _, removed := range Units() {
		t.Run(string(removed.Feature), func(t *testing.T) {
			var c policy.Candidate
			policy.WakeSettings{Units: Units().Without(removed.Feature)}.ReadFacts(&c, wl, src)
			for f, get := range fact {
				want := get(&all)
				if f == removed.Feature {
					want = get(&policy.Candidate{})
				}
				if diff := cmp.Diff(want, get(&c)); diff != "" {
					t.Errorf("facts of %s without %s (-want +got):\n%s", f, removed.Feature, diff)
				}
			}
		})
	}
}

type classTolerations map[string]*toleration.Toleration

func (c classTolerations) For(ref *kueue.PriorityClassRef) *toleration.Toleration {
	if ref == nil {
		return nil
	}
	return c[ref.Name]
}

type budgetSource struct{ b *budget.Budgets }

func (s budgetSource) BudgetsOf(*kueue.Workload) *budget.Budgets { return s.b }

func reflectNil(v any) bool {
	switch v := v.(type) {
	case *annotations.ExpectedRuntimeSettings:
		return v == nil
	case *toleration.Toleration:
		return v == nil
	case *annotations.Notice:
		return v == nil
	case *budget.Budgets:
		return v == nil
	}
	return v == nil
}

func samePriority(f *fixture) { f.in.Candidate.Priority = f.in.Preemptor.Priority }

func window(f *fixture) {
	timebased.Into(f.in.Queue, timebased.Settings{MinAdmitDuration: time.Minute})
}

func otherQueue(f *fixture) {
	f.in.Scope = policy.OtherClusterQueue
	f.in.Candidate.Info.ClusterQueue = "other"
}
