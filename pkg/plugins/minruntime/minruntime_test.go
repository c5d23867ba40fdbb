package minruntime

import (
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/google/go-cmp/cmp/cmpopts"

	kueue "sigs.k8s.io/kueue/apis/kueue/v1beta2"
	"sigs.k8s.io/kueue/pkg/workload"

	"github.com/kueue-timeshare/kueue-timeshare/pkg/plugins/timebased"
	"github.com/kueue-timeshare/kueue-timeshare/pkg/policy"
)

// The design seed's tree: A -> B(600s) -> {C -> {leaf1(0s), leaf2(180s)}, D(60s) -> leaf3}, with
// the values as reclaimMinRuntime (reclaim cases) or preemptMinRuntime (preempt cases).
func seedTree(field func(time.Duration) Settings) map[string]Path {
	a := Node{Kind: "Cohort", Name: "A"}
	b := Node{Kind: "Cohort", Name: "B", Settings: field(600 * time.Second)}
	c := Node{Kind: "Cohort", Name: "C"}
	d := Node{Kind: "Cohort", Name: "D", Settings: field(60 * time.Second)}
	return map[string]Path{
		"leaf1": {{Kind: "ClusterQueue", Name: "leaf1", Settings: field(0)}, c, b, a},
		"leaf2": {{Kind: "ClusterQueue", Name: "leaf2", Settings: field(180 * time.Second)}, c, b, a},
		"leaf3": {{Kind: "ClusterQueue", Name: "leaf3"}, d, b, a},
		"leaf4": {{Kind: "ClusterQueue", Name: "leaf4"}, c, b, a},
		"alone": {{Kind: "ClusterQueue", Name: "alone"}},
		"other": {{Kind: "ClusterQueue", Name: "other"}, {Kind: "Cohort", Name: "X"}},
	}
}

func reclaimAt(d time.Duration) Settings { return Settings{Reclaim: policy.Set(d)} }
func preemptAt(d time.Duration) Settings { return Settings{Preempt: policy.Set(d)} }

func TestResolveReclaim(t *testing.T) {
	tree := seedTree(reclaimAt)
	defaults := Defaults{Preempt: time.Hour, Reclaim: 30 * time.Second}
	cases := map[string]struct {
		method            ResolveMethod
		preemptor, victim string
		defaults          Defaults
		want              Protection
	}{
		"seed example 1: leaf1 reclaims from leaf3, D's value": {
			method: ResolveLCA, preemptor: "leaf1", victim: "leaf3",
			want: Protection{MinRuntime: 60 * time.Second, Source: policy.Source{Field: "reclaimMinRuntime", Value: "1m0s", Kind: "Cohort", Name: "D"}},
		},
		"seed example 2: leaf1 reclaims from its sibling leaf2, leaf2's value": {
			method: ResolveLCA, preemptor: "leaf1", victim: "leaf2",
			want: Protection{MinRuntime: 180 * time.Second, Source: policy.Source{Field: "reclaimMinRuntime", Value: "3m0s", Kind: "ClusterQueue", Name: "leaf2"}},
		},
		"seed example 3: leaf3 reclaims from leaf1, C inherits B's value": {
			method: ResolveLCA, preemptor: "leaf3", victim: "leaf1",
			want: Protection{MinRuntime: 600 * time.Second, Source: policy.Source{Field: "reclaimMinRuntime", Value: "10m0s", Kind: "Cohort", Name: "B"}},
		},
		"LCA: a set 0s on the victim's queue stops the walk": {
			method: ResolveLCA, preemptor: "leaf2", victim: "leaf1",
			want: Protection{Source: policy.Source{Field: "reclaimMinRuntime", Value: "0s", Kind: "ClusterQueue", Name: "leaf1"}},
		},
		"LCA: unset victim queue inherits from the cohort above the LCA's child": {
			method: ResolveLCA, preemptor: "leaf1", victim: "leaf4",
			want: Protection{MinRuntime: 600 * time.Second, Source: policy.Source{Field: "reclaimMinRuntime", Value: "10m0s", Kind: "Cohort", Name: "B"}},
		},
		"Queue: starts at the victim's ClusterQueue": {
			method: ResolveQueue, preemptor: "leaf3", victim: "leaf1",
			want: Protection{Source: policy.Source{Field: "reclaimMinRuntime", Value: "0s", Kind: "ClusterQueue", Name: "leaf1"}},
		},
		"Queue: unset queue walks up to D": {
			method: ResolveQueue, preemptor: "leaf1", victim: "leaf3",
			want: Protection{MinRuntime: 60 * time.Second, Source: policy.Source{Field: "reclaimMinRuntime", Value: "1m0s", Kind: "Cohort", Name: "D"}},
		},
		"no common ancestor: walks from the victim's queue, then the default": {
			method: ResolveLCA, preemptor: "leaf1", victim: "other", defaults: defaults,
			want: Protection{MinRuntime: 30 * time.Second, Source: policy.Source{Field: "defaultReclaimMinRuntime", Value: "30s"}},
		},
		"nothing set anywhere: the zero default": {
			method: ResolveLCA, preemptor: "alone", victim: "other",
			want: Protection{Source: policy.Source{Field: "defaultReclaimMinRuntime", Value: "0s"}},
		},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			got := ResolveReclaim(tc.method, tree[tc.preemptor], tree[tc.victim], tc.defaults)
			if diff := cmp.Diff(tc.want, got); diff != "" {
				t.Errorf("protection (-want +got):\n%s", diff)
			}
		})
	}
}

