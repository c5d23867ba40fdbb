package scheduler

import (
	"context"
	"math"
	"slices"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	apimeta "k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	utilfeature "k8s.io/apiserver/pkg/util/feature"
	"k8s.io/client-go/tools/events"
	featuregatetesting "k8s.io/component-base/featuregate/testing"
	testingclock "k8s.io/utils/clock/testing"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/interceptor"

	kueue "sigs.k8s.io/kueue/apis/kueue/v1beta2"
	qcache "sigs.k8s.io/kueue/pkg/cache/queue"
	schdcache "sigs.k8s.io/kueue/pkg/cache/scheduler"
	"sigs.k8s.io/kueue/pkg/scheduler/flavorassigner"
	"sigs.k8s.io/kueue/pkg/scheduler/preemption"
	utiltesting "sigs.k8s.io/kueue/pkg/util/testing"
	"sigs.k8s.io/kueue/pkg/workload"

	tsconfig "github.com/kueue-timeshare/kueue-timeshare/apis/config/v1alpha1"
	"github.com/kueue-timeshare/kueue-timeshare/pkg/features"
	"github.com/kueue-timeshare/kueue-timeshare/pkg/plugins/timebased"
	"github.com/kueue-timeshare/kueue-timeshare/pkg/policy"
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
		return &batchv1.Job{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "job", UID: "job-uid"}, Status: batchv1.JobStatus{Active: active, Terminating: ptr.To(terminating)}}
	}
	podOf := func(jobUID string, phase corev1.PodPhase) *corev1.Pod {
		return &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "pod-" + jobUID + "-" + string(phase), Labels: map[string]string{batchv1.ControllerUidLabel: jobUID},
			DeletionTimestamp: ptr.To(metav1.NewTime(now)), Finalizers: []string{"test"}}, Status: corev1.PodStatus{Phase: phase}}
	}
	cases := map[string]struct {
		objs     []client.Object
		elapsed  time.Duration
		wantHeld bool
		wantWhy  string
	}{
		"quota released, a Pod terminating: the usage is held": {
			objs: []client.Object{released, jobWith(0, 1), podOf("job-uid", corev1.PodRunning)}, wantHeld: true, wantWhy: reasonDraining,
		},
		"the Job still counts a terminating Pod that is gone: the hold ends": {
			objs: []client.Object{released, jobWith(0, 1)}, wantWhy: "its Pods are gone",
		},
		"the Job's last Pod stopped (Failed) while it is deleted: the hold ends": {
			objs: []client.Object{released, jobWith(0, 1), podOf("job-uid", corev1.PodFailed)}, wantWhy: "its Pods are gone",
		},
		"only another Job's Pod runs: the hold ends": {
			objs: []client.Object{released, jobWith(0, 1), podOf("other-uid", corev1.PodRunning)}, wantWhy: "its Pods are gone",
		},
		"quota released, no Pods left: the hold ends": {
			objs: []client.Object{released, jobWith(0, 0)}, wantWhy: "its Pods are gone",
		},
		"a Pod still running past the grace period and margin: kept, adding nothing, to charge the overstay": {
			objs: []client.Object{released, jobWith(0, 1), podOf("job-uid", corev1.PodRunning)}, elapsed: 40 * time.Second, wantHeld: true, wantWhy: reasonOverstaying,
		},
		"past the grace period and margin with no Pods left: the hold ends": {
			objs: []client.Object{released, jobWith(0, 1)}, elapsed: 40 * time.Second, wantWhy: "its Pods are gone",
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
			d := newDrainHolds(c, clk, nil, tsconfig.DefaultMaxHandoverHold, nil)
			h := &drainHold{uid: "uid-1", cq: "cq", job: types.NamespacedName{Namespace: "ns", Name: "job"}, jobUID: "job-uid", deadline: now.Add(30*time.Second + drainMargin)}
			clk.Step(tc.elapsed)
			held, why := d.holding(ctx, types.NamespacedName{Namespace: "ns", Name: "victim"}, h)
			if held != tc.wantHeld || why != tc.wantWhy {
				t.Errorf("holding = %v, %q; want %v, %q", held, why, tc.wantHeld, tc.wantWhy)
			}
		})
	}
}

