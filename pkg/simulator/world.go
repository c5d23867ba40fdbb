package simulator

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/go-logr/logr"
	corev1 "k8s.io/api/core/v1"
	nodev1 "k8s.io/api/node/v1"
	resourcev1 "k8s.io/api/resource/v1"
	schedulingv1 "k8s.io/api/scheduling/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	apimeta "k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/sets"
	"k8s.io/client-go/tools/events"
	testingclock "k8s.io/utils/clock/testing"
	"k8s.io/utils/ptr"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/fake"
	"sigs.k8s.io/controller-runtime/pkg/client/interceptor"
	"sigs.k8s.io/controller-runtime/pkg/event"

	configapi "sigs.k8s.io/kueue/apis/config/v1beta2"
	kueue "sigs.k8s.io/kueue/apis/kueue/v1beta2"
	qcache "sigs.k8s.io/kueue/pkg/cache/queue"
	schdcache "sigs.k8s.io/kueue/pkg/cache/scheduler"
	"sigs.k8s.io/kueue/pkg/controller/core"
	"sigs.k8s.io/kueue/pkg/controller/core/indexer"
	preemptexpectations "sigs.k8s.io/kueue/pkg/scheduler/preemption/expectations"
	"sigs.k8s.io/kueue/pkg/workload"
	workloadfinish "sigs.k8s.io/kueue/pkg/workload/finish"
	workloadpatching "sigs.k8s.io/kueue/pkg/workload/patching"

	"github.com/kueue-timeshare/kueue-timeshare/pkg/manager"
	"github.com/kueue-timeshare/kueue-timeshare/pkg/plugins"
	"github.com/kueue-timeshare/kueue-timeshare/pkg/policy"
	"github.com/kueue-timeshare/kueue-timeshare/pkg/queuesettings"
	"github.com/kueue-timeshare/kueue-timeshare/pkg/requeue"
	"github.com/kueue-timeshare/kueue-timeshare/pkg/scheduler"
	"github.com/kueue-timeshare/kueue-timeshare/pkg/scheduler/preemption"
)

// world is the in-process cluster: a fake API server, Kueue's scheduler cache and queue manager,
// our scheduler with the manager's preemptor, upstream's workload controller event handlers, our
// requeue controller, the window waker, and an emulation of the job controllers. It is driven one
// step at a time.
type world struct {
	ctx   context.Context
	log   logr.Logger
	start time.Time
	clock *testingclock.FakeClock

	client    client.WithWatch
	cache     *schdcache.Cache
	queues    *qcache.Manager
	requeuer  interface{ ProcessRequeues(context.Context) int }
	sched     *scheduler.Scheduler
	workloads *core.WorkloadReconciler
	requeue   *requeue.Reconciler
	waker     *queuesettings.Waker
	settings  *queuesettings.Store
	// sources are the units' sources of facts read from the cluster (policy.ClusterSource).
	sources policy.Sources
	booster *booster

	// seen is the last version of every Workload that the event handlers were given; dirty are
	// the Workloads written since.
	seen map[types.NamespacedName]*kueue.Workload
	// dirtyMu guards dirty: evictions are written from several goroutines at once (upstream's
	// IssuePreemptions and ours evict in parallel).
	dirtyMu sync.Mutex
	dirty   sets.Set[types.NamespacedName]
	jobs    map[types.NamespacedName]*job
	// byUID names workloads by UID, to say who preempted whom.
	byUID map[types.UID]string

	events []Event
	// finished counts the jobs that finished.
	finished int
	cycles   int
	notes    []string
	// stallLimit is how many fruitless cycles in a row end a step's scheduling.
	stallLimit int
	// versions counts the Workload versions handed to the event handlers.
	versions int
	// lostResource is the resource lost work is measured in (lostWorkResource).
	lostResource string
}

// builderIndexer registers Kueue's field indexes on a fake client builder.
type builderIndexer struct{ b *fake.ClientBuilder }

