package policy

import (
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"

	kueue "sigs.k8s.io/kueue/apis/kueue/v1beta2"
	"sigs.k8s.io/kueue/pkg/workload"
)

func TestTimeBasedEligibility(t *testing.T) {
	window := QueueSettings{MinAdmitDuration: time.Hour}
	preemptor := &Pending{Priority: 10, QueuedAt: t0}
	cases := map[string]struct {
		policy   kueue.PreemptionPolicy
		scope    Scope
		settings QueueSettings
		priority int64
		queuedAt time.Time
		reserved time.Time
		charge   time.Duration
		// waitingLonger is set on the preemptor.
		waitingLonger string
		want          Decision
	}{
		"held quota past the window": {
			policy: kueue.PreemptionPolicyLowerOrNewerEqualPriority, settings: window, priority: 10,
			queuedAt: t0.Add(-3 * time.Hour), reserved: t0.Add(-time.Hour - time.Second),
			want: Decision{Eligible: true, Rule: RuleTimeExpired, Reason: TimeBasedReason,
				Message: "same priority 10 and holding quota for 1h0m1s, longer than minAdmitDuration 1h0m0s"},
		},
		"exactly at the window is not enough": {
			policy: kueue.PreemptionPolicyLowerOrNewerEqualPriority, settings: window, priority: 10,
			queuedAt: t0.Add(-3 * time.Hour), reserved: t0.Add(-time.Hour),
			want: Decision{Rule: RuleNotLower, Message: "priority 10 is not lower than the preemptor's 10 and withinClusterQueue is LowerOrNewerEqualPriority"},
		},
		"no window set: upstream behaviour": {
			policy: kueue.PreemptionPolicyLowerOrNewerEqualPriority, priority: 10,
			queuedAt: t0.Add(-3 * time.Hour), reserved: t0.Add(-48 * time.Hour),
			want: Decision{Rule: RuleNotLower, Message: "priority 10 is not lower than the preemptor's 10 and withinClusterQueue is LowerOrNewerEqualPriority"},
		},
		"newer workloads keep upstream's rule and reason": {
			policy: kueue.PreemptionPolicyLowerOrNewerEqualPriority, settings: window, priority: 10,
			queuedAt: t0.Add(time.Minute), reserved: t0.Add(-2 * time.Hour),
			want: Decision{Eligible: true, Rule: RuleNewerEqualPriority, Message: "same priority 10 and queued after the preemptor"},
		},
		"higher priority is never taken for time": {
			policy: kueue.PreemptionPolicyLowerOrNewerEqualPriority, settings: window, priority: 11,
			queuedAt: t0.Add(-3 * time.Hour), reserved: t0.Add(-2 * time.Hour),
			want: Decision{Rule: RuleNotLower, Message: "priority 11 is not lower than the preemptor's 10 and withinClusterQueue is LowerOrNewerEqualPriority"},
		},
		"LowerPriority policy ignores the window": {
			policy: kueue.PreemptionPolicyLowerPriority, settings: window, priority: 10,
			queuedAt: t0.Add(-3 * time.Hour), reserved: t0.Add(-2 * time.Hour),
			want: Decision{Rule: RuleNotLower, Message: "priority 10 is not lower than the preemptor's 10 and withinClusterQueue is LowerPriority"},
		},
		"other ClusterQueues are out of scope": {
			policy: kueue.PreemptionPolicyLowerOrNewerEqualPriority, scope: OtherClusterQueue, settings: window, priority: 10,
			queuedAt: t0.Add(-3 * time.Hour), reserved: t0.Add(-2 * time.Hour),
			want: Decision{Rule: RuleNotLower, Message: "priority 10 is not lower than the preemptor's 10 and reclaimWithinCohort is LowerOrNewerEqualPriority"},
		},
		"without a true QuotaReserved condition the clock has not started": {
			policy: kueue.PreemptionPolicyLowerOrNewerEqualPriority, settings: window, priority: 10,
			queuedAt: t0.Add(-3 * time.Hour),
			want:     Decision{Rule: RuleNotLower, Message: "priority 10 is not lower than the preemptor's 10 and withinClusterQueue is LowerOrNewerEqualPriority"},
		},
		"another workload has the turn": {
			policy: kueue.PreemptionPolicyLowerOrNewerEqualPriority, settings: window, priority: 10, waitingLonger: "ns/earlier",
			queuedAt: t0.Add(-3 * time.Hour), reserved: t0.Add(-time.Hour - time.Second),
			want: Decision{Rule: RuleNotYourTurn, Message: "past minAdmitDuration 1h0m0s, but ns/earlier has waited longer for a turn"},
		},
		"someone else's turn does not stop upstream's rules": {
			policy: kueue.PreemptionPolicyLowerOrNewerEqualPriority, settings: window, priority: 10, waitingLonger: "ns/earlier",
			queuedAt: t0.Add(time.Minute), reserved: t0.Add(-2 * time.Hour),
			want: Decision{Eligible: true, Rule: RuleNewerEqualPriority, Message: "same priority 10 and queued after the preemptor"},
		},
		"a turn charged 20m for its Pods' overstay ends 20m early": {
			policy: kueue.PreemptionPolicyLowerOrNewerEqualPriority, settings: window, priority: 10, charge: 20 * time.Minute,
			queuedAt: t0.Add(-3 * time.Hour), reserved: t0.Add(-41 * time.Minute),
			want: Decision{Eligible: true, Rule: RuleTimeExpired, Reason: TimeBasedReason,
				Message: "same priority 10 and holding quota for 41m0s, longer than minAdmitDuration 1h0m0s less 20m0s its Pods outlived the hold after its last turn"},
		},
		"a charged turn still inside what is left of it": {
			policy: kueue.PreemptionPolicyLowerOrNewerEqualPriority, settings: window, priority: 10, charge: 20 * time.Minute,
			queuedAt: t0.Add(-3 * time.Hour), reserved: t0.Add(-40 * time.Minute),
			want: Decision{Rule: RuleNotLower, Message: "priority 10 is not lower than the preemptor's 10 and withinClusterQueue is LowerOrNewerEqualPriority"},
		},
		"a charge beyond the window takes the whole turn, no more": {
			policy: kueue.PreemptionPolicyLowerOrNewerEqualPriority, settings: window, priority: 10, charge: 5 * time.Hour,
			queuedAt: t0.Add(-3 * time.Hour), reserved: t0.Add(-time.Second),
			want: Decision{Eligible: true, Rule: RuleTimeExpired, Reason: TimeBasedReason,
				Message: "same priority 10 and holding quota for 1s, longer than minAdmitDuration 1h0m0s less 1h0m0s its Pods outlived the hold after its last turn"},
		},
		"lower priority keeps upstream's rule": {
			policy: kueue.PreemptionPolicyLowerOrNewerEqualPriority, settings: window, priority: 9, reserved: t0.Add(-2 * time.Hour),
			want: Decision{Eligible: true, Rule: RuleLowerPriority, Message: "priority 9 is lower than the preemptor's 10"},
		},
	}
	p := New(Options{}, WithTimeBasedPreemption())
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			pre := *preemptor
			pre.WaitingLonger = tc.waitingLonger
			in := &Input{Preemptor: &pre, Candidate: &Candidate{Priority: tc.priority, QueuedAt: tc.queuedAt, QuotaReservedAt: tc.reserved, TurnCharge: tc.charge},
				Scope: tc.scope, Policy: tc.policy, Settings: tc.settings, Now: t0}
			if diff := cmp.Diff(tc.want, p.Explain(in)); diff != "" {
				t.Errorf("Explain (-want +got):\n%s", diff)
			}
		})
	}
}

