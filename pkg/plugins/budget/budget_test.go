package budget

import (
	"encoding/json"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/validation/field"
	kueue "sigs.k8s.io/kueue/apis/kueue/v1beta2"
	"sigs.k8s.io/kueue/pkg/workload"

	tsapi "github.com/kueue-timeshare/kueue-timeshare/apis/kueue/v1beta2"
	"github.com/kueue-timeshare/kueue-timeshare/pkg/features"
	"github.com/kueue-timeshare/kueue-timeshare/pkg/plugins/timebased"
	"github.com/kueue-timeshare/kueue-timeshare/pkg/policy"
)

func TestBucket(t *testing.T) {
	t0 := time.Date(2026, 1, 1, 12, 0, 0, 0, time.UTC)
	twoPerHour := Budget{Max: 2, Period: time.Hour, Burst: 2}
	at := func(minutes ...int) []time.Time {
		var out []time.Time
		for _, m := range minutes {
			out = append(out, t0.Add(time.Duration(m)*time.Minute))
		}
		return out
	}
	type want struct {
		Tokens    float64
		NextToken time.Time
	}
	cases := map[string]struct {
		budget Budget
		spent  []time.Time
		now    time.Time
		want   want
	}{
		"nothing spent: full": {
			budget: twoPerHour, now: t0,
			want: want{Tokens: 2},
		},
		"one spent: one left, no wait": {
			budget: twoPerHour, spent: at(0), now: t0,
			want: want{Tokens: 1},
		},
		"two spent at once: empty until half a period": {
			budget: twoPerHour, spent: at(0, 0), now: t0.Add(10 * time.Minute),
			want: want{Tokens: 1.0 / 3, NextToken: t0.Add(30 * time.Minute)},
		},
		"refilled past the burst: capped": {
			budget: twoPerHour, spent: at(0, 0), now: t0.Add(5 * time.Hour),
			want: want{Tokens: 2, NextToken: t0.Add(30 * time.Minute)},
		},
		"refill between preemptions counts": {
			budget: twoPerHour, spent: at(0, 0, 30), now: t0.Add(30 * time.Minute),
			want: want{Tokens: 0, NextToken: t0.Add(time.Hour)},
		},
		"a burst above the rate": {
			budget: Budget{Max: 1, Period: time.Hour, Burst: 3}, spent: at(0, 0, 0), now: t0,
			want: want{Tokens: 0, NextToken: t0.Add(time.Hour)},
		},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			b := Bucket{Budget: tc.budget, Spent: tc.spent}
			got := want{Tokens: b.Tokens(tc.now), NextToken: b.NextToken()}
			if diff := cmp.Diff(tc.want, got, cmp.Comparer(func(a, b float64) bool { return a-b < 1e-6 && b-a < 1e-6 })); diff != "" {
				t.Errorf("(-want +got):\n%s", diff)
			}
			if next := b.NextToken(); !next.IsZero() && (b.Tokens(next) < 1-tokenEpsilon || b.Tokens(next.Add(-time.Millisecond)) >= 1) {
				t.Errorf("NextToken %s is not the first instant with a token", next)
			}
		})
	}
}

func TestRule(t *testing.T) {
	t0 := time.Date(2026, 1, 1, 12, 0, 0, 0, time.UTC)
	team := Bucket{Owner: "ClusterQueue team-a", Budget: Budget{Max: 2, Period: time.Hour, Burst: 2}, Spent: []time.Time{t0.Add(-5 * time.Minute), t0.Add(-5 * time.Minute)}}
	org := Bucket{Owner: "Cohort org", Budget: Budget{Max: 10, Period: time.Hour, Burst: 10}, Spent: []time.Time{t0.Add(-5 * time.Minute)}}
	once := Bucket{Owner: "perWorkload of Cohort org", Budget: Budget{Max: 1, Period: 2 * time.Hour, Burst: 1}, Spent: []time.Time{t0.Add(-time.Hour)}}
	cases := map[string]struct {
		buckets []Bucket
		turn    bool
		evicted bool
		// otherQueue: the preemptor is of another ClusterQueue of the cohort tree.
		otherQueue bool
		want       policy.Decision
		wantVeto   string
	}{
		"no budget": {
			want: policy.Decision{Eligible: true, Rule: policy.RuleLowerPriority, Message: "priority 1 is lower than the preemptor's 5"},
		},
		"tokens everywhere": {
			buckets: []Bucket{org},
			want:    policy.Decision{Eligible: true, Rule: policy.RuleLowerPriority, Message: "priority 1 is lower than the preemptor's 5"},
		},
		"its ClusterQueue's budget spent": {
			buckets:  []Bucket{team, org},
			want:     policy.Decision{Rule: RuleSpent, Message: "the preemption budget of ClusterQueue team-a (2 per 1h), spent until 12:25:00"},
			wantVeto: "the preemption budget of ClusterQueue team-a (2 per 1h), spent until 12:25:00",
		},
		"its per-workload budget spent, waiting longest": {
			buckets:  []Bucket{once, team},
			want:     policy.Decision{Rule: RuleSpent, Message: "the preemption budget of perWorkload of Cohort org (1 per 2h), spent until 13:00:00"},
			wantVeto: "the preemption budget of perWorkload of Cohort org (1 per 2h), spent until 13:00:00",
		},
		"a turn neither waits": {
			buckets: []Bucket{team}, turn: true,
			want: policy.Decision{Eligible: true, Rule: timebased.RuleExpired, Reason: timebased.Reason,
				Message: "same priority 5 and holding quota for 1h0m0s, longer than minAdmitDuration 1m0s"},
		},
		"a reclaim by another ClusterQueue neither waits": {
			buckets: []Bucket{team, once}, otherQueue: true,
			want: policy.Decision{Eligible: true, Rule: policy.RuleLowerPriority, Message: "priority 1 is lower than the preemptor's 5"},
		},
		"already evicted": {
			buckets: []Bucket{team}, evicted: true,
			want: policy.Decision{Eligible: true, Rule: policy.RuleLowerPriority, Message: "priority 1 is lower than the preemptor's 5"},
		},
	}
	p := policy.New(policy.Options{}, timebased.Unit().Option(), Option())
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			c := policy.Candidate{Info: &workload.Info{ClusterQueue: "team-a"}, Priority: 1, QueuedAt: t0.Add(-2 * time.Hour),
				QuotaReservedAt: t0.Add(-time.Hour), Admitted: true, AdmittedAt: t0.Add(-time.Hour), Evicted: tc.evicted}
			if tc.buckets != nil {
				budgets.Set(&c, &Budgets{Buckets: tc.buckets})
			}
			in := &policy.Input{Preemptor: &policy.Pending{Obj: &kueue.Workload{}, ClusterQueue: "team-a", Priority: 5, QueuedAt: t0},
				Candidate: &c, Scope: policy.SameClusterQueue, Policy: kueue.PreemptionPolicyLowerOrNewerEqualPriority, Now: t0}
			if tc.otherQueue {
				in.Preemptor.ClusterQueue, in.Scope = "lender", policy.OtherClusterQueue
			}
			if tc.turn {
				c.Priority = 5
				in.Queue = timebased.Resolved(timebased.Settings{MinAdmitDuration: time.Minute})
			}
			got := p.Explain(in)
			if diff := cmp.Diff(tc.want, got); diff != "" {
				t.Errorf("decision (-want +got):\n%s", diff)
			}
			why, until, ok := Unit().Vetoed(got.Rule, in)
			if ok != (tc.wantVeto != "") || why != tc.wantVeto {
				t.Errorf("Vetoed = %q, %v, want %q", why, ok, tc.wantVeto)
			}
			// The waker wakes the queue when the last spent bucket has its token back.
			if ok {
				got := policy.Changes(&c, policy.WakeSettings{Units: policy.Table{Unit()}})
				if !containsChange(got, until) {
					t.Errorf("changes %v do not include the end of the wait %s", got, until)
				}
			}
		})
	}
}