func (i *builderIndexer) IndexField(_ context.Context, obj client.Object, field string, fn client.IndexerFunc) error {
	i.b = i.b.WithIndex(obj, field, fn)
	return nil
}

func newWorld(ctx context.Context, sc *Scenario, mode Mode, log logr.Logger, wrap func(*world, scheduler.Preemptor) scheduler.Preemptor,
	removed policy.Feature) (*world, error) {
	objs := sc.Objects.deepCopy()
	start := ptr.Deref(sc.Simulation.Start, Time{DefaultStart}).Time
	w := &world{
		ctx:   ctrl.LoggerInto(ctx, log),
		log:   log,
		start: start,
		clock: testingclock.NewFakeClock(start),
		seen:  map[types.NamespacedName]*kueue.Workload{},
		dirty: sets.New[types.NamespacedName](),
		jobs:  map[types.NamespacedName]*job{},
		byUID: map[types.UID]string{},
		// One cycle per flavor a head may try, plus two.
		stallLimit: len(sc.Flavors) + 2,
	}
	w.lostResource, _ = lostWorkResource(sc)
	var window time.Duration
	if mode == ModeBooster {
		window = boosterObjects(objs)
	}

	// Only the kinds Kueue's code reads: the fake client's server-side apply maps every kind of
	// the scheme on each write, so a small scheme keeps writes cheap.
	scheme := runtime.NewScheme()
	for _, add := range []func(*runtime.Scheme) error{corev1.AddToScheme, schedulingv1.AddToScheme, nodev1.AddToScheme, resourcev1.AddToScheme, kueue.AddToScheme} {
		if err := add(scheme); err != nil {
			return nil, err
		}
	}
	idx := &builderIndexer{b: fake.NewClientBuilder().WithScheme(scheme)}
	if err := indexer.Setup(w.ctx, idx); err != nil {
		return nil, fmt.Errorf("field indexes: %w", err)
	}
	if err := queuesettings.SetupIndexes(w.ctx, idx); err != nil {
		return nil, err
	}
	// The fake client reads the raw Cohorts and ClusterQueues as Kueue's types.
	initial := objs.all()
	for _, ns := range objs.Namespaces {
		initial = append(initial, ns)
	}
	api := idx.b.WithObjects(initial...).
		WithStatusSubresource(&kueue.Workload{}, &kueue.ClusterQueue{}, &kueue.LocalQueue{}, &kueue.Cohort{}).
		Build()
	w.client = interceptor.NewClient(api, w.watchWrites())

	var fs *configapi.FairSharing
	if sc.FairSharing != nil {
		fs = &configapi.FairSharing{}
		for _, s := range sc.FairSharing.PreemptionStrategies {
			fs.PreemptionStrategies = append(fs.PreemptionStrategies, configapi.PreemptionStrategy(s))
		}
	}
	w.cache = schdcache.New(w.client, schdcache.WithFairSharing(fs != nil))
	expectations := preemptexpectations.New()
	w.queues, w.requeuer = qcache.NewManagerForUnitTestsWithRequeuer(w.client, w.cache,
		qcache.WithPreemptionExpectations(expectations), qcache.WithClock(w.clock))
	ts := sc.timeshareConfig()
	w.settings = manager.NewSettingsStore(ts)
	w.sources = plugins.Units().NewSources(nil)
	if err := policy.LoadSources(w.ctx, w.sources, w.client); err != nil {
		return nil, err
	}

	for _, rf := range objs.Flavors {
		w.cache.AddOrUpdateResourceFlavor(log, rf)
	}
	for _, u := range objs.Cohorts {
		c, _ := typedObject[kueue.Cohort](u)
		if err := errors.Join(w.cache.AddOrUpdateCohort(c), w.settings.SetCohort(u)); err != nil {
			return nil, fmt.Errorf("Cohort %s: %w", c.Name, err)
		}
		w.queues.AddOrUpdateCohort(w.ctx, c)
	}
	for _, u := range objs.ClusterQueues {
		cq, _ := typedObject[kueue.ClusterQueue](u)
		if err := errors.Join(w.cache.AddClusterQueue(w.ctx, cq), w.queues.AddClusterQueue(w.ctx, cq), w.settings.SetClusterQueue(u)); err != nil {
			return nil, fmt.Errorf("ClusterQueue %s: %w", cq.Name, err)
		}
	}
	// The cache reads a ClusterQueue's LocalQueues from the client when it adds the ClusterQueue.
	for _, lq := range objs.LocalQueues {
		if err := w.queues.AddLocalQueue(w.ctx, lq); err != nil {
			return nil, fmt.Errorf("LocalQueue %s/%s: %w", lq.Namespace, lq.Name, err)
		}
	}

	var extra []preemption.Option
	var units policy.Table
	if removed != "" {
		units = plugins.Units().Without(removed)
		extra = append(extra, preemption.WithoutFeature(removed))
	}
	preemptors := manager.PreemptorFactory(w.settings, w.sources, w.queues, ts.DefaultRequeueDelay.Duration, extra...)
	if wrap != nil {
		inner := preemptors
		preemptors = func(c scheduler.PreemptorConfig) scheduler.Preemptor { return wrap(w, inner(c)) }
	}
	// Events are dropped: the simulator reports from conditions.
	recorder := &events.FakeRecorder{}
	w.sched = scheduler.New(w.queues, w.cache, w.client, recorder,
		scheduler.WithTimeSource(w.clock),
		scheduler.WithQueueWaker(func(ctx context.Context, cq kueue.ClusterQueueReference) {
			queuesettings.Wake(ctx, w.client, w.queues, cq, log)
		}, queuesettings.RequeueBatchPeriod()),
		scheduler.WithFairSharing(fs),
		scheduler.WithPreemptionExpectations(expectations),
		scheduler.WithPreemptor(preemptors),
		scheduler.WithHeadsPerCycle(headsPerCycle(mode, ts)),
		// Inline, as upstream: a simulated cycle's writes are done when it returns.
		scheduler.WithPendingStatusWriters(0),
	)
	w.workloads = core.NewWorkloadReconciler(w.client, w.queues, w.cache, recorder, core.WithPreemptionExpectations(expectations))
	w.requeue = requeue.New(w.client, recorder, w.clock)
	w.waker = &queuesettings.Waker{Clock: w.clock, Client: w.client, Queues: w.queues, Store: w.settings, Sources: w.sources, Log: log,
		Candidate: w.candidate, Units: units}
	// A first sweep, with nothing admitted yet, so that the next covers only what follows.
	w.waker.Sweep(w.ctx)
	if mode == ModeBooster {
		if window == 0 {
			w.note("the priority booster never boosts: no ClusterQueue sets minAdmitDuration, which gives its interval")
		}
		w.booster = newBooster(w, window)
	}
	// Settle what adding the queues queued up.
	w.requeuer.ProcessRequeues(w.ctx)
	return w, nil
}