func TestTimeBasedOrder(t *testing.T) {
	ctx := &OrderContext{ClusterQueue: "cq", Settings: QueueSettings{MinAdmitDuration: time.Hour}, Now: t0}
	mk := func(uid, cq string, prio int64, reserved time.Duration) *Candidate {
		return &Candidate{
			Info:     &workload.Info{Obj: &kueue.Workload{ObjectMeta: metav1.ObjectMeta{UID: types.UID(uid)}}, ClusterQueue: kueue.ClusterQueueReference(cq)},
			Priority: prio, QuotaReservedAt: t0.Add(-reserved),
		}
	}
	p := New(Options{}, WithTimeBasedPreemption())
	cases := map[string]struct {
		a, b *Candidate
		want int
	}{
		"lower priority before an expired same-priority one": {a: mk("a", "cq", 5, time.Minute), b: mk("b", "cq", 10, 5*time.Hour), want: -1},
		"expired before not expired":                         {a: mk("a", "cq", 10, 2*time.Hour), b: mk("b", "cq", 10, time.Minute), want: -1},
		"among expired, longest running first":               {a: mk("a", "cq", 10, 2*time.Hour), b: mk("b", "cq", 10, 3*time.Hour), want: 1},
		"among not expired, most recently reserved first":    {a: mk("a", "cq", 10, 30*time.Minute), b: mk("b", "cq", 10, 10*time.Minute), want: 1},
		"simultaneous expiry is broken by UID":               {a: mk("b", "cq", 10, 2*time.Hour), b: mk("a", "cq", 10, 2*time.Hour), want: 1},
		"other queues keep upstream's order":                 {a: mk("a", "other", 10, 2*time.Hour), b: mk("b", "other", 10, time.Minute), want: 1},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			if got := sign(p.Compare(ctx, tc.a, tc.b)); got != tc.want {
				t.Errorf("Compare(a, b) = %d, want %d", got, tc.want)
			}
			if got := sign(p.Compare(ctx, tc.b, tc.a)); got != -tc.want {
				t.Errorf("Compare(b, a) = %d, want %d", got, -tc.want)
			}
		})
	}
}