// A hold that a cycle finds over (its Pods gone without an event seen, its workload or Job gone)
// wakes its ClusterQueue, so that the workloads parked behind it are tried again; one still
// draining wakes nothing.
func TestDrainApplyWakesTheQueueOfAnEndedHold(t *testing.T) {
	now := time.Date(2026, 11, 24, 12, 0, 0, 0, time.UTC)
	released := func(name, uid string) *kueue.Workload {
		return &kueue.Workload{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: name, UID: types.UID(uid)}, Status: kueue.WorkloadStatus{Conditions: []metav1.Condition{
			{Type: kueue.WorkloadQuotaReserved, Status: metav1.ConditionFalse, Reason: "Test", LastTransitionTime: metav1.NewTime(now)},
			{Type: kueue.WorkloadEvicted, Status: metav1.ConditionTrue, Reason: "Test", LastTransitionTime: metav1.NewTime(now)}}}}
	}
	job := func(name string, terminating int32) *batchv1.Job {
		return &batchv1.Job{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: name, UID: types.UID(name + "-uid")}, Status: batchv1.JobStatus{Terminating: ptr.To(terminating)}}
	}
	pod := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "draining-pod", Labels: map[string]string{batchv1.ControllerUidLabel: "draining-job-uid"}}}
	ctx, _ := utiltesting.ContextWithLog(t)
	c := utiltesting.NewClientBuilder().WithObjects(released("done", "uid-done"), job("done-job", 0),
		released("draining", "uid-draining"), job("draining-job", 1), pod).Build()
	var woken []kueue.ClusterQueueReference
	d := newDrainHolds(c, testingclock.NewFakeClock(now), func(_ context.Context, cq kueue.ClusterQueueReference) { woken = append(woken, cq) },
		tsconfig.DefaultMaxHandoverHold, nil)
	d.holds[types.NamespacedName{Namespace: "ns", Name: "done"}] = &drainHold{uid: "uid-done", cq: "ended", job: types.NamespacedName{Namespace: "ns", Name: "done-job"},
		jobUID: "done-job-uid", deadline: now.Add(time.Minute)}
	d.holds[types.NamespacedName{Namespace: "ns", Name: "draining"}] = &drainHold{uid: "uid-draining", cq: "still", job: types.NamespacedName{Namespace: "ns", Name: "draining-job"},
		jobUID: "draining-job-uid", deadline: now.Add(time.Minute)}
	d.apply(ctx, &schdcache.Snapshot{})
	if diff := cmp.Diff([]kueue.ClusterQueueReference{"ended"}, woken); diff != "" {
		t.Errorf("woken ClusterQueues (-want +got):\n%s", diff)
	}
	if _, ok := d.holds[types.NamespacedName{Namespace: "ns", Name: "draining"}]; !ok || len(d.holds) != 1 {
		t.Errorf("holds left: %v, want only the draining one", d.holds)
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
			d := newDrainHolds(nil, testingclock.NewFakeClock(time.Now()), func(_ context.Context, cq kueue.ClusterQueueReference) { woken = append(woken, cq) }, tsconfig.DefaultMaxHandoverHold, nil)
			d.holds[types.NamespacedName{Namespace: "ns", Name: "victim"}] = &drainHold{cq: "cq", job: types.NamespacedName{Namespace: "ns", Name: "job"}}
			d.jobChanged(ctx, tc.job)
			if diff := cmp.Diff(tc.wantWake, woken); diff != "" {
				t.Errorf("woken ClusterQueues (-want +got):\n%s", diff)
			}
		})
	}
}

func TestDrainPodChangedWakesTheHoldsQueue(t *testing.T) {
	pod := func(ns, jobUID string, phase corev1.PodPhase) *corev1.Pod {
		return &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "pod", Labels: map[string]string{batchv1.ControllerUidLabel: jobUID}},
			Status: corev1.PodStatus{Phase: phase}}
	}
	cases := map[string]struct {
		pod      *corev1.Pod
		gone     bool
		wantWake []kueue.ClusterQueueReference
	}{
		"the held Job's Pod deleted":              {pod: pod("ns", "job-uid", corev1.PodRunning), gone: true, wantWake: []kueue.ClusterQueueReference{"cq"}},
		"the held Job's Pod Failed":               {pod: pod("ns", "job-uid", corev1.PodFailed), wantWake: []kueue.ClusterQueueReference{"cq"}},
		"the held Job's Pod still running":        {pod: pod("ns", "job-uid", corev1.PodRunning)},
		"another Job's Pod deleted":               {pod: pod("ns", "other-uid", corev1.PodRunning), gone: true},
		"a Pod of no Job deleted":                 {pod: pod("ns", "", corev1.PodRunning), gone: true},
		"the same UID label in another namespace": {pod: pod("elsewhere", "job-uid", corev1.PodRunning), gone: true},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			ctx, _ := utiltesting.ContextWithLog(t)
			var woken []kueue.ClusterQueueReference
			d := newDrainHolds(nil, testingclock.NewFakeClock(time.Now()), func(_ context.Context, cq kueue.ClusterQueueReference) { woken = append(woken, cq) }, tsconfig.DefaultMaxHandoverHold, nil)
			d.holds[types.NamespacedName{Namespace: "ns", Name: "victim"}] = &drainHold{cq: "cq", job: types.NamespacedName{Namespace: "ns", Name: "job"}, jobUID: "job-uid"}
			d.podChanged(ctx, tc.pod, tc.gone)
			if diff := cmp.Diff(tc.wantWake, woken); diff != "" {
				t.Errorf("woken ClusterQueues (-want +got):\n%s", diff)
			}
		})
	}
}