func containsChange(changes []policy.Change, at time.Time) bool {
	for _, ch := range changes {
		if ch.At.Equal(at) {
			return true
		}
	}
	return false
}

func TestOf(t *testing.T) {
	burst := int32(5)
	cases := map[string]struct {
		in          *tsapi.PreemptionBudget
		want        Budget
		perWorkload *Budget
		words       string
	}{
		"unset": {},
		"burst defaults to maxPreemptions": {
			in:   &tsapi.PreemptionBudget{MaxPreemptions: 2, Period: metav1.Duration{Duration: 90 * time.Minute}},
			want: Budget{Max: 2, Period: 90 * time.Minute, Burst: 2}, words: "2 per 1h30m",
		},
		"burst and per workload": {
			in: &tsapi.PreemptionBudget{MaxPreemptions: 2, Period: metav1.Duration{Duration: time.Hour}, Burst: &burst,
				PerWorkload: &tsapi.WorkloadBudget{MaxPreemptions: 1, Period: metav1.Duration{Duration: 24 * time.Hour}}},
			want: Budget{Max: 2, Period: time.Hour, Burst: 5}, perWorkload: &Budget{Max: 1, Period: 24 * time.Hour, Burst: 1}, words: "2 per 1h",
		},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			if diff := cmp.Diff(tc.want, Of(tc.in)); diff != "" {
				t.Errorf("Of (-want +got):\n%s", diff)
			}
			var got *Budget
			if w, ok := PerWorkloadOf(tc.in); ok {
				got = &w
			}
			if diff := cmp.Diff(tc.perWorkload, got); diff != "" {
				t.Errorf("PerWorkloadOf (-want +got):\n%s", diff)
			}
			if tc.in != nil && Of(tc.in).String() != tc.words {
				t.Errorf("String = %q, want %q", Of(tc.in).String(), tc.words)
			}
		})
	}
}

func TestRefusedWhileOff(t *testing.T) {
	budget := `{"preemption":{"preemptionBudget":{"maxPreemptions":2,"period":"1h"}}}`
	cases := map[string]struct {
		spec, old string
		want      field.ErrorList
	}{
		"no budget":   {spec: `{"preemption":{}}`},
		"a budget":    {spec: budget, want: field.ErrorList{field.Forbidden(field.NewPath("spec", "preemption", "preemptionBudget"), features.BudgetGateOff)}},
		"kept":        {spec: budget, old: budget},
		"changed":     {spec: budget, old: `{"preemption":{"preemptionBudget":{"maxPreemptions":1,"period":"1h"}}}`, want: field.ErrorList{field.Forbidden(field.NewPath("spec", "preemption", "preemptionBudget"), features.BudgetGateOff)}},
		"not a spec.": {spec: `{"preemption":[]}`},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			var old json.RawMessage
			if tc.old != "" {
				old = json.RawMessage(tc.old)
			}
			got := (policy.Table{Unit()}).RefusedWhileOff(field.NewPath("spec", "preemption"), json.RawMessage(tc.spec), old,
				func(policy.Feature) bool { return false })
			if diff := cmp.Diff(tc.want, got); diff != "" {
				t.Errorf("(-want +got):\n%s", diff)
			}
		})
	}
}
