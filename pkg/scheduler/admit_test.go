package scheduler

import (
	"context"
	"errors"
	"sync/atomic"
	"testing"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/interceptor"

	kueue "sigs.k8s.io/kueue/apis/kueue/v1beta2"
	qcache "sigs.k8s.io/kueue/pkg/cache/queue"
	"sigs.k8s.io/kueue/pkg/workload"
)

// A quota reservation whose request fails may still have been written (its reply lost): the
// cache must then keep counting it, since the queue does not take back a workload that holds
// quota and no other event may come for it. One that was not written goes back to the queue.
// The scheduler learns which from the API server when it has a reader for it, else from the
// informer (here both are the fake client).
func TestAdmissionWriteFails(t *testing.T) {
	cases := map[string]struct {
		err         error
		written     bool
		apiReader   bool
		wantCounted bool
	}{
		"timeout, written, read back from the informer":   {err: apierrors.NewTimeoutError("injected", 1), written: true, wantCounted: true},
		"timeout, written, read back from the API server": {err: apierrors.NewTimeoutError("injected", 1), written: true, apiReader: true, wantCounted: true},
		"500, written, read back from the API server":     {err: apierrors.NewInternalError(errors.New("injected")), written: true, apiReader: true, wantCounted: true},
		"timeout, not written":                            {err: apierrors.NewTimeoutError("injected", 1), apiReader: true},
		"conflict, not written":                           {err: apierrors.NewConflict(kueue.Resource("workloads"), "a", errors.New("injected")), apiReader: true},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			w := newWorld(t, worldObjects{
				clusterQueues: []*kueue.ClusterQueue{cpuQueue("cq", "2").Obj()},
				workloads:     []*kueue.Workload{cpuWorkload("a", "cq", "1").Obj()},
			})
			failing := interceptor.NewClient(w.client.(client.WithWatch), interceptor.Funcs{
				SubResourcePatch: func(ctx context.Context, c client.Client, sub string, obj client.Object, patch client.Patch, opts ...client.SubResourcePatchOption) error {
					if tc.written {
						if err := c.SubResource(sub).Patch(ctx, obj, patch, opts...); err != nil {
							return err
						}
					}
					return tc.err
				},
			})
			var opts []Option
			if tc.apiReader {
				opts = append(opts, WithAPIReader(w.client))
			}
			s, wait := w.scheduler(opts...)
			s.client = failing
			s.Cycle(w.ctx)
			wait()

			wl := w.workload("a")
			if got := workload.HasQuotaReservation(wl); got != tc.written {
				t.Fatalf("quota reserved in the API: %t, want %t", got, tc.written)
			}
			if got := w.cache.IsAdded(*workload.NewInfo(wl)); got != tc.wantCounted {
				t.Errorf("counted in the cache: %t, want %t", got, tc.wantCounted)
			}
			if tc.written {
				// As after any admission, the workload controller takes it out of the queue
				// when it sees the reservation.
				return
			}
			pending, err := w.queues.Pending(cpuQueue("cq", "2").Obj())
			if err != nil {
				t.Fatal(err)
			}
			if pending != 1 {
				t.Errorf("pending in the queue: %d, want 1", pending)
			}
		})
	}
}

// A workload found not to fit while another's reservation was counted before its write failed is
// put back in its queue when the failure gives that quota back; otherwise it would wait for the
// next change of its ClusterQueue, which in a queue of long-running workloads may never come.
func TestFailedAdmissionRequeuesWhatItsQuotaHeldBack(t *testing.T) {
	cases := map[string]struct {
		err error
		// wantB: b holds the quota in the end.
		wantB bool
	}{
		// a is gone: b must get its place.
		"deleted meanwhile": {err: apierrors.NewNotFound(kueue.Resource("workloads"), "a"), wantB: true},
		// a is requeued and comes first again: b keeps waiting, rightly.
		"refused for a while": {err: apierrors.NewTimeoutError("injected", 1), wantB: false},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			w := newWorld(t, worldObjects{
				clusterQueues: []*kueue.ClusterQueue{cpuQueue("cq", "1").Obj()},
				workloads: []*kueue.Workload{
					cpuWorkload("a", "cq", "1").Creation(t0.Add(-time.Minute)).Obj(),
					cpuWorkload("b", "cq", "1").Obj(),
				},
			})
			release := make(chan struct{})
			var failed atomic.Bool
			held := interceptor.NewClient(w.client.(client.WithWatch), interceptor.Funcs{
				SubResourcePatch: func(ctx context.Context, c client.Client, sub string, obj client.Object, patch client.Patch, opts ...client.SubResourcePatchOption) error {
					if obj.GetName() == "a" && failed.CompareAndSwap(false, true) {
						<-release
						return tc.err
					}
					return c.SubResource(sub).Patch(ctx, obj, patch, opts...)
				},
			})
			s, wait := w.scheduler(WithAPIReader(w.client))
			s.client = held
			// Cycles that do not wait for their writes (Cycle does): the queue manager's heads,
			// without blocking while there are none.
			s.nextHeads = func(ctx context.Context) []qcache.Head {
				done, cancel := context.WithCancel(ctx)
				cancel()
				return s.queues.Heads(done)
			}
			// What setting the world up asked the requeuer is done first: from then on only a
			// release of quota moves a parked workload back.
			w.requeuer.ProcessRequeues(w.ctx)
			// a is assumed while its write hangs; b, the next head, does not fit beside it.
			s.schedule(w.ctx)
			s.schedule(w.ctx)
			if workload.HasQuotaReservation(w.workload("b")) {
				t.Fatal("b was admitted beside a's reservation")
			}
			close(release)
			wait()
			for range 3 {
				w.requeuer.ProcessRequeues(w.ctx)
				s.Cycle(w.ctx)
				wait()
			}
			if got := workload.HasQuotaReservation(w.workload("b")); got != tc.wantB {
				t.Errorf("b holds the quota: %t, want %t", got, tc.wantB)
			}
		})
	}
}
