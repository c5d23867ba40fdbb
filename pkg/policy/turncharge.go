package policy

import (
	"fmt"
	"strings"
	"time"

	apimeta "k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	kueue "sigs.k8s.io/kueue/apis/kueue/v1beta2"
)

// TurnChargeCondition is the Workload condition by which the manager charges a workload's next
// turn with the time its Pods kept running past the longest hold after a turn
// (timeshare.maxHandoverHold): True while the charge waits for that turn, False once the turn it
// shortened is over. A tenant's grace period may keep its Pods running, but not for free. The
// scheduler's drain writes it; the features that count turns read it (Candidate.TurnCharge).
const TurnChargeCondition = "kueue-timeshare.io/TurnCharge"

// Reasons of the TurnCharge condition.
const (
	TurnChargeOwed  = "PodsOutlivedHold"
	TurnChargeSpent = "ChargedToTurn"
)

// turnChargeMark precedes the charge in the condition's message, which is where it is kept: the
// status is the manager's, and the message says it in words too.
const turnChargeMark = "its next turn is shorter by "

// TurnChargeMessage is the message of an owed charge: the Pods outlived the hold (bound) by
// overstay.
func TurnChargeMessage(overstay, bound time.Duration) string {
	overstay = overstay.Round(time.Second)
	return fmt.Sprintf("Its Pods ran %s past the longest hold the manager allows after a preemption (maxHandoverHold %s), while another workload had its quota; %s%s",
		overstay, bound, turnChargeMark, overstay)
}

// TurnChargeOf is the charge wl owes its current or next turn: zero unless its TurnCharge condition
// is True and says how much.
func TurnChargeOf(wl *kueue.Workload) time.Duration {
	c := apimeta.FindStatusCondition(wl.Status.Conditions, TurnChargeCondition)
	if c == nil || c.Status != metav1.ConditionTrue {
		return 0
	}
	_, after, ok := strings.Cut(c.Message, turnChargeMark)
	if !ok {
		return 0
	}
	d, err := time.ParseDuration(after)
	if err != nil || d < 0 {
		return 0
	}
	return d
}
