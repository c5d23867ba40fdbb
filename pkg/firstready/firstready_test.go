package firstready

import (
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	kueue "sigs.k8s.io/kueue/apis/kueue/v1beta2"

	"github.com/kueue-timeshare/kueue-timeshare/pkg/policy"
)

func TestNeeded(t *testing.T) {
	t0 := time.Date(2026, 11, 29, 12, 0, 0, 0, time.UTC)
	cond := func(typ string, status metav1.ConditionStatus, at time.Time) metav1.Condition {
		return metav1.Condition{Type: typ, Status: status, Reason: "Test", LastTransitionTime: metav1.NewTime(at)}
	}
	admitted := cond(kueue.WorkloadAdmitted, metav1.ConditionTrue, t0)
	ready := cond(kueue.WorkloadPodsReady, metav1.ConditionTrue, t0.Add(time.Minute))
	record := func(at time.Time) *metav1.Condition {
		return &metav1.Condition{Type: policy.FirstReadyCondition, Status: metav1.ConditionTrue, Reason: kueue.WorkloadPodsReady,
			Message: Message, LastTransitionTime: metav1.NewTime(at), ObservedGeneration: 3}
	}
	cases := map[string]struct {
		conds []metav1.Condition
		want  *metav1.Condition
	}{
		"ready since admission, no record: recorded at readiness": {
			conds: []metav1.Condition{admitted, ready},
			want:  record(t0.Add(time.Minute)),
		},
		"a record of this admission stays, though readiness moved on": {
			conds: []metav1.Condition{admitted, *record(t0.Add(time.Minute)), cond(kueue.WorkloadPodsReady, metav1.ConditionTrue, t0.Add(25*time.Minute))},
		},
		"a record of an earlier admission is replaced": {
			conds: []metav1.Condition{admitted, *record(t0.Add(-time.Hour)), ready},
			want:  record(t0.Add(time.Minute)),
		},
		"not ready: nothing to record": {
			conds: []metav1.Condition{admitted, cond(kueue.WorkloadPodsReady, metav1.ConditionFalse, t0.Add(time.Minute))},
		},
		"readiness left from before the admission: nothing to record": {
			conds: []metav1.Condition{admitted, cond(kueue.WorkloadPodsReady, metav1.ConditionTrue, t0.Add(-time.Second))},
		},
		"not admitted: nothing to record": {
			conds: []metav1.Condition{cond(kueue.WorkloadAdmitted, metav1.ConditionFalse, t0), ready},
		},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			wl := &kueue.Workload{ObjectMeta: metav1.ObjectMeta{Generation: 3}, Status: kueue.WorkloadStatus{Conditions: tc.conds}}
			if diff := cmp.Diff(tc.want, Needed(wl)); diff != "" {
				t.Errorf("Needed (-want +got):\n%s", diff)
			}
		})
	}
}