func TestDrainWakesJustBeforeThePodsAreDue(t *testing.T) {
	now := time.Date(2026, 11, 24, 12, 0, 0, 0, time.UTC)
	released := &kueue.Workload{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "victim", UID: "uid-1"}, Status: kueue.WorkloadStatus{Conditions: []metav1.Condition{
		{Type: kueue.WorkloadQuotaReserved, Status: metav1.ConditionFalse, Reason: "Test", LastTransitionTime: metav1.NewTime(now)},
		{Type: kueue.WorkloadEvicted, Status: metav1.ConditionTrue, Reason: "Test", LastTransitionTime: metav1.NewTime(now)},
	}}}
	job := &batchv1.Job{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "job", UID: "job-uid"}, Status: batchv1.JobStatus{Terminating: ptr.To[int32](2)}}
	pod := func(name string, due time.Duration) *corev1.Pod {
		return &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: name, Labels: map[string]string{batchv1.ControllerUidLabel: "job-uid"},
			DeletionTimestamp: ptr.To(metav1.NewTime(now.Add(due))), Finalizers: []string{"test"}}, Status: corev1.PodStatus{Phase: corev1.PodRunning}}
	}
	cases := map[string]struct {
		pods []client.Object
		// wantWokenAt are the offsets from now at which the ClusterQueue is woken, stepping in 100 ms.
		wantWokenAt []time.Duration
	}{
		"one Pod due in 10 s: woken 800 ms before": {
			pods: []client.Object{pod("a", 10*time.Second)}, wantWokenAt: []time.Duration{9200 * time.Millisecond},
		},
		"two Pods: woken before the later one is due": {
			pods: []client.Object{pod("a", 5*time.Second), pod("b", 10*time.Second)}, wantWokenAt: []time.Duration{9200 * time.Millisecond},
		},
		"a Pod not being deleted: no early wake": {
			pods: []client.Object{func() *corev1.Pod { p := pod("a", 0); p.DeletionTimestamp, p.Finalizers = nil, nil; return p }()},
		},
		"due already within the lead: no early wake": {
			pods: []client.Object{pod("a", 500*time.Millisecond)},
		},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			ctx, _ := utiltesting.ContextWithLog(t)
			clk := testingclock.NewFakeClock(now)
			c := utiltesting.NewClientBuilder().WithObjects(append([]client.Object{released, job}, tc.pods...)...).Build()
			var woken []time.Duration
			var elapsed time.Duration
			// The fake clock runs the timer's function while it holds its own lock: no clock reads in it.
			d := newDrainHolds(c, clk, func(context.Context, kueue.ClusterQueueReference) { woken = append(woken, elapsed) }, tsconfig.DefaultMaxHandoverHold, nil).withLead(time.Second)
			h := &drainHold{uid: "uid-1", cq: "cq", job: types.NamespacedName{Namespace: "ns", Name: "job"}, jobUID: "job-uid", deadline: now.Add(time.Minute)}
			key := types.NamespacedName{Namespace: "ns", Name: "victim"}
			// Every cycle checks the hold again; a wake is set once per deadline.
			for range 3 {
				if held, why := d.holding(ctx, key, h); !held || why != reasonDraining {
					t.Fatalf("holding = %v, %q; want the usage held", held, why)
				}
			}
			for range 120 {
				elapsed += 100 * time.Millisecond
				clk.Step(100 * time.Millisecond)
			}
			if diff := cmp.Diff(tc.wantWokenAt, woken); diff != "" {
				t.Errorf("wakes (-want +got):\n%s", diff)
			}
		})
	}
}

// A head waiting for victims' Pods is told whose; a victim back at the head of its queue is told
// it waits for its own.
func TestDrainMessage(t *testing.T) {
	until := time.Date(2026, 3, 1, 12, 5, 0, 0, time.UTC)
	cases := map[string]struct {
		victims []string
		self    string
		until   time.Time
		want    string
	}{
		"another workload's Pods, until when": {
			victims: []string{"ns/a"}, self: "ns/c", until: until,
			want: "waiting for the Pods of the preempted workload(s) ns/a to terminate before taking their quota; the quota is held until 2026-03-01T12:05:00Z at the latest",
		},
		"another workload's Pods": {
			victims: []string{"ns/a", "ns/b"}, self: "ns/c",
			want: "waiting for the Pods of the preempted workload(s) ns/a, ns/b to terminate before taking their quota",
		},
		"its own Pods": {
			victims: []string{"ns/a"}, self: "ns/a",
			want: "waiting for its own Pods, stopped at its preemption, to terminate before taking quota again",
		},
		"its own and another's": {
			victims: []string{"ns/a", "ns/b"}, self: "ns/b",
			want: "waiting for its own Pods, stopped at its preemption, and those of the preempted workload(s) ns/a to terminate before taking quota again",
		},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			if diff := cmp.Diff(tc.want, drainMessage(tc.victims, tc.self, tc.until)); diff != "" {
				t.Errorf("message (-want +got):\n%s", diff)
			}
		})
	}
}

