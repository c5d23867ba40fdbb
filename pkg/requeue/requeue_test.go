package requeue

import (
	"context"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/google/go-cmp/cmp/cmpopts"
	corev1 "k8s.io/api/core/v1"
	apimeta "k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	testingclock "k8s.io/utils/clock/testing"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/interceptor"

	kueue "sigs.k8s.io/kueue/apis/kueue/v1beta2"
	"sigs.k8s.io/kueue/pkg/features"
	utiltesting "sigs.k8s.io/kueue/pkg/util/testing"
	utiltestingapi "sigs.k8s.io/kueue/pkg/util/testing/v1beta2"

	tsapi "github.com/kueue-timeshare/kueue-timeshare/apis/kueue/v1beta2"
	"github.com/kueue-timeshare/kueue-timeshare/pkg/plugins/timebased"
)

var t0 = time.Date(2026, 3, 1, 12, 0, 0, 0, time.UTC)

func requeued(status metav1.ConditionStatus, reason string) metav1.Condition {
	return metav1.Condition{Type: kueue.WorkloadRequeued, Status: status, Reason: reason, Message: "by the test", LastTransitionTime: metav1.NewTime(t0)}
}

func quotaReserved(status metav1.ConditionStatus) metav1.Condition {
	return metav1.Condition{Type: kueue.WorkloadQuotaReserved, Status: status, Reason: "ByTest", LastTransitionTime: metav1.NewTime(t0)}
}

// evicted is what upstream's job reconciler leaves behind after an eviction for reason: the quota
// given back and Requeued=False with the eviction's reason.
func evicted(reason string) *utiltestingapi.WorkloadWrapper {
	return utiltestingapi.MakeWorkload("wl", "ns").
		Condition(metav1.Condition{Type: kueue.WorkloadEvicted, Status: metav1.ConditionTrue, Reason: reason, Message: "evicted by the test", LastTransitionTime: metav1.NewTime(t0)}).
		Condition(quotaReserved(metav1.ConditionFalse)).
		Condition(requeued(metav1.ConditionFalse, reason))
}

