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
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"

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
	queues    *qcache.Manager
	cache     *schdcache.Cache
	client    client.Client
	recorder  events.EventRecorder
	preemptor Preemptor
	// hooks are the preemptor's extension points of the loop.
	hooks            Hooks
	workloadOrdering workload.Ordering
	options

	// admissionRoutineWrapper runs the API write of an admission; tests make it synchronous.
	admissionRoutineWrapper routine.Wrapper

	// drains keeps the quota of victims of our preemptions until their Pods are gone.
	drains *drainHolds
	// refusalWakes wakes the queues of preemptors parked after a refused preemption.
	refusalWakes *queueWakes

	// schedulingCycle counts scheduling attempts since start. The flavor assigner records it on
	// assignments to tell how old a resumed flavor scan is.
	schedulingCycle int64
}

// New builds a Scheduler. Add it to a controller-runtime manager to run it.
// Upstream's original: New in sigs.k8s.io/kueue/pkg/scheduler.
func New(queues *qcache.Manager, cache *schdcache.Cache, cl client.Client, recorder events.EventRecorder, opts ...Option) *Scheduler {
	o := defaultOptions()
	for _, opt := range opts {
		opt(&o)
	}
	if o.resourceFormatter == nil {
		o.resourceFormatter = resources.NewResourceFormatter()
	}
	ordering := workload.Ordering{PodsReadyRequeuingTimestamp: o.podsReadyRequeuingTimestamp}
	s := &Scheduler{
		queues:                  queues,
		cache:                   cache,
		client:                  cl,
		recorder:                recorder,
		workloadOrdering:        ordering,
		options:                 o,
		admissionRoutineWrapper: routine.DefaultWrapper,
		preemptor: o.newPreemptor(PreemptorConfig{
			Client:               cl,
			Ordering:             ordering,
			Recorder:             recorder,
			FairSharing:          o.fairSharing,
			AdmissionFairSharing: afs.Enabled(o.admissionFairSharing),
			Clock:                o.clock,
			RoleTracker:          o.roleTracker,
			Expectations:         o.preemptionExpectations,
			CustomLabels:         o.customLabels,
		}),
	}
	s.hooks = s.preemptor.Hooks()
	s.drains = newDrainHolds(cl, o.clock, o.wakeQueue).withLead(o.requeueBatchPeriod)
	s.refusalWakes = newQueueWakes(o.clock, o.wakeQueue)
	return s
}

