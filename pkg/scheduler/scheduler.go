// Package scheduler is kueue-timeshare's admission loop. It behaves as the scheduler of
// sigs.k8s.io/kueue v0.19.2 and is built from the same exported pieces (queue manager,
// scheduler cache, flavor assigner), but takes its preemptor as an interface so that the
// victim policy can be replaced without forking the loop.
package scheduler

import (
	"context"
	"sync"

	"k8s.io/apimachinery/pkg/util/sets"
	"k8s.io/client-go/tools/events"
	"k8s.io/utils/clock"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"

	configapi "sigs.k8s.io/kueue/apis/config/v1beta2"
	kueue "sigs.k8s.io/kueue/apis/kueue/v1beta2"
	qcache "sigs.k8s.io/kueue/pkg/cache/queue"
	schdcache "sigs.k8s.io/kueue/pkg/cache/scheduler"
	"sigs.k8s.io/kueue/pkg/metrics"
	"sigs.k8s.io/kueue/pkg/resources"
	"sigs.k8s.io/kueue/pkg/scheduler/preemption"
	"sigs.k8s.io/kueue/pkg/scheduler/preemption/fairsharing"
	afs "sigs.k8s.io/kueue/pkg/util/admissionfairsharing"
	"sigs.k8s.io/kueue/pkg/util/roletracker"
	"sigs.k8s.io/kueue/pkg/util/routine"
	"sigs.k8s.io/kueue/pkg/util/wait"
	"sigs.k8s.io/kueue/pkg/workload"
)

// Scheduler admits the heads of the ClusterQueues, one cycle at a time.
type Scheduler struct {
	queues                  *qcache.Manager
	cache                   *schdcache.Cache
	client                  client.Client
	recorder                events.EventRecorder
	admissionRoutineWrapper routine.Wrapper
	preemptor               Preemptor
	workloadOrdering        workload.Ordering
	fairSharing             *configapi.FairSharing
	admissionFairSharing    *configapi.AdmissionFairSharing
	quotaCheckStrategy      configapi.QuotaCheckStrategy
	clock                   clock.Clock
	roleTracker             *roletracker.RoleTracker
	customLabels            *metrics.CustomLabels
	resourceFormatter       *resources.ResourceFormatter

	// schedulingCycle counts scheduling attempts since start. The flavor assigner records it on
	// assignments to tell how old a resumed flavor scan is.
	schedulingCycle int64

	// Ours from here on.

	// apiReader reads past the informer cache (WithAPIReader).
	apiReader client.Reader
	// hooks are the preemptor's extension points of the loop.
	hooks Hooks
	// drains keeps the quota of victims of our preemptions until their Pods are gone.
	drains *drainHolds
	// refusalWakes wakes the queues of preemptors parked after a refused preemption.
	refusalWakes *queueWakes
	// nextHeads gives the cycle its heads: the queue manager's, or those Cycle hands it.
	nextHeads func(context.Context) []qcache.Head
	// draining lists, per ClusterQueue, this cycle's victims of ours whose Pods still terminate:
	// their quota is held in the snapshot and no new preemption starts there until they are gone.
	draining draining
	// waitedForTurn are this cycle's ClusterQueues where a head stepped aside or was held back
	// for the workload whose turn it was.
	waitedForTurn sets.Set[kueue.ClusterQueueReference]
}

// New builds a Scheduler. Add it to a controller-runtime manager to run it.
// Upstream's original: New in sigs.k8s.io/kueue/pkg/scheduler.
func New(queues *qcache.Manager, cache *schdcache.Cache, cl client.Client, recorder events.EventRecorder, opts ...Option) *Scheduler {
	options := defaultOptions
	for _, opt := range opts {
		opt(&options)
	}
	if options.resourceFormatter == nil {
		options.resourceFormatter = resources.NewResourceFormatter()
	}
	wo := workload.Ordering{
		PodsReadyRequeuingTimestamp: options.podsReadyRequeuingTimestamp,
	}
	s := &Scheduler{
		fairSharing: options.fairSharing,
		queues:      queues,
		cache:       cache,
		client:      cl,
		recorder:    recorder,
		// timeshare: the preemptor is the one WithPreemptor chose, upstream's by default.
		preemptor: options.newPreemptor(PreemptorConfig{
			Client:               cl,
			Ordering:             wo,
			Recorder:             recorder,
			FairSharing:          options.fairSharing,
			AdmissionFairSharing: afs.Enabled(options.admissionFairSharing),
			Clock:                options.clock,
			RoleTracker:          options.roleTracker,
			Expectations:         options.preemptionExpectations,
			CustomLabels:         options.customLabels,
		}),
		admissionRoutineWrapper: routine.DefaultWrapper,
		workloadOrdering:        wo,
		clock:                   options.clock,
		admissionFairSharing:    options.admissionFairSharing,
		quotaCheckStrategy:      options.quotaCheckStrategy,
		roleTracker:             options.roleTracker,
		customLabels:            options.customLabels,
		resourceFormatter:       options.resourceFormatter,
	}
	// timeshare: our options and the parts of the loop built from them.
	s.initTimeshare(options)
	return s
}