func TestResolvePreempt(t *testing.T) {
	tree := seedTree(preemptAt)
	cases := map[string]struct {
		victim   Path
		defaults Defaults
		want     Protection
	}{
		"queue's own value": {
			victim: tree["leaf2"],
			want:   Protection{MinRuntime: 180 * time.Second, Source: policy.Source{Field: "preemptMinRuntime", Value: "3m0s", Kind: "ClusterQueue", Name: "leaf2"}},
		},
		"set 0s is no protection and is not inherited over": {
			victim: tree["leaf1"], defaults: Defaults{Preempt: time.Hour},
			want: Protection{Source: policy.Source{Field: "preemptMinRuntime", Value: "0s", Kind: "ClusterQueue", Name: "leaf1"}},
		},
		"unset walks up the cohorts": {
			victim: tree["leaf4"],
			want:   Protection{MinRuntime: 600 * time.Second, Source: policy.Source{Field: "preemptMinRuntime", Value: "10m0s", Kind: "Cohort", Name: "B"}},
		},
		"reclaim settings do not count for preemption": {
			victim: seedTree(reclaimAt)["leaf2"], defaults: Defaults{Preempt: 5 * time.Minute, Reclaim: time.Hour},
			want: Protection{MinRuntime: 5 * time.Minute, Source: policy.Source{Field: "defaultPreemptMinRuntime", Value: "5m0s"}},
		},
		"queue without cohort takes the default": {
			victim: tree["alone"], defaults: Defaults{Preempt: 2 * time.Minute},
			want: Protection{MinRuntime: 2 * time.Minute, Source: policy.Source{Field: "defaultPreemptMinRuntime", Value: "2m0s"}},
		},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			if diff := cmp.Diff(tc.want, ResolvePreempt(tc.victim, tc.defaults)); diff != "" {
				t.Errorf("protection (-want +got):\n%s", diff)
			}
		})
	}
}

