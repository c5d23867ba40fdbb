package queuesettings

import (
	"context"
	"testing"
	"time"

	"github.com/go-logr/logr"
	"github.com/google/go-cmp/cmp"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	utilfeature "k8s.io/apiserver/pkg/util/feature"
	clientgoscheme "k8s.io/client-go/kubernetes/scheme"
	featuregatetesting "k8s.io/component-base/featuregate/testing"
	testingclock "k8s.io/utils/clock/testing"
	"sigs.k8s.io/controller-runtime/pkg/client/fake"

	kueue "sigs.k8s.io/kueue/apis/kueue/v1beta2"
	qcache "sigs.k8s.io/kueue/pkg/cache/queue"
	schdcache "sigs.k8s.io/kueue/pkg/cache/scheduler"
	"sigs.k8s.io/kueue/pkg/controller/core/indexer"
	"sigs.k8s.io/kueue/pkg/scheduler/preemption/expectations"
	testingwrappers "sigs.k8s.io/kueue/pkg/util/testing/v1beta2"

	"github.com/kueue-timeshare/kueue-timeshare/pkg/features"
	"github.com/kueue-timeshare/kueue-timeshare/pkg/plugins/minruntime"
	"github.com/kueue-timeshare/kueue-timeshare/pkg/plugins/timebased"
	"github.com/kueue-timeshare/kueue-timeshare/pkg/policy"
)

func TestSetClusterQueue(t *testing.T) {
	cq := func(preemption map[string]any) *unstructured.Unstructured {
		u := newClusterQueue()
		u.SetName("cq")
		u.Object["spec"] = map[string]any{"preemption": preemption}
		return u
	}
	cases := map[string]struct {
		obj     *unstructured.Unstructured
		want    timebased.Settings
		wantMin minruntime.Settings
		wantErr string
	}{
		"stores the window and min-runtimes": {
			obj: cq(map[string]any{"withinClusterQueue": "LowerOrNewerEqualPriority",
				"withinClusterQueueConfig": map[string]any{"minAdmitDuration": "4h"}, "reclaimMinRuntime": "10m"}),
			want:    timebased.Settings{MinAdmitDuration: 4 * time.Hour},
			wantMin: minruntime.Settings{Reclaim: policy.Set(10 * time.Minute)},
		},
		"ignores invalid settings, as the controller does, and says why": {
			obj:     cq(map[string]any{"withinClusterQueue": "LowerOrNewerEqualPriority", "withinClusterQueueConfig": map[string]any{"minAdmitDuration": "30s"}}),
			wantErr: "spec.preemption.withinClusterQueueConfig.minAdmitDuration: Invalid value: \"30s\": must be at least 1m0s",
		},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			s := NewStore()
			// Earlier settings are replaced, also by invalid ones.
			setWindow(s, "cq", time.Minute)
			err := s.SetClusterQueue(tc.obj)
			if got := errString(err); got != tc.wantErr {
				t.Errorf("error %q, want %q", got, tc.wantErr)
			}
			if diff := cmp.Diff(tc.want, timebased.SettingsOf(s, "cq")); diff != "" {
				t.Errorf("settings (-want +got):\n%s", diff)
			}
			if diff := cmp.Diff(tc.wantMin, minRuntimesOf(s, "ClusterQueue", "cq")); diff != "" {
				t.Errorf("min-runtimes (-want +got):\n%s", diff)
			}
		})
	}
}

func TestSetCohort(t *testing.T) {
	cohort := func(preemption map[string]any) *unstructured.Unstructured {
		u := newCohort()
		u.SetName("org")
		u.Object["spec"] = map[string]any{"preemption": preemption}
		return u
	}
	cases := map[string]struct {
		obj     *unstructured.Unstructured
		want    minruntime.Settings
		wantErr string
	}{
		"stores the min-runtimes": {
			obj:  cohort(map[string]any{"preemptMinRuntime": "5m"}),
			want: minruntime.Settings{Preempt: policy.Set(5 * time.Minute)},
		},
		"ignores a negative one and says why": {
			obj:     cohort(map[string]any{"preemptMinRuntime": "-5m"}),
			wantErr: "spec.preemption.preemptMinRuntime: Invalid value: \"-5m0s\": must not be negative",
		},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			s := NewStore()
			err := s.SetCohort(tc.obj)
			if got := errString(err); got != tc.wantErr {
				t.Errorf("error %q, want %q", got, tc.wantErr)
			}
			if diff := cmp.Diff(tc.want, minRuntimesOf(s, "Cohort", "org")); diff != "" {
				t.Errorf("min-runtimes (-want +got):\n%s", diff)
			}
		})
	}
}

