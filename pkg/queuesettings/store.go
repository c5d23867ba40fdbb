// Package queuesettings keeps each ClusterQueue's and Cohort's kueue-timeshare settings (the
// extension fields Kueue's typed objects drop) for the preemptor, read from the raw objects by
// small controllers.
package queuesettings

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"reflect"
	"sync"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/util/sets"
	"k8s.io/client-go/tools/events"
	"k8s.io/utils/ptr"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/controller"

	kueue "sigs.k8s.io/kueue/apis/kueue/v1beta2"

	tsconfig "github.com/kueue-timeshare/kueue-timeshare/apis/config/v1alpha1"
	tsapi "github.com/kueue-timeshare/kueue-timeshare/apis/kueue/v1beta2"
	"github.com/kueue-timeshare/kueue-timeshare/pkg/message"
	"github.com/kueue-timeshare/kueue-timeshare/pkg/plugins"
	"github.com/kueue-timeshare/kueue-timeshare/pkg/plugins/budget"
	"github.com/kueue-timeshare/kueue-timeshare/pkg/policy"
)

// ReasonInvalidSettings is the reason of the Warning event on a ClusterQueue whose settings are
// ignored because they break a validation rule (possible when written while the webhook was down).
const ReasonInvalidSettings = "InvalidTimeshareSettings"

// Store holds the last valid settings of every ClusterQueue and Cohort, and the defaults the
// manager's configuration sets for them.
type Store struct {
	mu sync.RWMutex
	// strictFIFO are the ClusterQueues whose spec.queueingStrategy is StrictFIFO.
	strictFIFO sets.Set[kueue.ClusterQueueReference]
	// known are the ClusterQueues whose objects the store has read, with settings or without.
	known sets.Set[kueue.ClusterQueueReference]
	// cohortsRead are the Cohorts whose objects the store has read; cohortExists, when set,
	// reports whether a Cohort object exists in the cache that feeds Kueue's own.
	cohortsRead  sets.Set[kueue.CohortReference]
	cohortExists func(kueue.CohortReference) bool
	// ledger: the preemption budgets, their tree and the preemptions they paid for.
	ledger budget.Ledger
	// unitSettings are what the units read off each queue of the tree (policy.Unit.QueueSettings),
	// and unitDefaults what the manager's configuration sets for them (DefaultSettings).
	unitSettings map[unitKey]any
	unitDefaults map[policy.Feature]any
}

// unitKey is a unit's settings on one queue of the tree.
type unitKey struct {
	feature policy.Feature
	kind    string
	name    string
}

// NewStore returns a store without settings or defaults (see Configure).
func NewStore() *Store {
	return &Store{
		strictFIFO:  sets.New[kueue.ClusterQueueReference](),
		known:       sets.New[kueue.ClusterQueueReference](),
		cohortsRead: sets.New[kueue.CohortReference](),

		unitSettings: map[unitKey]any{},
		unitDefaults: map[policy.Feature]any{},
	}
}

// Configure takes the defaults of the manager configuration ts that the store resolves to.
func (s *Store) Configure(ts *tsconfig.Configuration) {
	s.ledger.SetDefault(ts.PreemptionBudget)
	s.mu.Lock()
	defer s.mu.Unlock()
	for _, u := range plugins.Units() {
		if u.DefaultSettings == nil {
			continue
		}
		if d := u.DefaultSettings(ts); d != nil {
			s.unitDefaults[u.Feature] = d
		}
	}
}

// SettingsPath is what feature f's unit read off cq and the cohorts above it (parents, nearest
// first), for the unit to resolve, with the manager's default of it (nil: none).
func (s *Store) SettingsPath(f policy.Feature, cq kueue.ClusterQueueReference, parents []kueue.CohortReference) ([]policy.QueueNode, any) {
	s.mu.RLock()
	defer s.mu.RUnlock()
	path := make([]policy.QueueNode, 0, len(parents)+1)
	path = append(path, policy.QueueNode{Kind: "ClusterQueue", Name: string(cq), Settings: s.unitSettings[unitKey{f, "ClusterQueue", string(cq)}]})
	for _, c := range parents {
		path = append(path, policy.QueueNode{Kind: "Cohort", Name: string(c), Settings: s.unitSettings[unitKey{f, "Cohort", string(c)}]})
	}
	return path, s.unitDefaults[f]
}