// A protection vetoes only what the table allows, and only while the candidate runs for less than
// its minimum.
func TestMinRuntimeProtection(t *testing.T) {
	p := policy.New(policy.Options{}, Option(), timebased.Option())
	preemptor := &policy.Pending{Priority: 100, QueuedAt: t0}
	tenMin := Protection{MinRuntime: 10 * time.Minute, Source: policy.Source{Field: "preemptMinRuntime", Value: "10m0s", Kind: "ClusterQueue", Name: "q"}}
	cases := map[string]struct {
		priority   int64
		admittedAt time.Time
		evicted    bool
		protection Protection
		scope      policy.Scope
		policy     kueue.PreemptionPolicy
		settings   timebased.Settings
		want       policy.Decision
	}{
		"lower priority inside its min-runtime is protected": {
			priority: 1, admittedAt: t0.Add(-9 * time.Minute), protection: tenMin, policy: kueue.PreemptionPolicyLowerPriority,
			want: policy.Decision{Rule: Rule, Message: "running for 9m0s, less than preemptMinRuntime 10m0s from ClusterQueue q"},
		},
		"one second before the end is still protected": {
			priority: 1, admittedAt: t0.Add(-10*time.Minute + time.Second), protection: tenMin, policy: kueue.PreemptionPolicyLowerPriority,
			want: policy.Decision{Rule: Rule, Message: "running for 9m59s, less than preemptMinRuntime 10m0s from ClusterQueue q"},
		},
		"exactly at the minimum it may be preempted": {
			priority: 1, admittedAt: t0.Add(-10 * time.Minute), protection: tenMin, policy: kueue.PreemptionPolicyLowerPriority,
			want: policy.Decision{Eligible: true, Rule: policy.RuleLowerPriority, Message: "priority 1 is lower than the preemptor's 100"},
		},
		"an evicted candidate is never protected": {
			priority: 1, admittedAt: t0.Add(-time.Minute), evicted: true, protection: tenMin, policy: kueue.PreemptionPolicyLowerPriority,
			want: policy.Decision{Eligible: true, Rule: policy.RuleLowerPriority, Message: "priority 1 is lower than the preemptor's 100"},
		},
		"a candidate not admitted yet has no running work to protect": {
			priority: 1, protection: tenMin, policy: kueue.PreemptionPolicyLowerPriority,
			want: policy.Decision{Eligible: true, Rule: policy.RuleLowerPriority, Message: "priority 1 is lower than the preemptor's 100"},
		},
		"no protection resolved": {
			priority: 1, admittedAt: t0.Add(-time.Second), policy: kueue.PreemptionPolicyLowerPriority,
			want: policy.Decision{Eligible: true, Rule: policy.RuleLowerPriority, Message: "priority 1 is lower than the preemptor's 100"},
		},
		"an ineligible candidate keeps the table's reason, not the protection": {
			priority: 500, admittedAt: t0.Add(-time.Second), protection: tenMin, policy: kueue.PreemptionPolicyLowerPriority,
			want: policy.Decision{Rule: policy.RuleNotLower, Message: "priority 500 is not lower than the preemptor's 100 and withinClusterQueue is LowerPriority"},
		},
		"reclaim scope is protected the same way": {
			priority: 1, admittedAt: t0.Add(-time.Minute), scope: policy.OtherClusterQueue, policy: kueue.PreemptionPolicyAny,
			protection: Protection{MinRuntime: time.Hour, Source: policy.Source{Field: "reclaimMinRuntime", Value: "1h0m0s", Kind: "Cohort", Name: "team-a"}},
			want:       policy.Decision{Rule: Rule, Message: "running for 1m0s, less than reclaimMinRuntime 1h0m0s from Cohort team-a"},
		},
		"same priority past minAdmitDuration but inside preemptMinRuntime stays protected": {
			priority: 100, admittedAt: t0.Add(-5 * time.Minute), protection: tenMin,
			policy: kueue.PreemptionPolicyLowerOrNewerEqualPriority, settings: timebased.Settings{MinAdmitDuration: time.Minute},
			want: policy.Decision{Rule: Rule, Message: "running for 5m0s, less than preemptMinRuntime 10m0s from ClusterQueue q"},
		},
		"same priority past both is preempted for time-sharing": {
			priority: 100, admittedAt: t0.Add(-11 * time.Minute), protection: tenMin,
			policy: kueue.PreemptionPolicyLowerOrNewerEqualPriority, settings: timebased.Settings{MinAdmitDuration: time.Minute},
			want: policy.Decision{Eligible: true, Rule: timebased.RuleExpired, Reason: timebased.Reason,
				Message: "same priority 100 and holding quota for 11m0s, longer than minAdmitDuration 1m0s"},
		},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			c := &policy.Candidate{Info: &workload.Info{}, Priority: tc.priority, QueuedAt: t0.Add(-time.Hour),
				QuotaReservedAt: tc.admittedAt, AdmittedAt: tc.admittedAt, Evicted: tc.evicted}
			q := timebased.Resolved(tc.settings)
			Into(q, tc.protection)
			in := &policy.Input{Preemptor: preemptor, Candidate: c, Scope: tc.scope, Policy: tc.policy, Queue: q, Now: t0}
			if diff := cmp.Diff(tc.want, p.Explain(in)); diff != "" {
				t.Errorf("Explain (-want +got):\n%s", diff)
			}
			want := tc.want
			want.Message = ""
			if diff := cmp.Diff(want, p.Decide(in)); diff != "" {
				t.Errorf("Decide (-want +got):\n%s", diff)
			}
		})
	}
}

