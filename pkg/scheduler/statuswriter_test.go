package scheduler

import (
	"context"
	"errors"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	apimeta "k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	testingclock "k8s.io/utils/clock/testing"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/interceptor"

	kueue "sigs.k8s.io/kueue/apis/kueue/v1beta2"
	utiltesting "sigs.k8s.io/kueue/pkg/util/testing"
	"sigs.k8s.io/kueue/pkg/workload"
)

// pendingUpdate is the cycle's update of a waiting head, as requeueAndUpdate makes it.
func pendingUpdate(msg string) func(*kueue.Workload) (bool, error) {
	return func(wl *kueue.Workload) (bool, error) {
		return workload.UnsetQuotaReservationWithCondition(wl, "Pending", msg, t0), nil
	}
}

func pendingMessage(t *testing.T, c client.Client, name string) string {
	t.Helper()
	var wl kueue.Workload
	if err := c.Get(t.Context(), types.NamespacedName{Namespace: "ns", Name: name}, &wl); err != nil {
		if apierrors.IsNotFound(err) {
			return "(deleted)"
		}
		t.Fatal(err)
	}
	if c := apimeta.FindStatusCondition(wl.Status.Conditions, kueue.WorkloadQuotaReserved); c != nil {
		return c.Message
	}
	return ""
}

