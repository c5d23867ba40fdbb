package scheduler

import (
	"context"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	batchv1 "k8s.io/api/batch/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	testingclock "k8s.io/utils/clock/testing"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	kueue "sigs.k8s.io/kueue/apis/kueue/v1beta2"
	utiltesting "sigs.k8s.io/kueue/pkg/util/testing"
)

func TestDrainHoldHolding(t *testing.T) {
	now := time.Date(2026, 11, 24, 12, 0, 0, 0, time.UTC)
	cond := func(typ string, status metav1.ConditionStatus) metav1.Condition {
		return metav1.Condition{Type: typ, Status: status, Reason: "Test", LastTransitionTime: metav1.NewTime(now)}
	}
	victim := func(conds ...metav1.Condition) *kueue.Workload {
		return &kueue.Workload{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "victim", UID: "uid-1"}, Status: kueue.WorkloadStatus{Conditions: conds}}
	}
	released := victim(cond(kueue.WorkloadQuotaReserved, metav1.ConditionFalse), cond(kueue.WorkloadEvicted, metav1.ConditionTrue))
	jobWith := func(active, terminating int32) *batchv1.Job {
		return &batchv1.Job{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "job"}, Status: batchv1.JobStatus{Active: active, Terminating: ptr.To(terminating)}}
	}
	cases := map[string]struct {
		objs     []client.Object
		elapsed  time.Duration
		wantHeld bool
		wantWhy  string
	}{
		"quota released, a Pod terminating: the usage is held": {
			objs: []client.Object{released, jobWith(0, 1)}, wantHeld: true, wantWhy: reasonDraining,
		},
		"quota released, no Pods left: the hold ends": {
			objs: []client.Object{released, jobWith(0, 0)}, wantWhy: "its Pods are gone",
		},
		"Pods still terminating past the grace period and margin: the hold ends": {
			objs: []client.Object{released, jobWith(0, 1)}, elapsed: 40 * time.Second, wantWhy: "its grace period is over",
		},
		"eviction under way (quota still reserved): held, but counted by Kueue already": {
			objs:     []client.Object{victim(cond(kueue.WorkloadQuotaReserved, metav1.ConditionTrue), cond(kueue.WorkloadEvicted, metav1.ConditionTrue)), jobWith(1, 0)},
			wantHeld: true, wantWhy: "its eviction is under way",
		},
		"admitted again: the hold ends": {
			objs:    []client.Object{victim(cond(kueue.WorkloadQuotaReserved, metav1.ConditionTrue), cond(kueue.WorkloadEvicted, metav1.ConditionFalse)), jobWith(1, 0)},
			wantWhy: "it holds quota again",
		},
		"workload deleted: the hold ends": {
			objs: []client.Object{jobWith(0, 1)}, wantWhy: "the workload is gone",
		},
		"workload recreated under the same name: the hold ends": {
			objs: []client.Object{func() *kueue.Workload { w := released.DeepCopy(); w.UID = "uid-2"; return w }(), jobWith(0, 1)}, wantWhy: "the workload was replaced",
		},
		"Job deleted: the hold ends": {
			objs: []client.Object{released}, wantWhy: "its Job is gone",
		},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			ctx, _ := utiltesting.ContextWithLog(t)
			clk := testingclock.NewFakeClock(now)
			c := utiltesting.NewClientBuilder().WithObjects(tc.objs...).Build()
			d := newDrainHolds(c, clk, nil)
			h := &drainHold{uid: "uid-1", cq: "cq", job: types.NamespacedName{Namespace: "ns", Name: "job"}, deadline: now.Add(30*time.Second + drainMargin)}
			clk.Step(tc.elapsed)
			held, why := d.holding(ctx, types.NamespacedName{Namespace: "ns", Name: "victim"}, h)
			if held != tc.wantHeld || why != tc.wantWhy {
				t.Errorf("holding = %v, %q; want %v, %q", held, why, tc.wantHeld, tc.wantWhy)
			}
		})
	}
}

func TestDrainJobChangedWakesOnlyWhenPodsAreGone(t *testing.T) {
	cases := map[string]struct {
		job      *batchv1.Job
		wantWake []kueue.ClusterQueueReference
	}{
		"held Job with a Pod terminating":   {job: &batchv1.Job{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "job"}, Status: batchv1.JobStatus{Terminating: ptr.To[int32](1)}}},
		"held Job with no Pods left":        {job: &batchv1.Job{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "job"}, Status: batchv1.JobStatus{Terminating: ptr.To[int32](0)}}, wantWake: []kueue.ClusterQueueReference{"cq"}},
		"another Job with no Pods left":     {job: &batchv1.Job{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "other"}}},
		"held Job reporting no terminating": {job: &batchv1.Job{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "job"}}, wantWake: []kueue.ClusterQueueReference{"cq"}},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			ctx, _ := utiltesting.ContextWithLog(t)
			var woken []kueue.ClusterQueueReference
			d := newDrainHolds(nil, testingclock.NewFakeClock(time.Now()), func(_ context.Context, cq kueue.ClusterQueueReference) { woken = append(woken, cq) })
			d.holds[types.NamespacedName{Namespace: "ns", Name: "victim"}] = &drainHold{cq: "cq", job: types.NamespacedName{Namespace: "ns", Name: "job"}}
			d.jobChanged(ctx, tc.job)
			if diff := cmp.Diff(tc.wantWake, woken); diff != "" {
				t.Errorf("woken ClusterQueues (-want +got):\n%s", diff)
			}
		})
	}
}