// inherited are the settings a Cohort passes down its cohort tree.
type inherited struct {
	// units are what the units read off it, by feature; a unit that read nothing is absent.
	units map[policy.Feature]any
}

// inheritedOf reads them off a ClusterQueue's or Cohort's extension fields.
func inheritedOf(ext any) inherited {
	return inherited{units: unitSettingsOf(ext)}
}

// unitSettingsOf is what the units read off ext (policy.Unit.QueueSettings), by feature, without
// the zero values of those that read nothing.
func unitSettingsOf(ext any) map[policy.Feature]any {
	out := map[policy.Feature]any{}
	for _, u := range plugins.Units() {
		if u.QueueSettings == nil {
			continue
		}
		if v := u.QueueSettings(ext); v != nil && !reflect.ValueOf(v).IsZero() {
			out[u.Feature] = v
		}
	}
	return out
}

// setUnitSettings stores what the units read off one queue of the tree and reports whether it
// changed; s.mu is held.
func (s *Store) setUnitSettings(kind, name string, read map[policy.Feature]any) bool {
	changed := false
	for _, u := range plugins.Units() {
		if u.QueueSettings != nil {
			changed = setOrDelete(s.unitSettings, unitKey{u.Feature, kind, name}, read[u.Feature]) || changed
		}
	}
	return changed
}

// SetCohortExists tells the store how to learn that a Cohort object exists before the store has
// read it: a lookup in the informer cache that Kueue's own cache is fed from. Without it every
// Cohort counts as known (the simulator sets Cohorts before it schedules).
func (s *Store) SetCohortExists(exists func(kueue.CohortReference) bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.cohortExists = exists
}

// Lengths lists every distinct positive length of a protection that the queues' settings and the
// manager's defaults set (policy.Unit.Lengths): the lengths after which some protection may end.
func (s *Store) Lengths() []time.Duration {
	s.mu.RLock()
	defer s.mu.RUnlock()
	seen := sets.New[time.Duration]()
	for _, u := range plugins.Units() {
		if u.Lengths == nil {
			continue
		}
		for k, v := range s.unitSettings {
			if k.feature == u.Feature {
				seen.Insert(u.Lengths(v)...)
			}
		}
		if d, ok := s.unitDefaults[u.Feature]; ok {
			seen.Insert(u.Lengths(d)...)
		}
	}
	return sets.List(seen)
}

// setClusterQueueUnits stores what the units read off cq and reports whether it changed.
func (s *Store) setClusterQueueUnits(cq kueue.ClusterQueueReference, units map[policy.Feature]any) bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.setUnitSettings("ClusterQueue", string(cq), units)
}

// setCohort stores a Cohort's settings and reports whether they changed.
func (s *Store) setCohort(c kueue.CohortReference, in inherited) bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.setUnitSettings("Cohort", string(c), in.units)
}

func setOrDelete[K comparable, V comparable](m map[K]V, k K, v V) bool {
	var zero V
	old := m[k]
	if v == zero {
		delete(m, k)
	} else {
		m[k] = v
	}
	return old != v
}

// QueueSettingsOf is what feature f's unit read off cq (policy.Unit.QueueSettings); nil when it
// read nothing, or f's gate is off (the settings then change nothing).
func (s *Store) QueueSettingsOf(f policy.Feature, cq kueue.ClusterQueueReference) any {
	if !policy.GateOn(f) {
		return nil
	}
	s.mu.RLock()
	defer s.mu.RUnlock()
	return s.unitSettings[unitKey{f, "ClusterQueue", string(cq)}]
}

