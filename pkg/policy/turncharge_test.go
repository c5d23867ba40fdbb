package policy

import (
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	kueue "sigs.k8s.io/kueue/apis/kueue/v1beta2"
)

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
