package timebased

import (
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/google/go-cmp/cmp/cmpopts"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"

	kueue "sigs.k8s.io/kueue/apis/kueue/v1beta2"
	"sigs.k8s.io/kueue/pkg/workload"

	"github.com/kueue-timeshare/kueue-timeshare/pkg/policy"
)

func TestTimeBasedEligibility(t *testing.T) {
	window := Settings{MinAdmitDuration: time.Hour}
	preemptor := &policy.Pending{Priority: 10, QueuedAt: t0}
	cases := map[string]struct {
		policy   kueue.PreemptionPolicy
		scope    policy.Scope
		settings Settings
		priority int64
		queuedAt time.Time
		reserved time.Time
		charge   time.Duration
		// waitingLonger is set on the preemptor.
		waitingLonger string
		want          policy.Decision
	}{
		"held quota past the window": {
			policy: kueue.PreemptionPolicyLowerOrNewerEqualPriority, settings: window, priority: 10,
			queuedAt: t0.Add(-3 * time.Hour), reserved: t0.Add(-time.Hour - time.Second),
			want: policy.Decision{Eligible: true, Rule: RuleExpired, Reason: Reason,
				Message: "same priority 10 and holding quota for 1h0m1s, longer than minAdmitDuration 1h0m0s"},
		},
		"exactly at the window is not enough": {
			policy: kueue.PreemptionPolicyLowerOrNewerEqualPriority, settings: window, priority: 10,
			queuedAt: t0.Add(-3 * time.Hour), reserved: t0.Add(-time.Hour),
			want: policy.Decision{Rule: policy.RuleNotLower, Message: "priority 10 is not lower than the preemptor's 10 and withinClusterQueue is LowerOrNewerEqualPriority"},
		},
		"no window set: upstream behaviour": {
			policy: kueue.PreemptionPolicyLowerOrNewerEqualPriority, priority: 10,
			queuedAt: t0.Add(-3 * time.Hour), reserved: t0.Add(-48 * time.Hour),
			want: policy.Decision{Rule: policy.RuleNotLower, Message: "priority 10 is not lower than the preemptor's 10 and withinClusterQueue is LowerOrNewerEqualPriority"},
		},
		"newer workloads keep upstream's rule and reason": {
			policy: kueue.PreemptionPolicyLowerOrNewerEqualPriority, settings: window, priority: 10,
			queuedAt: t0.Add(time.Minute), reserved: t0.Add(-2 * time.Hour),
			want: policy.Decision{Eligible: true, Rule: policy.RuleNewerEqualPriority, Message: "same priority 10 and queued after the preemptor"},
		},
		"higher priority is never taken for time": {
			policy: kueue.PreemptionPolicyLowerOrNewerEqualPriority, settings: window, priority: 11,
			queuedAt: t0.Add(-3 * time.Hour), reserved: t0.Add(-2 * time.Hour),
			want: policy.Decision{Rule: policy.RuleNotLower, Message: "priority 11 is not lower than the preemptor's 10 and withinClusterQueue is LowerOrNewerEqualPriority"},
		},
		"LowerPriority policy ignores the window": {
			policy: kueue.PreemptionPolicyLowerPriority, settings: window, priority: 10,
			queuedAt: t0.Add(-3 * time.Hour), reserved: t0.Add(-2 * time.Hour),
			want: policy.Decision{Rule: policy.RuleNotLower, Message: "priority 10 is not lower than the preemptor's 10 and withinClusterQueue is LowerPriority"},
		},
		"other ClusterQueues are out of scope": {
			policy: kueue.PreemptionPolicyLowerOrNewerEqualPriority, scope: policy.OtherClusterQueue, settings: window, priority: 10,
			queuedAt: t0.Add(-3 * time.Hour), reserved: t0.Add(-2 * time.Hour),
			want: policy.Decision{Rule: policy.RuleNotLower, Message: "priority 10 is not lower than the preemptor's 10 and reclaimWithinCohort is LowerOrNewerEqualPriority"},
		},
		"without a true QuotaReserved condition the clock has not started": {
			policy: kueue.PreemptionPolicyLowerOrNewerEqualPriority, settings: window, priority: 10,
			queuedAt: t0.Add(-3 * time.Hour),
			want:     policy.Decision{Rule: policy.RuleNotLower, Message: "priority 10 is not lower than the preemptor's 10 and withinClusterQueue is LowerOrNewerEqualPriority"},
		},
		"another workload has the turn": {
			policy: kueue.PreemptionPolicyLowerOrNewerEqualPriority, settings: window, priority: 10, waitingLonger: "ns/earlier",
			queuedAt: t0.Add(-3 * time.Hour), reserved: t0.Add(-time.Hour - time.Second),
			want: policy.Decision{Rule: RuleNotYourTurn, Message: "past minAdmitDuration 1h0m0s, but ns/earlier has waited longer for a turn"},
		},
		"someone else's turn does not stop upstream's rules": {
			policy: kueue.PreemptionPolicyLowerOrNewerEqualPriority, settings: window, priority: 10, waitingLonger: "ns/earlier",
			queuedAt: t0.Add(time.Minute), reserved: t0.Add(-2 * time.Hour),
			want: policy.Decision{Eligible: true, Rule: policy.RuleNewerEqualPriority, Message: "same priority 10 and queued after the preemptor"},
		},
		"a turn charged 20m for its Pods' overstay ends 20m early": {
			policy: kueue.PreemptionPolicyLowerOrNewerEqualPriority, settings: window, priority: 10, charge: 20 * time.Minute,
			queuedAt: t0.Add(-3 * time.Hour), reserved: t0.Add(-41 * time.Minute),
			want: policy.Decision{Eligible: true, Rule: RuleExpired, Reason: Reason,
				Message: "same priority 10 and holding quota for 41m0s, longer than minAdmitDuration 1h0m0s less 20m0s its Pods outlived the hold after its last turn"},
		},
		"a charged turn still inside what is left of it": {
			policy: kueue.PreemptionPolicyLowerOrNewerEqualPriority, settings: window, priority: 10, charge: 20 * time.Minute,
			queuedAt: t0.Add(-3 * time.Hour), reserved: t0.Add(-40 * time.Minute),
			want: policy.Decision{Rule: policy.RuleNotLower, Message: "priority 10 is not lower than the preemptor's 10 and withinClusterQueue is LowerOrNewerEqualPriority"},
		},
		"a charge beyond the window takes the whole turn, no more": {
			policy: kueue.PreemptionPolicyLowerOrNewerEqualPriority, settings: window, priority: 10, charge: 5 * time.Hour,
			queuedAt: t0.Add(-3 * time.Hour), reserved: t0.Add(-time.Second),
			want: policy.Decision{Eligible: true, Rule: RuleExpired, Reason: Reason,
				Message: "same priority 10 and holding quota for 1s, longer than minAdmitDuration 1h0m0s less 1h0m0s its Pods outlived the hold after its last turn"},
		},
		"lower priority keeps upstream's rule": {
			policy: kueue.PreemptionPolicyLowerOrNewerEqualPriority, settings: window, priority: 9, reserved: t0.Add(-2 * time.Hour),
			want: policy.Decision{Eligible: true, Rule: policy.RuleLowerPriority, Message: "priority 9 is lower than the preemptor's 10"},
		},
	}
	p := policy.New(policy.Options{}, Option())
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			pre := *preemptor
			SetWaitingLonger(&pre, tc.waitingLonger)
			in := &policy.Input{Preemptor: &pre, Candidate: &policy.Candidate{Priority: tc.priority, QueuedAt: tc.queuedAt, QuotaReservedAt: tc.reserved, TurnCharge: tc.charge},
				Scope: tc.scope, Policy: tc.policy, Queue: Resolved(tc.settings), Now: t0}
			if diff := cmp.Diff(tc.want, p.Explain(in)); diff != "" {
				t.Errorf("Explain (-want +got):\n%s", diff)
			}
		})
	}
}