// watchWrites notes every Workload written through the client, by whoever writes it (the
// scheduler, the preemptor, the emulated controllers), so that sync hands exactly those changes to
// the event handlers, as an informer would.
func (w *world) watchWrites() interceptor.Funcs {
	return interceptor.Funcs{
		Create: func(ctx context.Context, c client.WithWatch, obj client.Object, opts ...client.CreateOption) error {
			w.markDirty(obj)
			return c.Create(ctx, obj, opts...)
		},
		Update: func(ctx context.Context, c client.WithWatch, obj client.Object, opts ...client.UpdateOption) error {
			w.markDirty(obj)
			return c.Update(ctx, obj, opts...)
		},
		Patch: func(ctx context.Context, c client.WithWatch, obj client.Object, patch client.Patch, opts ...client.PatchOption) error {
			w.markDirty(obj)
			return c.Patch(ctx, obj, patch, opts...)
		},
		Delete: func(ctx context.Context, c client.WithWatch, obj client.Object, opts ...client.DeleteOption) error {
			w.markDirty(obj)
			return c.Delete(ctx, obj, opts...)
		},
		SubResourceUpdate: func(ctx context.Context, c client.Client, sub string, obj client.Object, opts ...client.SubResourceUpdateOption) error {
			w.markDirty(obj)
			return c.SubResource(sub).Update(ctx, obj, opts...)
		},
		SubResourcePatch: func(ctx context.Context, c client.Client, sub string, obj client.Object, patch client.Patch, opts ...client.SubResourcePatchOption) error {
			if u, ok := obj.(*unstructured.Unstructured); ok && sub == "status" && patch.Type() == types.ApplyPatchType && u.GetKind() == "Workload" {
				return w.applyConditions(ctx, c, u)
			}
			w.markDirty(obj)
			return c.SubResource(sub).Patch(ctx, obj, patch, opts...)
		},
	}
}

