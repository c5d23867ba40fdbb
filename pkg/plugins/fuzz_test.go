package plugins

import (
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"

	kueue "sigs.k8s.io/kueue/apis/kueue/v1beta2"
	"sigs.k8s.io/kueue/pkg/workload"

	"github.com/kueue-timeshare/kueue-timeshare/apis/annotations"
	"github.com/kueue-timeshare/kueue-timeshare/pkg/plugins/minruntime"
	"github.com/kueue-timeshare/kueue-timeshare/pkg/plugins/timebased"
	"github.com/kueue-timeshare/kueue-timeshare/pkg/plugins/toleration"
	"github.com/kueue-timeshare/kueue-timeshare/pkg/policy"
)

// fuzzCandidate builds a candidate from fuzzed facts, seconds relative to t0: its toleration and
// expected runtime are read by the units from its Workload and priority class, as the preemptor
// reads them.
func fuzzCandidate(t0 time.Time, cq bool, prio int64, queued, reserved, admitted int64, evicted bool, tolMin int64, tolSecs int64, expected int64) *policy.Candidate {
	wl := &kueue.Workload{ObjectMeta: metav1.ObjectMeta{UID: types.UID("a"), Annotations: map[string]string{}}}
	info := &workload.Info{Obj: wl, ClusterQueue: "other"}
	if cq {
		info.ClusterQueue = "cq"
	}
	c := &policy.Candidate{Info: info, Priority: prio % 1000, QueuedAt: t0.Add(time.Duration(queued%100000) * time.Second), Evicted: evicted}
	if reserved%3 != 0 {
		c.QuotaReservedAt = t0.Add(-time.Duration(reserved%100000) * time.Second)
	}
	if admitted%3 != 0 {
		c.Admitted, c.AdmittedAt = true, t0.Add(-time.Duration(admitted%100000)*time.Second)
	}
	var src policy.Sources
	if tolSecs != 0 {
		t := annotations.Toleration{MinimumPreemptablePriority: tolMin % 1000}
		if tolSecs < 0 {
			t.Forever = true
		} else {
			t.Duration = time.Duration(tolSecs%100000) * time.Second
		}
		wl.Spec.PriorityClassRef = &kueue.PriorityClassRef{Name: "class"}
		src = append(src, classTolerations{"class": {Toleration: t, Source: "class"}})
	}
	if expected != 0 {
		wl.Annotations[annotations.ExpectedRuntime] = (time.Duration(expected%100000+1) * time.Second).String()
	}
	Units().ReadFacts(c, wl, src, nil, false)
	return c
}

var fuzzPolicies = []kueue.PreemptionPolicy{kueue.PreemptionPolicyNever, kueue.PreemptionPolicyLowerPriority,
	kueue.PreemptionPolicyLowerOrNewerEqualPriority, kueue.PreemptionPolicyAny, ""}

// FuzzVictimPolicy checks the invariants of the full policy (every feature of the registry on) on
// arbitrary facts: decisions are deterministic, a candidate inside its min-runtime or tolerating
// the preemptor is never eligible, an eligible decision names its rule, and Explain agrees with
// Decide.
func FuzzVictimPolicy(f *testing.F) {
	t0 := time.Date(2026, 1, 1, 12, 0, 0, 0, time.UTC)
	f.Add(int64(100), int64(10), int64(5), int64(600), int64(300), false, int64(0), int64(0), int64(0), uint8(1), true, int64(3600), int64(1800))
	f.Add(int64(100), int64(100), int64(-5), int64(7200), int64(7200), false, int64(10000), int64(-1), int64(3600), uint8(2), true, int64(60), int64(0))
	f.Add(int64(5), int64(500), int64(0), int64(0), int64(0), true, int64(0), int64(600), int64(1), uint8(3), false, int64(0), int64(600))
	p := policy.New(policy.Options{TimestampBuffer: 5 * time.Minute}, With(Precedence()...))
	f.Fuzz(func(t *testing.T, preemptorPrio, prio, queued, reserved, admitted int64, evicted bool, tolMin, tolSecs, expected int64,
		policyIdx uint8, sameCQ bool, minAdmit, minRuntime int64) {
		c := fuzzCandidate(t0, sameCQ, prio, queued, reserved, admitted, evicted, tolMin, tolSecs, expected)
		scope := policy.OtherClusterQueue
		if sameCQ {
			scope = policy.SameClusterQueue
		}
		in := &policy.Input{
			Preemptor: &policy.Pending{ClusterQueue: "cq", Priority: preemptorPrio % 1000, QueuedAt: t0},
			Candidate: c, Scope: scope, Policy: fuzzPolicies[int(policyIdx)%len(fuzzPolicies)],
			Queue: timebased.Resolved(timebased.Settings{MinAdmitDuration: time.Duration(abs(minAdmit)%100000) * time.Second}),
			Now:   t0,
		}
		minruntime.Into(in.Queue, minruntime.Protection{MinRuntime: time.Duration(abs(minRuntime)%100000) * time.Second, Source: policy.Source{Note: "test"}})
		d := p.Decide(in)
		if again := p.Decide(in); again != d {
			t.Fatalf("not deterministic: %+v then %+v", d, again)
		}
		if x := p.Explain(in); x.Eligible != d.Eligible || x.Rule != d.Rule || x.Reason != d.Reason || x.Message == "" {
			t.Fatalf("Explain %+v disagrees with Decide %+v", x, d)
		}
		if d.Rule == "" {
			t.Fatalf("decision without a rule: %+v", d)
		}
		if d.Eligible && minruntime.Protected(c, minruntime.Of(in), in.Now) {
			t.Fatalf("a candidate inside its min-runtime was made eligible by %s", d.Rule)
		}
		if d.Eligible && toleration.Tolerated(c, in.Preemptor.Priority, in.Now) {
			t.Fatalf("a candidate tolerating the preemptor was made eligible by %s", d.Rule)
		}
		if d.Eligible && in.Policy != kueue.PreemptionPolicyAny && in.Policy != kueue.PreemptionPolicyLowerPriority &&
			in.Policy != kueue.PreemptionPolicyLowerOrNewerEqualPriority {
			t.Fatalf("policy %q allowed preemption by %s", in.Policy, d.Rule)
		}
	})
}

func abs(v int64) int64 {
	if v < 0 {
		return -v
	}
	return v
}