// initTimeshare sets up what the loop adds to upstream's: the preemptor's hooks, the drain holds
// and the wake-ups after refusals.
func (s *Scheduler) initTimeshare(o options) {
	s.apiReader = o.apiReader
	s.nextHeads = s.queues.Heads
	s.hooks = s.preemptor.Hooks()
	s.drains = newDrainHolds(s.client, o.clock, o.wakeQueue).withLead(o.requeueBatchPeriod)
	s.refusalWakes = newQueueWakes(o.clock, o.wakeQueue)
}

// Start runs the loop in the background until ctx ends (manager.Runnable).
// Upstream's original: (*Scheduler).Start in sigs.k8s.io/kueue/pkg/scheduler.
func (s *Scheduler) Start(ctx context.Context) error {
	log := ctrl.LoggerFrom(ctx).WithName("scheduler")
	ctx = ctrl.LoggerInto(ctx, log)
	go wait.UntilWithBackoff(ctx, s.schedule)
	return nil
}

// NeedLeaderElection keeps admission to the elected replica.
// Upstream's original: (*Scheduler).NeedLeaderElection in sigs.k8s.io/kueue/pkg/scheduler.
func (s *Scheduler) NeedLeaderElection() bool {
	return true
}

func (s *Scheduler) fairSharingEnabled() bool {
	return fairsharing.Enabled(s.fairSharing)
}

// schedule is one scheduling cycle. It returns SlowDown when nothing was admitted, so that
// an idle or blocked cluster does not spin.
// Upstream's original: (*Scheduler).schedule in sigs.k8s.io/kueue/pkg/scheduler.
func (s *Scheduler) schedule(ctx context.Context) wait.SpeedSignal {
	s.schedulingCycle++
	log := roletracker.WithReplicaRole(ctrl.LoggerFrom(ctx), s.roleTracker).WithValues("schedulingCycle", s.schedulingCycle)
	ctx = ctrl.LoggerInto(ctx, log)
	cycleStartTime := s.clock.Now()
	log.V(2).Info("Scheduling cycle starts")
	defer func() {
		log.V(2).Info("Scheduling cycle complete", "duration", s.clock.Since(cycleStartTime))
	}()
	// Blocks until some ClusterQueue has a head; none means the manager is stopping.
	heads := s.nextHeads(ctx)
	if len(heads) == 0 {
		return wait.KeepGoing
	}
	startTime := s.clock.Now()
	log.V(2).Info("Obtained heads", "headCount", len(heads), "waitDuration", startTime.Sub(cycleStartTime))
	var snapshotOpts []schdcache.SnapshotOption
	if afs.Enabled(s.admissionFairSharing) {
		snapshotOpts = append(snapshotOpts, schdcache.WithAfsUsageLedger(s.queues.AfsUsageLedger))
	}
	phaseStartTime := s.clock.Now()
	snapshot, err := s.cache.Snapshot(ctx, snapshotOpts...)
	if err != nil {
		log.Error(err, "failed to build snapshot for scheduling")
		return wait.SlowDown
	}
	logSnapshotIfVerbose(log, snapshot)
	log.V(2).Info("Snapshot taken", "duration", s.clock.Since(phaseStartTime))
	// timeshare: the quota of draining victims stays held, and a head may give way to the workload whose turn it is.
	heads = s.beforeNomination(ctx, heads, snapshot)
	phaseStartTime = s.clock.Now()
	entries, inadmissibleEntries := s.nominate(ctx, heads, snapshot)
	log.V(2).Info("Nomination done", "entries", len(entries), "inadmissibleEntries", len(inadmissibleEntries), "duration", s.clock.Since(phaseStartTime))
	iterator := makeIterator(ctx, entries, s.workloadOrdering, fairsharing.Enabled(s.fairSharing))
	phaseStartTime = s.clock.Now()
	preemptedWorkloads := make(preemption.PreemptedWorkloads)
	skippedPreemptions := make(map[kueue.ClusterQueueReference]int)
	for iterator.hasNext() {
		s.processEntry(ctx, iterator.pop(), snapshot, preemptedWorkloads, skippedPreemptions)
	}
	result := metrics.AdmissionResultInadmissible
	for _, e := range entries {
		logAdmissionAttemptIfVerbose(log, &e)
		// Admitted entries are done; evicted ones are finished by the workload controller.
		if e.status != assumed && e.status != evicted {
			s.requeueAndUpdate(ctx, e)
		} else {
			result = metrics.AdmissionResultSuccess
		}
	}
	for _, e := range inadmissibleEntries {
		logAdmissionAttemptIfVerbose(log, &e)
		s.requeueAndUpdate(ctx, e)
	}
	// timeshare: workloads parked behind the one whose turn it was get another chance once it is admitted.
	s.retryAfterTurns(s.waitedForTurn, entries)
	log.V(2).Info("Workload processing done", "duration", s.clock.Since(phaseStartTime))
	s.reportSkippedPreemptions(skippedPreemptions)
	metrics.AdmissionAttempt(result, s.clock.Since(startTime), s.roleTracker)
	if result != metrics.AdmissionResultSuccess {
		return wait.SlowDown
	}
	return wait.KeepGoing
}

