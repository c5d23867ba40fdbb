package main

import (
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	kueue "sigs.k8s.io/kueue/apis/kueue/v1beta2"

	"github.com/kueue-timeshare/kueue-timeshare/apis/annotations"
	"github.com/kueue-timeshare/kueue-timeshare/pkg/plugins/notice"
)

func TestDescribe(t *testing.T) {
	now := time.Date(2026, 11, 25, 10, 0, 0, 0, time.UTC)
	at := func(d time.Duration) metav1.Time { return metav1.NewTime(now.Add(d)) }
	given := annotations.Notice{Start: now.Add(-30 * time.Second), Deadline: now.Add(30 * time.Second), Reason: "InClusterQueueTimeBased",
		Preemptor: "default/next", PreemptorUID: "uid"}
	admitted := func(ann map[string]string) *kueue.Workload {
		var record []metav1.Condition
		if _, ok := ann[annotations.PreemptionNotice]; ok {
			record = append(record, notice.ConditionOf(&given, 0))
		}
		return &kueue.Workload{
			ObjectMeta: metav1.ObjectMeta{Namespace: "default", Name: "w", Annotations: ann},
			Status: kueue.WorkloadStatus{
				Admission: &kueue.Admission{ClusterQueue: "q"},
				Conditions: append([]metav1.Condition{
					{Type: kueue.WorkloadQuotaReserved, Status: metav1.ConditionTrue, LastTransitionTime: at(-90 * time.Second)},
					{Type: kueue.WorkloadAdmitted, Status: metav1.ConditionTrue, LastTransitionTime: at(-90 * time.Second)},
				}, record...),
			},
		}
	}
	notice := given.Annotations()
	checkpointed := map[string]string{annotations.CheckpointDone: "true"}
	for k, v := range notice {
		checkpointed[k] = v
	}
	cases := map[string]struct {
		wl   *kueue.Workload
		want row
	}{
		"admitted": {wl: admitted(nil), want: row{name: "default/w", state: "ADMITTED", detail: "for 1m30s"}},
		"admitted, under notice": {wl: admitted(notice),
			want: row{name: "default/w", state: "ADMITTED", detail: "for 1m30s; under preemption notice until 10:00:30 (in 30s) for default/next",
				units: "2026-11-25T10:00:30Z"}},
		"under notice, its checkpoint done": {wl: admitted(checkpointed),
			want: row{name: "default/w", state: "ADMITTED", detail: "for 1m30s; under preemption notice until 10:00:30 (in 30s) for default/next, checkpoint done",
				units: "2026-11-25T10:00:30Z checkpoint done"}},
		"pending, evicted": {
			wl: &kueue.Workload{ObjectMeta: metav1.ObjectMeta{Namespace: "default", Name: "w"}, Status: kueue.WorkloadStatus{Conditions: []metav1.Condition{
				{Type: kueue.WorkloadQuotaReserved, Status: metav1.ConditionFalse, Message: "insufficient quota"},
				{Type: kueue.WorkloadEvicted, Status: metav1.ConditionTrue, Reason: "Preempted"},
			}}},
			want: row{name: "default/w", state: "PENDING", detail: "evicted (Preempted): insufficient quota"},
		},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			if diff := cmp.Diff(tc.want, describe(tc.wl, now), cmp.AllowUnexported(row{})); diff != "" {
				t.Errorf("row (-want +got):\n%s", diff)
			}
		})
	}
}

func TestEstimateNote(t *testing.T) {
	cases := map[string]struct {
		eta, sentence, want string
	}{
		"a time: the manager's sentence": {eta: "2026-11-25T10:01:01Z", sentence: "expected around 10:01, 1st in turn order; turns are 1m",
			want: "expected around 10:01, 1st in turn order; turns are 1m"},
		"a time without a sentence": {eta: "2026-11-25T10:01:01Z", want: "expected at 2026-11-25T10:01:01Z"},
		"unknown, with the reason":  {eta: "unknown", sentence: "held by default/h, which declares no runtime and has no window", want: "expected admission unknown: held by default/h, which declares no runtime and has no window"},
		"unknown, without a reason": {eta: "unknown", want: "expected admission unknown"},
		"no estimate":               {sentence: "stray", want: ""},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			if diff := cmp.Diff(tc.want, estimateNote(tc.eta, tc.sentence)); diff != "" {
				t.Errorf("note (-want +got):\n%s", diff)
			}
		})
	}
}