// UnitSettingsOf is what the units whose gate is on read off cq, by feature (see QueueSettingsOf).
func (s *Store) UnitSettingsOf(cq kueue.ClusterQueueReference) map[policy.Feature]any {
	s.mu.RLock()
	defer s.mu.RUnlock()
	var out map[policy.Feature]any
	for _, u := range plugins.Units() {
		v, ok := s.unitSettings[unitKey{u.Feature, "ClusterQueue", string(cq)}]
		if !ok || !policy.GateOn(u.Feature) {
			continue
		}
		if out == nil {
			out = map[policy.Feature]any{}
		}
		out[u.Feature] = v
	}
	return out
}

// Configured reports whether some ClusterQueue or Cohort sets feature f's settings, with f's gate
// on.
func (s *Store) Configured(f policy.Feature) bool {
	if !policy.GateOn(f) {
		return false
	}
	s.mu.RLock()
	defer s.mu.RUnlock()
	for k := range s.unitSettings {
		if k.feature == f {
			return true
		}
	}
	return false
}

// QueuesSetting are the ClusterQueues that set feature f's settings, with f's gate on.
func (s *Store) QueuesSetting(f policy.Feature) []kueue.ClusterQueueReference {
	if !policy.GateOn(f) {
		return nil
	}
	s.mu.RLock()
	defer s.mu.RUnlock()
	var out []kueue.ClusterQueueReference
	for k := range s.unitSettings {
		if k.feature == f && k.kind == "ClusterQueue" {
			out = append(out, kueue.ClusterQueueReference(k.name))
		}
	}
	return out
}

// StrictFIFO reports whether cq's spec.queueingStrategy is StrictFIFO.
func (s *Store) StrictFIFO(cq kueue.ClusterQueueReference) bool {
	s.mu.RLock()
	defer s.mu.RUnlock()
	return s.strictFIFO.Has(cq)
}

// Known reports whether the store has read cq's object. Kueue's cache learns of a new ClusterQueue
// through another watch than ours, so the scheduler may see it first: until the store has read
// it, its settings (a min-runtime, say) are not known to be absent.
func (s *Store) Known(cq kueue.ClusterQueueReference) bool {
	s.mu.RLock()
	defer s.mu.RUnlock()
	return s.known.Has(cq)
}

// CohortKnown reports whether c's settings are known: the store has read its object, or there is
// no object to read (a Cohort only named by ClusterQueues). Like a ClusterQueue, a Cohort just
// created may reach Kueue's cache before the store has read its min-runtimes.
func (s *Store) CohortKnown(c kueue.CohortReference) bool {
	s.mu.RLock()
	read, exists := s.cohortsRead.Has(c), s.cohortExists
	s.mu.RUnlock()
	return read || exists == nil || !exists(c)
}

// setCohortRead records whether c's object exists and reports whether it was unread before.
func (s *Store) setCohortRead(c kueue.CohortReference, exists bool) bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	was := s.cohortsRead.Has(c)
	if exists {
		s.cohortsRead.Insert(c)
	} else {
		s.cohortsRead.Delete(c)
	}
	return exists && !was
}

// setKnown records whether cq exists and reports whether it was unknown before.
func (s *Store) setKnown(cq kueue.ClusterQueueReference, exists bool) bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	was := s.known.Has(cq)
	if exists {
		s.known.Insert(cq)
	} else {
		s.known.Delete(cq)
	}
	return exists && !was
}

// setStrictFIFO records cq's queueing strategy and reports whether it changed.
func (s *Store) setStrictFIFO(cq kueue.ClusterQueueReference, strict bool) bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.strictFIFO.Has(cq) == strict {
		return false
	}
	if strict {
		s.strictFIFO.Insert(cq)
	} else {
		s.strictFIFO.Delete(cq)
	}
	return true
}