// A tenant's Job sets its grace period to any int64 of seconds; the hold saturates instead of
// wrapping to one over at once, and its wake-up is not set for now. The manager's bound
// (timeshare.maxHandoverHold) caps it: the tenant does not choose how long a turn holds the quota.
func TestDrainRecordGracePeriodSaturates(t *testing.T) {
	now := time.Date(2026, 11, 24, 12, 0, 0, 0, time.UTC)
	cases := map[string]struct {
		grace *int64
		// bound is the manager's bound; none (the largest Duration) when zero.
		bound time.Duration
		// wantHold is how long the hold lasts at the least, wantMost at the most (when set);
		// wantWokenAt when the wake-up fires within a minute, stepping in a second (none: never).
		wantHold    time.Duration
		wantMost    time.Duration
		wantWokenAt []time.Duration
	}{
		"a day, under a bound of 20 s: held 20 s and the margin": {
			grace: ptr.To[int64](86400), bound: 20 * time.Second, wantHold: 30 * time.Second, wantMost: 30 * time.Second,
			wantWokenAt: []time.Duration{31 * time.Second},
		},
		"a day, under the default bound: held 5 minutes and the margin": {
			grace: ptr.To[int64](86400), bound: tsconfig.DefaultMaxHandoverHold, wantHold: 5*time.Minute + drainMargin, wantMost: 5*time.Minute + drainMargin,
		},
		"no grace period: the Pod default": {wantHold: 40 * time.Second, wantWokenAt: []time.Duration{41 * time.Second}},
		"thirty seconds":                   {grace: ptr.To[int64](30), wantHold: 40 * time.Second, wantWokenAt: []time.Duration{41 * time.Second}},
		"zero":                             {grace: ptr.To[int64](0), wantHold: drainMargin, wantWokenAt: []time.Duration{11 * time.Second}},
		"negative: none":                   {grace: ptr.To[int64](-5), wantHold: drainMargin, wantWokenAt: []time.Duration{11 * time.Second}},
		"the largest int64 of seconds":     {grace: ptr.To[int64](math.MaxInt64), wantHold: 200 * 365 * 24 * time.Hour},
		"one second past the largest Duration": {
			grace: ptr.To[int64](math.MaxInt64/int64(time.Second) + 1), wantHold: 200 * 365 * 24 * time.Hour,
		},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			ctx, _ := utiltesting.ContextWithLog(t)
			clk := testingclock.NewFakeClock(now)
			job := &batchv1.Job{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "job", UID: "job-uid"},
				Spec: batchv1.JobSpec{Template: corev1.PodTemplateSpec{Spec: corev1.PodSpec{TerminationGracePeriodSeconds: tc.grace}}}}
			wl := &kueue.Workload{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "victim", UID: "uid-1",
				OwnerReferences: []metav1.OwnerReference{{APIVersion: "batch/v1", Kind: "Job", Name: "job", UID: "job-uid", Controller: ptr.To(true)}}}}
			c := utiltesting.NewClientBuilder().WithObjects(job).Build()
			var woken []time.Duration
			var elapsed time.Duration
			bound := tc.bound
			if bound == 0 {
				bound = time.Duration(math.MaxInt64)
			}
			d := newDrainHolds(c, clk, func(context.Context, kueue.ClusterQueueReference) { woken = append(woken, elapsed) }, bound, nil)
			info := workload.NewInfo(wl)
			info.ClusterQueue = "cq"
			d.record(ctx, workload.NewInfo(&kueue.Workload{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "preemptor"}}),
				[]*preemption.Target{{WorkloadInfo: info, Reason: timebased.Reason}})
			h := d.holds[types.NamespacedName{Namespace: "ns", Name: "victim"}]
			if h == nil {
				t.Fatal("no hold recorded")
			}
			if got := h.deadline.Sub(now); got < tc.wantHold || (tc.wantMost > 0 && got > tc.wantMost) {
				t.Errorf("the hold lasts %s, want at least %s and at most %s", got, tc.wantHold, tc.wantMost)
			}
			for range 60 {
				elapsed += time.Second
				clk.Step(time.Second)
			}
			if diff := cmp.Diff(tc.wantWokenAt, woken); diff != "" {
				t.Errorf("wakes (-want +got):\n%s", diff)
			}
		})
	}
}

// Our eviction ends the turn a charge shortened: the charge is marked spent, once, and an
// eviction by upstream's reasons leaves it owed.
func TestDrainRecordSpendsTheTurnCharge(t *testing.T) {
	now := time.Date(2026, 11, 24, 12, 0, 0, 0, time.UTC)
	owed := metav1.Condition{Type: policy.TurnChargeCondition, Status: metav1.ConditionTrue, Reason: policy.TurnChargeOwed,
		Message: policy.TurnChargeMessage(2*time.Minute, time.Minute), LastTransitionTime: metav1.NewTime(now.Add(-time.Hour))}
	cases := map[string]struct {
		reason     string
		conds      []metav1.Condition
		wantStatus metav1.ConditionStatus
		wantReason string
	}{
		"rotated out after its charged turn: spent": {
			reason: timebased.Reason, conds: []metav1.Condition{owed}, wantStatus: metav1.ConditionFalse, wantReason: policy.TurnChargeSpent,
		},
		"preempted by upstream's rules: still owed": {
			reason: kueue.InClusterQueueReason, conds: []metav1.Condition{owed}, wantStatus: metav1.ConditionTrue, wantReason: policy.TurnChargeOwed,
		},
		"nothing owed: nothing written": {reason: timebased.Reason},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			ctx, _ := utiltesting.ContextWithLog(t)
			wl := &kueue.Workload{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "victim", UID: "uid-1"}, Status: kueue.WorkloadStatus{Conditions: tc.conds}}
			c := utiltesting.NewClientBuilder().WithObjects(wl).WithStatusSubresource(wl).Build()
			d := newDrainHolds(c, testingclock.NewFakeClock(now), nil, time.Minute, nil)
			info := workload.NewInfo(wl.DeepCopy())
			info.ClusterQueue = "cq"
			d.record(ctx, workload.NewInfo(&kueue.Workload{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "preemptor"}}),
				[]*preemption.Target{{WorkloadInfo: info, Reason: tc.reason}})
			var got kueue.Workload
			if err := c.Get(ctx, client.ObjectKeyFromObject(wl), &got); err != nil {
				t.Fatal(err)
			}
			var status metav1.ConditionStatus
			var reason string
			if cond := apimeta.FindStatusCondition(got.Status.Conditions, policy.TurnChargeCondition); cond != nil {
				status, reason = cond.Status, cond.Reason
			}
			if status != tc.wantStatus || reason != tc.wantReason {
				t.Errorf("TurnCharge = %s %s, want %s %s", status, reason, tc.wantStatus, tc.wantReason)
			}
			if len(info.Obj.Status.Conditions) != len(tc.conds) {
				t.Errorf("the snapshot's workload was written to: %+v", info.Obj.Status.Conditions)
			}
		})
	}
}