// applyConditions applies the status conditions of a server-side apply to a Workload as the API
// server would, by type (its conditions are a map-list); the fake client replaces the whole list.
func (w *world) applyConditions(ctx context.Context, c client.Client, u *unstructured.Unstructured) error {
	raw, _, err := unstructured.NestedSlice(u.Object, "status", "conditions")
	if err != nil {
		return err
	}
	wl := &kueue.Workload{}
	if err := c.Get(ctx, client.ObjectKeyFromObject(u), wl); err != nil {
		return err
	}
	for _, r := range raw {
		m, ok := r.(map[string]any)
		if !ok {
			continue
		}
		var cond metav1.Condition
		if err := runtime.DefaultUnstructuredConverter.FromUnstructured(m, &cond); err != nil {
			return err
		}
		apimeta.SetStatusCondition(&wl.Status.Conditions, cond)
	}
	w.markDirty(wl)
	return c.Status().Update(ctx, wl)
}

// markDirty notes a Workload written, for sync.
func (w *world) markDirty(obj client.Object) {
	if _, ok := obj.(*kueue.Workload); ok {
		w.dirtyMu.Lock()
		w.dirty.Insert(client.ObjectKeyFromObject(obj))
		w.dirtyMu.Unlock()
	}
}

func (w *world) now() time.Duration { return w.clock.Now().Sub(w.start) }

// submit creates the Workload of a job, as the job controller would.
func (w *world) submit(j *job) error {
	if j.spec.Snapshot != nil {
		return w.submitSnapshot(j)
	}
	wl := j.spec.Workload(w.clock.Now(), j.uid)
	if err := w.client.Create(w.ctx, wl); err != nil {
		return fmt.Errorf("creating workload %s: %w", j.spec.Name, err)
	}
	w.byUID[j.uid] = j.spec.Name
	j.arrived(w.now())
	w.record(Event{Kind: EventArrived, Workload: j.spec.Name, ClusterQueue: j.spec.ClusterQueue})
	return nil
}

// finish marks a job's Workload finished, as the job controller does when the job completes, and
// then deletes it, as a finished job's owner would: neither matters to the scheduler any more.
func (w *world) finish(j *job) error {
	var wl kueue.Workload
	if err := w.client.Get(w.ctx, j.key, &wl); err != nil {
		return fmt.Errorf("finishing workload %s: %w", j.spec.Name, err)
	}
	if err := workloadfinish.Finish(w.ctx, w.client, &wl, kueue.WorkloadFinishedReasonSucceeded, "Job finished successfully", w.clock); err != nil {
		return fmt.Errorf("finishing workload %s: %w", j.spec.Name, err)
	}
	w.sync()
	if err := w.client.Delete(w.ctx, &wl); client.IgnoreNotFound(err) != nil {
		return fmt.Errorf("deleting finished workload %s: %w", j.spec.Name, err)
	}
	return nil
}