// beforeNomination applies the drain holds to the snapshot and lets the preemptor substitute
// heads for the workloads whose turn it is. What it finds is kept for the rest of the cycle.
func (s *Scheduler) beforeNomination(ctx context.Context, heads []qcache.Head, snapshot *schdcache.Snapshot) []qcache.Head {
	s.draining = s.drains.apply(ctx, snapshot)
	// After the snapshot (and the quota of draining victims): whose turn it is depends on who
	// could use it.
	s.waitedForTurn = sets.New[kueue.ClusterQueueReference]()
	return s.substituteHeads(ctx, heads, snapshot, s.waitedForTurn)
}

// Upstream's original: (*Scheduler).reportSkippedPreemptions in sigs.k8s.io/kueue/pkg/scheduler.
func (s *Scheduler) reportSkippedPreemptions(p map[kueue.ClusterQueueReference]int) {
	for cqName, count := range p {
		metrics.ReportAdmissionCyclePreemptionSkips(cqName, count, s.customLabels.CQGet(cqName), s.roleTracker)
	}
}

// Cycle runs one scheduling cycle now, for a caller that drives the scheduler itself instead of
// starting it (the simulator). Unlike the loop it never waits for heads: with none it returns at
// once. It returns once the cycle's admissions are written. heads are the ClusterQueue heads the
// queues gave it; progress reports that one was admitted, when the loop would go on at once
// (KeepGoing): evictions issued for a head are not progress until the victims are gone and the
// head admitted. It must not be called on a started Scheduler, nor concurrently.
func (s *Scheduler) Cycle(ctx context.Context) (heads []workload.Reference, progress bool) {
	var writes sync.WaitGroup
	loop, nextHeads := s.admissionRoutineWrapper, s.nextHeads
	s.admissionRoutineWrapper = routine.NewWrapper(func() { writes.Add(1) }, writes.Done)
	s.nextHeads = func(ctx context.Context) []qcache.Head {
		// The queue manager blocks only while its context is alive.
		done, cancel := context.WithCancel(ctx)
		cancel()
		h := s.queues.Heads(done)
		for i := range h {
			heads = append(heads, workload.Key(h[i].Obj))
		}
		return h
	}
	defer func() { s.admissionRoutineWrapper, s.nextHeads = loop, nextHeads }()
	signal := s.schedule(ctx)
	writes.Wait()
	return heads, len(heads) > 0 && signal == wait.KeepGoing
}
