package toleration

import (
	"context"
	"errors"
	"fmt"
	"sync"

	corev1 "k8s.io/api/core/v1"
	schedulingv1 "k8s.io/api/scheduling/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/client-go/tools/events"
	"k8s.io/utils/ptr"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/controller"

	kueue "sigs.k8s.io/kueue/apis/kueue/v1beta2"

	"github.com/kueue-timeshare/kueue-timeshare/apis/annotations"
	"github.com/kueue-timeshare/kueue-timeshare/pkg/message"
)

// ReasonInvalid is the reason of the Warning event on a class whose toleration annotations are
// ignored (possible when it was written while the webhook was down, or before it existed).
const ReasonInvalid = "InvalidPreemptionToleration"

type key struct {
	kind kueue.PriorityClassKind
	name string
}

// Store holds the toleration of every priority class it has read; a class read without one is
// kept as nil, so that a miss means "not read yet".
type Store struct {
	mu      sync.RWMutex
	classes map[key]*Toleration
	// misses, when set, is read for a class the controllers have not reconciled yet: a workload
	// may name a class created a moment ago, and its preemptor must not decide without it.
	misses client.Reader
}

// StoreOption configures a Store.
type StoreOption func(*Store)

// ReadMisses makes the store read a class it does not hold yet from r (the manager's cache).
func ReadMisses(r client.Reader) StoreOption {
	return func(s *Store) { s.misses = r }
}

// NewStore returns an empty store.
func NewStore(opts ...StoreOption) *Store {
	s := &Store{classes: map[key]*Toleration{}}
	for _, o := range opts {
		o(s)
	}
	return s
}

// For returns the toleration of the class ref points to, or nil. The result is shared: callers
// must not change it.
func (s *Store) For(ref *kueue.PriorityClassRef) *Toleration {
	if ref == nil {
		return nil
	}
	k := key{ref.Kind, ref.Name}
	s.mu.RLock()
	t, read := s.classes[k]
	s.mu.RUnlock()
	if read || s.misses == nil {
		return t
	}
	return s.readMiss(k)
}

// readMiss reads one class the controllers have not reconciled yet. A class that is not found
// is not remembered, since it may be created later.
func (s *Store) readMiss(k key) *Toleration {
	var obj client.Object
	var value func() int32
	switch k.kind {
	case kueue.WorkloadPriorityClassKind:
		c := &kueue.WorkloadPriorityClass{}
		obj, value = c, func() int32 { return c.Value }
	case kueue.PodPriorityClassKind:
		c := &schedulingv1.PriorityClass{}
		obj, value = c, func() int32 { return c.Value }
	default:
		return nil
	}
	if err := s.misses.Get(context.TODO(), client.ObjectKey{Name: k.name}, obj); err != nil {
		return nil
	}
	t, _ := toleration(k.kind, k.name, obj.GetAnnotations(), value())
	return s.set(k, t)
}

