package policy

import (
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	kueue "sigs.k8s.io/kueue/apis/kueue/v1beta2"
	"sigs.k8s.io/kueue/pkg/workload"

	"github.com/kueue-timeshare/kueue-timeshare/apis/annotations"
)

// TestPrecedence: for each pair of features that both apply to one candidate, the precedence
// table decides, whatever the order the features are registered in.
func TestPrecedence(t *testing.T) {
	// Each fact makes one feature apply to a same-priority candidate of the preemptor's
	// ClusterQueue, queued before it, holding quota and running for two hours.
	type facts struct {
		window, expected, minRuntime, toleration, notYourTurn bool
	}
	cases := map[string]struct {
		features []Feature
		facts    facts
		want     Decision
		// without is the decision with the winning feature left out: the other one applied too.
		winner  Feature
		without Decision
	}{
		"minAdmitDuration and expected runtime: the time-based rule decides": {
			features: []Feature{FeatureTimeBased, FeatureExpectedRuntime},
			facts:    facts{window: true, expected: true},
			want:     Decision{Eligible: true, Rule: RuleTimeExpired, Reason: TimeBasedReason},
			winner:   FeatureTimeBased, without: Decision{Eligible: true, Rule: RuleExpectedRuntime, Reason: ExpectedRuntimeReason},
		},
		"another workload has the turn: it refuses before expected runtime could allow": {
			features: []Feature{FeatureTimeBased, FeatureExpectedRuntime},
			facts:    facts{window: true, expected: true, notYourTurn: true},
			want:     Decision{Rule: RuleNotYourTurn},
			winner:   FeatureTimeBased, without: Decision{Eligible: true, Rule: RuleExpectedRuntime, Reason: ExpectedRuntimeReason},
		},
		"minAdmitDuration and min-runtime: min-runtime protects": {
			features: []Feature{FeatureTimeBased, FeatureMinRuntime},
			facts:    facts{window: true, minRuntime: true},
			want:     Decision{Rule: RuleMinRuntime},
			winner:   FeatureMinRuntime, without: Decision{Eligible: true, Rule: RuleTimeExpired, Reason: TimeBasedReason},
		},
		"minAdmitDuration and toleration: toleration protects": {
			features: []Feature{FeatureTimeBased, FeatureToleration},
			facts:    facts{window: true, toleration: true},
			want:     Decision{Rule: RuleToleration},
			winner:   FeatureToleration, without: Decision{Eligible: true, Rule: RuleTimeExpired, Reason: TimeBasedReason},
		},
		"expected runtime and min-runtime: min-runtime protects": {
			features: []Feature{FeatureExpectedRuntime, FeatureMinRuntime},
			facts:    facts{expected: true, minRuntime: true},
			want:     Decision{Rule: RuleMinRuntime},
			winner:   FeatureMinRuntime, without: Decision{Eligible: true, Rule: RuleExpectedRuntime, Reason: ExpectedRuntimeReason},
		},
		"expected runtime and toleration: toleration protects": {
			features: []Feature{FeatureExpectedRuntime, FeatureToleration},
			facts:    facts{expected: true, toleration: true},
			want:     Decision{Rule: RuleToleration},
			winner:   FeatureToleration, without: Decision{Eligible: true, Rule: RuleExpectedRuntime, Reason: ExpectedRuntimeReason},
		},
		"min-runtime and toleration on an eligible candidate: min-runtime names the protection": {
			features: []Feature{FeatureMinRuntime, FeatureToleration, FeatureTimeBased},
			facts:    facts{window: true, minRuntime: true, toleration: true},
			want:     Decision{Rule: RuleMinRuntime},
			winner:   FeatureMinRuntime, without: Decision{Rule: RuleToleration},
		},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			pre := &Pending{ClusterQueue: "cq", Priority: 100, QueuedAt: t0.Add(-time.Minute)}
			if tc.facts.notYourTurn {
				pre.WaitingLonger = "ns/other"
			}
			running := t0.Add(-2 * time.Hour)
			c := &Candidate{Info: &workload.Info{ClusterQueue: "cq"}, Priority: 100, QueuedAt: t0.Add(-3 * time.Hour),
				QuotaReservedAt: running, Admitted: true, AdmittedAt: running}
			in := &Input{Preemptor: pre, Candidate: c, Scope: SameClusterQueue, Policy: kueue.PreemptionPolicyLowerOrNewerEqualPriority, Now: t0}
			if tc.facts.window {
				in.Settings.MinAdmitDuration = time.Hour
			}
			if tc.facts.expected {
				expectedRuntime.Set(c, &annotations.ExpectedRuntimeSettings{Expected: time.Hour})
			}
			if tc.facts.minRuntime {
				in.Protection = Protection{MinRuntime: 3 * time.Hour, Source: Source{Field: "preemptMinRuntime", Value: "3h0m0s", Kind: "ClusterQueue", Name: "cq"}}
			}
			if tc.facts.toleration {
				toleration.Set(c, &Toleration{Toleration: annotations.Toleration{MinimumPreemptablePriority: 1000, Forever: true}, Source: "WorkloadPriorityClass sticky"})
			}
			forward := append([]Feature(nil), tc.features...)
			backward := make([]Feature, 0, len(forward))
			for i := len(forward) - 1; i >= 0; i-- {
				backward = append(backward, forward[i])
			}
			for _, order := range [][]Feature{forward, backward} {
				if diff := cmp.Diff(tc.want, New(Options{}, testUnits().With(order...)).Decide(in)); diff != "" {
					t.Errorf("registered as %v: Decide (-want +got):\n%s", order, diff)
				}
			}
			// The other feature applies too: the pair is a real conflict.
			var rest []Feature
			for _, f := range tc.features {
				if f != tc.winner {
					rest = append(rest, f)
				}
			}
			if diff := cmp.Diff(tc.without, New(Options{}, testUnits().With(rest...)).Decide(in)); diff != "" {
				t.Errorf("without %s: Decide (-want +got):\n%s", tc.winner, diff)
			}
		})
	}
}

// testUnits are the units of this package in the registry's order (plugins.Units; the budget's
// are tested in its own package, and the whole table in package plugins).
func testUnits() Table {
	return Table{TimeBasedUnit(), ExpectedRuntimeUnit(), MinRuntimeUnit(), TolerationUnit(), NoticeUnit()}
}

// mustUnit is feature f's unit.
func mustUnit(t *testing.T, f Feature) Unit {
	t.Helper()
	for _, u := range testUnits() {
		if u.Feature == f {
			return u
		}
	}
	t.Fatalf("no unit for feature %s in the registry", f)
	return Unit{}
}
