package toleration

import (
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/google/go-cmp/cmp/cmpopts"

	kueue "sigs.k8s.io/kueue/apis/kueue/v1beta2"
	"sigs.k8s.io/kueue/pkg/workload"

	"github.com/kueue-timeshare/kueue-timeshare/apis/annotations"
	"github.com/kueue-timeshare/kueue-timeshare/pkg/plugins/minruntime"
	"github.com/kueue-timeshare/kueue-timeshare/pkg/policy"
)

// The seed's classes: system-critical 10000, high 9000, low 8000, and low-non-preempted(-10min),
// 8000, tolerating priorities below 10000 forever (or for 10 minutes).
func TestPreemptionToleration(t *testing.T) {
	t0 := time.Date(2026, 1, 1, 12, 0, 0, 0, time.UTC)
	p := policy.New(policy.Options{}, Option(), minruntime.Option())
	forever := &Toleration{Toleration: annotations.Toleration{MinimumPreemptablePriority: 10000, Forever: true}, Source: "WorkloadPriorityClass low-non-preempted"}
	tenMin := &Toleration{Toleration: annotations.Toleration{MinimumPreemptablePriority: 10000, Duration: 10 * time.Minute}, Source: "PriorityClass low-non-preempted-10min"}
	none := &Toleration{Toleration: annotations.Toleration{MinimumPreemptablePriority: 8001}, Source: "WorkloadPriorityClass low"}
	cases := map[string]struct {
		preemptor  int64
		toleration *Toleration
		running    time.Duration // since admission; 0: not admitted
		evicted    bool
		scope      policy.Scope
		protection minruntime.Protection
		want       policy.Decision
	}{
		"high cannot preempt low-non-preempted, ever": {
			preemptor: 9000, toleration: forever, running: 1000 * time.Hour,
			want: policy.Decision{Rule: RuleTolerates, Message: "WorkloadPriorityClass low-non-preempted tolerates preemption by priority 9000 (below 10000) for as long as it runs"},
		},
		"system-critical preempts low-non-preempted at once": {
			preemptor: 10000, toleration: forever, running: time.Second,
			want: policy.Decision{Eligible: true, Rule: policy.RuleLowerPriority, Message: "priority 8000 is lower than the preemptor's 10000"},
		},
		"high waits 10 minutes for low-non-preempted-10min": {
			preemptor: 9000, toleration: tenMin, running: 10*time.Minute - time.Second,
			want: policy.Decision{Rule: RuleTolerates, Message: "PriorityClass low-non-preempted-10min tolerates preemption by priority 9000 (below 10000) for 10m0s after admission"},
		},
		"after 10 minutes, high preempts low-non-preempted-10min": {
			preemptor: 9000, toleration: tenMin, running: 10 * time.Minute,
			want: policy.Decision{Eligible: true, Rule: policy.RuleLowerPriority, Message: "priority 8000 is lower than the preemptor's 9000"},
		},
		"a class without toleration seconds tolerates nothing": {
			preemptor: 9000, toleration: none, running: time.Second,
			want: policy.Decision{Eligible: true, Rule: policy.RuleLowerPriority, Message: "priority 8000 is lower than the preemptor's 9000"},
		},
		"no class toleration at all": {
			preemptor: 9000, running: time.Second,
			want: policy.Decision{Eligible: true, Rule: policy.RuleLowerPriority, Message: "priority 8000 is lower than the preemptor's 9000"},
		},
		"an evicted candidate does not tolerate": {
			preemptor: 9000, toleration: forever, running: time.Minute, evicted: true,
			want: policy.Decision{Eligible: true, Rule: policy.RuleLowerPriority, Message: "priority 8000 is lower than the preemptor's 9000"},
		},
		"a candidate not admitted yet does not tolerate": {
			preemptor: 9000, toleration: forever,
			want: policy.Decision{Eligible: true, Rule: policy.RuleLowerPriority, Message: "priority 8000 is lower than the preemptor's 9000"},
		},
		"reclaim is tolerated too": {
			preemptor: 9000, toleration: forever, running: time.Minute, scope: policy.OtherClusterQueue,
			want: policy.Decision{Rule: RuleTolerates, Message: "WorkloadPriorityClass low-non-preempted tolerates preemption by priority 9000 (below 10000) for as long as it runs"},
		},
		"toleration comes before min-runtime when both hold": {
			preemptor: 9000, toleration: forever, running: time.Minute, protection: minruntime.Protection{MinRuntime: time.Hour, Source: policy.Source{Field: "preemptMinRuntime", Value: "1h0m0s", Kind: "ClusterQueue", Name: "q"}},
			want: policy.Decision{Rule: RuleTolerates, Message: "WorkloadPriorityClass low-non-preempted tolerates preemption by priority 9000 (below 10000) for as long as it runs"},
		},
		"min-runtime still protects once the toleration ended": {
			preemptor: 9000, toleration: tenMin, running: 20 * time.Minute, protection: minruntime.Protection{MinRuntime: time.Hour, Source: policy.Source{Field: "preemptMinRuntime", Value: "1h0m0s", Kind: "ClusterQueue", Name: "q"}},
			want: policy.Decision{Rule: minruntime.Rule, Message: "running for 20m0s, less than preemptMinRuntime 1h0m0s from ClusterQueue q"},
		},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			c := &policy.Candidate{Info: &workload.Info{}, Priority: 8000, QueuedAt: t0.Add(-time.Hour), Evicted: tc.evicted}
			fact.Set(c, tc.toleration)
			if tc.running > 0 {
				c.AdmittedAt, c.QuotaReservedAt = t0.Add(-tc.running), t0.Add(-tc.running)
			}
			in := &policy.Input{Preemptor: &policy.Pending{Priority: tc.preemptor, QueuedAt: t0}, Candidate: c, Scope: tc.scope,
				Policy: kueue.PreemptionPolicyLowerPriority, Queue: minruntime.Resolved(tc.protection), Now: t0}
			if diff := cmp.Diff(tc.want, p.Explain(in)); diff != "" {
				t.Errorf("Explain (-want +got):\n%s", diff)
			}
		})
	}
}

// TestChanges pins the toleration's interval edge.
func TestChanges(t *testing.T) {
	t0 := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	running := func(tol annotations.Toleration) policy.Candidate {
		c := policy.Candidate{Admitted: true, AdmittedAt: t0}
		fact.Set(&c, &Toleration{Toleration: tol})
		return c
	}
	cases := map[string]struct {
		c    policy.Candidate
		s    policy.WakeSettings
		want []policy.Change
	}{
		"toleration ends after its duration from admission": {
			c:    running(annotations.Toleration{Duration: time.Minute}),
			want: []policy.Change{{At: t0.Add(time.Minute)}},
		},
		"a toleration for ever never ends": {
			c: running(annotations.Toleration{Forever: true}),
		},
		"toleration off": {
			c: running(annotations.Toleration{Duration: time.Minute}),
			s: policy.WakeSettings{Enabled: func(f policy.Feature) bool { return f != Feature }},
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