// set records what a class that exists declares; one that tolerates nothing is kept as read,
// without a toleration. It returns what was kept.
func (s *Store) set(k key, t *Toleration) *Toleration {
	if t != nil && !t.Tolerates() {
		t = nil
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	s.classes[k] = t
	return t
}

// forget records that a class is gone.
func (s *Store) forget(k key) {
	s.mu.Lock()
	defer s.mu.Unlock()
	delete(s.classes, k)
}

// toleration parses a class's annotations; invalid ones give none and a problem.
func toleration(kind kueue.PriorityClassKind, name string, ann map[string]string, value int32) (*Toleration, string) {
	t, errs := annotations.ParseToleration(ann, value)
	if len(errs) > 0 {
		return nil, errs.ToAggregate().Error()
	}
	return &Toleration{Toleration: t, Source: fmt.Sprintf("%s %s", kind, name)}, ""
}

// Set stores the toleration declared by the annotations of one priority class, as the controllers
// do: for callers that have no API server to watch, such as the simulator. Invalid annotations give
// no toleration, as with the controllers, and the error says what is wrong with them.
func (s *Store) Set(kind kueue.PriorityClassKind, name string, ann map[string]string, value int32) error {
	t, problem := toleration(kind, name, ann, value)
	s.set(key{kind, name}, t)
	if problem != "" {
		return errors.New(problem)
	}
	return nil
}

// Load reads every class once, so that the store is complete before the first scheduling cycle.
func (s *Store) Load(ctx context.Context, c client.Reader) error {
	var wpcs kueue.WorkloadPriorityClassList
	if err := c.List(ctx, &wpcs); err != nil {
		return fmt.Errorf("listing WorkloadPriorityClasses: %w", err)
	}
	for i := range wpcs.Items {
		o := &wpcs.Items[i]
		t, _ := toleration(kueue.WorkloadPriorityClassKind, o.Name, o.Annotations, o.Value)
		s.set(key{kueue.WorkloadPriorityClassKind, o.Name}, t)
	}
	var pcs schedulingv1.PriorityClassList
	if err := c.List(ctx, &pcs); err != nil {
		return fmt.Errorf("listing PriorityClasses: %w", err)
	}
	for i := range pcs.Items {
		o := &pcs.Items[i]
		t, _ := toleration(kueue.PodPriorityClassKind, o.Name, o.Annotations, o.Value)
		s.set(key{kueue.PodPriorityClassKind, o.Name}, t)
	}
	return nil
}

// reconciler feeds the store from one kind of class.
type reconciler struct {
	client   client.Client
	store    *Store
	recorder events.EventRecorder
	kind     kueue.PriorityClassKind
	newObj   func() client.Object
	value    func(client.Object) int32
}

// Setup registers the controllers for both kinds of class with mgr, which feed s; they run on
// every replica.
func (s *Store) Setup(mgr ctrl.Manager) error {
	store := s
	recorder := mgr.GetEventRecorder("kueue-timeshare")
	kinds := []*reconciler{
		{kind: kueue.WorkloadPriorityClassKind, newObj: func() client.Object { return &kueue.WorkloadPriorityClass{} },
			value: func(o client.Object) int32 { return o.(*kueue.WorkloadPriorityClass).Value }},
		{kind: kueue.PodPriorityClassKind, newObj: func() client.Object { return &schedulingv1.PriorityClass{} },
			value: func(o client.Object) int32 { return o.(*schedulingv1.PriorityClass).Value }},
	}
	for _, r := range kinds {
		r.client, r.store, r.recorder = mgr.GetClient(), store, recorder
		err := ctrl.NewControllerManagedBy(mgr).
			Named("timeshare-toleration-" + string(r.kind)).
			For(r.newObj()).
			WithOptions(controller.Options{NeedLeaderElection: ptr.To(false)}).
			Complete(r)
		if err != nil {
			return err
		}
	}
	return nil
}

func (r *reconciler) Reconcile(ctx context.Context, req ctrl.Request) (ctrl.Result, error) {
	log := ctrl.LoggerFrom(ctx)
	k := key{r.kind, req.Name}
	obj := r.newObj()
	if err := r.client.Get(ctx, req.NamespacedName, obj); err != nil {
		if apierrors.IsNotFound(err) {
			r.store.forget(k)
			return ctrl.Result{}, nil
		}
		return ctrl.Result{}, err
	}
	t, problem := toleration(r.kind, req.Name, obj.GetAnnotations(), r.value(obj))
	if problem != "" {
		log.Info("Ignoring invalid preemption toleration", "kind", r.kind, "name", req.Name, "problem", message.Bound(problem))
		r.recorder.Eventf(obj, nil, corev1.EventTypeWarning, ReasonInvalid, "Validate", "%s", message.Bound("preemption toleration ignored: "+problem))
	}
	r.store.set(k, t)
	if t != nil {
		log.V(3).Info("Preemption toleration", "kind", r.kind, "name", req.Name, "toleration", t.String())
	}
	return ctrl.Result{}, nil
}