// Start runs the loop in the background until ctx ends (manager.Runnable).
// Upstream's original: (*Scheduler).Start in sigs.k8s.io/kueue/pkg/scheduler.
func (s *Scheduler) Start(ctx context.Context) error {
	ctx = ctrl.LoggerInto(ctx, ctrl.LoggerFrom(ctx).WithName("scheduler"))
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

func (s *Scheduler) afsEnabled() bool {
	return afs.Enabled(s.admissionFairSharing)
}

// schedule is one scheduling cycle. It returns SlowDown when nothing was admitted, so that
// an idle or blocked cluster does not spin. The cycle itself is scheduleHeads.
func (s *Scheduler) schedule(ctx context.Context) wait.SpeedSignal {
	return s.scheduleHeads(ctx, s.queues.Heads)
}

// Cycle runs one scheduling cycle now, for a caller that drives the scheduler itself instead of
// starting it (the simulator). Unlike the loop it never waits for heads: with none it returns at
// once. It returns once the cycle's admissions are written. heads are the ClusterQueue heads the
// queues gave it; progress reports that one was admitted, when the loop would go on at once
// (KeepGoing): evictions issued for a head are not progress until the victims are gone and the
// head admitted. It must not be called on a started Scheduler, nor concurrently.
func (s *Scheduler) Cycle(ctx context.Context) (heads []workload.Reference, progress bool) {
	var writes sync.WaitGroup
	loop := s.admissionRoutineWrapper
	s.admissionRoutineWrapper = routine.NewWrapper(func() { writes.Add(1) }, writes.Done)
	defer func() { s.admissionRoutineWrapper = loop }()
	signal := s.scheduleHeads(ctx, func(ctx context.Context) []qcache.Head {
		// The queue manager blocks only while its context is alive.
		done, cancel := context.WithCancel(ctx)
		cancel()
		h := s.queues.Heads(done)
		for i := range h {
			heads = append(heads, workload.Key(h[i].Obj))
		}
		return h
	})
	writes.Wait()
	return heads, len(heads) > 0 && signal == wait.KeepGoing
}

// scheduleHeads is one cycle on the heads that nextHeads returns.
// Upstream's original: (*Scheduler).schedule in sigs.k8s.io/kueue/pkg/scheduler.
func (s *Scheduler) scheduleHeads(ctx context.Context, nextHeads func(context.Context) []qcache.Head) wait.SpeedSignal {
	s.schedulingCycle++
	clk := s.clock
	log := roletracker.WithReplicaRole(ctrl.LoggerFrom(ctx), s.roleTracker).WithValues("schedulingCycle", s.schedulingCycle)
	ctx = ctrl.LoggerInto(ctx, log)
	began := clk.Now()
	log.V(2).Info("Scheduling cycle starts")
	defer func() { log.V(2).Info("Scheduling cycle complete", "duration", clk.Since(began)) }()

	// Blocks until some ClusterQueue has a head; none means the manager is stopping.
	heads := nextHeads(ctx)
	if len(heads) == 0 {
		return wait.KeepGoing
	}
	headsAt := clk.Now()
	log.V(2).Info("Obtained heads", "headCount", len(heads), "waitDuration", headsAt.Sub(began))

	var snapOpts []schdcache.SnapshotOption
	if s.afsEnabled() {
		snapOpts = append(snapOpts, schdcache.WithAfsUsageLedger(s.queues.AfsUsageLedger))
	}
	phase := clk.Now()
	snap, err := s.cache.Snapshot(ctx, snapOpts...)
	if err != nil {
		log.Error(err, "failed to build snapshot for scheduling")
		return wait.SlowDown
	}
	if v := log.V(6); v.Enabled() {
		snap.Log(v)
	}
	log.V(2).Info("Snapshot taken", "duration", clk.Since(phase))
	draining := s.drains.apply(ctx, snap)
	// After the snapshot (and the quota of draining victims): whose turn it is depends on who
	// could use it.
	waitedForTurn := sets.New[kueue.ClusterQueueReference]()
	heads = s.substituteHeads(ctx, heads, snap, waitedForTurn)

	phase = clk.Now()
	candidates, rejected := s.nominate(ctx, heads, snap)
	log.V(2).Info("Nomination done", "entries", len(candidates), "inadmissibleEntries", len(rejected), "duration", clk.Since(phase))

	phase = clk.Now()
	c := cycleState{
		snapshot:  snap,
		draining:  draining,
		preempted: make(preemption.PreemptedWorkloads),
		skipped:   make(map[kueue.ClusterQueueReference]int),
		waited:    waitedForTurn,
	}
	iterator := makeIterator(ctx, candidates, s.workloadOrdering, fairsharing.Enabled(s.fairSharing))
	for iterator.hasNext() {
		s.processEntry(ctx, iterator.pop(), &c)
	}

	outcome := metrics.AdmissionResultInadmissible
	for i := range candidates {
		e := candidates[i]
		logAdmissionAttemptIfVerbose(log, &e)
		// Admitted entries are done; evicted ones are finished by the workload controller.
		if e.status == assumed || e.status == evicted {
			outcome = metrics.AdmissionResultSuccess
			continue
		}
		s.requeueAndUpdate(ctx, e)
	}
	for i := range rejected {
		logAdmissionAttemptIfVerbose(log, &rejected[i])
		s.requeueAndUpdate(ctx, rejected[i])
	}
	s.retryAfterTurns(c.waited, candidates)
	log.V(2).Info("Workload processing done", "duration", clk.Since(phase))

	for cq, n := range c.skipped {
		metrics.ReportAdmissionCyclePreemptionSkips(cq, n, s.customLabels.CQGet(cq), s.roleTracker)
	}
	metrics.AdmissionAttempt(outcome, clk.Since(headsAt), s.roleTracker)
	if outcome == metrics.AdmissionResultSuccess {
		return wait.KeepGoing
	}
	return wait.SlowDown
}

// cycleState is what entries processed in one cycle share.
type cycleState struct {
	snapshot *schdcache.Snapshot
	// preempted holds the victims already claimed this cycle; another entry needing any
	// of them has to wait.
	preempted preemption.PreemptedWorkloads
	// skipped counts, per ClusterQueue, preemptions given up because of such overlaps.
	skipped map[kueue.ClusterQueueReference]int
	// draining lists, per ClusterQueue, our victims whose Pods still terminate: their quota is
	// held in the snapshot and no new preemption starts there until they are gone.
	draining draining
	// waited are the ClusterQueues where a head stepped aside or was held back for the workload
	// whose turn it was.
	waited sets.Set[kueue.ClusterQueueReference]
}
