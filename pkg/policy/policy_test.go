package policy

import (
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/utils/ptr"

	kueue "sigs.k8s.io/kueue/apis/kueue/v1beta2"
	"sigs.k8s.io/kueue/pkg/workload"
)

var t0 = time.Date(2026, 1, 1, 12, 0, 0, 0, time.UTC)

func TestDecide(t *testing.T) {
	preemptor := &Pending{Priority: 100, QueuedAt: t0}
	cases := map[string]struct {
		policy   kueue.PreemptionPolicy
		opts     Options
		priority int64
		queuedAt time.Time
		want     Decision
	}{
		"Never refuses even a lower priority": {
			policy: kueue.PreemptionPolicyNever, priority: 1,
			want: Decision{Rule: RuleNever, Message: "withinClusterQueue is Never"},
		},
		"empty policy counts as Never": {
			priority: 1,
			want:     Decision{Rule: RuleNever, Message: "withinClusterQueue is Never"},
		},
		"Any takes a higher priority": {
			policy: kueue.PreemptionPolicyAny, priority: 500,
			want: Decision{Eligible: true, Rule: RuleAny, Message: "withinClusterQueue is Any"},
		},
		"LowerPriority takes a lower priority": {
			policy: kueue.PreemptionPolicyLowerPriority, priority: 99,
			want: Decision{Eligible: true, Rule: RuleLowerPriority, Message: "priority 99 is lower than the preemptor's 100"},
		},
		"LowerPriority refuses the same priority even if newer": {
			policy: kueue.PreemptionPolicyLowerPriority, priority: 100, queuedAt: t0.Add(time.Hour),
			want: Decision{Rule: RuleNotLower, Message: "priority 100 is not lower than the preemptor's 100 and withinClusterQueue is LowerPriority"},
		},
		"LowerOrNewerEqualPriority takes a newer same-priority workload": {
			policy: kueue.PreemptionPolicyLowerOrNewerEqualPriority, priority: 100, queuedAt: t0.Add(time.Second),
			want: Decision{Eligible: true, Rule: RuleNewerEqualPriority, Message: "same priority 100 and queued after the preemptor"},
		},
		"LowerOrNewerEqualPriority refuses an older same-priority workload": {
			policy: kueue.PreemptionPolicyLowerOrNewerEqualPriority, priority: 100, queuedAt: t0.Add(-time.Second),
			want: Decision{Rule: RuleNotLower, Message: "priority 100 is not lower than the preemptor's 100 and withinClusterQueue is LowerOrNewerEqualPriority"},
		},
		"LowerOrNewerEqualPriority refuses one queued at the same instant": {
			policy: kueue.PreemptionPolicyLowerOrNewerEqualPriority, priority: 100, queuedAt: t0,
			want: Decision{Rule: RuleNotLower, Message: "priority 100 is not lower than the preemptor's 100 and withinClusterQueue is LowerOrNewerEqualPriority"},
		},
		"timestamp buffer: newer but inside the buffer is refused": {
			policy: kueue.PreemptionPolicyLowerOrNewerEqualPriority, opts: Options{TimestampBuffer: 5 * time.Minute},
			priority: 100, queuedAt: t0.Add(5 * time.Minute),
			want: Decision{Rule: RuleNotLower, Message: "priority 100 is not lower than the preemptor's 100 and withinClusterQueue is LowerOrNewerEqualPriority"},
		},
		"timestamp buffer: newer beyond the buffer is taken": {
			policy: kueue.PreemptionPolicyLowerOrNewerEqualPriority, opts: Options{TimestampBuffer: 5 * time.Minute},
			priority: 100, queuedAt: t0.Add(5*time.Minute + time.Nanosecond),
			want: Decision{Eligible: true, Rule: RuleNewerEqualPriority, Message: "same priority 100 and queued after the preemptor"},
		},
		"LowerOrNewerEqualPriority refuses a higher priority even if newer": {
			policy: kueue.PreemptionPolicyLowerOrNewerEqualPriority, priority: 101, queuedAt: t0.Add(time.Hour),
			want: Decision{Rule: RuleNotLower, Message: "priority 101 is not lower than the preemptor's 100 and withinClusterQueue is LowerOrNewerEqualPriority"},
		},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			in := &Input{
				Preemptor: preemptor,
				Candidate: &Candidate{Priority: tc.priority, QueuedAt: tc.queuedAt},
				Scope:     SameClusterQueue,
				Policy:    tc.policy,
				Now:       t0,
			}
			if diff := cmp.Diff(tc.want, New(tc.opts).Explain(in)); diff != "" {
				t.Errorf("Explain (-want +got):\n%s", diff)
			}
			plain := tc.want
			plain.Message = ""
			if diff := cmp.Diff(plain, New(tc.opts).Decide(in)); diff != "" {
				t.Errorf("Decide (-want +got):\n%s", diff)
			}
		})
	}
}

