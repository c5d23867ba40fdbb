package policy

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
)

// TestFeatureRemoval registers the table without each feature in turn: the policy, its timing
// and its fact reading still build from it, the decisions where the removed feature does not
// apply are the full table's, and where it applies they are what upstream's rules alone give
// (or, where another feature applies too, that feature's).
func TestFeatureRemoval(t *testing.T) {
	t0 := time.Date(2026, 1, 1, 12, 0, 0, 0, time.UTC)
	// Every candidate holds quota and runs since two minutes ago, in the preemptor's ClusterQueue
	// unless said otherwise; the preemptor has priority 5.
	running := func(prio int64) Candidate {
		return Candidate{Info: &workload.Info{ClusterQueue: "cq"}, Priority: prio, QueuedAt: t0.Add(-time.Hour),
			QuotaReservedAt: t0.Add(-2 * time.Minute), Admitted: true, AdmittedAt: t0.Add(-2 * time.Minute)}
	}
	expected := &annotations.ExpectedRuntimeSettings{Expected: time.Minute}
	tolerates := &Toleration{Toleration: annotations.Toleration{MinimumPreemptablePriority: 10, Duration: time.Hour}, Source: "WorkloadPriorityClass keep"}
	noticed := &annotations.Notice{Start: t0.Add(-time.Minute), Deadline: t0.Add(time.Hour), Reason: kueue.InClusterQueueReason,
		Preemptor: "ns/other", PreemptorUID: "other"}
	type tweak func(*Input)
	cases := map[string]struct {
		tweaks []tweak
		// applies lists the features that decide, or would once the one that decides is removed.
		applies []Feature
		// without is the decision without a feature of applies when it is not upstream's.
		without map[Feature]string
	}{
		"lower priority, no feature applies": {},
		"same priority, Never": {
			tweaks: []tweak{samePriority, func(in *Input) { in.Policy = kueue.PreemptionPolicyNever }},
		},
		"same priority past minAdmitDuration": {
			tweaks:  []tweak{samePriority, window},
			applies: []Feature{FeatureTimeBased},
		},
		"same priority past minAdmitDuration, another workload has the turn": {
			tweaks:  []tweak{samePriority, window, func(in *Input) { in.Preemptor.WaitingLonger = "ns/first" }},
			applies: []Feature{FeatureTimeBased},
		},
		"same priority past its expected runtime": {
			tweaks:  []tweak{samePriority, func(in *Input) { expectedRuntime.Set(in.Candidate, expected) }},
			applies: []Feature{FeatureExpectedRuntime},
		},
		"past its expected runtime in another ClusterQueue": {
			tweaks: []tweak{samePriority, otherQueue, func(in *Input) { expectedRuntime.Set(in.Candidate, expected) }},
		},
		"lower priority inside its min-runtime": {
			tweaks:  []tweak{func(in *Input) { in.Protection = Protection{MinRuntime: time.Hour} }},
			applies: []Feature{FeatureMinRuntime},
		},
		"lower priority past its min-runtime": {
			tweaks: []tweak{func(in *Input) { in.Protection = Protection{MinRuntime: time.Minute} }},
		},
		"lower priority, its class tolerates the preemptor": {
			tweaks:  []tweak{func(in *Input) { toleration.Set(in.Candidate, tolerates) }},
			applies: []Feature{FeatureToleration},
		},
		"lower priority under notice for another preemptor": {
			tweaks:  []tweak{func(in *Input) { notice.Set(in.Candidate, noticed) }},
			applies: []Feature{FeatureNotice},
		},
		"lower priority under notice for this preemptor": {
			tweaks: []tweak{func(in *Input) {
				n := *noticed
				n.PreemptorUID = in.Preemptor.Obj.UID
				notice.Set(in.Candidate, &n)
			}},
		},
		"lower priority under notice for another preemptor, already evicted": {
			tweaks: []tweak{func(in *Input) {
				notice.Set(in.Candidate, noticed)
				in.Candidate.Evicted = true
			}},
		},
		"same priority under notice for another preemptor": {
			tweaks: []tweak{samePriority, func(in *Input) { notice.Set(in.Candidate, noticed) }},
		},
		"past minAdmitDuration and under notice": {
			tweaks:  []tweak{samePriority, window, func(in *Input) { notice.Set(in.Candidate, noticed) }},
			applies: []Feature{FeatureTimeBased, FeatureNotice},
			without: map[Feature]string{FeatureNotice: RuleTimeExpired},
		},
		"past its expected runtime and under notice": {
			tweaks: []tweak{samePriority, func(in *Input) {
				expectedRuntime.Set(in.Candidate, expected)
				notice.Set(in.Candidate, noticed)
			}},
			applies: []Feature{FeatureExpectedRuntime, FeatureNotice},
			without: map[Feature]string{FeatureNotice: RuleExpectedRuntime},
		},
		"lower priority, tolerating and under notice": {
			tweaks: []tweak{func(in *Input) {
				toleration.Set(in.Candidate, tolerates)
				notice.Set(in.Candidate, noticed)
			}},
			applies: []Feature{FeatureToleration, FeatureNotice},
			without: map[Feature]string{FeatureToleration: RuleUnderNotice, FeatureNotice: RuleToleration},
		},
		"past minAdmitDuration and tolerating": {
			tweaks:  []tweak{samePriority, window, func(in *Input) { toleration.Set(in.Candidate, tolerates) }},
			applies: []Feature{FeatureTimeBased, FeatureToleration},
			without: map[Feature]string{FeatureToleration: RuleTimeExpired},
		},
		"past its expected runtime inside its min-runtime": {
			tweaks: []tweak{samePriority, func(in *Input) {
				expectedRuntime.Set(in.Candidate, expected)
				in.Protection = Protection{MinRuntime: time.Hour}
			}},
			applies: []Feature{FeatureExpectedRuntime, FeatureMinRuntime},
			without: map[Feature]string{FeatureMinRuntime: RuleExpectedRuntime},
		},
		"inside its min-runtime and under notice": {
			tweaks: []tweak{func(in *Input) {
				notice.Set(in.Candidate, noticed)
				in.Protection = Protection{MinRuntime: time.Hour}
			}},
			applies: []Feature{FeatureMinRuntime, FeatureNotice},
			without: map[Feature]string{FeatureMinRuntime: RuleUnderNotice, FeatureNotice: RuleMinRuntime},
		},
	}
	input := func(tweaks []tweak) *Input {
		c := running(1)
		in := &Input{Preemptor: &Pending{Obj: &kueue.Workload{ObjectMeta: metav1.ObjectMeta{UID: "preemptor"}}, ClusterQueue: "cq",
			Priority: 5, QueuedAt: t0}, Candidate: &c, Scope: SameClusterQueue, Policy: kueue.PreemptionPolicyLowerOrNewerEqualPriority, Now: t0}
		for _, tw := range tweaks {
			tw(in)
		}
		return in
	}
	full := testUnits()
	if got, want := len(full), 5; got != want {
		t.Fatalf("%d features registered, want %d", got, want)
	}
	all := New(Options{}, full.With(full.Features()...))
	upstream := New(Options{})
	for _, removed := range full {
		t.Run(string(removed.Feature), func(t *testing.T) {
			table := full.Without(removed.Feature)
			if slices.Contains(table.Features(), removed.Feature) || len(table) != len(full)-1 {
				t.Fatalf("table without %s: %v", removed.Feature, table.Features())
			}
			p := New(Options{}, table.With(table.Features()...))
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
					ws := WakeSettings{Queue: in.Settings, MinRuntimes: []time.Duration{in.Protection.MinRuntime}, Units: full}
					wsWithout, wsOnly := ws, ws
					wsWithout.Units, wsOnly.Units = table, Table{removed}
					wantChanges := Changes(in.Candidate, ws)
					for _, ch := range Changes(in.Candidate, wsOnly) {
						i := slices.Index(wantChanges, ch)
						if i < 0 {
							t.Fatalf("change %v of %s is not among the full table's %v", ch, removed.Feature, wantChanges)
						}
						wantChanges = slices.Delete(wantChanges, i, i+1)
					}
					sortChanges := cmpopts.SortSlices(func(a, b Change) bool { return a.At.Before(b.At) })
					if diff := cmp.Diff(wantChanges, Changes(in.Candidate, wsWithout), sortChanges, cmpopts.EquateEmpty()); diff != "" {
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
		Status:     kueue.WorkloadStatus{Conditions: []metav1.Condition{NoticeRecord(n, 1)}},
	}
	tol := &Toleration{Toleration: annotations.Toleration{MinimumPreemptablePriority: 10, Forever: true}, Source: "WorkloadPriorityClass keep"}
	src := Sources{classTolerations{"keep": tol}}
	fact := map[Feature]func(*Candidate) any{
		FeatureExpectedRuntime: func(c *Candidate) any { return expectedRuntime.Of(c) },
		FeatureToleration:      func(c *Candidate) any { return toleration.Of(c) },
		FeatureNotice:          func(c *Candidate) any { return notice.Of(c) },
	}
	var all Candidate
	WakeSettings{Units: testUnits()}.ReadFacts(&all, wl, src)
	for f, get := range fact {
		if reflectNil(get(&all)) {
			t.Fatalf("the full table did not read the facts of %s", f)
		}
	}
	for _, removed := range testUnits() {
		t.Run(string(removed.Feature), func(t *testing.T) {
			var c Candidate
			WakeSettings{Units: testUnits().Without(removed.Feature)}.ReadFacts(&c, wl, src)
			for f, get := range fact {
				want := get(&all)
				if f == removed.Feature {
					want = get(&Candidate{})
				}
				if diff := cmp.Diff(want, get(&c)); diff != "" {
					t.Errorf("facts of %s without %s (-want +got):\n%s", f, removed.Feature, diff)
				}
			}
		})
	}
}

type classTolerations map[string]*Toleration

func (c classTolerations) For(ref *kueue.PriorityClassRef) *Toleration { return c[ref.Name] }

func reflectNil(v any) bool {
	switch v := v.(type) {
	case *annotations.ExpectedRuntimeSettings:
		return v == nil
	case *Toleration:
		return v == nil
	case *annotations.Notice:
		return v == nil
	}
	return v == nil
}

func samePriority(in *Input) { in.Candidate.Priority = in.Preemptor.Priority }

func window(in *Input) { in.Settings = QueueSettings{MinAdmitDuration: time.Minute} }

func otherQueue(in *Input) {
	in.Scope = OtherClusterQueue
	in.Candidate.Info.ClusterQueue = "other"
}
