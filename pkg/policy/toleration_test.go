package policy

import (
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	kueue "sigs.k8s.io/kueue/apis/kueue/v1beta2"
	"sigs.k8s.io/kueue/pkg/workload"

	"github.com/kueue-timeshare/kueue-timeshare/apis/annotations"
)

// The seed's classes: system-critical 10000, high 9000, low 8000, and low-non-preempted(-10min),
// 8000, tolerating priorities below 10000 forever (or for 10 minutes).
func TestPreemptionToleration(t *testing.T) {
	p := New(Options{}, WithPreemptionToleration(), WithMinRuntimeProtection())
	forever := &Toleration{Toleration: annotations.Toleration{MinimumPreemptablePriority: 10000, Forever: true}, Source: "WorkloadPriorityClass low-non-preempted"}
	tenMin := &Toleration{Toleration: annotations.Toleration{MinimumPreemptablePriority: 10000, Duration: 10 * time.Minute}, Source: "PriorityClass low-non-preempted-10min"}
	none := &Toleration{Toleration: annotations.Toleration{MinimumPreemptablePriority: 8001}, Source: "WorkloadPriorityClass low"}
	cases := map[string]struct {
		preemptor  int64
		toleration *Toleration
		running    time.Duration // since admission; 0: not admitted
		evicted    bool
		scope      Scope
		protection Protection
		want       Decision
	}{
		"high cannot preempt low-non-preempted, ever": {
			preemptor: 9000, toleration: forever, running: 1000 * time.Hour,
			want: Decision{Rule: RuleToleration, Message: "WorkloadPriorityClass low-non-preempted tolerates preemption by priority 9000 (below 10000) for as long as it runs"},
		},
		"system-critical preempts low-non-preempted at once": {
			preemptor: 10000, toleration: forever, running: time.Second,
			want: Decision{Eligible: true, Rule: RuleLowerPriority, Message: "priority 8000 is lower than the preemptor's 10000"},
		},
		"high waits 10 minutes for low-non-preempted-10min": {
			preemptor: 9000, toleration: tenMin, running: 10*time.Minute - time.Second,
			want: Decision{Rule: RuleToleration, Message: "PriorityClass low-non-preempted-10min tolerates preemption by priority 9000 (below 10000) for 10m0s after admission"},
		},
		"after 10 minutes, high preempts low-non-preempted-10min": {
			preemptor: 9000, toleration: tenMin, running: 10 * time.Minute,
			want: Decision{Eligible: true, Rule: RuleLowerPriority, Message: "priority 8000 is lower than the preemptor's 9000"},
		},
		"a class without toleration seconds tolerates nothing": {
			preemptor: 9000, toleration: none, running: time.Second,
			want: Decision{Eligible: true, Rule: RuleLowerPriority, Message: "priority 8000 is lower than the preemptor's 9000"},
		},
		"no class toleration at all": {
			preemptor: 9000, running: time.Second,
			want: Decision{Eligible: true, Rule: RuleLowerPriority, Message: "priority 8000 is lower than the preemptor's 9000"},
		},
		"an evicted candidate does not tolerate": {
			preemptor: 9000, toleration: forever, running: time.Minute, evicted: true,
			want: Decision{Eligible: true, Rule: RuleLowerPriority, Message: "priority 8000 is lower than the preemptor's 9000"},
		},
		"a candidate not admitted yet does not tolerate": {
			preemptor: 9000, toleration: forever,
			want: Decision{Eligible: true, Rule: RuleLowerPriority, Message: "priority 8000 is lower than the preemptor's 9000"},
		},
		"reclaim is tolerated too": {
			preemptor: 9000, toleration: forever, running: time.Minute, scope: OtherClusterQueue,
			want: Decision{Rule: RuleToleration, Message: "WorkloadPriorityClass low-non-preempted tolerates preemption by priority 9000 (below 10000) for as long as it runs"},
		},
		"toleration comes before min-runtime when both hold": {
			preemptor: 9000, toleration: forever, running: time.Minute, protection: Protection{MinRuntime: time.Hour, Source: Source{Field: "preemptMinRuntime", Value: "1h0m0s", Kind: "ClusterQueue", Name: "q"}},
			want: Decision{Rule: RuleToleration, Message: "WorkloadPriorityClass low-non-preempted tolerates preemption by priority 9000 (below 10000) for as long as it runs"},
		},
		"min-runtime still protects once the toleration ended": {
			preemptor: 9000, toleration: tenMin, running: 20 * time.Minute, protection: Protection{MinRuntime: time.Hour, Source: Source{Field: "preemptMinRuntime", Value: "1h0m0s", Kind: "ClusterQueue", Name: "q"}},
			want: Decision{Rule: RuleMinRuntime, Message: "running for 20m0s, less than preemptMinRuntime 1h0m0s from ClusterQueue q"},
		},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			c := withFacts(Candidate{Info: &workload.Info{}, Priority: 8000, QueuedAt: t0.Add(-time.Hour), Evicted: tc.evicted}, tc.toleration)
			if tc.running > 0 {
				c.AdmittedAt, c.QuotaReservedAt = t0.Add(-tc.running), t0.Add(-tc.running)
			}
			in := &Input{Preemptor: &Pending{Priority: tc.preemptor, QueuedAt: t0}, Candidate: c, Scope: tc.scope,
				Policy: kueue.PreemptionPolicyLowerPriority, Protection: tc.protection, Now: t0}
			if diff := cmp.Diff(tc.want, p.Explain(in)); diff != "" {
				t.Errorf("Explain (-want +got):\n%s", diff)
			}
		})
	}
}