func TestExtensionRules(t *testing.T) {
	protect := Rule{
		Name: "Protected", When: func(in *Input) bool { return in.Candidate.Priority == 7 },
		Why: func(*Input) string { return "protected" },
	}
	allowOld := Rule{
		Name: "OldEnough", Eligible: true, When: func(in *Input) bool { return in.Now.Sub(in.Candidate.QuotaReservedAt) > time.Hour },
		Why: func(*Input) string { return "ran long enough" },
	}
	tolerated := Rule{
		Name: "Tolerated", When: func(in *Input) bool { return in.Candidate.Priority == 8 },
		Why: func(*Input) string { return "tolerates it" },
	}
	p := New(Options{}, WithRulesFirst(protect), WithRulesBefore(RuleNotLower, allowOld), WithProtections(tolerated))
	cases := map[string]struct {
		policy    kueue.PreemptionPolicy
		candidate Candidate
		wantRule  string
		eligible  bool
		// protects: the refusal is a protection of an eligible candidate (Policy.Protects).
		protects bool
	}{
		"a protection vetoes what the table finds eligible, and says it protects": {
			policy: kueue.PreemptionPolicyLowerPriority, candidate: Candidate{Priority: 8}, wantRule: "Tolerated", protects: true,
		},
		"a protection does not apply where the table refuses": {
			policy: kueue.PreemptionPolicyNever, candidate: Candidate{Priority: 8}, wantRule: RuleNever,
		},
		"a refusal of the table is not a protection": {
			policy: kueue.PreemptionPolicyLowerPriority, candidate: Candidate{Priority: 101, QuotaReservedAt: t0}, wantRule: RuleNotLower,
		},
		"a protection vetoes Any": {
			policy: kueue.PreemptionPolicyAny, candidate: Candidate{Priority: 7}, wantRule: "Protected",
		},
		"standard rules still come before an inserted one": {
			policy: kueue.PreemptionPolicyLowerPriority, candidate: Candidate{Priority: 1, QuotaReservedAt: t0.Add(-2 * time.Hour)},
			wantRule: RuleLowerPriority, eligible: true,
		},
		"an inserted rule decides where the standard ones would refuse": {
			policy: kueue.PreemptionPolicyLowerPriority, candidate: Candidate{Priority: 100, QuotaReservedAt: t0.Add(-2 * time.Hour)},
			wantRule: "OldEnough", eligible: true,
		},
		"Never still wins over an inserted rule": {
			policy: kueue.PreemptionPolicyNever, candidate: Candidate{Priority: 100, QuotaReservedAt: t0.Add(-2 * time.Hour)},
			wantRule: RuleNever,
		},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			d := p.Decide(&Input{Preemptor: &Pending{Priority: 100, QueuedAt: t0}, Candidate: &tc.candidate, Policy: tc.policy, Now: t0})
			if d.Rule != tc.wantRule || d.Eligible != tc.eligible || p.Protects(d.Rule) != tc.protects {
				t.Errorf("got rule %s eligible=%t protects=%t, want %s eligible=%t protects=%t", d.Rule, d.Eligible, p.Protects(d.Rule), tc.wantRule, tc.eligible, tc.protects)
			}
		})
	}
}