var t0 = time.Date(2026, 1, 1, 12, 0, 0, 0, time.UTC)

// TestChanges pins the edge of a min-runtime: its last instant, counted from admission.
func TestChanges(t *testing.T) {
	running := policy.Candidate{QuotaReservedAt: t0, Admitted: true, AdmittedAt: t0.Add(time.Second)}
	cases := map[string]struct {
		c    policy.Candidate
		s    policy.WakeSettings
		want []policy.Change
	}{
		"a min-runtime ends at its last instant, counted from admission": {
			c: running, s: policy.WakeSettings{Lengths: []time.Duration{time.Minute, time.Hour}},
			want: []policy.Change{{At: t0.Add(time.Second + time.Minute)}, {At: t0.Add(time.Second + time.Hour)}},
		},
		"an evicted workload has no protection to end": {
			c: policy.Candidate{QuotaReservedAt: t0, Admitted: true, AdmittedAt: t0, Evicted: true},
			s: policy.WakeSettings{Lengths: []time.Duration{time.Minute}},
		},
		"not started by the runtime clock: no min-runtime end known": {
			c: policy.Candidate{QuotaReservedAt: t0, Admitted: true, AdmittedAt: t0, NotStarted: true},
			s: policy.WakeSettings{Lengths: []time.Duration{time.Minute}},
		},
		"min-runtime off": {
			c: running, s: policy.WakeSettings{Lengths: []time.Duration{time.Minute}, Enabled: func(f policy.Feature) bool { return f != Feature }},
		},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			tc.s.Units = policy.Table{Unit()}
			got := policy.Changes(&tc.c, tc.s)
			if diff := cmp.Diff(tc.want, got, cmp.Comparer(time.Time.Equal), cmpopts.EquateEmpty()); diff != "" {
				t.Errorf("Changes (-want +got):\n%s", diff)
			}
		})
	}
}

// TestLengths: every positive min-runtime that settings or defaults set ends some protection.
func TestLengths(t *testing.T) {
	cases := map[string]struct {
		s    any
		want []time.Duration
	}{
		"queue settings":         {s: Settings{Preempt: policy.Set(time.Minute), Reclaim: policy.Set(0)}, want: []time.Duration{time.Minute}},
		"defaults":               {s: Defaults{Preempt: time.Hour, Reclaim: time.Minute}, want: []time.Duration{time.Hour, time.Minute}},
		"another unit's setting": {s: time.Minute},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			if diff := cmp.Diff(tc.want, lengths(tc.s), cmpopts.EquateEmpty()); diff != "" {
				t.Errorf("lengths (-want +got):\n%s", diff)
			}
		})
	}
}
