package scheduler

import (
	"context"
	"errors"
	"testing"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/interceptor"

	kueue "sigs.k8s.io/kueue/apis/kueue/v1beta2"
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