// Reconciler feeds the store from ClusterQueues read as unstructured objects.
type Reconciler struct {
	client   client.Client
	store    *Store
	recorder events.EventRecorder
	onChange func(context.Context, kueue.ClusterQueueReference)
}

// Setup registers the reconciler with mgr. It runs on every replica so that a new leader has the
// settings at hand. onChange, if set, is called when a ClusterQueue's settings change: Kueue's own
// controller does not see our fields, so it would not re-evaluate the queue's pending workloads.
func Setup(mgr ctrl.Manager, store *Store, onChange func(context.Context, kueue.ClusterQueueReference)) error {
	r := &Reconciler{client: mgr.GetClient(), store: store, recorder: mgr.GetEventRecorder("kueue-timeshare"), onChange: onChange}
	return ctrl.NewControllerManagedBy(mgr).
		Named("timeshare-clusterqueue-settings").
		For(newClusterQueue()).
		WithOptions(controller.Options{NeedLeaderElection: ptr.To(false)}).
		Complete(r)
}

func newClusterQueue() *unstructured.Unstructured {
	u := &unstructured.Unstructured{}
	u.SetGroupVersionKind(kueue.SchemeGroupVersion.WithKind("ClusterQueue"))
	return u
}

// Reconcile parses and validates one ClusterQueue's settings. Invalid settings are ignored, with a
// Warning event, rather than failing: the ClusterQueue keeps working as upstream's would.
func (r *Reconciler) Reconcile(ctx context.Context, req ctrl.Request) (ctrl.Result, error) {
	log := ctrl.LoggerFrom(ctx)
	name := kueue.ClusterQueueReference(req.Name)
	u := newClusterQueue()
	if err := r.client.Get(ctx, req.NamespacedName, u); err != nil {
		if apierrors.IsNotFound(err) {
			r.store.setStrictFIFO(name, false)
			r.store.setClusterQueueUnits(name, nil)
			r.store.ledger.SetClusterQueue(name, nil)
			r.store.setKnown(name, false)
			return ctrl.Result{}, nil
		}
		return ctrl.Result{}, err
	}
	strict, units, problem := parse(u)
	if problem != "" {
		log.Info("Ignoring invalid kueue-timeshare settings", "clusterQueue", req.Name, "problem", message.Bound(problem))
		r.recorder.Eventf(u, nil, corev1.EventTypeWarning, ReasonInvalidSettings, "Validate",
			"%s", message.Bound("kueue-timeshare settings ignored: "+problem))
	}
	changed := r.store.setStrictFIFO(name, strict)
	changed = r.store.setClusterQueueUnits(name, units) || changed
	changed = r.store.ledger.SetClusterQueue(name, u) || changed
	// A ClusterQueue just read may have pending workloads that were refused preemption meanwhile.
	changed = r.store.setKnown(name, true) || changed
	if changed && r.onChange != nil {
		r.onChange(ctx, name)
	}
	log.V(3).Info("ClusterQueue settings", "clusterQueue", req.Name, "strictFIFO", strict, "unitSettings", units)
	return ctrl.Result{}, nil
}

// parse returns whether the ClusterQueue's queueing strategy is StrictFIFO and what the units read
// off it, or no settings and what is wrong with them.
func parse(u *unstructured.Unstructured) (bool, map[policy.Feature]any, string) {
	fail := func(problem string) (bool, map[policy.Feature]any, string) {
		return false, nil, problem
	}
	raw, err := rawSpec(u)
	if err != nil {
		return fail(err.Error())
	}
	ext, err := tsapi.ParseClusterQueueExtension(raw)
	if err != nil {
		return fail(err.Error())
	}
	var cq kueue.ClusterQueue
	if err := json.Unmarshal(raw, &cq.Spec); err != nil {
		return fail(err.Error())
	}
	if errs := tsapi.ValidateClusterQueueExtension(ext, cq.Spec.Preemption); len(errs) > 0 {
		return fail(errs.ToAggregate().Error())
	}
	return cq.Spec.QueueingStrategy == kueue.StrictFIFO, unitSettingsOf(ext), ""
}