func TestDrainWithin(t *testing.T) {
	jobRef := metav1.OwnerReference{APIVersion: "batch/v1", Kind: "Job", Name: "job", UID: "job-uid", Controller: ptr.To(true)}
	podSet := func(grace *int64) kueue.PodSet {
		return kueue.PodSet{Name: "main", Count: 1, Template: corev1.PodTemplateSpec{Spec: corev1.PodSpec{TerminationGracePeriodSeconds: grace}}}
	}
	cases := map[string]struct {
		gateOff bool
		owner   *metav1.OwnerReference
		podSets []kueue.PodSet
		want    time.Duration
	}{
		"a Job's workload: its pod set's grace period": {
			owner: &jobRef, podSets: []kueue.PodSet{podSet(ptr.To[int64](10))}, want: 10 * time.Second,
		},
		"the longest of its pod sets, the Pod default where none is set": {
			owner: &jobRef, podSets: []kueue.PodSet{podSet(ptr.To[int64](10)), podSet(nil)}, want: 30 * time.Second,
		},
		"a grace period of a day: held at most the manager's bound": {
			owner: &jobRef, podSets: []kueue.PodSet{podSet(ptr.To[int64](86400))}, want: 5 * time.Minute,
		},
		"a negative grace period drains at once": {
			owner: &jobRef, podSets: []kueue.PodSet{podSet(ptr.To[int64](-5))}, want: 0,
		},
		"not owned by a Job: the quota is not held": {
			owner: &metav1.OwnerReference{APIVersion: "v1", Kind: "Pod", Name: "p", UID: "p", Controller: ptr.To(true)}, podSets: []kueue.PodSet{podSet(ptr.To[int64](10))},
		},
		"no owner": {podSets: []kueue.PodSet{podSet(ptr.To[int64](10))}},
		"HandoverAfterVictimTermination off": {
			gateOff: true, owner: &jobRef, podSets: []kueue.PodSet{podSet(ptr.To[int64](10))},
		},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			if tc.gateOff {
				featuregatetesting.SetFeatureGateDuringTest(t, utilfeature.DefaultFeatureGate, features.HandoverAfterVictimTermination, false)
			}
			wl := &kueue.Workload{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "wl"}, Spec: kueue.WorkloadSpec{PodSets: tc.podSets}}
			if tc.owner != nil {
				wl.OwnerReferences = []metav1.OwnerReference{*tc.owner}
			}
			if got := DrainWithin(5 * time.Minute)(wl); got != tc.want {
				t.Errorf("DrainWithin(5m) = %s, want %s", got, tc.want)
			}
		})
	}
}

