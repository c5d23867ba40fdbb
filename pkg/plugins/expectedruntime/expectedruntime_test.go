package expectedruntime

import (
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	kueue "sigs.k8s.io/kueue/apis/kueue/v1beta2"
	"sigs.k8s.io/kueue/pkg/workload"

	"github.com/kueue-timeshare/kueue-timeshare/apis/annotations"
	"github.com/kueue-timeshare/kueue-timeshare/pkg/plugins/minruntime"
	"github.com/kueue-timeshare/kueue-timeshare/pkg/policy"
)

var t0 = time.Date(2026, 1, 1, 12, 0, 0, 0, time.UTC)

// withFact is c with its expected-runtime annotations er (none when nil), as read.
func withFact(c policy.Candidate, er *annotations.ExpectedRuntimeSettings) *policy.Candidate {
	if er != nil {
		fact.Set(&c, er)
	}
	return &c
}

func TestNominate(t *testing.T) {
	hour := &annotations.ExpectedRuntimeSettings{Expected: time.Hour}
	cases := map[string]struct {
		er         *annotations.ExpectedRuntimeSettings
		running    time.Duration // since admission, may be negative (clock skew)
		notRunning bool
		noStart    bool
		evicted    bool
		want       bool
		wantSkip   string
	}{
		"not opted in":                       {running: 2 * time.Hour},
		"exactly at the expected runtime":    {er: hour, running: time.Hour, want: true},
		"one second short: not yet, no skip": {er: hour, running: time.Hour - time.Second},
		"long past":                          {er: hour, running: 10 * time.Hour, want: true},
		"cooldown not over": {
			er: &annotations.ExpectedRuntimeSettings{Expected: time.Hour, NotBefore: t0.Add(time.Second)}, running: 2 * time.Hour, wantSkip: annotations.SkipCooldown,
		},
		"cooldown ends exactly now": {
			er: &annotations.ExpectedRuntimeSettings{Expected: time.Hour, NotBefore: t0}, running: 2 * time.Hour, want: true,
		},
		"invalid duration":   {er: &annotations.ExpectedRuntimeSettings{Skip: annotations.SkipInvalidDuration}, running: 2 * time.Hour, wantSkip: annotations.SkipInvalidDuration},
		"invalid not-before": {er: &annotations.ExpectedRuntimeSettings{Skip: annotations.SkipInvalidNotBefore}, running: 2 * time.Hour, wantSkip: annotations.SkipInvalidNotBefore},
		"not admitted":       {er: hour, notRunning: true, wantSkip: annotations.SkipNotRunning},
		"being evicted":      {er: hour, running: 2 * time.Hour, evicted: true, wantSkip: annotations.SkipNotRunning},
		"admitted, no time":  {er: hour, noStart: true, wantSkip: annotations.SkipMissingStart},
		"admitted in future": {er: hour, running: -time.Minute, wantSkip: annotations.SkipClockSkew},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			c := withFact(policy.Candidate{Evicted: tc.evicted, Admitted: !tc.notRunning}, tc.er)
			if !tc.notRunning && !tc.noStart {
				c.AdmittedAt = t0.Add(-tc.running)
			}
			got, skip := Nominate(c, t0)
			if got != tc.want || skip != tc.wantSkip {
				t.Errorf("Nominate = (%t, %q), want (%t, %q)", got, skip, tc.want, tc.wantSkip)
			}
		})
	}
}