func rawSpec(u *unstructured.Unstructured) (json.RawMessage, error) {
	spec, _, _ := unstructured.NestedFieldNoCopy(u.Object, "spec")
	return json.Marshal(spec)
}

// SetClusterQueue stores the settings of one ClusterQueue, given as the raw object (the extension
// fields are not in Kueue's typed objects), as the controller does: for callers that have no API
// server to watch, such as the simulator. Invalid settings are ignored, as by the controller, and
// the error says what is wrong with them.
func (s *Store) SetClusterQueue(u *unstructured.Unstructured) error {
	name := kueue.ClusterQueueReference(u.GetName())
	strict, units, problem := parse(u)
	s.setStrictFIFO(name, strict)
	s.setClusterQueueUnits(name, units)
	s.ledger.SetClusterQueue(name, u)
	s.setKnown(name, true)
	if problem != "" {
		return errors.New(problem)
	}
	return nil
}

// SetCohort is SetClusterQueue for a Cohort.
func (s *Store) SetCohort(u *unstructured.Unstructured) error {
	in, problem := parseCohort(u)
	s.setCohort(kueue.CohortReference(u.GetName()), in)
	s.ledger.SetCohort(kueue.CohortReference(u.GetName()), u)
	s.setCohortRead(kueue.CohortReference(u.GetName()), true)
	if problem != "" {
		return errors.New(problem)
	}
	return nil
}

// Load reads every ClusterQueue and Cohort once, so that the store is complete before the first
// scheduling cycle: after a restart, a cycle that ran before the controllers caught up would see
// no protection and could preempt a workload inside its min-runtime.
func (s *Store) Load(ctx context.Context, c client.Reader) error {
	cqs := &unstructured.UnstructuredList{}
	cqs.SetGroupVersionKind(kueue.SchemeGroupVersion.WithKind("ClusterQueueList"))
	if err := c.List(ctx, cqs); err != nil {
		return fmt.Errorf("listing ClusterQueues: %w", err)
	}
	for i := range cqs.Items {
		name := kueue.ClusterQueueReference(cqs.Items[i].GetName())
		strict, units, _ := parse(&cqs.Items[i])
		s.setStrictFIFO(name, strict)
		s.setClusterQueueUnits(name, units)
		s.ledger.SetClusterQueue(name, &cqs.Items[i])
		s.setKnown(name, true)
	}
	cohorts := &unstructured.UnstructuredList{}
	cohorts.SetGroupVersionKind(kueue.SchemeGroupVersion.WithKind("CohortList"))
	if err := c.List(ctx, cohorts); err != nil {
		return fmt.Errorf("listing Cohorts: %w", err)
	}
	for i := range cohorts.Items {
		in, _ := parseCohort(&cohorts.Items[i])
		s.setCohort(kueue.CohortReference(cohorts.Items[i].GetName()), in)
		s.ledger.SetCohort(kueue.CohortReference(cohorts.Items[i].GetName()), &cohorts.Items[i])
		s.setCohortRead(kueue.CohortReference(cohorts.Items[i].GetName()), true)
	}
	return nil
}

// BudgetsOf are the buckets wl needs a token from (budget.Source), from the store's ledger.
func (s *Store) BudgetsOf(wl *kueue.Workload) *budget.Budgets { return s.ledger.BudgetsOf(wl) }

// RecordPreemption enters a preemption the budgets pay for in the store's ledger (budget.Recorder).
func (s *Store) RecordPreemption(wl *kueue.Workload, cq kueue.ClusterQueueReference, at time.Time) {
	s.ledger.RecordPreemption(wl, cq, at)
}

// LoadPreemptions rebuilds the store's ledger from the Workloads (budget.Ledger.Load).
func (s *Store) LoadPreemptions(ctx context.Context, c client.Reader) error {
	return s.ledger.Load(ctx, c)
}