// sync hands every Workload change since the last call to upstream's workload controller event
// handlers (which keep the queue manager and the cache in step, as its informer would), lets the
// emulated job controller react to evictions and our requeue controller to the evictions it left
// unrequeued, and records what happened to each job. It returns
// whether anything happened to a job (admitted, evicted, finished), as opposed to status updates.
func (w *world) sync() bool {
	acted := false
	for round := 0; ; round++ {
		w.dirtyMu.Lock()
		keys := w.dirty.UnsortedList()
		w.dirty.Clear()
		w.dirtyMu.Unlock()
		if len(keys) == 0 {
			break
		}
		if round == 100 {
			w.note("workload updates did not settle at %s", FormatOffset(w.now()))
			break
		}
		slices.SortFunc(keys, func(a, b types.NamespacedName) int { return strings.Compare(a.String(), b.String()) })
		var changed []*kueue.Workload
		for _, k := range keys {
			old := w.seen[k]
			wl := &kueue.Workload{}
			if err := w.client.Get(w.ctx, k, wl); err != nil {
				if !apierrors.IsNotFound(err) {
					w.note("reading workload %s: %v", k, err)
					continue
				}
				if old != nil {
					delete(w.seen, k)
					w.workloads.Delete(event.TypedDeleteEvent[*kueue.Workload]{Object: old.DeepCopy()})
				}
				continue
			}
			if old != nil && old.ResourceVersion == wl.ResourceVersion {
				continue
			}
			w.seen[k] = wl
			w.versions++
			if old == nil {
				w.workloads.Create(event.TypedCreateEvent[*kueue.Workload]{Object: wl.DeepCopy()})
			} else {
				w.workloads.Update(event.TypedUpdateEvent[*kueue.Workload]{ObjectOld: old.DeepCopy(), ObjectNew: wl.DeepCopy()})
			}
			acted = w.observe(old, wl) || acted
			changed = append(changed, wl)
		}
		for _, wl := range changed {
			acted = w.stopEvictedJob(wl) || acted
			acted = w.requeueEvicted(wl) || acted
			w.clearEvicted(wl)
		}
	}
	w.requeuer.ProcessRequeues(w.ctx)
	return acted
}

// toggleActive plays a workload's owner changing spec.active, and Kueue's workload controller
// (upstream's reconciler, run on the workload) answering it: eviction when deactivated, Requeued
// when reactivated.
func (w *world) toggleActive(j *job) error {
	t := j.toggle
	j.toggle = noToggle
	wl := &kueue.Workload{}
	if err := w.client.Get(w.ctx, j.key, wl); err != nil {
		return client.IgnoreNotFound(err)
	}
	if workloadfinish.IsFinished(wl) {
		return nil
	}
	wl.Spec.Active = ptr.To(t == reactivate)
	if err := w.client.Update(w.ctx, wl); err != nil {
		return fmt.Errorf("setting spec.active of %s: %w", j.key, err)
	}
	kind := EventReactivated
	if t == deactivate {
		kind = EventDeactivated
	}
	w.record(Event{Kind: kind, Workload: j.spec.Name, ClusterQueue: j.spec.ClusterQueue})
	w.sync()
	if _, err := w.workloads.Reconcile(w.ctx, ctrl.Request{NamespacedName: j.key}); err != nil {
		w.note("Kueue's workload controller on %s: %v", j.key, err)
	}
	if t == deactivate {
		j.toggle, j.toggleAt = reactivate, w.now()+j.spec.ReactivateAfter
	}
	return nil
}

