package expectedruntime

// The controller carries the expected-runtime annotations from a job to its Workload, and tells
// users (with Warning events on the Workload) when they are invalid; the unit reads them from the
// Workload.

import (
	"context"
	"encoding/json"
	"fmt"
	"sync"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/tools/events"
	"k8s.io/klog/v2"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/builder"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/event"
	"sigs.k8s.io/controller-runtime/pkg/predicate"

	kueue "sigs.k8s.io/kueue/apis/kueue/v1beta2"

	"github.com/kueue-timeshare/kueue-timeshare/apis/annotations"
	"github.com/kueue-timeshare/kueue-timeshare/pkg/features"
	"github.com/kueue-timeshare/kueue-timeshare/pkg/jobowner"
	"github.com/kueue-timeshare/kueue-timeshare/pkg/message"
)

// ReasonInvalid is the reason of the Warning event on a Workload whose expected-runtime
// annotations cannot be used; the workload is then never nominated.
const ReasonInvalid = "InvalidExpectedRuntime"

// propagated are the annotations a user sets on a job; requeue-not-before is ours, on the Workload.
var propagated = []string{annotations.ExpectedRuntime, annotations.RequeueDelay}

// Reconciler copies the annotations when a Workload appears or its annotations change.
type Reconciler struct {
	client   client.Client
	recorder events.EventRecorder
	// reported remembers the problem last reported per Workload, so an unchanged problem is not
	// reported again on every update.
	mu       sync.Mutex
	reported map[types.NamespacedName]string
}

// Setup registers the reconciler with mgr. It runs on the leader only: it writes.
func Setup(mgr ctrl.Manager) error {
	r := &Reconciler{client: mgr.GetClient(), recorder: mgr.GetEventRecorder("kueue-timeshare"), reported: map[types.NamespacedName]string{}}
	return ctrl.NewControllerManagedBy(mgr).
		Named("timeshare-expected-runtime").
		For(&kueue.Workload{}, builder.WithPredicates(predicate.Or(createOnly(), predicate.AnnotationChangedPredicate{}))).
		Complete(r)
}

func createOnly() predicate.Predicate {
	return predicate.Funcs{
		CreateFunc:  func(event.CreateEvent) bool { return true },
		UpdateFunc:  func(event.UpdateEvent) bool { return false },
		DeleteFunc:  func(event.DeleteEvent) bool { return true },
		GenericFunc: func(event.GenericEvent) bool { return false },
	}
}

func (r *Reconciler) Reconcile(ctx context.Context, req ctrl.Request) (ctrl.Result, error) {
	log := ctrl.LoggerFrom(ctx)
	var wl kueue.Workload
	if err := r.client.Get(ctx, req.NamespacedName, &wl); err != nil {
		if apierrors.IsNotFound(err) {
			r.mu.Lock()
			delete(r.reported, req.NamespacedName)
			r.mu.Unlock()
		}
		return ctrl.Result{}, client.IgnoreNotFound(err)
	}
	if !features.Enabled(features.ExpectedRuntimeRequeue) {
		return ctrl.Result{}, nil
	}
	if err := r.copyFromOwner(ctx, &wl); err != nil {
		return ctrl.Result{}, err
	}
	problem := ""
	if s, ok := annotations.ParseExpectedRuntime(wl.Annotations); ok && s.Skip != "" {
		problem = s.Problem
	}
	r.mu.Lock()
	last, seen := r.reported[req.NamespacedName]
	r.reported[req.NamespacedName] = problem
	r.mu.Unlock()
	if problem != "" && (!seen || last != problem) {
		// The problem quotes the tenant's annotation value, of any length.
		log.V(4).Info("Invalid expected-runtime annotations", "workload", klog.KObj(&wl), "problem", message.Bound(problem))
		r.recorder.Eventf(&wl, nil, corev1.EventTypeWarning, ReasonInvalid, "Validate",
			"%s", message.Bound("expected-runtime requeue is off for this workload: "+problem))
	}
	return ctrl.Result{}, nil
}

// copyFromOwner copies the job's annotations to wl (re-reading wl through the patch result).
func (r *Reconciler) copyFromOwner(ctx context.Context, wl *kueue.Workload) error {
	job, err := jobowner.Of(ctx, r.client, wl)
	if job == nil || err != nil {
		return err
	}
	patch := map[string]any{}
	for _, k := range propagated {
		if v, ok := job.GetAnnotations()[k]; ok && wl.Annotations[k] != v {
			patch[k] = v
		}
	}
	if len(patch) == 0 {
		return nil
	}
	values, err := json.Marshal(patch)
	if err != nil {
		return err
	}
	body := fmt.Appendf(nil, `{"metadata":{"annotations":%s}}`, values)
	if err := r.client.Patch(ctx, wl, client.RawPatch(types.MergePatchType, body)); err != nil {
		return err
	}
	ctrl.LoggerFrom(ctx).V(3).Info("Copied expected-runtime annotations from the job", "workload", klog.KObj(wl), "job", job.GetName())
	return nil
}