func TestPendingStatusWriter(t *testing.T) {
	type write struct{ name, msg string }
	waiting := func(name, msg string) *kueue.Workload {
		wl := cpuWorkload(name, "cq", "1").Obj()
		_ = workload.UnsetQuotaReservationWithCondition(wl, "Pending", msg, t0)
		return wl
	}
	cases := map[string]struct {
		workloads []*kueue.Workload
		writes    []write
		// conflicts is how many patches the API server refuses with a conflict first.
		conflicts int
		// since the cycle queued its writes: these got quota, were assumed by a later cycle, or
		// were deleted.
		reservedSince, assumedSince, deletedSince []string
		wantPatches                               int
		wantMessages                              map[string]string
	}{
		"two writes for one workload: one patch, the latest message": {
			workloads:    []*kueue.Workload{cpuWorkload("a", "cq", "1").Obj()},
			writes:       []write{{"a", "first"}, {"a", "second"}},
			wantPatches:  1,
			wantMessages: map[string]string{"a": "second"},
		},
		"nothing a user sees changed: no patch": {
			workloads:    []*kueue.Workload{waiting("a", "same")},
			writes:       []write{{"a", "same"}},
			wantMessages: map[string]string{"a": "same"},
		},
		"a newer message replaces the written one": {
			workloads:    []*kueue.Workload{waiting("a", "old")},
			writes:       []write{{"a", "new"}},
			wantPatches:  1,
			wantMessages: map[string]string{"a": "new"},
		},
		"one patch per workload": {
			workloads:    []*kueue.Workload{cpuWorkload("a", "cq", "1").Obj(), cpuWorkload("b", "cq", "1").Obj(), cpuWorkload("c", "cq", "1").Obj()},
			writes:       []write{{"a", "a waits"}, {"b", "b waits"}, {"c", "c waits"}, {"b", "b still waits"}},
			wantPatches:  3,
			wantMessages: map[string]string{"a": "a waits", "b": "b still waits", "c": "c waits"},
		},
		"a conflict: computed again and retried": {
			workloads:    []*kueue.Workload{cpuWorkload("a", "cq", "1").Obj()},
			writes:       []write{{"a", "waits"}},
			conflicts:    2,
			wantPatches:  3,
			wantMessages: map[string]string{"a": "waits"},
		},
		"given quota since: not written": {
			workloads:     []*kueue.Workload{cpuWorkload("a", "cq", "1").Obj(), cpuWorkload("b", "cq", "1").Obj()},
			writes:        []write{{"a", "waits"}, {"b", "waits"}},
			reservedSince: []string{"a"},
			wantPatches:   1,
			wantMessages:  map[string]string{"a": "", "b": "waits"},
		},
		"assumed by a later cycle: not written": {
			workloads:    []*kueue.Workload{cpuWorkload("a", "cq", "1").Obj()},
			writes:       []write{{"a", "waits"}},
			assumedSince: []string{"a"},
			wantMessages: map[string]string{"a": ""},
		},
		"deleted since: not written": {
			workloads:    []*kueue.Workload{cpuWorkload("a", "cq", "1").Obj()},
			writes:       []write{{"a", "waits"}},
			deletedSince: []string{"a"},
			wantMessages: map[string]string{"a": "(deleted)"},
		},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			ctx, cancel := context.WithCancel(t.Context())
			defer cancel()
			var mu sync.Mutex
			patches, conflicts := 0, tc.conflicts
			builder := utiltesting.NewClientBuilder().WithStatusSubresource(&kueue.Workload{})
			for _, wl := range tc.workloads {
				builder = builder.WithObjects(wl.DeepCopy())
			}
			c := builder.WithInterceptorFuncs(interceptor.Funcs{
				SubResourcePatch: func(ctx context.Context, c client.Client, sub string, obj client.Object, patch client.Patch, opts ...client.SubResourcePatchOption) error {
					mu.Lock()
					patches++
					refuse := conflicts > 0
					conflicts--
					mu.Unlock()
					if refuse {
						return apierrors.NewConflict(kueue.Resource("workloads"), obj.GetName(), errors.New("injected"))
					}
					return utiltesting.TreatSSAAsStrategicMerge(ctx, c, sub, obj, patch, opts...)
				},
			}).Build()
			w := newPendingStatusWriter(2, c, testingclock.NewFakeClock(t0), func(*kueue.Workload) bool { return false })
			assumed := map[string]bool{}
			for _, name := range tc.assumedSince {
				assumed[name] = true
			}
			w.reserved = func(wl *kueue.Workload) bool { return assumed[wl.Name] }

			seen := map[string]*kueue.Workload{}
			for _, wl := range tc.workloads {
				seen[wl.Name] = wl
			}
			for _, wr := range tc.writes {
				if err := w.patchAdmissionStatus(ctx, seen[wr.name].DeepCopy(), pendingUpdate(wr.msg)); err != nil {
					t.Fatal(err)
				}
			}
			for _, name := range tc.reservedSince {
				var wl kueue.Workload
				if err := c.Get(ctx, client.ObjectKeyFromObject(seen[name]), &wl); err != nil {
					t.Fatal(err)
				}
				wl.Status.Conditions = []metav1.Condition{{Type: kueue.WorkloadQuotaReserved, Status: metav1.ConditionTrue, Reason: "QuotaReserved", LastTransitionTime: metav1.NewTime(t0)}}
				if err := c.Status().Update(ctx, &wl); err != nil {
					t.Fatal(err)
				}
			}
			for _, name := range tc.deletedSince {
				if err := c.Delete(ctx, seen[name]); err != nil {
					t.Fatal(err)
				}
			}
			mu.Lock()
			patches = 0
			mu.Unlock()
			// Started after the writes were queued, so that coalescing does not race the workers.
			w.start(ctx)
			w.flush(ctx)

			got := map[string]string{}
			for name := range tc.wantMessages {
				got[name] = pendingMessage(t, c, name)
			}
			if diff := cmp.Diff(tc.wantMessages, got); diff != "" {
				t.Errorf("messages (-want +got):\n%s", diff)
			}
			if patches != tc.wantPatches {
				t.Errorf("%d patches, want %d", patches, tc.wantPatches)
			}
		})
	}
}

func TestPendingStatusWriterStopsWithContext(t *testing.T) {
	var patches int
	c := utiltesting.NewClientBuilder().WithStatusSubresource(&kueue.Workload{}).
		WithObjects(cpuWorkload("a", "cq", "1").Obj()).
		WithInterceptorFuncs(interceptor.Funcs{SubResourcePatch: func(ctx context.Context, c client.Client, sub string, obj client.Object, patch client.Patch, opts ...client.SubResourcePatchOption) error {
			patches++
			return utiltesting.TreatSSAAsStrategicMerge(ctx, c, sub, obj, patch, opts...)
		}}).Build()
	w := newPendingStatusWriter(3, c, testingclock.NewFakeClock(t0), func(*kueue.Workload) bool { return false })
	ctx, cancel := context.WithCancel(t.Context())
	w.start(ctx)
	cancel()
	stopped := make(chan struct{})
	go func() {
		w.running.Wait()
		close(stopped)
	}()
	select {
	case <-stopped:
	case <-time.After(10 * time.Second):
		t.Fatal("the workers did not stop with their context")
	}
	if err := w.patchAdmissionStatus(t.Context(), cpuWorkload("a", "cq", "1").Obj(), pendingUpdate("waits")); err != nil {
		t.Fatal(err)
	}
	w.flush(t.Context())
	if patches != 0 || pendingMessage(t, c, "a") != "" {
		t.Errorf("a stopped writer wrote (%d patches)", patches)
	}
}