// stopEvictedJob does what the job controller does for an evicted workload that still holds its
// quota: stop the job and, once it is no longer active (at once here), give the quota back and
// mark the workload requeued.
func (w *world) stopEvictedJob(wl *kueue.Workload) bool {
	ev := apimeta.FindStatusCondition(wl.Status.Conditions, kueue.WorkloadEvicted)
	if ev == nil || ev.Status != metav1.ConditionTrue || !workload.HasQuotaReservation(wl) || workloadfinish.IsFinished(wl) {
		return false
	}
	err := workloadpatching.PatchAdmissionStatus(w.ctx, w.client, wl.DeepCopy(), w.clock, func(wl *kueue.Workload) (bool, error) {
		requeued := ev.Reason == kueue.WorkloadEvictedByPreemption || ev.Reason == kueue.WorkloadEvictedDueToNodeFailures
		changed := workload.SetRequeuedCondition(wl, ev.Reason, ev.Message, requeued)
		reason := workload.UnadmittedWorkloadReasonWithFallback(kueue.WorkloadQuotaReservedReasonPendingEvaluation, kueue.WorkloadPending) //nolint:staticcheck // the fallback the job controller uses
		if workload.UnsetQuotaReservationWithCondition(wl, reason, ev.Message, w.clock.Now()) {
			changed = true
		}
		return changed, nil
	})
	if err != nil {
		w.note("stopping evicted workload %s: %v", wl.Name, err)
		return false
	}
	return true
}

// requeueEvicted runs our requeue controller on a Workload version it would be handed (its
// predicate is requeue.Needed): one that the emulated job controller left with Requeued=False
// after an eviction for one of our preemption reasons.
func (w *world) requeueEvicted(wl *kueue.Workload) bool {
	if requeue.Needed(wl) == "" {
		return false
	}
	if _, err := w.requeue.Reconcile(w.ctx, ctrl.Request{NamespacedName: client.ObjectKeyFromObject(wl)}); err != nil {
		w.note("requeuing workload %s: %v", wl.Name, err)
		return false
	}
	return true
}

// observe records what a Workload change means for its job; it reports admissions, evictions and
// completions.
func (w *world) observe(old, wl *kueue.Workload) bool {
	j := w.jobs[client.ObjectKeyFromObject(wl)]
	if j == nil {
		return false
	}
	now := w.now()
	acted := false
	if workloadfinish.IsFinished(wl) && (old == nil || !workloadfinish.IsFinished(old)) {
		j.finished(now)
		w.finished++
		w.record(Event{Kind: EventFinished, Workload: j.spec.Name, ClusterQueue: j.spec.ClusterQueue})
		return true
	}
	if (old == nil || !workload.HasQuotaReservation(old)) && workload.HasQuotaReservation(wl) {
		j.admitted(now)
		if j.spec.DeactivateAfter > 0 {
			j.toggle, j.toggleAt = deactivate, now+j.spec.DeactivateAfter
		}
		w.record(Event{Kind: EventAdmitted, Workload: j.spec.Name, ClusterQueue: string(wl.Status.Admission.ClusterQueue)})
		acted = true
	}
	w.observeWarning(j, old, wl)
	if ev := apimeta.FindStatusCondition(wl.Status.Conditions, kueue.WorkloadEvicted); conditionTrue(wl, kueue.WorkloadEvicted) && !conditionTrue(old, kueue.WorkloadEvicted) {
		e := Event{Kind: EventEvicted, Workload: j.spec.Name, ClusterQueue: j.spec.ClusterQueue, Reason: ev.Reason}
		if ev.Reason == kueue.WorkloadEvictedByPreemption || policy.IsOwnReason(ev.Reason) {
			e.Kind = EventPreempted
			if pc := apimeta.FindStatusCondition(wl.Status.Conditions, kueue.WorkloadPreempted); pc != nil {
				e.Reason = pc.Reason
				e.By = w.byUID[preemptorUID(pc.Message)]
			}
		}
		if n := j.warning; n != nil {
			e.Outcome = n.Late.Outcome
			if n.saved {
				e.Outcome = n.Early.Outcome
			}
		}
		if j.toggle == deactivate {
			j.toggle = noToggle
		}
		e.Lost = j.evicted(now, e.Reason)
		e.LostResourceHours = heldOf(j.spec, w.lostResource) * e.Lost.Hours()
		w.record(e)
		acted = true
	}
	return acted
}