func TestCompare(t *testing.T) {
	ctx := &OrderContext{ClusterQueue: "cq", Now: t0}
	mk := func(uid, cq, lq string, prio int64, reserved time.Time, evicted bool, lqUsage *float64) *Candidate {
		return &Candidate{
			Info: &workload.Info{
				Obj:               &kueue.Workload{ObjectMeta: metav1.ObjectMeta{UID: types.UID(uid)}, Spec: kueue.WorkloadSpec{QueueName: kueue.LocalQueueName(lq)}},
				ClusterQueue:      kueue.ClusterQueueReference(cq),
				LocalQueueFSUsage: lqUsage,
			},
			Priority: prio, QuotaReservedAt: reserved, Evicted: evicted,
		}
	}
	cases := map[string]struct {
		opts    Options
		a, b    *Candidate
		want    int
		wantKey string
	}{
		"evicted before running": {
			a: mk("a", "cq", "lq", 100, t0, true, nil), b: mk("b", "other", "lq", 0, t0, false, nil), want: -1,
		},
		"other ClusterQueues before the preemptor's": {
			a: mk("a", "cq", "lq", 0, t0, false, nil), b: mk("b", "other", "lq", 100, t0, false, nil), want: 1,
		},
		"lower priority first": {
			a: mk("a", "cq", "lq", 1, t0, false, nil), b: mk("b", "cq", "lq", 2, t0.Add(time.Hour), false, nil), want: -1,
		},
		"most recently reserved first": {
			a: mk("a", "cq", "lq", 1, t0.Add(-time.Hour), false, nil), b: mk("b", "cq", "lq", 1, t0.Add(-time.Minute), false, nil), want: 1,
		},
		"not reserved counts as reserved now": {
			a: mk("a", "cq", "lq", 1, time.Time{}, false, nil), b: mk("b", "cq", "lq", 1, t0.Add(-time.Minute), false, nil), want: -1,
		},
		"UID breaks ties": {
			a: mk("b", "cq", "lq", 1, t0, false, nil), b: mk("a", "cq", "lq", 1, t0, false, nil), want: 1,
		},
		"busier LocalQueue first when admission fair sharing is on": {
			opts: Options{LocalQueueFairSharing: true},
			a:    mk("a", "cq", "lq1", 5, t0, false, ptr.To(0.2)), b: mk("b", "cq", "lq2", 1, t0, false, ptr.To(0.7)), want: 1,
		},
		"LocalQueue usage ignored when off": {
			a: mk("a", "cq", "lq1", 5, t0, false, ptr.To(0.2)), b: mk("b", "cq", "lq2", 1, t0, false, ptr.To(0.7)), want: 1,
		},
		"LocalQueue usage ignored within one LocalQueue": {
			opts: Options{LocalQueueFairSharing: true},
			a:    mk("a", "cq", "lq", 1, t0, false, ptr.To(0.2)), b: mk("b", "cq", "lq", 5, t0, false, ptr.To(0.7)), want: -1,
		},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			p := New(tc.opts)
			if got := sign(p.Compare(ctx, tc.a, tc.b)); got != tc.want {
				t.Errorf("Compare(a, b) = %d, want %d", got, tc.want)
			}
			if got := sign(p.Compare(ctx, tc.b, tc.a)); got != -tc.want {
				t.Errorf("Compare(b, a) = %d, want %d", got, -tc.want)
			}
		})
	}
}

func sign(x int) int {
	switch {
	case x < 0:
		return -1
	case x > 0:
		return 1
	}
	return 0
}
