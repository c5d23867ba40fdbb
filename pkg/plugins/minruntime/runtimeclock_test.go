package minruntime

import (
	"testing"
	"time"

	"github.com/go-logr/logr"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	kueue "sigs.k8s.io/kueue/apis/kueue/v1beta2"
	"sigs.k8s.io/kueue/pkg/workload"

	"github.com/kueue-timeshare/kueue-timeshare/pkg/policy"
)

// A workload admitted at t0 whose Pods became ready a minute later, checked at various instants,
// by each clock: what a min-runtime of 10m decides (expected runtimes: package expectedruntime).
func TestRuntimeClock(t *testing.T) {
	t0 := time.Date(2026, 11, 24, 12, 0, 0, 0, time.UTC)
	cond := func(typ string, status metav1.ConditionStatus, at time.Time) metav1.Condition {
		return metav1.Condition{Type: typ, Status: status, Reason: "Test", LastTransitionTime: metav1.NewTime(at)}
	}
	admitted := cond(kueue.WorkloadAdmitted, metav1.ConditionTrue, t0)
	readyAt := t0.Add(time.Minute)
	cases := map[string]struct {
		conds         []metav1.Condition
		clock         policy.RuntimeClock
		now           time.Time
		wantSince     time.Time
		wantProtected bool
		wantEnds      time.Time
	}{
		"Admitted clock counts from admission": {
			conds: []metav1.Condition{admitted, cond(kueue.WorkloadPodsReady, metav1.ConditionTrue, readyAt)},
			clock: policy.RuntimeClockAdmitted, now: t0.Add(10*time.Minute + 30*time.Second),
			wantSince: t0, wantEnds: t0.Add(10 * time.Minute),
		},
		"PodsReady clock counts from readiness: still protected at the same instant": {
			conds: []metav1.Condition{admitted, cond(kueue.WorkloadPodsReady, metav1.ConditionTrue, readyAt)},
			clock: policy.RuntimeClockPodsReady, now: t0.Add(10*time.Minute + 30*time.Second),
			wantSince: readyAt, wantProtected: true, wantEnds: readyAt.Add(10 * time.Minute),
		},
		"PodsReady clock: ten minutes after readiness the protection is over": {
			conds: []metav1.Condition{admitted, cond(kueue.WorkloadPodsReady, metav1.ConditionTrue, readyAt)},
			clock: policy.RuntimeClockPodsReady, now: readyAt.Add(10 * time.Minute),
			wantSince: readyAt, wantEnds: readyAt.Add(10 * time.Minute),
		},
		"PodsReady clock: Pods not ready yet, so it has not started: protected, end unknown, not nominated": {
			conds: []metav1.Condition{admitted, cond(kueue.WorkloadPodsReady, metav1.ConditionFalse, t0)},
			clock: policy.RuntimeClockPodsReady, now: t0.Add(time.Hour),
			wantProtected: true,
		},
		"PodsReady clock: readiness left from an earlier admission does not count": {
			conds: []metav1.Condition{cond(kueue.WorkloadAdmitted, metav1.ConditionTrue, readyAt.Add(time.Second)), cond(kueue.WorkloadPodsReady, metav1.ConditionTrue, readyAt)},
			clock: policy.RuntimeClockPodsReady, now: t0.Add(time.Hour),
			wantProtected: true,
		},
		"PodsReady clock: readiness that flapped counts from the first readiness the manager recorded": {
			conds: []metav1.Condition{admitted, cond(policy.FirstReadyCondition, metav1.ConditionTrue, readyAt),
				cond(kueue.WorkloadPodsReady, metav1.ConditionTrue, readyAt.Add(25*time.Minute))},
			clock: policy.RuntimeClockPodsReady, now: readyAt.Add(30 * time.Minute),
			wantSince: readyAt, wantEnds: readyAt.Add(10 * time.Minute),
		},
		"PodsReady clock: Pods not ready now, but ready since admission: the clock runs on": {
			conds: []metav1.Condition{admitted, cond(policy.FirstReadyCondition, metav1.ConditionTrue, readyAt),
				cond(kueue.WorkloadPodsReady, metav1.ConditionFalse, readyAt.Add(5*time.Minute))},
			clock: policy.RuntimeClockPodsReady, now: readyAt.Add(10 * time.Minute),
			wantSince: readyAt, wantEnds: readyAt.Add(10 * time.Minute),
		},
		"PodsReady clock: a record from an earlier admission does not count": {
			conds: []metav1.Condition{admitted, cond(policy.FirstReadyCondition, metav1.ConditionTrue, t0.Add(-time.Hour)),
				cond(kueue.WorkloadPodsReady, metav1.ConditionTrue, readyAt)},
			clock: policy.RuntimeClockPodsReady, now: t0.Add(10*time.Minute + 30*time.Second),
			wantSince: readyAt, wantProtected: true, wantEnds: readyAt.Add(10 * time.Minute),
		},
		"Admitted clock: the record is not read": {
			conds: []metav1.Condition{admitted, cond(policy.FirstReadyCondition, metav1.ConditionTrue, readyAt)},
			clock: policy.RuntimeClockAdmitted, now: t0.Add(10 * time.Minute),
			wantSince: t0, wantEnds: t0.Add(10 * time.Minute),
		},
		"not admitted: nothing runs, nothing to protect, by either clock": {
			conds: []metav1.Condition{cond(kueue.WorkloadPodsReady, metav1.ConditionTrue, readyAt)},
			clock: policy.RuntimeClockPodsReady, now: t0.Add(time.Hour),
		},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			wl := &kueue.Workload{Status: kueue.WorkloadStatus{Conditions: tc.conds}}
			if got := policy.RunningSince(wl, tc.clock); !got.Equal(tc.wantSince) {
				t.Errorf("RunningSince = %v, want %v", got, tc.wantSince)
			}
			c := policy.NewCandidate(logr.Discard(), workload.NewInfo(wl), workload.Ordering{})
			c.CountRuntimeFrom(tc.clock)
			p := Protection{MinRuntime: 10 * time.Minute, Source: policy.Source{Field: "preemptMinRuntime", Value: "10m0s", Kind: "ClusterQueue", Name: "q"}}
			if got := Protected(&c, p, tc.now); got != tc.wantProtected {
				t.Errorf("Protected = %v, want %v", got, tc.wantProtected)
			}
			if got := ProtectionEnds(&c, p); !got.Equal(tc.wantEnds) {
				t.Errorf("ProtectionEnds = %v, want %v", got, tc.wantEnds)
			}
		})
	}
}