func TestReconcile(t *testing.T) {
	podGVK := corev1.SchemeGroupVersion.WithKind("Pod")
	cases := map[string]struct {
		wl *kueue.Workload
		// podOwnedSkip sets SkipReassignmentForPodOwnedWorkloads (on by default).
		podOwnedSkip *bool
		// wantRequeued is the Requeued condition after Reconcile; nil: the workload is not written.
		wantRequeued *metav1.Condition
		wantEvents   []utiltesting.EventRecord
	}{
		"time-sharing victim: requeued under the same reason": {
			wl:           evicted(timebased.Reason).Obj(),
			wantRequeued: &metav1.Condition{Type: kueue.WorkloadRequeued, Status: metav1.ConditionTrue, Reason: timebased.Reason, Message: "Requeued after time-sharing preemption"},
			wantEvents: []utiltesting.EventRecord{{Key: types.NamespacedName{Namespace: "ns", Name: "wl"}, EventType: corev1.EventTypeNormal,
				Reason: ReasonRequeued, Message: "Requeued after time-sharing preemption"}},
		},
		"expected-runtime victim: requeued under the same reason": {
			wl:           evicted(tsapi.ExpectedRuntimeReason).Obj(),
			wantRequeued: &metav1.Condition{Type: kueue.WorkloadRequeued, Status: metav1.ConditionTrue, Reason: tsapi.ExpectedRuntimeReason, Message: "Requeued after preemption for running past its expected runtime"},
			wantEvents: []utiltesting.EventRecord{{Key: types.NamespacedName{Namespace: "ns", Name: "wl"}, EventType: corev1.EventTypeNormal,
				Reason: ReasonRequeued, Message: "Requeued after preemption for running past its expected runtime"}},
		},
		"deactivated: left alone": {
			wl: evicted(kueue.WorkloadDeactivated).Active(false).Obj(),
		},
		"deactivated although active again: left to upstream's workload controller": {
			wl: evicted(kueue.WorkloadDeactivated).Obj(),
		},
		"ClusterQueue stopped: left alone": {
			wl: evicted(kueue.WorkloadEvictedByClusterQueueStopped).Obj(),
		},
		"LocalQueue stopped: left alone": {
			wl: evicted(kueue.WorkloadEvictedByLocalQueueStopped).Obj(),
		},
		"inadmissible: left alone": {
			wl: evicted("Inadmissible").Obj(),
		},
		"PodsReady timeout: left to upstream's backoff": {
			wl: evicted(kueue.WorkloadEvictedByPodsReadyTimeout).Obj(),
		},
		"upstream's preemption left unrequeued (a pod-owned workload): left alone": {
			wl: evicted(kueue.WorkloadEvictedByPreemption).Obj(),
		},
		"our reason, still holding quota: not yet": {
			wl: evicted(timebased.Reason).Condition(quotaReserved(metav1.ConditionTrue)).Obj(),
		},
		"our reason, deactivated since: left alone": {
			wl: evicted(timebased.Reason).Active(false).Obj(),
		},
		"our reason, finished since: left alone": {
			wl: evicted(timebased.Reason).FinishedAt(t0).Obj(),
		},
		"our reason, already requeued: nothing to do": {
			wl: evicted(timebased.Reason).Condition(requeued(metav1.ConditionTrue, timebased.Reason)).Obj(),
		},
		"no Requeued condition: nothing to do": {
			wl: utiltestingapi.MakeWorkload("wl", "ns").Obj(),
		},
		"owned by a single Pod: ends with its Pod, as upstream's preemptions do": {
			wl: evicted(timebased.Reason).OwnerReference(podGVK, "pod", "pod-uid").Obj(),
		},
		"owned by a single Pod, SkipReassignmentForPodOwnedWorkloads off: requeued": {
			wl:           evicted(timebased.Reason).OwnerReference(podGVK, "pod", "pod-uid").Obj(),
			podOwnedSkip: new(false),
			wantRequeued: &metav1.Condition{Type: kueue.WorkloadRequeued, Status: metav1.ConditionTrue, Reason: timebased.Reason, Message: "Requeued after time-sharing preemption"},
			wantEvents: []utiltesting.EventRecord{{Key: types.NamespacedName{Namespace: "ns", Name: "wl"}, EventType: corev1.EventTypeNormal,
				Reason: ReasonRequeued, Message: "Requeued after time-sharing preemption"}},
		},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			if tc.podOwnedSkip != nil {
				features.SetFeatureGateDuringTest(t, features.SkipReassignmentForPodOwnedWorkloads, *tc.podOwnedSkip)
			}
			ctx, _ := utiltesting.ContextWithLog(t)
			cl := newClient(tc.wl, interceptor.Funcs{})
			before := get(t, ctx, cl)
			if got := Needed(before) != ""; got != (tc.wantRequeued != nil) {
				t.Errorf("Needed = %v, want %v", got, tc.wantRequeued != nil)
			}
			recorder := &utiltesting.EventRecorder{}
			r := New(cl, recorder, testingclock.NewFakeClock(t0))
			if _, err := r.Reconcile(ctx, ctrl.Request{NamespacedName: client.ObjectKeyFromObject(tc.wl)}); err != nil {
				t.Fatalf("Reconcile: %v", err)
			}
			after := get(t, ctx, cl)
			if tc.wantRequeued == nil {
				if diff := cmp.Diff(before, after); diff != "" {
					t.Errorf("workload written (-before +after):\n%s", diff)
				}
			} else {
				got := apimeta.FindStatusCondition(after.Status.Conditions, kueue.WorkloadRequeued)
				if diff := cmp.Diff(tc.wantRequeued, got, cmpopts.IgnoreFields(metav1.Condition{}, "LastTransitionTime", "ObservedGeneration")); diff != "" {
					t.Errorf("Requeued condition (-want +got):\n%s", diff)
				}
				// Nothing else changes: the other conditions stay as they were (in any order).
				if diff := cmp.Diff(before.Status.Conditions, after.Status.Conditions,
					cmpopts.IgnoreSliceElements(func(c metav1.Condition) bool { return c.Type == kueue.WorkloadRequeued }),
					cmpopts.SortSlices(func(a, b metav1.Condition) bool { return a.Type < b.Type })); diff != "" {
					t.Errorf("other conditions changed (-before +after):\n%s", diff)
				}
				if Needed(after) != "" {
					t.Error("still needs a requeue after Reconcile")
				}
			}
			if diff := cmp.Diff(tc.wantEvents, recorder.RecordedEvents); diff != "" {
				t.Errorf("events (-want +got):\n%s", diff)
			}
		})
	}
}