func errString(err error) string {
	if err == nil {
		return ""
	}
	return err.Error()
}

// TestWakerSweep: a pending workload that found no victim is retried once a window (or, with
// protection, a preemptMinRuntime) of its ClusterQueue has ended, when the caller sweeps, and not
// before.
func TestWakerSweep(t *testing.T) {
	t0 := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	lead := time.Second - LeadMargin
	cases := map[string]struct {
		after   time.Duration
		lead    time.Duration
		gateOff bool
		// protection: the ClusterQueue has preemptMinRuntime 1m instead of minAdmitDuration 1m
		// (and gateOff turns MinRuntimeProtection off).
		protection bool
		// finished: the workload holding the quota has finished (it keeps its admission).
		finished bool
		// exactAdmission, when set, is when the Waker's Candidate says the workload was admitted,
		// instead of its conditions' time.
		exactAdmission time.Duration
		wantHead       bool
		// wantNext is the end the waker saw coming, for its next exact sweep.
		wantNext time.Time
	}{
		"inside the window":              {after: 30 * time.Second, wantNext: t0.Add(time.Minute)},
		"exactly at the end: not passed": {after: time.Minute, wantNext: t0.Add(time.Minute)},
		"just past the end":              {after: time.Minute + WakePrecision, wantHead: true},
		"window ended":                   {after: 61 * time.Second, wantHead: true},
		"window ended, feature gate off": {after: 61 * time.Second, gateOff: true},
		"inside the window, gate off":    {after: 30 * time.Second, gateOff: true},
		// With a lead, the queue is also woken a requeue batch period early, so that its retry
		// lands just after the end; the end itself is still to come.
		"inside the window, before the lead": {after: 30 * time.Second, lead: lead, wantNext: t0.Add(time.Minute - lead)},
		"at the lead":                        {after: time.Minute - lead + WakePrecision, lead: lead, wantHead: true, wantNext: t0.Add(time.Minute)},
		"window ended, with a lead":          {after: 61 * time.Second, lead: lead, wantHead: true},
		"at the lead time, without a lead":   {after: time.Minute - lead + WakePrecision, wantNext: t0.Add(time.Minute)},
		"protected":                          {after: 30 * time.Second, protection: true, wantNext: t0.Add(time.Minute)},
		"protection ended":                   {after: 61 * time.Second, protection: true, wantHead: true},
		"protection ended, gate off":         {after: 61 * time.Second, protection: true, gateOff: true},
		"window ended, the holder finished":  {after: 61 * time.Second, finished: true},
		"an exact admission time, inside":    {after: time.Minute + WakePrecision, exactAdmission: 500 * time.Millisecond, wantNext: t0.Add(time.Minute + 500*time.Millisecond)},
		"an exact admission time, past":      {after: time.Minute + time.Second, exactAdmission: 500 * time.Millisecond, wantHead: true},
		"protection ended, holder finished":  {after: 61 * time.Second, protection: true, finished: true},
		"at the lead, gate off":              {after: time.Minute - lead + WakePrecision, lead: lead, gateOff: true},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			if tc.gateOff {
				gate := features.TimeBasedSamePriorityPreemption
				if tc.protection {
					gate = features.MinRuntimeProtection
				}
				featuregatetesting.SetFeatureGateDuringTest(t, utilfeature.DefaultFeatureGate, gate, false)
			}
			ctx := context.Background()
			clk := testingclock.NewFakeClock(t0)
			cq := testingwrappers.MakeClusterQueue("cq").
				ResourceGroup(*testingwrappers.MakeFlavorQuotas("default").Resource(corev1.ResourceCPU, "1").Obj()).Obj()
			lq := testingwrappers.MakeLocalQueue("lq", "ns").ClusterQueue("cq").Obj()
			running := testingwrappers.MakeWorkload("running", "ns").Queue("lq").Request(corev1.ResourceCPU, "1").
				SimpleReserveQuota("cq", "default", t0).AdmittedAt(true, t0).Obj()
			if tc.finished {
				running.Status.Conditions = append(running.Status.Conditions, metav1.Condition{
					Type: kueue.WorkloadFinished, Status: metav1.ConditionTrue, Reason: "Succeeded", LastTransitionTime: metav1.NewTime(t0.Add(time.Second)),
				})
			}
			waiting := testingwrappers.MakeWorkload("waiting", "ns").Queue("lq").Request(corev1.ResourceCPU, "1").Creation(t0).Obj()

			scheme := runtime.NewScheme()
			if err := clientgoscheme.AddToScheme(scheme); err != nil {
				t.Fatal(err)
			}
			if err := kueue.AddToScheme(scheme); err != nil {
				t.Fatal(err)
			}
			cl := fake.NewClientBuilder().WithScheme(scheme).
				WithIndex(&kueue.Workload{}, indexer.WorkloadClusterQueueKey, indexer.IndexWorkloadClusterQueue).
				WithIndex(&kueue.Workload{}, HoldingQuotaKey, indexHoldingQuota).
				WithIndex(&kueue.Workload{}, indexer.WorkloadQueueKey, indexer.IndexWorkloadQueue).
				WithIndex(&kueue.LocalQueue{}, indexer.QueueClusterQueueKey, indexer.IndexQueueClusterQueue).
				WithObjects(&corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: "ns"}}, cq, lq, running, waiting).WithStatusSubresource(&kueue.Workload{}).Build()
			cache := schdcache.New(cl)
			queues, requeuer := qcache.NewManagerForUnitTestsWithRequeuer(cl, cache, qcache.WithPreemptionExpectations(expectations.New()))
			cache.AddOrUpdateResourceFlavor(logr.Discard(), testingwrappers.MakeResourceFlavor("default").Obj())
			if err := cache.AddClusterQueue(ctx, cq); err != nil {
				t.Fatal(err)
			}
			if err := queues.AddClusterQueue(ctx, cq); err != nil {
				t.Fatal(err)
			}
			if err := queues.AddLocalQueue(ctx, lq); err != nil {
				t.Fatal(err)
			}
			cache.AddOrUpdateWorkload(logr.Discard(), running)
			if err := queues.AddOrUpdateWorkload(logr.Discard(), waiting); err != nil {
				t.Fatal(err)
			}
			// Set-up notifications are not what the test is about.
			requeuer.ProcessRequeues(ctx)
			// The scheduler found no victim: the workload waits among the inadmissible ones.
			heads := queues.Heads(ctx)
			if len(heads) != 1 {
				t.Fatalf("got %d heads, want the waiting workload", len(heads))
			}
			queues.RequeueWorkload(ctx, &heads[0].Info, qcache.RequeueReasonGeneric, "")
			// Only the sweep may retry it from here on.
			requeuer.ProcessRequeues(ctx)

			store := NewStore()
			if tc.protection {
				store.setClusterQueueUnits("cq", minRuntimesIn(minruntime.Settings{Preempt: policy.Set(time.Minute)}))
			} else {
				setWindow(store, "cq", time.Minute)
			}
			w := &Waker{Clock: clk, Client: cl, Queues: queues, Store: store, Log: logr.Discard(), Lead: tc.lead}
			if tc.exactAdmission != 0 {
				w.Candidate = func(wl *kueue.Workload) policy.Candidate {
					c := policy.CandidateOf(wl, "")
					c.QuotaReservedAt, c.AdmittedAt = t0.Add(tc.exactAdmission), t0.Add(tc.exactAdmission)
					return c
				}
			}
			w.last = t0
			clk.SetTime(t0.Add(tc.after))
			w.Sweep(ctx)
			requeuer.ProcessRequeues(ctx)
			if !w.next.Equal(tc.wantNext) {
				t.Errorf("next end %s, want %s", w.next, tc.wantNext)
			}
			if got := w.Next().At; !got.Equal(tc.wantNext) {
				t.Errorf("Next() at %s, want %s", got, tc.wantNext)
			}

			done, cancel := context.WithCancel(ctx)
			cancel()
			if got := len(queues.Heads(done)) == 1; got != tc.wantHead {
				t.Errorf("waiting workload retried: %t, want %t", got, tc.wantHead)
			}
		})
	}
}
