// Package firstready records, under the PodsReady runtime clock, when a workload's Pods were first
// ready since its admission (policy.FirstReadyCondition). Min-runtimes and expected runtimes count
// from that record, so that a readiness probe that fails for a moment does not start a workload's
// protection again: protection is bought once per admission.
package firstready

import (
	"context"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	apimeta "k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/klog/v2"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/builder"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/predicate"

	kueue "sigs.k8s.io/kueue/apis/kueue/v1beta2"
	workloadpatching "sigs.k8s.io/kueue/pkg/workload/patching"

	"github.com/kueue-timeshare/kueue-timeshare/pkg/policy"
)

// Message is the message of the record.
const Message = "The workload's Pods were first ready at this condition's lastTransitionTime since its admission; " +
	"min-runtimes and expected runtimes count from then, whatever its readiness does later"

// Reconciler writes the record of a workload whose Pods are ready and that has none for its
// current admission.
type Reconciler struct {
	client client.Client
}

// Setup registers a Reconciler with mgr. It runs on the leader only: it writes.
func Setup(mgr ctrl.Manager) error {
	r := &Reconciler{client: mgr.GetClient()}
	return ctrl.NewControllerManagedBy(mgr).
		Named("timeshare-first-ready").
		For(&kueue.Workload{}, builder.WithPredicates(predicate.NewPredicateFuncs(func(o client.Object) bool {
			wl, ok := o.(*kueue.Workload)
			return ok && Needed(wl) != nil
		}))).
		Complete(r)
}

// Needed returns the record wl should carry and does not: its Pods are ready, since its current
// admission, and no record of this admission is there. Nil otherwise.
func Needed(wl *kueue.Workload) *metav1.Condition {
	admitted := apimeta.FindStatusCondition(wl.Status.Conditions, kueue.WorkloadAdmitted)
	if admitted == nil || admitted.Status != metav1.ConditionTrue {
		return nil
	}
	ready := apimeta.FindStatusCondition(wl.Status.Conditions, kueue.WorkloadPodsReady)
	if ready == nil || ready.Status != metav1.ConditionTrue || ready.LastTransitionTime.Before(&admitted.LastTransitionTime) {
		return nil
	}
	if !policy.FirstReady(wl, admitted.LastTransitionTime.Time).IsZero() {
		return nil
	}
	return &metav1.Condition{
		Type: policy.FirstReadyCondition, Status: metav1.ConditionTrue, Reason: kueue.WorkloadPodsReady, Message: Message,
		LastTransitionTime: ready.LastTransitionTime, ObservedGeneration: wl.Generation,
	}
}

func (r *Reconciler) Reconcile(ctx context.Context, req ctrl.Request) (ctrl.Result, error) {
	var wl kueue.Workload
	if err := r.client.Get(ctx, req.NamespacedName, &wl); err != nil {
		return ctrl.Result{}, client.IgnoreNotFound(err)
	}
	record := Needed(&wl)
	if record == nil {
		return ctrl.Result{}, nil
	}
	err := workloadpatching.PatchStatus(ctx, r.client, &wl, client.FieldOwner(policy.FirstReadyFieldOwner), func(w *kueue.Workload) (bool, error) {
		// A record of an earlier admission is replaced, time included.
		apimeta.RemoveStatusCondition(&w.Status.Conditions, policy.FirstReadyCondition)
		apimeta.SetStatusCondition(&w.Status.Conditions, *record)
		return true, nil
	})
	if apierrors.IsConflict(err) || apierrors.IsNotFound(err) {
		return ctrl.Result{}, nil
	}
	if err == nil {
		ctrl.LoggerFrom(ctx).V(3).Info("Recorded when the workload's Pods were first ready", "workload", klog.KObj(&wl), "at", record.LastTransitionTime)
	}
	return ctrl.Result{}, err
}
