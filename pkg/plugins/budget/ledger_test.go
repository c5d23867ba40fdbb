package budget

import (
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	kueue "sigs.k8s.io/kueue/apis/kueue/v1beta2"

	"github.com/kueue-timeshare/kueue-timeshare/pkg/plugins/timebased"
	"github.com/kueue-timeshare/kueue-timeshare/pkg/policy"
)

// TestPreemptionOf: the ledger is rebuilt from the manager-written Preempted condition only.
func TestPreemptionOf(t *testing.T) {
	t0 := time.Date(2026, 1, 1, 12, 0, 0, 0, time.UTC)
	msg := "Preempted to accommodate a workload (UID: p, JobUID: UNKNOWN) due to prioritization in the ClusterQueue; preemptor path: /org/team/a; preemptee path: /org/team/a"
	cond := func(status metav1.ConditionStatus, reason, message string) *kueue.Workload {
		w := &kueue.Workload{ObjectMeta: metav1.ObjectMeta{UID: "v", Annotations: map[string]string{"preemptee path": "/forged"}}}
		w.Status.Conditions = []metav1.Condition{{Type: kueue.WorkloadPreempted, Status: status, Reason: reason, Message: message, LastTransitionTime: metav1.NewTime(t0)}}
		return w
	}
	path := []node{{kind: "ClusterQueue", name: "a"}, {kind: "Cohort", name: "team"}, {kind: "Cohort", name: "org"}}
	cases := map[string]struct {
		wl   *kueue.Workload
		want *preemption
	}{
		"never preempted": {wl: &kueue.Workload{}},
		"preempted":       {wl: cond(metav1.ConditionTrue, kueue.InClusterQueueReason, msg), want: &preemption{uid: "v", path: path, at: t0}},
		"readmitted since: the admission's time": {wl: cond(metav1.ConditionFalse, "QuotaReserved", "Previously: "+msg),
			want: &preemption{uid: "v", path: path, at: t0}},
		"a turn": {wl: cond(metav1.ConditionTrue, timebased.Reason, msg)},
		"a turn, readmitted since": {wl: cond(metav1.ConditionFalse, "QuotaReserved",
			"Previously: Preempted to accommodate a workload due to "+policy.OwnReasonWords()[timebased.Reason].Eviction+"; preemptee path: /a")},
		"no path": {wl: cond(metav1.ConditionTrue, kueue.InClusterQueueReason, "Preempted")},
		"a reclaim by another ClusterQueue": {wl: cond(metav1.ConditionTrue, kueue.InCohortReclamationReason,
			"Preempted to accommodate a workload (UID: p, JobUID: UNKNOWN) due to reclamation within the cohort; preemptor path: /org/team/b; preemptee path: /org/team/a")},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			var got *preemption
			if p, ok := preemptionOf(tc.wl); ok {
				got = &p
			}
			if diff := cmp.Diff(tc.want, got, cmp.AllowUnexported(preemption{}, node{})); diff != "" {
				t.Errorf("(-want +got):\n%s", diff)
			}
		})
	}
}