// A workload written by someone else between the read and the patch is not overwritten: the patch
// fails on the resourceVersion, nothing is written and no event is recorded; the newer version
// comes to the controller as an update of its own.
func TestReconcileDoesNotOverwriteNewerVersion(t *testing.T) {
	ctx, _ := utiltesting.ContextWithLog(t)
	wl := evicted(timebased.Reason).Obj()
	var raced bool
	cl := newClient(wl, interceptor.Funcs{
		Get: func(ctx context.Context, c client.WithWatch, key client.ObjectKey, obj client.Object, opts ...client.GetOption) error {
			if err := c.Get(ctx, key, obj, opts...); err != nil || raced {
				return err
			}
			raced = true
			// Someone deactivates the workload right after this read.
			newer := obj.DeepCopyObject().(*kueue.Workload)
			newer.Spec.Active = new(false)
			return c.Update(ctx, newer)
		},
	})
	recorder := &utiltesting.EventRecorder{}
	r := New(cl, recorder, testingclock.NewFakeClock(t0))
	if _, err := r.Reconcile(ctx, ctrl.Request{NamespacedName: client.ObjectKeyFromObject(wl)}); err != nil {
		t.Fatalf("Reconcile: %v", err)
	}
	after := get(t, ctx, cl)
	if c := apimeta.FindStatusCondition(after.Status.Conditions, kueue.WorkloadRequeued); c == nil || c.Status != metav1.ConditionFalse {
		t.Errorf("Requeued = %v, want the False condition left as it was", c)
	}
	if after.Spec.Active == nil || *after.Spec.Active {
		t.Error("the other writer's change was lost")
	}
	if len(recorder.RecordedEvents) != 0 {
		t.Errorf("events recorded: %v", recorder.RecordedEvents)
	}
	if _, err := r.Reconcile(ctx, ctrl.Request{NamespacedName: client.ObjectKeyFromObject(wl)}); err != nil {
		t.Fatalf("second Reconcile: %v", err)
	}
	if c := apimeta.FindStatusCondition(get(t, ctx, cl).Status.Conditions, kueue.WorkloadRequeued); c.Status != metav1.ConditionFalse {
		t.Error("an inactive workload was requeued")
	}
}

func TestReconcileGone(t *testing.T) {
	ctx, _ := utiltesting.ContextWithLog(t)
	r := New(utiltesting.NewClientBuilder().Build(), &utiltesting.EventRecorder{}, nil)
	if _, err := r.Reconcile(ctx, ctrl.Request{NamespacedName: types.NamespacedName{Namespace: "ns", Name: "gone"}}); err != nil {
		t.Fatalf("Reconcile of a deleted workload: %v", err)
	}
}

// newClient is a fake API server holding wl, where server-side apply acts as a merge patch (as in
// upstream's unit tests); extra intercepts other calls.
func newClient(wl *kueue.Workload, extra interceptor.Funcs) client.Client {
	extra.SubResourcePatch = utiltesting.TreatSSAAsStrategicMerge
	return utiltesting.NewClientBuilder().
		WithObjects(wl.DeepCopy()).
		WithStatusSubresource(&kueue.Workload{}).
		WithInterceptorFuncs(extra).
		Build()
}

func get(t *testing.T, ctx context.Context, cl client.Client) *kueue.Workload {
	t.Helper()
	var wl kueue.Workload
	if err := cl.Get(ctx, types.NamespacedName{Namespace: "ns", Name: "wl"}, &wl); err != nil {
		t.Fatal(err)
	}
	return &wl
}