// The charge is kept in the manager's TurnCharge condition: only a True one with a charge counts.
func TestTurnChargeOf(t *testing.T) {
	cases := map[string]struct {
		conds []metav1.Condition
		want  time.Duration
	}{
		"none": {},
		"owed": {conds: []metav1.Condition{{Type: TurnChargeCondition, Status: metav1.ConditionTrue, Reason: TurnChargeOwed, Message: TurnChargeMessage(2*time.Minute+400*time.Millisecond, time.Minute)}},
			want: 2 * time.Minute},
		"spent":                      {conds: []metav1.Condition{{Type: TurnChargeCondition, Status: metav1.ConditionFalse, Reason: TurnChargeSpent, Message: "The turn that ended at this preemption was shorter by 2m0s"}}},
		"a message without a charge": {conds: []metav1.Condition{{Type: TurnChargeCondition, Status: metav1.ConditionTrue, Reason: TurnChargeOwed, Message: "its next turn is shorter by a lot"}}},
		"a negative charge":          {conds: []metav1.Condition{{Type: TurnChargeCondition, Status: metav1.ConditionTrue, Reason: TurnChargeOwed, Message: "its next turn is shorter by -5m"}}},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			wl := &kueue.Workload{Status: kueue.WorkloadStatus{Conditions: tc.conds}}
			if got := TurnChargeOf(wl); got != tc.want {
				t.Errorf("TurnChargeOf = %s, want %s", got, tc.want)
			}
			if got := CandidateOf(wl, RuntimeClockAdmitted).TurnCharge; got != tc.want {
				t.Errorf("CandidateOf(...).TurnCharge = %s, want %s", got, tc.want)
			}
		})
	}
}

// The turn order the preemptor and the admission estimate share.
func TestTurnPlaceCompare(t *testing.T) {
	at := t0
	cases := map[string]struct {
		a, b TurnPlace
		want int
	}{
		"waited longer goes first":                 {a: TurnPlace{At: at, UID: "b"}, b: TurnPlace{At: at.Add(time.Second), UID: "a"}, want: -1},
		"same second: the one that left goes last": {a: TurnPlace{At: at, Left: true, UID: "a"}, b: TurnPlace{At: at, UID: "b"}, want: 1},
		"same second, both joined: smaller UID":    {a: TurnPlace{At: at, UID: "a"}, b: TurnPlace{At: at, UID: "b"}, want: -1},
		"same second, both left: smaller UID":      {a: TurnPlace{At: at, Left: true, UID: "b"}, b: TurnPlace{At: at, Left: true, UID: "a"}, want: 1},
		"the same place":                           {a: TurnPlace{At: at, UID: "a"}, b: TurnPlace{At: at, UID: "a"}, want: 0},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			if got := tc.a.Compare(tc.b); got != tc.want {
				t.Errorf("Compare = %d, want %d", got, tc.want)
			}
			if got := tc.b.Compare(tc.a); got != -tc.want {
				t.Errorf("reversed Compare = %d, want %d", got, -tc.want)
			}
		})
	}
}
