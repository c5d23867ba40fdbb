package simulator

import (
	"context"
	"slices"
	"strings"
	"time"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/tools/events"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/interceptor"

	kueue "sigs.k8s.io/kueue/apis/kueue/v1beta2"
	boostcontroller "sigs.k8s.io/kueue/cmd/experimental/kueue-priority-booster/pkg/controller"

	"github.com/kueue-timeshare/kueue-timeshare/pkg/timeutil"
)

// booster runs upstream's experimental kueue-priority-booster controller in the simulation. It
// measures how long a workload has been admitted against the wall clock, so the Workloads it
// reads have their condition times moved by the distance between the wall clock and the simulated
// one: to it, a workload admitted an hour ago in the simulation was admitted an hour ago.
type booster struct {
	w *world
	r *boostcontroller.PriorityBoostReconciler
}

func newBooster(w *world, window time.Duration) *booster {
	shifted := interceptor.NewClient(w.client, interceptor.Funcs{
		Get: func(ctx context.Context, c client.WithWatch, key client.ObjectKey, obj client.Object, opts ...client.GetOption) error {
			if err := c.Get(ctx, key, obj, opts...); err != nil {
				return err
			}
			if wl, ok := obj.(*kueue.Workload); ok {
				shift := time.Since(w.clock.Now())
				for i := range wl.Status.Conditions {
					c := &wl.Status.Conditions[i]
					c.LastTransitionTime.Time = c.LastTransitionTime.Add(shift)
				}
			}
			return nil
		},
	})
	return &booster{w: w, r: boostcontroller.NewPriorityBoostReconciler(shifted, &events.FakeRecorder{}, boostcontroller.WithTimeSharingInterval(window))}
}

// reconcile runs the controller on every workload, as its watch would after any change, and
// returns when it asked to look again (0 for never).
func (b *booster) reconcile(now time.Duration) time.Duration {
	keys := make([]types.NamespacedName, 0, len(b.w.seen))
	for k := range b.w.seen {
		keys = append(keys, k)
	}
	slices.SortFunc(keys, func(a, c types.NamespacedName) int { return strings.Compare(a.String(), c.String()) })
	var next time.Duration
	for _, k := range keys {
		res, err := b.r.Reconcile(b.w.ctx, ctrl.Request{NamespacedName: k})
		if err != nil {
			b.w.note("priority booster on %s: %v", k, err)
			continue
		}
		if res.RequeueAfter > 0 {
			// Round up: the wall clock moved on a little since the controller looked.
			at := timeutil.Add(now, timeutil.Add(res.RequeueAfter.Round(time.Millisecond), time.Millisecond))
			if next == 0 || at < next {
				next = at
			}
		}
	}
	return next
}

// boosterObjects adapts ClusterQueues to the booster and returns its time-sharing interval, the
// scenario's largest minAdmitDuration. The booster lowers priorities, so pending workloads must be
// allowed to preempt lower ones (LowerPriority), and minAdmitDuration has no meaning.
func boosterObjects(o *Objects) (window time.Duration) {
	for _, u := range o.ClusterQueues {
		raw, _, _ := unstructured.NestedString(u.Object, "spec", "preemption", "withinClusterQueueConfig", "minAdmitDuration")
		d, _ := time.ParseDuration(raw)
		window = max(window, d)
		within, _, _ := unstructured.NestedString(u.Object, "spec", "preemption", "withinClusterQueue")
		if within == string(kueue.PreemptionPolicyLowerOrNewerEqualPriority) {
			_ = unstructured.SetNestedField(u.Object, string(kueue.PreemptionPolicyLowerPriority), "spec", "preemption", "withinClusterQueue")
		}
		unstructured.RemoveNestedField(u.Object, "spec", "preemption", "withinClusterQueueConfig")
	}
	return window
}
