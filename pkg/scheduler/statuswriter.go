package scheduler

import (
	"context"
	"slices"
	"sync"

	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/sets"
	"k8s.io/client-go/util/retry"
	"k8s.io/klog/v2"
	"k8s.io/utils/clock"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"

	kueue "sigs.k8s.io/kueue/apis/kueue/v1beta2"
	"sigs.k8s.io/kueue/pkg/workload"
	workloadpatching "sigs.k8s.io/kueue/pkg/workload/patching"
)

// pendingStatusWriter writes the pending status of heads that wait (WithPendingStatusWriters).
// With no workers it writes inline, as upstream. With workers the cycle only queues the write:
// one per Workload (a newer one replaces a queued one), sent by the workers through the loop's
// own client, so its rate limit bounds them. Queued writes are dropped when the manager stops:
// the next leader's first cycle computes every waiting head's status again and writes it.
type pendingStatusWriter struct {
	workers int
	client  client.Client
	clock   clock.Clock
	// reserved reports whether the scheduler cache holds quota for wl (a reservation being
	// written).
	reserved func(wl *kueue.Workload) bool

	mu sync.Mutex
	// changed is signalled when a write is queued or finished and when the writer stops.
	changed sync.Cond
	// order lists the keys of queued, oldest first; writing are the keys being written.
	order   []types.NamespacedName
	queued  map[types.NamespacedName]pendingWrite
	writing sets.Set[types.NamespacedName]
	started bool
	stopped bool
	running sync.WaitGroup
}

// pendingWrite is a waiting head's status as one cycle saw it.
type pendingWrite struct {
	seen   *kueue.Workload
	update workloadpatching.UpdateFunc
}

func newPendingStatusWriter(workers int, c client.Client, clk clock.Clock, reserved func(*kueue.Workload) bool) *pendingStatusWriter {
	w := &pendingStatusWriter{
		workers:  workers,
		client:   c,
		clock:    clk,
		reserved: reserved,
		queued:   make(map[types.NamespacedName]pendingWrite),
		writing:  sets.New[types.NamespacedName](),
	}
	w.changed.L = &w.mu
	return w
}

// patchAdmissionStatus is workloadpatching.PatchAdmissionStatus for a head that waits. With
// workers it queues the write and returns at once; the options are then the writer's own.
func (w *pendingStatusWriter) patchAdmissionStatus(ctx context.Context, wl *kueue.Workload, update workloadpatching.UpdateFunc, options ...workloadpatching.PatchStatusOption) error {
	if w.workers == 0 {
		return workloadpatching.PatchAdmissionStatus(ctx, w.client, wl, w.clock, update, options...)
	}
	key := client.ObjectKeyFromObject(wl)
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.stopped {
		return nil
	}
	if _, ok := w.queued[key]; !ok {
		w.order = append(w.order, key)
	}
	w.queued[key] = pendingWrite{seen: wl, update: update}
	w.changed.Broadcast()
	return nil
}

// start runs the workers until ctx ends.
func (w *pendingStatusWriter) start(ctx context.Context) {
	if w.workers == 0 {
		return
	}
	w.mu.Lock()
	w.started = true
	w.mu.Unlock()
	log := ctrl.LoggerFrom(ctx).WithName("pending-status")
	ctx = ctrl.LoggerInto(ctx, log)
	for range w.workers {
		w.running.Go(func() {
			for {
				key, p, ok := w.next(true)
				if !ok {
					return
				}
				w.write(ctx, key, p)
				w.done(key)
			}
		})
	}
	go func() {
		<-ctx.Done()
		w.mu.Lock()
		defer w.mu.Unlock()
		w.stopped = true
		w.order, w.queued = nil, map[types.NamespacedName]pendingWrite{}
		w.changed.Broadcast()
	}()
}

// flush returns once every queued write is done. Without started workers (Cycle, tests) it
// writes them itself, oldest first.
func (w *pendingStatusWriter) flush(ctx context.Context) {
	w.mu.Lock()
	started := w.started
	if started {
		for !w.stopped && (len(w.queued) > 0 || w.writing.Len() > 0) {
			w.changed.Wait()
		}
	}
	w.mu.Unlock()
	if started {
		return
	}
	for {
		key, p, ok := w.next(false)
		if !ok {
			return
		}
		w.write(ctx, key, p)
		w.done(key)
	}
}

// next takes the oldest queued write whose Workload is not being written; block waits for one
// until the writer stops.
func (w *pendingStatusWriter) next(block bool) (types.NamespacedName, pendingWrite, bool) {
	w.mu.Lock()
	defer w.mu.Unlock()
	for !w.stopped {
		// A Workload is written by one worker at a time, so its writes land in order.
		if i := slices.IndexFunc(w.order, func(k types.NamespacedName) bool { return !w.writing.Has(k) }); i >= 0 {
			key := w.order[i]
			if i == 0 {
				w.order = w.order[1:]
			} else {
				w.order = slices.Delete(w.order, i, i+1)
			}
			p := w.queued[key]
			delete(w.queued, key)
			w.writing.Insert(key)
			return key, p, true
		}
		if !block {
			break
		}
		w.changed.Wait()
	}
	return types.NamespacedName{}, pendingWrite{}, false
}

func (w *pendingStatusWriter) done(key types.NamespacedName) {
	w.mu.Lock()
	defer w.mu.Unlock()
	w.writing.Delete(key)
	w.changed.Broadcast()
}

// write applies p to the Workload as the informer cache has it now, so that nothing newer is
// overwritten and nothing unchanged is sent. The patch carries that version: a conflict means
// the Workload moved on, and the write is computed again from the cache.
func (w *pendingStatusWriter) write(ctx context.Context, key types.NamespacedName, p pendingWrite) {
	log := ctrl.LoggerFrom(ctx).WithValues("workload", klog.KRef(key.Namespace, key.Name))
	err := retry.RetryOnConflict(retry.DefaultBackoff, func() error {
		var latest kueue.Workload
		if err := w.client.Get(ctx, key, &latest); err != nil {
			return client.IgnoreNotFound(err)
		}
		if w.outdated(p, &latest) {
			log.V(3).Info("Skipping an outdated pending status")
			return nil
		}
		return workloadpatching.PatchAdmissionStatus(ctx, w.client, &latest, w.clock, p.update)
	})
	if err != nil && ctx.Err() == nil {
		log.Error(err, "Could not update Workload status")
	}
}

// outdated reports whether latest is no longer the workload the cycle saw waiting: recreated,
// or given quota since (written, or assumed by a later cycle and still being written).
func (w *pendingStatusWriter) outdated(p pendingWrite, latest *kueue.Workload) bool {
	if latest.UID != p.seen.UID {
		return true
	}
	if workload.HasQuotaReservation(p.seen) {
		return false
	}
	return workload.HasQuotaReservation(latest) || w.reserved(latest)
}
