package scheduler

import (
	"context"
	"sync"

	"k8s.io/apimachinery/pkg/util/sets"
	ctrl "sigs.k8s.io/controller-runtime"

	kueue "sigs.k8s.io/kueue/apis/kueue/v1beta2"
	qcache "sigs.k8s.io/kueue/pkg/cache/queue"
	schdcache "sigs.k8s.io/kueue/pkg/cache/scheduler"
	"sigs.k8s.io/kueue/pkg/util/routine"
	"sigs.k8s.io/kueue/pkg/util/wait"
	"sigs.k8s.io/kueue/pkg/workload"

	"github.com/kueue-timeshare/kueue-timeshare/pkg/queuesettings"
)

// initTimeshare sets up what the loop adds to upstream's: the preemptor's hooks, the drain holds
// and the wake-ups after refusals.
func (s *Scheduler) initTimeshare(o options) {
	s.apiReader = o.apiReader
	s.nextHeads = s.queues.Heads
	s.hooks = s.preemptor.Hooks()
	if o.wakeQueue == nil {
		o.wakeQueue, o.requeueBatchPeriod = s.wakeThroughQueues, queuesettings.RequeueBatchPeriod()
	}
	s.drains = newDrainHolds(s.client, o.clock, o.wakeQueue, o.handoverHoldBound, s.recorder).withLead(o.requeueBatchPeriod)
	s.refusalWakes = newQueueWakes(o.clock, o.wakeQueue)
	s.headsPerCycle = o.headsPerCycle
	s.pendingStatus = newPendingStatusWriter(o.pendingStatusWriters, s.client, s.clock, func(wl *kueue.Workload) bool {
		cq, ok := s.queues.ClusterQueueForWorkload(wl)
		return ok && s.cache.IsAdded(workload.Info{Obj: wl, ClusterQueue: cq})
	})
}

// wakeThroughQueues is the loop's waker unless WithQueueWaker gives another: it retries cq's
// inadmissible workloads through the queue manager the loop reads, so that a workload parked after
// a refused preemption or a drain is tried again at the time the loop chose, whoever built it.
func (s *Scheduler) wakeThroughQueues(ctx context.Context, cq kueue.ClusterQueueReference) {
	queuesettings.Wake(ctx, s.client, s.queues, cq, ctrl.LoggerFrom(ctx))
}

// beforeNomination applies the drain holds to the snapshot and lets the preemptor substitute
// heads for the workloads whose turn it is. What it finds is kept for the rest of the cycle.
func (s *Scheduler) beforeNomination(ctx context.Context, heads []qcache.Head, snapshot *schdcache.Snapshot) []qcache.Head {
	s.draining = s.drains.apply(ctx, snapshot)
	// After the snapshot (and the quota of draining victims): whose turn it is depends on who
	// could use it.
	s.waitedForTurn = sets.New[kueue.ClusterQueueReference]()
	s.takenInCycle = nil
	return s.substituteHeads(ctx, heads, snapshot, s.waitedForTurn)
}

// Cycle runs one scheduling cycle now, for a caller that drives the scheduler itself instead of
// starting it (the simulator). Unlike the loop it never waits for heads: with none it returns at
// once. It returns once the cycle's admissions and pending statuses are written. heads are the
// ClusterQueue heads the queues gave it; progress reports that one was admitted, when the loop
// would go on at once (KeepGoing): evictions issued for a head are not progress until the victims
// are gone and the head admitted. It must not be called on a started Scheduler, nor concurrently.
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
	s.pendingStatus.flush(ctx)
	return heads, len(heads) > 0 && signal == wait.KeepGoing
}