// A tenant's Job may keep its Pods running past the longest hold (its grace period): the quota goes
// to the next workload at the bound, a Warning tells the victim's Workload, and the time its Pods
// run past the bound is charged to its next turn on its TurnCharge condition.
func TestDrainOverstayIsChargedToTheNextTurn(t *testing.T) {
	now := time.Date(2026, 11, 24, 12, 0, 0, 0, time.UTC)
	const bound = 20 * time.Second
	deadline := now.Add(bound + drainMargin)
	cond := func(typ string, status metav1.ConditionStatus, reason, msg string) metav1.Condition {
		return metav1.Condition{Type: typ, Status: status, Reason: reason, Message: msg, LastTransitionTime: metav1.NewTime(now)}
	}
	released := []metav1.Condition{cond(kueue.WorkloadQuotaReserved, metav1.ConditionFalse, "Test", ""), cond(kueue.WorkloadEvicted, metav1.ConditionTrue, "Test", "")}
	owes := func(d time.Duration) metav1.Condition {
		return cond(policy.TurnChargeCondition, metav1.ConditionTrue, policy.TurnChargeOwed, policy.TurnChargeMessage(d, bound))
	}
	// podDue is a Pod of the Job being deleted, due to be gone at now+due (the tenant's grace period).
	podDue := func(due time.Duration) *corev1.Pod {
		return &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "pod", Labels: map[string]string{batchv1.ControllerUidLabel: "job-uid"},
			DeletionTimestamp: ptr.To(metav1.NewTime(now.Add(due))), Finalizers: []string{"test"}}, Status: corev1.PodStatus{Phase: corev1.PodRunning}}
	}
	cases := map[string]struct {
		conds []metav1.Condition
		pod   *corev1.Pod
		// goneAt is when the Pod is gone, seenAt when the hold is next looked at after that;
		// readmitAt, if set, is when the workload has quota again instead.
		goneAt, seenAt, readmitAt time.Duration
		wantEvents                []string
		wantCharge                time.Duration
		wantWhy                   string
	}{
		"the Pods stop within the bound: no warning, no charge": {
			pod: podDue(time.Hour), goneAt: 15 * time.Second, seenAt: 15 * time.Second, wantWhy: "its Pods are gone",
		},
		"the Pods outlive the bound by two minutes: warned once, charged two minutes": {
			pod: podDue(time.Hour), goneAt: 30*time.Second + 2*time.Minute, seenAt: 30*time.Second + 2*time.Minute,
			wantEvents: []string{"Warning PodsOutlivedHold Its Pods still run past the longest hold the manager allows after a preemption (maxHandoverHold 20s): its quota went to the next workload, and the time they keep running is charged to its next turn"},
			wantCharge: 2 * time.Minute, wantWhy: "its Pods are gone; the time they outlived the hold is charged to its next turn",
		},
		"seen gone late: charged no further than the Pods' deletion deadline": {
			pod: podDue(90 * time.Second), goneAt: 90 * time.Second, seenAt: 10 * time.Minute,
			wantEvents: []string{"Warning PodsOutlivedHold Its Pods still run past the longest hold the manager allows after a preemption (maxHandoverHold 20s): its quota went to the next workload, and the time they keep running is charged to its next turn"},
			wantCharge: time.Minute, wantWhy: "its Pods are gone; the time they outlived the hold is charged to its next turn",
		},
		"a charge still owed: added to": {
			conds: []metav1.Condition{owes(3 * time.Minute)}, pod: podDue(time.Hour), goneAt: 90 * time.Second, seenAt: 90 * time.Second,
			wantEvents: []string{"Warning PodsOutlivedHold Its Pods still run past the longest hold the manager allows after a preemption (maxHandoverHold 20s): its quota went to the next workload, and the time they keep running is charged to its next turn"},
			wantCharge: 4 * time.Minute, wantWhy: "its Pods are gone; the time they outlived the hold is charged to its next turn",
		},
		"Pods stuck past their deletion deadline (a lost node): charged up to it, then no longer watched": {
			pod: podDue(2 * time.Minute), seenAt: 10 * time.Minute,
			wantEvents: []string{"Warning PodsOutlivedHold Its Pods still run past the longest hold the manager allows after a preemption (maxHandoverHold 20s): its quota went to the next workload, and the time they keep running is charged to its next turn"},
			wantCharge: 90 * time.Second, wantWhy: "its Pods' deletion deadline is past; the time they outlived the hold until then is charged to its next turn",
		},
		"admitted again while its old Pods run: charged until then": {
			pod: podDue(time.Hour), readmitAt: 50 * time.Second,
			wantEvents: []string{"Warning PodsOutlivedHold Its Pods still run past the longest hold the manager allows after a preemption (maxHandoverHold 20s): its quota went to the next workload, and the time they keep running is charged to its next turn"},
			wantCharge: 20 * time.Second, wantWhy: "it holds quota again; the time they outlived the hold is charged to its next turn",
		},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			ctx, _ := utiltesting.ContextWithLog(t)
			clk := testingclock.NewFakeClock(now)
			wl := &kueue.Workload{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "victim", UID: "uid-1"}, Status: kueue.WorkloadStatus{Conditions: append(slices.Clone(released), tc.conds...)}}
			job := &batchv1.Job{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "job", UID: "job-uid"}, Status: batchv1.JobStatus{Terminating: ptr.To[int32](1)}}
			c := utiltesting.NewClientBuilder().WithObjects(wl, job, tc.pod).WithStatusSubresource(wl).Build()
			recorder := events.NewFakeRecorder(10)
			d := newDrainHolds(c, clk, func(context.Context, kueue.ClusterQueueReference) {}, bound, recorder)
			h := &drainHold{uid: "uid-1", cq: "cq", job: types.NamespacedName{Namespace: "ns", Name: "job"}, jobUID: "job-uid", deadline: deadline}
			key := client.ObjectKeyFromObject(wl)
			end := tc.seenAt
			if tc.readmitAt > 0 {
				end = tc.readmitAt
			}
			// Every cycle of every second looks at the hold; the Pods run until goneAt.
			var held bool
			var why string
			for step := time.Duration(0); step <= end; step += time.Second {
				clk.SetTime(now.Add(step))
				if tc.readmitAt > 0 && step == tc.readmitAt {
					var w kueue.Workload
					if err := c.Get(ctx, key, &w); err != nil {
						t.Fatal(err)
					}
					w.Status.Conditions = []metav1.Condition{cond(kueue.WorkloadQuotaReserved, metav1.ConditionTrue, "Test", ""), cond(kueue.WorkloadEvicted, metav1.ConditionFalse, "Test", "")}
					w.Status.Conditions = append(w.Status.Conditions, tc.conds...)
					if err := c.Status().Update(ctx, &w); err != nil {
						t.Fatal(err)
					}
				}
				if tc.goneAt > 0 && step == tc.goneAt {
					// Being deleted already: the Pod goes once its finalizer does.
					var p corev1.Pod
					if err := c.Get(ctx, client.ObjectKeyFromObject(tc.pod), &p); err != nil {
						t.Fatal(err)
					}
					p.Finalizers = nil
					if err := c.Update(ctx, &p); err != nil {
						t.Fatal(err)
					}
					// As the manager's Pod informer tells it, unless the case looks late.
					if tc.seenAt == tc.goneAt {
						d.podChanged(ctx, &p, true)
					}
				}
				if tc.goneAt > 0 && step > tc.goneAt && step < tc.seenAt {
					continue
				}
				if step == tc.seenAt && tc.seenAt != tc.goneAt {
					// Looked at late, whatever the overstay's read interval says.
					h.lookAfter = time.Time{}
				}
				if held, why = d.holding(ctx, key, h); !held {
					break
				}
				if !clk.Now().Before(deadline) && why != reasonOverstaying {
					t.Fatalf("at +%s past the deadline: holding = %v, %q; want %q", step, held, why, reasonOverstaying)
				}
			}
			if held || why != tc.wantWhy {
				t.Errorf("holding = %v, %q; want the hold over: %q", held, why, tc.wantWhy)
			}
			var got []string
			for len(recorder.Events) > 0 {
				got = append(got, <-recorder.Events)
			}
			if diff := cmp.Diff(tc.wantEvents, got); diff != "" {
				t.Errorf("events (-want +got):\n%s", diff)
			}
			var w kueue.Workload
			if err := c.Get(ctx, key, &w); err != nil {
				t.Fatal(err)
			}
			if got := policy.TurnChargeOf(&w); got != tc.wantCharge {
				t.Errorf("charge owed = %s, want %s; conditions %+v", got, tc.wantCharge, w.Status.Conditions)
			}
		})
	}
}

