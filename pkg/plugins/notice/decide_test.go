package notice

import (
	"slices"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/google/go-cmp/cmp/cmpopts"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	kueue "sigs.k8s.io/kueue/apis/kueue/v1beta2"

	"github.com/kueue-timeshare/kueue-timeshare/apis/annotations"
	"github.com/kueue-timeshare/kueue-timeshare/pkg/plugins/timebased"
)

func TestDecide(t *testing.T) {
	start := time.Date(2026, 3, 1, 10, 0, 0, 0, time.UTC)
	n := &annotations.Notice{Start: start, Deadline: start.Add(5 * time.Minute), Reason: timebased.Reason, Preemptor: "ns/pre", PreemptorUID: "pre-uid"}
	waiting := Preemptor{Found: true, UID: "pre-uid", Active: true}
	cond := func(typ string, status metav1.ConditionStatus, reason string, at time.Time) metav1.Condition {
		return metav1.Condition{Type: typ, Status: status, Reason: reason, LastTransitionTime: metav1.NewTime(at)}
	}
	admitted := cond(kueue.WorkloadQuotaReserved, metav1.ConditionTrue, "QuotaReserved", start.Add(-time.Hour))
	// A victim carries the manager's record of n unless a case gives its own PreemptionNotice condition.
	victim := func(conds ...metav1.Condition) *kueue.Workload {
		if !slices.ContainsFunc(conds, func(c metav1.Condition) bool { return c.Type == Condition }) {
			conds = append(conds, ConditionOf(n, 0))
		}
		return &kueue.Workload{Status: kueue.WorkloadStatus{Conditions: conds}}
	}
	checkpointed := victim(admitted)
	checkpointed.Annotations = map[string]string{annotations.CheckpointDone: "true"}

	cases := map[string]struct {
		wl     *kueue.Workload
		notice *annotations.Notice
		pre    Preemptor
		now    time.Time
		want   Decision
	}{
		"no notice": {
			wl: victim(admitted), pre: waiting, now: start,
			want: Decision{Action: Nothing},
		},
		"notice runs: tell, wait for the deadline": {
			wl: victim(admitted), notice: n, pre: waiting, now: start.Add(time.Minute),
			want: Decision{Action: Tell, Wait: 4 * time.Minute},
		},
		"deadline reached: tell, due": {
			wl: victim(admitted), notice: n, pre: waiting, now: n.Deadline,
			want: Decision{Action: Tell, Due: true},
		},
		"preemptor moved outside the victim's cohort tree: withdrawn": {
			wl: victim(admitted), notice: n, pre: Preemptor{Found: true, UID: "pre-uid", Active: true, ElsewhereInTree: true}, now: start,
			want: Decision{Action: End, Outcome: Withdrawn},
		},
		"checkpoint done: due before the deadline": {
			wl: checkpointed, notice: n, pre: waiting, now: start,
			want: Decision{Action: Tell, Due: true},
		},
		"preemptor deleted: withdrawn": {
			wl: victim(admitted), notice: n, pre: Preemptor{}, now: start,
			want: Decision{Action: End, Outcome: Withdrawn},
		},
		"preemptor replaced by one of the same name: withdrawn": {
			wl: victim(admitted), notice: n, pre: Preemptor{Found: true, UID: "other", Active: true}, now: start,
			want: Decision{Action: End, Outcome: Withdrawn},
		},
		"preemptor admitted elsewhere: withdrawn": {
			wl: victim(admitted), notice: n, pre: Preemptor{Found: true, UID: "pre-uid", Active: true, QuotaReserved: true}, now: start,
			want: Decision{Action: End, Outcome: Withdrawn},
		},
		"preemptor finished: withdrawn": {
			wl: victim(admitted), notice: n, pre: Preemptor{Found: true, UID: "pre-uid", Active: true, Finished: true}, now: start,
			want: Decision{Action: End, Outcome: Withdrawn},
		},
		"preemptor deactivated: withdrawn": {
			wl: victim(admitted), notice: n, pre: Preemptor{Found: true, UID: "pre-uid"}, now: start,
			want: Decision{Action: End, Outcome: Withdrawn},
		},
		"victim finished: ended early, even with its preemptor gone": {
			wl: victim(admitted, cond(kueue.WorkloadFinished, metav1.ConditionTrue, "Succeeded", start)), notice: n, pre: Preemptor{}, now: start,
			want: Decision{Action: End, Outcome: EndedEarly},
		},
		"victim suspended by its owner: ended early": {
			wl: victim(admitted, cond(kueue.WorkloadEvicted, metav1.ConditionTrue, "Deactivated", start)), notice: n, pre: waiting, now: start,
			want: Decision{Action: End, Outcome: EndedEarly},
		},
		"victim without quota: ended early": {
			wl: victim(), notice: n, pre: waiting, now: start,
			want: Decision{Action: End, Outcome: EndedEarly},
		},
		"preempted for this notice, the preemptor's condition not seen yet: record its outcome, not counted": {
			wl: victim(admitted, cond(kueue.WorkloadEvicted, metav1.ConditionTrue, "Preempted", n.Deadline),
				cond(kueue.WorkloadPreempted, metav1.ConditionTrue, timebased.Reason, n.Deadline)),
			notice: n, pre: waiting, now: n.Deadline,
			want: Decision{Action: Record, Outcome: EvictedAtDeadline},
		},
		"preempted for another reason than the notice's: ended early": {
			wl: victim(admitted, cond(kueue.WorkloadEvicted, metav1.ConditionTrue, "Preempted", start),
				cond(kueue.WorkloadPreempted, metav1.ConditionTrue, kueue.InClusterQueueReason, start)),
			notice: n, pre: waiting, now: start,
			want: Decision{Action: End, Outcome: EndedEarly},
		},
		"evicted by the preemptor: clean only": {
			wl:     victim(cond(Condition, metav1.ConditionFalse, string(EvictedAtDeadline), n.Deadline)),
			notice: n, pre: Preemptor{Found: true, UID: "pre-uid", Active: true, QuotaReserved: true}, now: n.Deadline,
			want: Decision{Action: Clean},
		},
		"ended by this controller before a restart: clean only": {
			wl:     victim(admitted, cond(Condition, metav1.ConditionFalse, string(Withdrawn), start.Add(time.Minute))),
			notice: n, pre: Preemptor{}, now: start.Add(time.Minute),
			want: Decision{Action: Clean},
		},
		"a condition False from an earlier notice does not end a new one": {
			wl:     victim(admitted, cond(Condition, metav1.ConditionFalse, string(EndedEarly), start.Add(-time.Hour))),
			notice: n, pre: waiting, now: start,
			want: Decision{Action: Tell, Wait: 5 * time.Minute},
		},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			got := Decide(tc.wl, tc.notice, tc.pre, tc.now)
			if diff := cmp.Diff(tc.want, got, cmpopts.IgnoreFields(Decision{}, "Why")); diff != "" {
				t.Errorf("Decide (-want +got):\n%s", diff)
			}
		})
	}
}
