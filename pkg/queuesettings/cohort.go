package queuesettings

import (
	"context"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/client-go/tools/events"
	"k8s.io/utils/ptr"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/controller"

	kueue "sigs.k8s.io/kueue/apis/kueue/v1beta2"

	tsapi "github.com/kueue-timeshare/kueue-timeshare/apis/kueue/v1beta2"
	"github.com/kueue-timeshare/kueue-timeshare/pkg/message"
)

// CohortReconciler feeds the store from Cohorts read as unstructured objects.
type CohortReconciler struct {
	client   client.Client
	store    *Store
	recorder events.EventRecorder
	onChange func(context.Context, kueue.CohortReference)
}

// SetupCohorts registers the Cohort reconciler with mgr. onChange, if set, is called when a
// Cohort's settings change, so that pending workloads of its tree are tried again.
func SetupCohorts(mgr ctrl.Manager, store *Store, onChange func(context.Context, kueue.CohortReference)) error {
	r := &CohortReconciler{client: mgr.GetClient(), store: store, recorder: mgr.GetEventRecorder("kueue-timeshare"), onChange: onChange}
	return ctrl.NewControllerManagedBy(mgr).
		Named("timeshare-cohort-settings").
		For(newCohort()).
		WithOptions(controller.Options{NeedLeaderElection: ptr.To(false)}).
		Complete(r)
}

// CohortInCache reports whether a Cohort object is in r, the manager's informer cache: Kueue's
// cache is fed from the same informer, so a Cohort Kueue has seen is there first. An error other
// than not found counts as present, so that preemption waits rather than ignores a protection.
func CohortInCache(r client.Reader) func(kueue.CohortReference) bool {
	return func(c kueue.CohortReference) bool {
		err := r.Get(context.Background(), client.ObjectKey{Name: string(c)}, &kueue.Cohort{})
		return !apierrors.IsNotFound(err)
	}
}

func newCohort() *unstructured.Unstructured {
	u := &unstructured.Unstructured{}
	u.SetGroupVersionKind(kueue.SchemeGroupVersion.WithKind("Cohort"))
	return u
}

// Reconcile parses and validates one Cohort's settings; invalid ones are ignored with a Warning
// event, as for ClusterQueues.
func (r *CohortReconciler) Reconcile(ctx context.Context, req ctrl.Request) (ctrl.Result, error) {
	log := ctrl.LoggerFrom(ctx)
	name := kueue.CohortReference(req.Name)
	u := newCohort()
	if err := r.client.Get(ctx, req.NamespacedName, u); err != nil {
		if apierrors.IsNotFound(err) {
			r.store.setCohortRead(name, false)
			r.store.ledger.SetCohort(name, nil)
			if r.store.setCohort(name, inherited{}) && r.onChange != nil {
				r.onChange(ctx, name)
			}
			return ctrl.Result{}, nil
		}
		return ctrl.Result{}, err
	}
	in, problem := parseCohort(u)
	if problem != "" {
		log.Info("Ignoring invalid kueue-timeshare settings", "cohort", req.Name, "problem", message.Bound(problem))
		r.recorder.Eventf(u, nil, corev1.EventTypeWarning, ReasonInvalidSettings, "Validate",
			"%s", message.Bound("kueue-timeshare settings ignored: "+problem))
	}
	changed := r.store.setCohort(name, in)
	changed = r.store.ledger.SetCohort(name, u) || changed
	// A Cohort just read may have ClusterQueues below it that were refused preemption meanwhile.
	changed = r.store.setCohortRead(name, true) || changed
	if changed && r.onChange != nil {
		r.onChange(ctx, name)
	}
	log.V(3).Info("Cohort settings", "cohort", req.Name, "unitSettings", in.units)
	return ctrl.Result{}, nil
}

func parseCohort(u *unstructured.Unstructured) (inherited, string) {
	raw, err := rawSpec(u)
	if err != nil {
		return inherited{}, err.Error()
	}
	ext, err := tsapi.ParseCohortExtension(raw)
	if err != nil {
		return inherited{}, err.Error()
	}
	if errs := tsapi.ValidateCohortExtension(ext); len(errs) > 0 {
		return inherited{}, errs.ToAggregate().Error()
	}
	return inheritedOf(ext), ""
}