// NominatedFrom is the instant Nominate turns true: not a second before, and at it.
func TestNominatedFrom(t *testing.T) {
	cases := map[string]struct {
		c    policy.Candidate
		want time.Time
	}{
		"an hour after admission": {
			c:    *withFact(policy.Candidate{Admitted: true, AdmittedAt: t0}, &annotations.ExpectedRuntimeSettings{Expected: time.Hour}),
			want: t0.Add(time.Hour),
		},
		"the cooldown ends later": {
			c:    *withFact(policy.Candidate{Admitted: true, AdmittedAt: t0}, &annotations.ExpectedRuntimeSettings{Expected: time.Hour, NotBefore: t0.Add(90 * time.Minute)}),
			want: t0.Add(90 * time.Minute),
		},
		"counted from PodsReady": {
			c:    *withFact(policy.Candidate{Admitted: true, AdmittedAt: t0, RunningSince: t0.Add(time.Minute)}, &annotations.ExpectedRuntimeSettings{Expected: time.Hour}),
			want: t0.Add(61 * time.Minute),
		},
		"Pods not ready yet: no instant": {
			c: *withFact(policy.Candidate{Admitted: true, AdmittedAt: t0, NotStarted: true}, &annotations.ExpectedRuntimeSettings{Expected: time.Hour}),
		},
		"not opted in: no instant": {c: policy.Candidate{Admitted: true, AdmittedAt: t0}},
		"invalid annotation: no instant": {
			c: *withFact(policy.Candidate{Admitted: true, AdmittedAt: t0}, &annotations.ExpectedRuntimeSettings{Skip: annotations.SkipInvalidDuration}),
		},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			got := NominatedFrom(&tc.c)
			if !got.Equal(tc.want) {
				t.Fatalf("NominatedFrom = %v, want %v", got, tc.want)
			}
			if got.IsZero() {
				return
			}
			if ok, _ := Nominate(&tc.c, got.Add(-time.Nanosecond)); ok {
				t.Errorf("nominated just before %v", got)
			}
			if ok, _ := Nominate(&tc.c, got); !ok {
				t.Errorf("not nominated at %v", got)
			}
		})
	}
}

func TestExpectedRuntimeRule(t *testing.T) {
	p := policy.New(policy.Options{}, Option(), minruntime.Option())
	past := &annotations.ExpectedRuntimeSettings{Expected: time.Hour}
	cases := map[string]struct {
		policy     kueue.PreemptionPolicy
		scope      policy.Scope
		priority   int64
		er         *annotations.ExpectedRuntimeSettings
		protection minruntime.Protection
		want       policy.Decision
	}{
		"same priority, LowerPriority policy: nominated": {
			policy: kueue.PreemptionPolicyLowerPriority, priority: 100, er: past,
			want: policy.Decision{Eligible: true, Rule: Rule, Reason: Reason, Message: "running for 2h0m0s, past its expected runtime 1h0m0s"},
		},
		"a lower priority keeps upstream's reason": {
			policy: kueue.PreemptionPolicyLowerPriority, priority: 1, er: past,
			want: policy.Decision{Eligible: true, Rule: policy.RuleLowerPriority, Message: "priority 1 is lower than the preemptor's 100"},
		},
		"higher priority than the preemptor: not for it": {
			policy: kueue.PreemptionPolicyLowerPriority, priority: 101, er: past,
			want: policy.Decision{Rule: policy.RuleNotLower, Message: "priority 101 is not lower than the preemptor's 100 and withinClusterQueue is LowerPriority"},
		},
		"Never stays Never": {
			policy: kueue.PreemptionPolicyNever, priority: 100, er: past,
			want: policy.Decision{Rule: policy.RuleNever, Message: "withinClusterQueue is Never"},
		},
		"another ClusterQueue: not for reclaim": {
			policy: kueue.PreemptionPolicyLowerPriority, scope: policy.OtherClusterQueue, priority: 100, er: past,
			want: policy.Decision{Rule: policy.RuleNotLower, Message: "priority 100 is not lower than the preemptor's 100 and reclaimWithinCohort is LowerPriority"},
		},
		"min-runtime still protects a nominated workload": {
			policy: kueue.PreemptionPolicyLowerPriority, priority: 100, er: past, protection: minruntime.Protection{MinRuntime: 3 * time.Hour, Source: policy.Source{Field: "preemptMinRuntime", Value: "3h0m0s", Kind: "ClusterQueue", Name: "q"}},
			want: policy.Decision{Rule: minruntime.Rule, Message: "running for 2h0m0s, less than preemptMinRuntime 3h0m0s from ClusterQueue q"},
		},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			c := withFact(policy.Candidate{Info: &workload.Info{}, Priority: tc.priority, QueuedAt: t0.Add(-3 * time.Hour), Admitted: true,
				AdmittedAt: t0.Add(-2 * time.Hour), QuotaReservedAt: t0.Add(-2 * time.Hour)}, tc.er)
			in := &policy.Input{Preemptor: &policy.Pending{Priority: 100, QueuedAt: t0}, Candidate: c, Scope: tc.scope, Policy: tc.policy, Queue: minruntime.Resolved(tc.protection), Now: t0}
			if diff := cmp.Diff(tc.want, p.Explain(in)); diff != "" {
				t.Errorf("Explain (-want +got):\n%s", diff)
			}
		})
	}
}