// An overstaying hold adds nothing to the quota and is read again every overstayLook, not at
// every cycle, unless one of its Pods is heard of: a tenant's many day-long grace periods cost
// the scheduler little.
func TestDrainOverstayIsReadEveryOverstayLook(t *testing.T) {
	now := time.Date(2026, 11, 24, 12, 0, 0, 0, time.UTC)
	ctx, _ := utiltesting.ContextWithLog(t)
	clk := testingclock.NewFakeClock(now)
	wl := &kueue.Workload{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "victim", UID: "uid-1"}, Status: kueue.WorkloadStatus{Conditions: []metav1.Condition{
		{Type: kueue.WorkloadQuotaReserved, Status: metav1.ConditionFalse, Reason: "Test", LastTransitionTime: metav1.NewTime(now)},
		{Type: kueue.WorkloadEvicted, Status: metav1.ConditionTrue, Reason: "Test", LastTransitionTime: metav1.NewTime(now)},
	}}}
	job := &batchv1.Job{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "job", UID: "job-uid"}, Status: batchv1.JobStatus{Terminating: ptr.To[int32](1)}}
	pod := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "pod", Labels: map[string]string{batchv1.ControllerUidLabel: "job-uid"},
		DeletionTimestamp: ptr.To(metav1.NewTime(now.Add(24 * time.Hour))), Finalizers: []string{"test"}}, Status: corev1.PodStatus{Phase: corev1.PodRunning}}
	reads := 0
	c := utiltesting.NewClientBuilder().WithObjects(wl, job, pod).WithStatusSubresource(wl).WithInterceptorFuncs(interceptor.Funcs{
		Get: func(ctx context.Context, c client.WithWatch, key client.ObjectKey, obj client.Object, opts ...client.GetOption) error {
			if _, ok := obj.(*kueue.Workload); ok {
				reads++
			}
			return c.Get(ctx, key, obj, opts...)
		},
	}).Build()
	d := newDrainHolds(c, clk, func(context.Context, kueue.ClusterQueueReference) {}, 20*time.Second, nil)
	h := &drainHold{uid: "uid-1", cq: "cq", job: types.NamespacedName{Namespace: "ns", Name: "job"}, jobUID: "job-uid", deadline: now}
	key := client.ObjectKeyFromObject(wl)
	var got []int
	for range 3 {
		before := reads
		for range 10 {
			if held, why := d.holding(ctx, key, h); !held || why != reasonOverstaying {
				t.Fatalf("holding = %v, %q; want %q", held, why, reasonOverstaying)
			}
			clk.Step(time.Second)
		}
		got = append(got, reads-before)
	}
	d.podChanged(ctx, pod, true)
	before := reads
	d.holding(ctx, key, h)
	got = append(got, reads-before)
	if diff := cmp.Diff([]int{1, 1, 1, 1}, got); diff != "" {
		t.Errorf("reads of the workload per ten one-second cycles, then after a Pod event (-want +got):\n%s", diff)
	}
}

