package policy

import (
	"testing"
	"time"

	"k8s.io/apimachinery/pkg/types"

	kueue "sigs.k8s.io/kueue/apis/kueue/v1beta2"
	"sigs.k8s.io/kueue/pkg/workload"

	"github.com/kueue-timeshare/kueue-timeshare/apis/annotations"
)

// fuzzCandidate builds a candidate from fuzzed facts; seconds are relative to t0.
func fuzzCandidate(uid string, cq bool, prio int64, queued, reserved, admitted int64, evicted bool, tolMin int64, tolSecs int64, expected int64) *Candidate {
	info := &workload.Info{Obj: &kueue.Workload{}, ClusterQueue: "other"}
	info.Obj.UID = types.UID(uid)
	if cq {
		info.ClusterQueue = "cq"
	}
	c := &Candidate{Info: info, Priority: prio % 1000, QueuedAt: t0.Add(time.Duration(queued%100000) * time.Second), Evicted: evicted}
	if reserved%3 != 0 {
		c.QuotaReservedAt = t0.Add(-time.Duration(reserved%100000) * time.Second)
	}
	if admitted%3 != 0 {
		c.Admitted, c.AdmittedAt = true, t0.Add(-time.Duration(admitted%100000)*time.Second)
	}
	if tolSecs != 0 {
		t := annotations.Toleration{MinimumPreemptablePriority: tolMin % 1000}
		if tolSecs < 0 {
			t.Forever = true
		} else {
			t.Duration = time.Duration(tolSecs%100000) * time.Second
		}
		toleration.Set(c, &Toleration{Toleration: t, Source: "class"})
	}
	if expected != 0 {
		expectedRuntime.Set(c, &annotations.ExpectedRuntimeSettings{Expected: time.Duration(expected%100000+1) * time.Second})
	}
	return c
}

var fuzzPolicies = []kueue.PreemptionPolicy{kueue.PreemptionPolicyNever, kueue.PreemptionPolicyLowerPriority,
	kueue.PreemptionPolicyLowerOrNewerEqualPriority, kueue.PreemptionPolicyAny, ""}

// FuzzVictimPolicy checks the invariants of the full policy (every feature on) on arbitrary facts:
// decisions are deterministic, a candidate inside its min-runtime or tolerating the preemptor is
// never eligible, an eligible decision names its rule, and Explain agrees with Decide.
func FuzzVictimPolicy(f *testing.F) {
	f.Add(int64(100), int64(10), int64(5), int64(600), int64(300), false, int64(0), int64(0), int64(0), uint8(1), true, int64(3600), int64(1800))
	f.Add(int64(100), int64(100), int64(-5), int64(7200), int64(7200), false, int64(10000), int64(-1), int64(3600), uint8(2), true, int64(60), int64(0))
	f.Add(int64(5), int64(500), int64(0), int64(0), int64(0), true, int64(0), int64(600), int64(1), uint8(3), false, int64(0), int64(600))
	p := New(Options{TimestampBuffer: 5 * time.Minute}, WithTimeBasedPreemption(), WithMinRuntimeProtection(), WithPreemptionToleration(), WithExpectedRuntimeRequeue())
	f.Fuzz(func(t *testing.T, preemptorPrio, prio, queued, reserved, admitted int64, evicted bool, tolMin, tolSecs, expected int64,
		policyIdx uint8, sameCQ bool, minAdmit, minRuntime int64) {
		c := fuzzCandidate("a", sameCQ, prio, queued, reserved, admitted, evicted, tolMin, tolSecs, expected)
		scope := OtherClusterQueue
		if sameCQ {
			scope = SameClusterQueue
		}
		in := &Input{
			Preemptor: &Pending{ClusterQueue: "cq", Priority: preemptorPrio % 1000, QueuedAt: t0},
			Candidate: c, Scope: scope, Policy: fuzzPolicies[int(policyIdx)%len(fuzzPolicies)],
			Settings:   QueueSettings{MinAdmitDuration: time.Duration(abs(minAdmit)%100000) * time.Second},
			Protection: Protection{MinRuntime: time.Duration(abs(minRuntime)%100000) * time.Second, Source: Source{Note: "test"}},
			Now:        t0,
		}
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
		if d.Eligible && Protected(c, in.Protection, in.Now) {
			t.Fatalf("a candidate inside its min-runtime was made eligible by %s", d.Rule)
		}
		if d.Eligible && Tolerated(c, in.Preemptor.Priority, in.Now) {
			t.Fatalf("a candidate tolerating the preemptor was made eligible by %s", d.Rule)
		}
		if d.Eligible && in.Policy != kueue.PreemptionPolicyAny && in.Policy != kueue.PreemptionPolicyLowerPriority &&
			in.Policy != kueue.PreemptionPolicyLowerOrNewerEqualPriority {
			t.Fatalf("policy %q allowed preemption by %s", in.Policy, d.Rule)
		}
	})
}

// FuzzOrdering checks that the candidate order is a strict weak order (irreflexive, antisymmetric,
// transitive) on arbitrary triples, so sorting is well defined and deterministic.
func FuzzOrdering(f *testing.F) {
	f.Add(int64(1), int64(10), int64(5), int64(2), int64(10), int64(6), int64(3), int64(10), int64(6), true, false, true, int64(600), false)
	f.Add(int64(5), int64(0), int64(0), int64(5), int64(0), int64(0), int64(5), int64(0), int64(0), false, false, false, int64(0), true)
	policies := map[bool]*Policy{
		false: New(Options{}, WithTimeBasedPreemption()),
		true:  New(Options{LocalQueueFairSharing: true}, WithTimeBasedPreemption()),
	}
	{
		f.Fuzz(func(t *testing.T, pa, ra, qa, pb, rb, qb, pc, rc, qc int64, ca, cb, cc bool, window int64, fair bool) {
			p := policies[fair]
			a := fuzzCandidate("a", ca, pa, qa, ra, ra, false, 0, 0, 0)
			b := fuzzCandidate("b", cb, pb, qb, rb, rb, false, 0, 0, 0)
			c := fuzzCandidate("c", cc, pc, qc, rc, rc, false, 0, 0, 0)
			ctx := &OrderContext{ClusterQueue: "cq", Settings: QueueSettings{MinAdmitDuration: time.Duration(abs(window)%100000) * time.Second}, Now: t0}
			all := []*Candidate{a, b, c}
			for _, x := range all {
				if p.Compare(ctx, x, x) != 0 {
					t.Fatalf("%s is ordered before itself", x.Info.Obj.UID)
				}
				for _, y := range all {
					if sign(p.Compare(ctx, x, y)) != -sign(p.Compare(ctx, y, x)) {
						t.Fatalf("not antisymmetric for %s, %s", x.Info.Obj.UID, y.Info.Obj.UID)
					}
					for _, z := range all {
						if p.Compare(ctx, x, y) < 0 && p.Compare(ctx, y, z) < 0 && p.Compare(ctx, x, z) >= 0 {
							t.Fatalf("not transitive: %s < %s < %s", x.Info.Obj.UID, y.Info.Obj.UID, z.Info.Obj.UID)
						}
					}
				}
			}
		})
	}
}

func abs(v int64) int64 {
	if v < 0 {
		return -v
	}
	return v
}