func TestTimeBasedOrder(t *testing.T) {
	ctx := &policy.OrderContext{ClusterQueue: "cq", Queue: Resolved(Settings{MinAdmitDuration: time.Hour}), Now: t0}
	mk := func(uid, cq string, prio int64, reserved time.Duration) *policy.Candidate {
		return &policy.Candidate{
			Info:     &workload.Info{Obj: &kueue.Workload{ObjectMeta: metav1.ObjectMeta{UID: types.UID(uid)}}, ClusterQueue: kueue.ClusterQueueReference(cq)},
			Priority: prio, QuotaReservedAt: t0.Add(-reserved),
		}
	}
	p := policy.New(policy.Options{}, Option())
	cases := map[string]struct {
		a, b *policy.Candidate
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

var t0 = time.Date(2026, 1, 1, 12, 0, 0, 0, time.UTC)

func sign(n int) int {
	switch {
	case n < 0:
		return -1
	case n > 0:
		return 1
	}
	return 0
}

// TestChanges pins the window's edge: it counts only once strictly passed.
func TestChanges(t *testing.T) {
	running := policy.Candidate{QuotaReservedAt: t0, Admitted: true, AdmittedAt: t0.Add(time.Second)}
	window := map[policy.Feature]any{Feature: Settings{MinAdmitDuration: time.Minute}}
	cases := map[string]struct {
		c    policy.Candidate
		s    policy.WakeSettings
		want []policy.Change
	}{
		"minAdmitDuration counts once strictly passed": {
			c: running, s: policy.WakeSettings{Queue: window},
			want: []policy.Change{{At: t0.Add(time.Minute), After: true}},
		},
		"an evicted workload's window still ends": {
			c:    policy.Candidate{QuotaReservedAt: t0, Admitted: true, AdmittedAt: t0, Evicted: true},
			s:    policy.WakeSettings{Queue: window},
			want: []policy.Change{{At: t0.Add(time.Minute), After: true}},
		},
		"no window": {c: running},
		"time-based preemption off": {
			c: running, s: policy.WakeSettings{Queue: window, Enabled: func(f policy.Feature) bool { return f != Feature }},
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

// TestMayChange: time-based preemption changes decisions only where some ClusterQueue sets a window.
func TestMayChange(t *testing.T) {
	set := func(f policy.Feature) bool { return f == Feature }
	for _, tc := range []struct {
		s    policy.WakeSettings
		want bool
	}{
		{s: policy.WakeSettings{}, want: false},
		{s: policy.WakeSettings{Configured: func(policy.Feature) bool { return false }}, want: false},
		{s: policy.WakeSettings{Configured: set}, want: true},
	} {
		if got := Unit().MayChange(tc.s); got != tc.want {
			t.Errorf("MayChange with configured %v = %v, want %v", tc.s.Configured != nil, got, tc.want)
		}
	}
}

// TestSettingsOf reads the window the store kept for the unit and the queue's strategy.
func TestSettingsOf(t *testing.T) {
	src := fakeSource{window: map[kueue.ClusterQueueReference]time.Duration{"turns": time.Hour}, strict: map[kueue.ClusterQueueReference]bool{"strict": true}}
	cases := map[kueue.ClusterQueueReference]Settings{
		"turns":  {MinAdmitDuration: time.Hour},
		"strict": {StrictFIFO: true},
		"none":   {},
	}
	for cq, want := range cases {
		if diff := cmp.Diff(want, SettingsOf(src, cq)); diff != "" {
			t.Errorf("%s: settings (-want +got):\n%s", cq, diff)
		}
	}
	if got := settingsOf(struct{}{}); got != nil {
		t.Errorf("settings read off a Cohort's extension = %v, want none", got)
	}
}

type fakeSource struct {
	window map[kueue.ClusterQueueReference]time.Duration
	strict map[kueue.ClusterQueueReference]bool
}

func (f fakeSource) QueueSettingsOf(feat policy.Feature, cq kueue.ClusterQueueReference) any {
	if d, ok := f.window[cq]; ok && feat == Feature {
		return Settings{MinAdmitDuration: d}
	}
	return nil
}

func (f fakeSource) StrictFIFO(cq kueue.ClusterQueueReference) bool { return f.strict[cq] }