// A victim whose Pods are gone stands aside for the workload it was preempted for while that one
// is pending, so that, older in the queue's order, it does not take its quota straight back; the
// first cycle that sees it wakes the ClusterQueue once, and anything that makes the preemptor's
// wait pointless ends it.
func TestDrainVictimYieldsToItsPreemptor(t *testing.T) {
	now := time.Date(2026, 11, 24, 12, 0, 0, 0, time.UTC)
	cond := func(typ string, status metav1.ConditionStatus) metav1.Condition {
		return metav1.Condition{Type: typ, Status: status, Reason: "Test", LastTransitionTime: metav1.NewTime(now)}
	}
	victim := func(reserved metav1.ConditionStatus) *kueue.Workload {
		return &kueue.Workload{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "victim", UID: "victim-uid"}, Status: kueue.WorkloadStatus{Conditions: []metav1.Condition{
			cond(kueue.WorkloadQuotaReserved, reserved), cond(kueue.WorkloadEvicted, metav1.ConditionFalse)}}}
	}
	preemptor := func(edit func(*kueue.Workload)) *kueue.Workload {
		w := &kueue.Workload{ObjectMeta: metav1.ObjectMeta{Namespace: "other", Name: "preemptor", UID: "preemptor-uid"}, Spec: kueue.WorkloadSpec{Active: ptr.To(true)}}
		if edit != nil {
			edit(w)
		}
		return w
	}
	podsGone := &batchv1.Job{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "job", UID: "job-uid"}}
	cases := map[string]struct {
		objs []client.Object
		// cycles are the clock's steps before each cycle after the first.
		cycles       []time.Duration
		wantYielding []string
		wantWoken    int
		wantHeld     bool
	}{
		"the preemptor is pending: the victim stands aside, and the first cycle wakes the queue": {
			objs: []client.Object{victim(metav1.ConditionFalse), podsGone, preemptor(nil)}, cycles: []time.Duration{time.Second},
			wantYielding: []string{"ns/victim"}, wantWoken: 1, wantHeld: true,
		},
		"the preemptor waits past handoverWait: the victim stands aside no longer": {
			objs: []client.Object{victim(metav1.ConditionFalse), podsGone, preemptor(nil)}, cycles: []time.Duration{handoverWait},
			// at the release, at handoverWait's timer (the parked victim), and at the end
			wantWoken: 3,
		},
		"the preemptor was admitted": {
			objs: []client.Object{victim(metav1.ConditionFalse), podsGone, preemptor(func(w *kueue.Workload) {
				w.Status.Conditions = []metav1.Condition{cond(kueue.WorkloadQuotaReserved, metav1.ConditionTrue)}
			})},
			wantWoken: 1,
		},
		"the preemptor was deactivated": {
			objs: []client.Object{victim(metav1.ConditionFalse), podsGone, preemptor(func(w *kueue.Workload) { w.Spec.Active = ptr.To(false) })}, wantWoken: 1,
		},
		"the preemptor finished": {
			objs: []client.Object{victim(metav1.ConditionFalse), podsGone, preemptor(func(w *kueue.Workload) {
				w.Status.Conditions = []metav1.Condition{cond(kueue.WorkloadFinished, metav1.ConditionTrue)}
			})},
			wantWoken: 1,
		},
		"the preemptor was deleted and created again under its name": {
			objs: []client.Object{victim(metav1.ConditionFalse), podsGone, preemptor(func(w *kueue.Workload) { w.UID = "another-uid" })}, wantWoken: 1,
		},
		"the preemptor is gone": {
			objs: []client.Object{victim(metav1.ConditionFalse), podsGone}, wantWoken: 1,
		},
		"the victim holds quota again": {
			objs: []client.Object{victim(metav1.ConditionTrue), podsGone, preemptor(nil)}, wantWoken: 1,
		},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			ctx, _ := utiltesting.ContextWithLog(t)
			clk := testingclock.NewFakeClock(now)
			c := utiltesting.NewClientBuilder().WithObjects(tc.objs...).Build()
			woken := 0
			d := newDrainHolds(c, clk, func(context.Context, kueue.ClusterQueueReference) { woken++ }, tsconfig.DefaultMaxHandoverHold, nil)
			key := types.NamespacedName{Namespace: "ns", Name: "victim"}
			d.holds[key] = &drainHold{uid: "victim-uid", cq: "cq", job: types.NamespacedName{Namespace: "ns", Name: "job"}, jobUID: "job-uid",
				deadline: now.Add(time.Minute), preemptor: types.NamespacedName{Namespace: "other", Name: "preemptor"}, preemptorUID: "preemptor-uid"}
			got := d.apply(ctx, &schdcache.Snapshot{})
			for _, step := range tc.cycles {
				clk.Step(step)
				got = d.apply(ctx, &schdcache.Snapshot{})
			}
			if diff := cmp.Diff(tc.wantYielding, got["cq"].yielding); diff != "" {
				t.Errorf("victims standing aside (-want +got):\n%s", diff)
			}
			if got["cq"].yieldsToPreemptor("ns/victim") != (len(tc.wantYielding) > 0) {
				t.Errorf("yieldsToPreemptor disagrees with the list %v", got["cq"].yielding)
			}
			if len(got["cq"].victims) != 0 {
				t.Errorf("victims whose quota is held: %v, want none (the Pods are gone)", got["cq"].victims)
			}
			if woken != tc.wantWoken {
				t.Errorf("woken %d times, want %d", woken, tc.wantWoken)
			}
			if _, held := d.holds[key]; held != tc.wantHeld {
				t.Errorf("hold kept = %v, want %v", held, tc.wantHeld)
			}
		})
	}
}

// A head that stands aside for its preemptor is held back, as inadmissible, in a BestEffortFIFO
// ClusterQueue; a StrictFIFO one keeps its order (its head would come back every cycle and hold
// the whole queue), and a head that stands aside for nothing is not held.
func TestVetoAdmissionOfAVictimStandingAside(t *testing.T) {
	cq := func(name string, strategy kueue.QueueingStrategy) *kueue.ClusterQueue {
		return &kueue.ClusterQueue{ObjectMeta: metav1.ObjectMeta{Name: name}, Spec: kueue.ClusterQueueSpec{QueueingStrategy: strategy}}
	}
	victim := &kueue.Workload{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "victim", UID: "victim-uid"}}
	cases := map[string]struct {
		cq       kueue.ClusterQueueReference
		yielding []string
		mode     flavorassigner.FlavorAssignmentMode
		wantHeld bool
	}{
		"BestEffortFIFO, standing aside":       {cq: "best-effort", yielding: []string{"ns/victim"}, mode: flavorassigner.Fit, wantHeld: true},
		"StrictFIFO, standing aside":           {cq: "strict", yielding: []string{"ns/victim"}, mode: flavorassigner.Fit},
		"BestEffortFIFO, another stands aside": {cq: "best-effort", yielding: []string{"ns/other"}, mode: flavorassigner.Fit},
		"BestEffortFIFO, needs to preempt":     {cq: "best-effort", yielding: []string{"ns/victim"}, mode: flavorassigner.Preempt},
		"BestEffortFIFO, nobody stands aside":  {cq: "best-effort", mode: flavorassigner.Fit},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			ctx, _ := utiltesting.ContextWithLog(t)
			c := utiltesting.NewClientBuilder().WithObjects(cq("best-effort", kueue.BestEffortFIFO), cq("strict", kueue.StrictFIFO)).Build()
			s := &Scheduler{client: c, draining: draining{tc.cq: {yielding: tc.yielding}}}
			e := &entry{Head: qcache.Head{Info: workload.Info{Obj: victim, ClusterQueue: tc.cq}}}
			held := s.vetoAdmission(ctx, e, &schdcache.Snapshot{}, tc.mode)
			if held != tc.wantHeld {
				t.Fatalf("held back = %v, want %v", held, tc.wantHeld)
			}
			want := ""
			if tc.wantHeld {
				want = "waiting for the workload it was preempted for to be admitted before taking quota again"
			}
			if diff := cmp.Diff(want, e.inadmissibleMsg); diff != "" {
				t.Errorf("message (-want +got):\n%s", diff)
			}
		})
	}
}
