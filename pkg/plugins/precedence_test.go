package plugins

import (
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	kueue "sigs.k8s.io/kueue/apis/kueue/v1beta2"
	"sigs.k8s.io/kueue/pkg/workload"

	"github.com/kueue-timeshare/kueue-timeshare/apis/annotations"
	"github.com/kueue-timeshare/kueue-timeshare/pkg/plugins/expectedruntime"
	"github.com/kueue-timeshare/kueue-timeshare/pkg/plugins/minruntime"
	"github.com/kueue-timeshare/kueue-timeshare/pkg/plugins/timebased"
	"github.com/kueue-timeshare/kueue-timeshare/pkg/plugins/toleration"
	"github.com/kueue-timeshare/kueue-timeshare/pkg/policy"
)

// TestPrecedence: for each pair of features that both apply to one candidate, the precedence
// table decides, whatever the order the features are registered in.
func TestPrecedence(t *testing.T) {
	t0 := time.Date(2026, 1, 1, 12, 0, 0, 0, time.UTC)
	// Each fact makes one feature apply to a same-priority candidate of the preemptor's
	// ClusterQueue, queued before it, holding quota and running for two hours.
	type facts struct {
		window, expected, minRuntime, toleration, notYourTurn bool
	}
	cases := map[string]struct {
		features []policy.Feature
		facts    facts
		want     policy.Decision
		// without is the decision with the winning feature left out: the other one applied too.
		winner  policy.Feature
		without policy.Decision
	}{
		"minAdmitDuration and expected runtime: the time-based rule decides": {
			features: []policy.Feature{timebased.Feature, expectedruntime.Feature},
			facts:    facts{window: true, expected: true},
			want:     policy.Decision{Eligible: true, Rule: timebased.RuleExpired, Reason: timebased.Reason},
			winner:   timebased.Feature, without: policy.Decision{Eligible: true, Rule: expectedruntime.Rule, Reason: expectedruntime.Reason},
		},
		"another workload has the turn: it refuses before expected runtime could allow": {
			features: []policy.Feature{timebased.Feature, expectedruntime.Feature},
			facts:    facts{window: true, expected: true, notYourTurn: true},
			want:     policy.Decision{Rule: timebased.RuleNotYourTurn},
			winner:   timebased.Feature, without: policy.Decision{Eligible: true, Rule: expectedruntime.Rule, Reason: expectedruntime.Reason},
		},
		"minAdmitDuration and min-runtime: min-runtime protects": {
			features: []policy.Feature{timebased.Feature, minruntime.Feature},
			facts:    facts{window: true, minRuntime: true},
			want:     policy.Decision{Rule: minruntime.Rule},
			winner:   minruntime.Feature, without: policy.Decision{Eligible: true, Rule: timebased.RuleExpired, Reason: timebased.Reason},
		},
		"minAdmitDuration and toleration: toleration protects": {
			features: []policy.Feature{timebased.Feature, toleration.Feature},
			facts:    facts{window: true, toleration: true},
			want:     policy.Decision{Rule: toleration.RuleTolerates},
			winner:   toleration.Feature, without: policy.Decision{Eligible: true, Rule: timebased.RuleExpired, Reason: timebased.Reason},
		},
		"expected runtime and min-runtime: min-runtime protects": {
			features: []policy.Feature{expectedruntime.Feature, minruntime.Feature},
			facts:    facts{expected: true, minRuntime: true},
			want:     policy.Decision{Rule: minruntime.Rule},
			winner:   minruntime.Feature, without: policy.Decision{Eligible: true, Rule: expectedruntime.Rule, Reason: expectedruntime.Reason},
		},
		"expected runtime and toleration: toleration protects": {
			features: []policy.Feature{expectedruntime.Feature, toleration.Feature},
			facts:    facts{expected: true, toleration: true},
			want:     policy.Decision{Rule: toleration.RuleTolerates},
			winner:   toleration.Feature, without: policy.Decision{Eligible: true, Rule: expectedruntime.Rule, Reason: expectedruntime.Reason},
		},
		"min-runtime and toleration on an eligible candidate: min-runtime names the protection": {
			features: []policy.Feature{minruntime.Feature, toleration.Feature, timebased.Feature},
			facts:    facts{window: true, minRuntime: true, toleration: true},
			want:     policy.Decision{Rule: minruntime.Rule},
			winner:   minruntime.Feature, without: policy.Decision{Rule: toleration.RuleTolerates},
		},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			pre := &policy.Pending{ClusterQueue: "cq", Priority: 100, QueuedAt: t0.Add(-time.Minute)}
			if tc.facts.notYourTurn {
				timebased.SetWaitingLonger(pre, "ns/other")
			}
			running := t0.Add(-2 * time.Hour)
			c := &policy.Candidate{Info: &workload.Info{ClusterQueue: "cq"}, Priority: 100, QueuedAt: t0.Add(-3 * time.Hour),
				QuotaReservedAt: running, Admitted: true, AdmittedAt: running}
			in := &policy.Input{Preemptor: pre, Candidate: c, Scope: policy.SameClusterQueue, Policy: kueue.PreemptionPolicyLowerOrNewerEqualPriority, Now: t0}
			in.Queue = &policy.QueueFacts{}
			if tc.facts.window {
				timebased.Into(in.Queue, timebased.Settings{MinAdmitDuration: time.Hour})
			}
			wl := &kueue.Workload{ObjectMeta: metav1.ObjectMeta{Annotations: map[string]string{}}}
			var src policy.Sources
			if tc.facts.expected {
				wl.Annotations[annotations.ExpectedRuntime] = "1h"
			}
			if tc.facts.minRuntime {
				minruntime.Into(in.Queue, minruntime.Protection{MinRuntime: 3 * time.Hour, Source: policy.Source{Field: "preemptMinRuntime", Value: "3h0m0s", Kind: "ClusterQueue", Name: "cq"}})
			}
			if tc.facts.toleration {
				wl.Spec.PriorityClassRef = &kueue.PriorityClassRef{Name: "sticky"}
				src = append(src, classTolerations{"sticky": {Toleration: annotations.Toleration{MinimumPreemptablePriority: 1000, Forever: true}, Source: "WorkloadPriorityClass sticky"}})
			}
			Units().ReadFacts(c, wl, src, nil, false)
			forward := append([]policy.Feature(nil), tc.features...)
			backward := make([]policy.Feature, 0, len(forward))
			for i := len(forward) - 1; i >= 0; i-- {
				backward = append(backward, forward[i])
			}
			for _, order := range [][]policy.Feature{forward, backward} {
				if diff := cmp.Diff(tc.want, policy.New(policy.Options{}, With(order...)).Decide(in)); diff != "" {
					t.Errorf("registered as %v: Decide (-want +got):\n%s", order, diff)
				}
			}
			// The other feature applies too: the pair is a real conflict.
			var rest []policy.Feature
			for _, f := range tc.features {
				if f != tc.winner {
					rest = append(rest, f)
				}
			}
			if diff := cmp.Diff(tc.without, policy.New(policy.Options{}, With(rest...)).Decide(in)); diff != "" {
				t.Errorf("without %s: Decide (-want +got):\n%s", tc.winner, diff)
			}
		})
	}
}