// observeWarning starts a running job's reaction to a warning before eviction that a unit newly
// wrote on its Workload (policy.Warns).
func (w *world) observeWarning(j *job, old, wl *kueue.Workload) {
	if conditionTrue(wl, kueue.WorkloadEvicted) {
		return
	}
	for _, u := range warnings() {
		given, err := u.Given(old, wl)
		if err != nil {
			w.note("workload %s: %v", wl.Name, err)
		}
		if given == nil {
			continue
		}
		j.warned(u, w.now(), given.Until.Sub(w.start))
		w.record(Event{Kind: EventKind(u.Event), Workload: j.spec.Name, ClusterQueue: j.spec.ClusterQueue, Reason: given.Reason,
			By: w.byUID[given.By], Until: given.Until.Sub(w.start)})
	}
}

// saveCheckpoints ends the checkpoints that jobs began at a warning and that complete by now: the
// job answers on its Workload (checkpoint-done, as a sidecar would), and its ClusterQueue's tree is
// woken so that the preemptor waiting on the warning evicts it now rather than at the deadline.
func (w *world) saveCheckpoints(order []*job) error {
	now := w.now()
	for _, j := range order {
		// The checkpoint begun at a warning, once it completes.
		if n := j.warning; j.state != running || n == nil || n.saved || n.checkpointAt <= 0 || n.checkpointAt > now {
			continue
		}
		j.warning.saved = true
		wl := &kueue.Workload{}
		if err := w.client.Get(w.ctx, j.key, wl); err != nil {
			return fmt.Errorf("saving the checkpoint of workload %s: %w", j.spec.Name, err)
		}
		patch := client.MergeFrom(wl.DeepCopy())
		metav1.SetMetaDataAnnotation(&wl.ObjectMeta, j.warning.Answer, "true")
		if err := w.client.Patch(w.ctx, wl, patch); err != nil {
			return fmt.Errorf("saving the checkpoint of workload %s: %w", j.spec.Name, err)
		}
		w.sync()
		if wl.Status.Admission != nil {
			queuesettings.Wake(w.ctx, w.client, w.queues, wl.Status.Admission.ClusterQueue, w.log)
		}
	}
	return nil
}

// clearEvicted removes from an evicted Workload the annotations the units' controllers remove
// once the eviction is written (clearer), so that none applies to its next admission.
func (w *world) clearEvicted(wl *kueue.Workload) {
	if !conditionTrue(wl, kueue.WorkloadEvicted) {
		return
	}
	patched := wl.DeepCopy()
	for _, a := range cleared() {
		delete(patched.Annotations, a)
	}
	if len(patched.Annotations) == len(wl.Annotations) {
		return
	}
	if err := w.client.Patch(w.ctx, patched, client.MergeFrom(wl)); client.IgnoreNotFound(err) != nil {
		w.note("clearing the annotations of evicted workload %s: %v", wl.Name, err)
	}
}

// candidate reads a running job's Workload as the waker does, but from the exact time the job
// was admitted (a simulated workload reserves quota and is admitted at once).
func (w *world) candidate(wl *kueue.Workload) policy.Candidate {
	c := policy.CandidateOf(wl, "")
	if j := w.jobs[client.ObjectKeyFromObject(wl)]; j != nil && j.state == running {
		c.QuotaReservedAt, c.Admitted, c.AdmittedAt = w.start.Add(j.since), true, w.start.Add(j.since)
	}
	return c
}

func conditionTrue(wl *kueue.Workload, t string) bool {
	return wl != nil && apimeta.IsStatusConditionTrue(wl.Status.Conditions, t)
}

// preemptorUID reads the preemptor's UID from a Preempted condition's message, which says
// "... a workload (UID: <uid>, JobUID: ...) ...".
func preemptorUID(msg string) types.UID {
	_, rest, ok := strings.Cut(msg, "(UID: ")
	if !ok {
		return ""
	}
	uid, _, _ := strings.Cut(rest, ",")
	return types.UID(strings.TrimSuffix(uid, ")"))
}