// TestRequeueDoesNotWaitForTheClient: the cycle's requeueAndUpdate returns while the API server
// has not answered the write, which lands once it does.
func TestRequeueDoesNotWaitForTheClient(t *testing.T) {
	w := newWorld(t, worldObjects{
		clusterQueues: []*kueue.ClusterQueue{cpuQueue("cq", "1").Obj()},
		workloads:     []*kueue.Workload{cpuWorkload("a", "cq", "2").Obj()},
	})
	entered, release := make(chan struct{}, 1), make(chan struct{})
	slow := interceptor.NewClient(w.client.(client.WithWatch), interceptor.Funcs{
		SubResourcePatch: func(ctx context.Context, c client.Client, sub string, obj client.Object, patch client.Patch, opts ...client.SubResourcePatchOption) error {
			entered <- struct{}{}
			<-release
			return utiltesting.TreatSSAAsStrategicMerge(ctx, c, sub, obj, patch, opts...)
		},
	})
	s := New(w.queues, w.cache, slow, w.recorder, WithClock(t, w.clock), WithPendingStatusWriters(2))
	ctx, cancel := context.WithCancel(w.ctx)
	defer cancel()
	s.pendingStatus.start(ctx)
	done, stop := context.WithCancel(ctx)
	stop()
	heads := w.queues.Heads(done)
	if len(heads) != 1 {
		t.Fatalf("%d heads, want 1", len(heads))
	}

	returned := make(chan struct{})
	go func() {
		s.requeueAndUpdate(ctx, entry{Head: heads[0], status: notNominated, inadmissibleMsg: "waits for quota"})
		close(returned)
	}()
	select {
	case <-returned:
	case <-time.After(5 * time.Second):
		close(release)
		t.Fatal("requeueAndUpdate waited for the API server")
	}
	select {
	case <-entered:
	case <-time.After(10 * time.Second):
		t.Fatal("the write never reached the API server")
	}
	close(release)
	s.pendingStatus.flush(ctx)
	if got := pendingMessage(t, w.client, "a"); got != "waits for quota" {
		t.Errorf("message %q, want %q", got, "waits for quota")
	}
}

// TestPendingStatusAfterRestart: writes still queued when the manager stops are lost, and the
// next manager's first cycle, which reads the waiting heads from the API again, writes them.
func TestPendingStatusAfterRestart(t *testing.T) {
	objs := worldObjects{
		clusterQueues: []*kueue.ClusterQueue{cpuQueue("cq", "1").Obj()},
		workloads:     []*kueue.Workload{cpuWorkload("a", "cq", "2").Obj()},
	}
	before := newWorld(t, objs)
	s := New(before.queues, before.cache, before.client, before.recorder, WithClock(t, before.clock), WithPendingStatusWriters(2))
	ctx, stop := context.WithCancel(before.ctx)
	s.pendingStatus.start(ctx)
	stop()
	s.pendingStatus.running.Wait()
	s.schedule(before.ctx)
	if got := pendingMessage(t, before.client, "a"); got != "" {
		t.Fatalf("a stopped writer wrote %q", got)
	}

	objs.workloads = []*kueue.Workload{before.workload("a")}
	after := newWorld(t, objs)
	s = New(after.queues, after.cache, after.client, after.recorder, WithClock(t, after.clock), WithPendingStatusWriters(2))
	if heads, _ := s.Cycle(after.ctx); len(heads) != 1 {
		t.Fatalf("%d heads after the restart, want 1", len(heads))
	}
	if got := pendingMessage(t, after.client, "a"); !strings.Contains(got, "insufficient quota") {
		t.Errorf("message after the restart %q, want the flavor assigner's", got)
	}
}
