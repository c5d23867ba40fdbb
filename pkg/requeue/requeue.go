// Package requeue puts workloads evicted for one of this project's preemption reasons back in
// their queue.
//
// Upstream's job reconciler (and its concurrent-admission variant reconciler), when it gives back
// the quota of an evicted workload, marks the workload Requeued=True only for evictions it knows
// ("Preempted", node failures). For any other reason it writes Requeued=False with the eviction's
// reason, and upstream's queue then never offers the workload to the scheduler again. Victims
// preempted for one of our reasons (policy.IsOwnReason: time-sharing, expected-runtime requeue)
// carry it on their Evicted condition, so this controller does for them what the job reconciler
// does for "Preempted": it sets Requeued=True.
package requeue

import (
	"context"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	apimeta "k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/tools/events"
	"k8s.io/klog/v2"
	"k8s.io/utils/clock"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/builder"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/predicate"

	kueue "sigs.k8s.io/kueue/apis/kueue/v1beta2"
	"sigs.k8s.io/kueue/pkg/features"
	"sigs.k8s.io/kueue/pkg/workload"
	workloadfinish "sigs.k8s.io/kueue/pkg/workload/finish"
	workloadpatching "sigs.k8s.io/kueue/pkg/workload/patching"

	"github.com/kueue-timeshare/kueue-timeshare/pkg/policy"
)

// ReasonRequeued is the reason of the Normal event recorded on a workload this controller requeues.
const ReasonRequeued = "Requeued"

// messages say in words why a workload went back to its queue, by preemption reason: each
// feature's unit words its own.
var messages = func() map[string]string {
	out := map[string]string{}
	for reason, words := range policy.OwnReasonWords() {
		out[reason] = words.Requeue
	}
	return out
}()

// Reconciler sets Requeued=True on workloads that upstream left out of their queue after an
// eviction for one of our reasons.
type Reconciler struct {
	client   client.Client
	recorder events.EventRecorder
	clock    clock.Clock
}

// New returns a Reconciler; a nil clock is the real one.
func New(cl client.Client, recorder events.EventRecorder, clk clock.Clock) *Reconciler {
	if clk == nil {
		clk = clock.RealClock{}
	}
	return &Reconciler{client: cl, recorder: recorder, clock: clk}
}

// Setup registers a Reconciler with mgr. Like our other controllers it runs on the leader only:
// it writes.
func Setup(mgr ctrl.Manager, clk clock.Clock) error {
	r := New(mgr.GetClient(), mgr.GetEventRecorder("kueue-timeshare"), clk)
	return ctrl.NewControllerManagedBy(mgr).
		Named("timeshare-requeue").
		For(&kueue.Workload{}, builder.WithPredicates(predicate.NewPredicateFuncs(func(o client.Object) bool {
			wl, ok := o.(*kueue.Workload)
			return ok && Needed(wl) != ""
		}))).
		Complete(r)
}

// Needed returns the reason under which wl waits to be requeued by this controller, or "" when it
// does not: its Requeued condition is False with one of our reasons, and it no longer holds quota,
// is active and has not finished. Like upstream's job reconciler, it leaves out a workload owned
// by a single Pod while SkipReassignmentForPodOwnedWorkloads is on: that workload ends with its Pod.
func Needed(wl *kueue.Workload) string {
	c := apimeta.FindStatusCondition(wl.Status.Conditions, kueue.WorkloadRequeued)
	if c == nil || c.Status != metav1.ConditionFalse || !policy.IsOwnReason(c.Reason) {
		return ""
	}
	if workload.HasQuotaReservation(wl) || !workload.IsActive(wl) || workloadfinish.IsFinished(wl) {
		return ""
	}
	if features.Enabled(features.SkipReassignmentForPodOwnedWorkloads) && workload.OwnedBySinglePod(wl) {
		return ""
	}
	return c.Reason
}

// Reconcile requeues the workload if it still needs it. The status patch is upstream's
// admission-status patch, which carries the resourceVersion read: if anyone changed the workload
// since, the patch fails with a conflict and nothing is written; the newer version reaches this
// controller as an update of its own.
func (r *Reconciler) Reconcile(ctx context.Context, req ctrl.Request) (ctrl.Result, error) {
	log := ctrl.LoggerFrom(ctx)
	var wl kueue.Workload
	if err := r.client.Get(ctx, req.NamespacedName, &wl); err != nil {
		return ctrl.Result{}, client.IgnoreNotFound(err)
	}
	reason := Needed(&wl)
	if reason == "" {
		return ctrl.Result{}, nil
	}
	message := messages[reason]
	err := workloadpatching.PatchAdmissionStatus(ctx, r.client, &wl, r.clock, func(w *kueue.Workload) (bool, error) {
		return workload.SetRequeuedCondition(w, reason, message, true), nil
	})
	if err != nil {
		if apierrors.IsConflict(err) {
			log.V(3).Info("Workload changed while being requeued; waiting for its newer version", "workload", klog.KObj(&wl))
			return ctrl.Result{}, nil
		}
		return ctrl.Result{}, client.IgnoreNotFound(err)
	}
	log.V(2).Info("Workload requeued", "workload", klog.KObj(&wl), "reason", reason)
	r.recorder.Eventf(&wl, nil, corev1.EventTypeNormal, ReasonRequeued, "Requeue", message)
	return ctrl.Result{}, nil
}