func (w *world) record(e Event) {
	e.At = w.now()
	w.events = append(w.events, e)
}

func (w *world) note(format string, args ...any) {
	w.notes = append(w.notes, fmt.Sprintf(format, args...))
}

// schedule runs scheduling cycles, handing their writes to the controllers after each, until no
// ClusterQueue has a head or the heads stop making progress. It reports whether heads were left
// in the active queues, which the scheduler's loop would keep retrying.
func (w *world) schedule() (spinning bool) {
	const maxCycles = 1000
	stalled := 0
	// tried are the heads processed since the state last changed.
	tried := sets.New[workload.Reference]()
	for range maxCycles {
		versions := w.versions
		heads, progress := w.sched.Cycle(w.ctx)
		w.cycles++
		acted := w.sync()
		if len(heads) == 0 {
			return false
		}
		// A cycle that changed a Workload (a pending message, say) can change the next one: an
		// updated workload goes back to the active queue, a parked one stays parked. The manager's
		// loop goes on at once; so does the simulation, until the writes stop. So it does for a
		// head not tried yet: the ones before it were parked without a write (their pending
		// message had not changed), and the loop goes on to the next ones at once.
		if changed := progress || acted || w.versions != versions; changed || !tried.HasAll(heads...) {
			if changed {
				tried.Clear()
			}
			stalled = 0
			tried.Insert(heads...)
			continue
		}
		// Fruitless cycles on the same heads: the state no longer changes. A few more than two,
		// since a head may try one flavor per cycle.
		if stalled++; stalled >= w.stallLimit {
			return true
		}
	}
	w.note("the scheduler did not settle after %d cycles at %s", maxCycles, FormatOffset(w.now()))
	return true
}

// resourceShare is a workload's dominant share of the capacity of its ClusterQueue: the largest,
// over the resources it asks for, of its total request over the ClusterQueue's nominal quota of
// that resource (all flavors); for a resource the ClusterQueue has no nominal quota of (it only
// borrows), over the nominal quota of its whole cohort tree.
func resourceShare(sc *Scenario, spec WorkloadSpec) float64 {
	share := 0.0
	for name, q := range spec.Requests {
		capacity := sc.nominal(spec.ClusterQueue, string(name), false)
		if capacity <= 0 {
			capacity = sc.nominal(spec.ClusterQueue, string(name), true)
		}
		if capacity > 0 {
			share = max(share, q.AsApproximateFloat64()*float64(spec.Pods)/capacity)
		}
	}
	return share
}

// nominal is the nominal quota of a resource, over all flavors, of the ClusterQueue and, with
// tree, of every ClusterQueue and Cohort of its cohort tree.
func (s *Scenario) nominal(cq, res string, tree bool) float64 {
	root := s.rootOf()
	cohortOf := func(u *unstructured.Unstructured) string {
		c, _, _ := unstructured.NestedString(u.Object, "spec", "cohortName")
		return c
	}
	mine, total := "", 0.0
	for _, u := range s.ClusterQueues {
		if u.GetName() == cq {
			mine, _ = root(cohortOf(u))
		}
	}
	inTree := func(cohort string) bool {
		r, _ := root(cohort)
		return tree && mine != "" && r == mine
	}
	add := func(u *unstructured.Unstructured) {
		typed, _ := typedObject[struct {
			Spec struct{ ResourceGroups []kueue.ResourceGroup }
		}](u)
		for _, g := range typed.Spec.ResourceGroups {
			for _, f := range g.Flavors {
				for _, r := range f.Resources {
					if string(r.Name) == res {
						total += r.NominalQuota.AsApproximateFloat64()
					}
				}
			}
		}
	}
	for _, u := range s.ClusterQueues {
		if u.GetName() == cq || inTree(cohortOf(u)) {
			add(u)
		}
	}
	for _, u := range s.Cohorts {
		if inTree(u.GetName()) {
			add(u)
		}
	}
	return total
}
