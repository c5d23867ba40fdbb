// Package scheduler is kueue-timeshare's admission loop. It behaves as the scheduler of
// sigs.k8s.io/kueue v0.19.2 and is built from the same exported pieces (queue manager,
// scheduler cache, flavor assigner), but takes its preemptor as an interface so that the
// victim policy can be replaced without forking the loop.
package scheduler

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"maps"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/go-logr/logr"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/sets"
	"k8s.io/client-go/tools/events"
	"k8s.io/klog/v2"
	"k8s.io/utils/clock"
	"k8s.io/utils/ptr"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/log"

	configapi "sigs.k8s.io/kueue/apis/config/v1beta2"
	kueue "sigs.k8s.io/kueue/apis/kueue/v1beta2"
	qcache "sigs.k8s.io/kueue/pkg/cache/queue"
	queueafs "sigs.k8s.io/kueue/pkg/cache/queue/afs"
	schdcache "sigs.k8s.io/kueue/pkg/cache/scheduler"
	controllerconstants "sigs.k8s.io/kueue/pkg/controller/constants"
	"sigs.k8s.io/kueue/pkg/features"
	"sigs.k8s.io/kueue/pkg/metrics"
	"sigs.k8s.io/kueue/pkg/resources"
	"sigs.k8s.io/kueue/pkg/scheduler/flavorassigner"
	"sigs.k8s.io/kueue/pkg/scheduler/preemption"
	"sigs.k8s.io/kueue/pkg/scheduler/preemption/fairsharing"
	afs "sigs.k8s.io/kueue/pkg/util/admissionfairsharing"
	"sigs.k8s.io/kueue/pkg/util/api"
	"sigs.k8s.io/kueue/pkg/util/expectations"
	"sigs.k8s.io/kueue/pkg/util/priority"
	utilqueue "sigs.k8s.io/kueue/pkg/util/queue"
	"sigs.k8s.io/kueue/pkg/util/roletracker"
	"sigs.k8s.io/kueue/pkg/util/routine"
	"sigs.k8s.io/kueue/pkg/util/wait"
	"sigs.k8s.io/kueue/pkg/workload"
	"sigs.k8s.io/kueue/pkg/workload/concurrentadmission"
	workloadevict "sigs.k8s.io/kueue/pkg/workload/evict"
	workloadfinish "sigs.k8s.io/kueue/pkg/workload/finish"
	workloadpatching "sigs.k8s.io/kueue/pkg/workload/patching"
	"sigs.k8s.io/kueue/pkg/workloadslicing"
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
	// steppedAsideFor is, per ClusterQueue, the workload a head last stepped aside for, until it
	// is admitted or found unable to use the turn (retryAfterTurns).
	steppedAsideFor map[kueue.ClusterQueueReference]types.UID
	// headsPerCycle is how many workloads of one ClusterQueue a cycle may take (WithHeadsPerCycle).
	headsPerCycle int
	// takenInCycle are the workloads this cycle took out of the queues after its heads, with
	// the heads themselves; nil while it took none.
	takenInCycle sets.Set[workload.Reference]
	// headCursors walk the ClusterQueues' queues for the cycle's heads after the first.
	headCursors headCursors
	// pendingStatus writes the status of heads that wait (WithPendingStatusWriters).
	pendingStatus *pendingStatusWriter
	// preemptors are the ClusterQueues' active preemptors (ActivePreemptor).
	preemptors activePreemptors
}

// usageOp says whether updateEntryPenalty charges a penalty or takes it back.
type usageOp int

const (
	add usageOp = iota
	subtract
)

// entryStatus is where a head got to in this cycle. It decides how the head is requeued
// and whether its QuotaReserved condition is written.
type entryStatus string

const (
	// notNominated: never got past the checks before admission (the zero value).
	notNominated entryStatus = ""
	// nominated: admission was attempted.
	nominated entryStatus = "nominated"
	// skipped: lost to another head in this cycle.
	skipped entryStatus = "skipped"
	// preemptionGated: needs preemption, which its preemption gate forbids for now.
	preemptionGated entryStatus = "preemptionGated"
	// evicted: the scheduler evicted it (failed node replacement).
	evicted entryStatus = "evicted"
	// assumed: admitted in the cache; the API write is in flight.
	assumed entryStatus = "assumed"
)

// entry is a head with what this cycle decided for it.
type entry struct {
	qcache.Head
	clusterQueueSnapshot *schdcache.ClusterQueueSnapshot
	assignment           flavorassigner.Assignment
	preemptionTargets    []*preemption.Target

	status entryStatus
	// inadmissibleMsg and quotaReservedReason go into the QuotaReserved condition when the head
	// is requeued without admission.
	inadmissibleMsg     string
	quotaReservedReason string
	requeueReason       qcache.RequeueReason
	// skipStatusUpdate keeps the condition untouched after an internal error.
	skipStatusUpdate bool
	// holdQuota is the preemptor's verdict that a head with no victims keeps the quota it waits
	// for (WaitVerdict.HoldQuota).
	holdQuota bool
}

// entryIterator yields a cycle's entries in the order they are processed.
type entryIterator interface {
	pop() *entry
	hasNext() bool
}

// classicalIterator hands out entries already sorted by makeClassicalIterator.
type classicalIterator struct {
	entries []entry
}

// WithPodsReadyRequeuingTimestamp picks the timestamp that orders workloads requeued after
// a PodsReady timeout.
// Upstream's original: WithPodsReadyRequeuingTimestamp in sigs.k8s.io/kueue/pkg/scheduler.
func WithPodsReadyRequeuingTimestamp(ts configapi.RequeuingTimestamp) Option {
	return func(o *options) {
		o.podsReadyRequeuingTimestamp = ts
	}
}

// WithFairSharing turns fair sharing on; nil leaves the previous value in place.
// Upstream's original: WithFairSharing in sigs.k8s.io/kueue/pkg/scheduler.
func WithFairSharing(fs *configapi.FairSharing) Option {
	return func(o *options) {
		if fs != nil {
			o.fairSharing = fs
		}
	}
}

// WithAdmissionFairSharing sets the admission fair sharing configuration.
// Upstream's original: WithAdmissionFairSharing in sigs.k8s.io/kueue/pkg/scheduler.
func WithAdmissionFairSharing(afs *configapi.AdmissionFairSharing) Option {
	return func(o *options) {
		o.admissionFairSharing = afs
	}
}

// WithClock replaces the clock; the testing.TB argument keeps it out of production wiring.
// Upstream's original: WithClock in sigs.k8s.io/kueue/pkg/scheduler.
func WithClock(_ testing.TB, c clock.Clock) Option {
	return func(o *options) {
		o.clock = c
	}
}

// WithRoleTracker sets the tracker whose role is added to logs and metrics.
// Upstream's original: WithRoleTracker in sigs.k8s.io/kueue/pkg/scheduler.
func WithRoleTracker(tracker *roletracker.RoleTracker) Option {
	return func(o *options) {
		o.roleTracker = tracker
	}
}

// WithPreemptionExpectations sets the store of in-flight preemptions.
// Upstream's original: WithPreemptionExpectations in sigs.k8s.io/kueue/pkg/scheduler.
func WithPreemptionExpectations(store *expectations.Store) Option {
	return func(o *options) {
		o.preemptionExpectations = store
	}
}

// WithCustomLabels sets the custom metric labels.
// Upstream's original: WithCustomLabels in sigs.k8s.io/kueue/pkg/scheduler.
func WithCustomLabels(cl *metrics.CustomLabels) Option {
	return func(o *options) {
		o.customLabels = cl
	}
}

// WithQuotaCheckStrategy sets how requests for resources a ClusterQueue does not declare
// are treated.
// Upstream's original: WithQuotaCheckStrategy in sigs.k8s.io/kueue/pkg/scheduler.
func WithQuotaCheckStrategy(qcs configapi.QuotaCheckStrategy) Option {
	return func(o *options) {
		o.quotaCheckStrategy = qcs
	}
}

// WithResourceFormatter sets the formatter for quantities in messages.
// Upstream's original: WithResourceFormatter in sigs.k8s.io/kueue/pkg/scheduler.
func WithResourceFormatter(formatter *resources.ResourceFormatter) Option {
	return func(o *options) {
		o.resourceFormatter = formatter
	}
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

// Start runs the loop in the background until ctx ends (manager.Runnable).
// Upstream's original: (*Scheduler).Start in sigs.k8s.io/kueue/pkg/scheduler.
func (s *Scheduler) Start(ctx context.Context) error {
	log := ctrl.LoggerFrom(ctx).WithName("scheduler")
	ctx = ctrl.LoggerInto(ctx, log)
	// timeshare: the pending-status writers run, and stop, with the loop.
	s.pendingStatus.start(ctx)
	go wait.UntilWithBackoff(ctx, s.schedule)
	return nil
}

// NeedLeaderElection keeps admission to the elected replica.
// Upstream's original: (*Scheduler).NeedLeaderElection in sigs.k8s.io/kueue/pkg/scheduler.
func (s *Scheduler) NeedLeaderElection() bool {
	return true
}

// markSkipped marks a head that lost to another one this cycle. The flavor scan progress is kept
// under FlavorFungibilityPreserveScanProgress: the head lost on contention, not on the
// flavor, so what was tried is still the best information.
// Upstream's original: (*entry).markSkipped in sigs.k8s.io/kueue/pkg/scheduler.
func (e *entry) markSkipped(msg string) {
	e.status = skipped
	e.inadmissibleMsg = msg
	if !features.Enabled(features.FlavorFungibilityPreserveScanProgress) {
		e.LastAssignment = nil
	}
}

// markPreemptionGated marks a head whose preemption is held by a closed preemption gate; all flavors are
// tried again next time.
// Upstream's original: (*entry).markPreemptionGated in sigs.k8s.io/kueue/pkg/scheduler.
func (e *entry) markPreemptionGated(msg string) {
	e.status = preemptionGated
	e.inadmissibleMsg = msg
	e.requeueReason = qcache.RequeueReasonPreemptionGated
	e.LastAssignment = nil
}

// Upstream's original: (*entry).markEvicted in sigs.k8s.io/kueue/pkg/scheduler.
func (e *entry) markEvicted() {
	e.status = evicted
}

// Upstream's original: (*entry).markNominated in sigs.k8s.io/kueue/pkg/scheduler.
func (e *entry) markNominated() {
	e.status = nominated
}

// Upstream's original: (*entry).markAssumed in sigs.k8s.io/kueue/pkg/scheduler.
func (e *entry) markAssumed() {
	e.status = assumed
}

// recordAssignment records a computed assignment and its scan progress, from which a requeued
// head resumes. The progress is held apart from the entry because entries move when sorted.
// Upstream's original: (*entry).recordAssignment in sigs.k8s.io/kueue/pkg/scheduler.
func (e *entry) recordAssignment(a flavorassigner.Assignment, targets []*preemption.Target) {
	e.assignment = a
	e.preemptionTargets = targets
	e.inadmissibleMsg = e.assignment.Message()
	e.LastAssignment = &e.assignment.LastState
	// timeshare: upstream's pointer into e.assignment would follow the slot, not the entry, once
	// the iterator sorts the entries; a copy stays with the workload.
	e.LastAssignment = ptr.To(e.assignment.LastState)
}

// markPreemptionOutcome records what IssuePreemptions did. Victims change the picture, so the
// flavor scan starts over next time.
// Upstream's original: (*entry).markPreemptionOutcome in sigs.k8s.io/kueue/pkg/scheduler.
func (e *entry) markPreemptionOutcome(preempted, errors int) {
	e.LastAssignment = nil
	if preempted != 0 {
		e.inadmissibleMsg += fmt.Sprintf(". Pending the preemption of %d workload(s)", preempted)
		e.requeueReason = qcache.RequeueReasonPendingPreemption
	} else if errors > 0 {
		e.inadmissibleMsg += fmt.Sprintf(". Preempting %d workload(s) failed, will retry.", errors)
		e.requeueReason = qcache.RequeueReasonPreemptionFailed
	}
}

// Upstream's original: (*Scheduler).reportSkippedPreemptions in sigs.k8s.io/kueue/pkg/scheduler.
func (s *Scheduler) reportSkippedPreemptions(p map[kueue.ClusterQueueReference]int) {
	for cqName, count := range p {
		metrics.ReportAdmissionCyclePreemptionSkips(cqName, count, s.customLabels.CQGet(cqName), s.roleTracker)
	}
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
	// timeshare: the queue manager's heads, or those Cycle hands in without blocking.
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
	// timeshare: the quota of draining victims stays held, and a head may give way to the
	// workload whose turn it is.
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
	// timeshare: the ClusterQueues whose head was admitted go on with their next workloads.
	entries, inadmissibleEntries = s.moreHeads(ctx, entries, inadmissibleEntries, snapshot, preemptedWorkloads, skippedPreemptions)
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
	// timeshare: workloads parked behind the one whose turn it was get another chance once it
	// is admitted.
	s.retryAfterTurns(s.waitedForTurn, entries, inadmissibleEntries)
	log.V(2).Info("Workload processing done", "duration", s.clock.Since(phaseStartTime))
	s.reportSkippedPreemptions(skippedPreemptions)
	metrics.AdmissionAttempt(result, s.clock.Since(startTime), s.roleTracker)
	if result != metrics.AdmissionResultSuccess {
		return wait.SlowDown
	}
	return wait.KeepGoing
}

// processEntry takes one head, in the order the iterator chose, from its assignment to
// admission, preemption or a reason to wait. The usage it is granted is added to the
// snapshot, so later heads in the cycle see it.
// Upstream's original: (*Scheduler).processEntry in sigs.k8s.io/kueue/pkg/scheduler.
func (s *Scheduler) processEntry(
	ctx context.Context,
	e *entry,
	snapshot *schdcache.Snapshot,
	preemptedWorkloads preemption.PreemptedWorkloads,
	skippedPreemptions map[kueue.ClusterQueueReference]int,
) {
	cq := snapshot.ClusterQueue(e.ClusterQueue)
	log := ctrl.LoggerFrom(ctx).WithValues("workload", klog.KObj(e.Obj), "clusterQueue", klog.KRef("", string(e.ClusterQueue)))
	if cq.HasParent() {
		log = log.WithValues("parentCohort", klog.KRef("", string(cq.Parent().GetName())), "rootCohort", klog.KRef("", string(cq.Parent().Root().GetName())))
	}
	ctx = ctrl.LoggerInto(ctx, log)
	log.V(2).Info("Attempting to schedule workload")

	if features.Enabled(features.ConcurrentAdmission) && concurrentadmission.IsVariant(e.Obj) {
		if moreFavorableSibling := s.findAdmittedMoreFavorableSibling(&e.Info, snapshot); moreFavorableSibling != nil {
			log.V(3).Info("Skipping workload as a more favorable variant is already admitted", "moreFavorableVariant", klog.KObj(moreFavorableSibling.Obj))
			e.quotaReservedReason = kueue.WorkloadQuotaReservedReasonPendingEvaluation
			e.markSkipped("A more favorable variant is already admitted")
			return
		}
	}

	usage, fits := s.updateAssignmentIfNeeded(ctx, log, e, snapshot, cq, preemptedWorkloads)
	mode := e.assignment.RepresentativeMode()

	if features.Enabled(features.TASFailedNodeReplacementFailFast) && workload.HasTopologyAssignmentWithUnhealthyNode(e.Obj) && mode != flavorassigner.Fit {
		s.handleFailedTASReplacement(ctx, log, e)
		return
	}

	if mode == flavorassigner.NoFit {
		e.requeueReason = qcache.RequeueReasonNoFit
		log.V(3).Info("Skipping workload as FlavorAssigner assigned NoFit mode")
		e.quotaReservedReason = e.assignment.NoFitReason
		// timeshare: the preemptor says why the head waits.
		s.explainWait(ctx, e, snapshot)
		return
	}

	if mode == flavorassigner.Preempt {
		// timeshare: no new preemption in a ClusterQueue whose victims of ours are still draining.
		if s.waitForDrainingVictims(log, e) {
			return
		}
		if len(e.preemptionTargets) == 0 {
			e.requeueReason = qcache.RequeueReasonPreemptionNoCandidates
			e.quotaReservedReason = kueue.WorkloadQuotaReservedReasonWaitingForQuota
			// timeshare: the preemptor says why the head waits and whether it holds the quota.
			s.explainWait(ctx, e, snapshot)
			s.reserveCapacityForUnreclaimablePreempt(log, e, cq)
			return
		}
		if (features.Enabled(features.ConcurrentAdmission) || features.Enabled(features.MultiKueueOrchestratedPreemption)) && workload.HasClosedPreemptionGate(e.Obj) {
			gatedMsg := "Workload requires preemption, but it's gated"
			log.V(3).Info("Workload requires preemption, but it is gated", "workload", klog.KObj(e.Obj))
			e.quotaReservedReason = kueue.WorkloadAdmissionGated
			e.markPreemptionGated(gatedMsg)
			return
		}
	}

	// A head whose victims are already being evicted for another waits for them, but its usage is
	// counted in this cycle's snapshot, so that no later head takes the room it will get.
	if mode == flavorassigner.DeferredFit {
		e.inadmissibleMsg = "Workload has overlapping preemption targets with another workload, but will fit after these preemptions complete"
		e.quotaReservedReason = kueue.WorkloadQuotaReservedReasonWaitingForPreemptedWorkloads
		e.requeueReason = qcache.RequeueReasonPendingPreemption

		e.LastAssignment = nil
		cq.AddUsage(usage)
		return
	}

	// What an earlier head of this cycle took is not the snapshot's any more: a head that shares
	// victims with one that preempts, or no longer fits in what is left, waits for the next cycle
	// and its fresh snapshot rather than act on stale numbers.
	if preemptedWorkloads.HasAny(e.preemptionTargets) {
		e.markSkipped("Workload has overlapping preemption targets with another workload")
		e.quotaReservedReason = kueue.WorkloadQuotaReservedReasonWaitingForQuota
		skippedPreemptions[cq.Name]++
		return
	}

	if !fits {
		e.markSkipped("Workload no longer fits after processing another workload")
		e.quotaReservedReason = kueue.WorkloadQuotaReservedReasonWaitingForQuota
		if mode == flavorassigner.Preempt {
			skippedPreemptions[cq.Name]++
		}
		return
	}
	// timeshare: a head that fits may still have to wait for the workload whose turn it is.
	if s.vetoAdmission(ctx, e, snapshot, mode) {
		return
	}
	preemptedWorkloads.Insert(e.preemptionTargets)
	cq.AddUsage(usage)

	preemptionTargets, oldWorkloadSlice := workloadslicing.FindReplacedSliceTarget(e.Obj, e.preemptionTargets)

	if mode == flavorassigner.Preempt {
		e.quotaReservedReason = kueue.WorkloadQuotaReservedReasonWaitingForPreemptedWorkloads
		s.issuePreemptions(ctx, log, e, preemptionTargets)
		return
	}

	s.waitForPodsReadyIfNeeded(ctx, log, e)

	if features.Enabled(features.ElasticJobsViaWorkloadSlices) && oldWorkloadSlice != nil {
		e.Obj.Status.ClusterName = oldWorkloadSlice.WorkloadInfo.Obj.Status.ClusterName
	}

	if features.Enabled(features.ConcurrentAdmission) && concurrentadmission.IsVariant(e.Obj) {
		if lessFavorableSibling := s.findAdmittedLessFavorableSibling(&e.Info, snapshot); lessFavorableSibling != nil {
			if !s.isMigrationAllowed(cq, e, log) {
				e.quotaReservedReason = kueue.WorkloadQuotaReservedReasonPendingEvaluation
				return
			}
			e.quotaReservedReason = kueue.WorkloadQuotaReservedReasonWaitingForPreemptedWorkloads
			s.issueMigration(ctx, log, e, lessFavorableSibling)
			return
		}
	}

	e.markNominated()
	if err := s.admit(ctx, e, cq, oldWorkloadSlice); err != nil {
		e.inadmissibleMsg = fmt.Sprintf("Failed to admit workload: %v", err)
	}
}

// handleFailedTASReplacement evicts a TAS workload on an unhealthy node for which no
// replacement fits (TASFailedNodeReplacementFailFast).
// Upstream's original: (*Scheduler).handleFailedTASReplacement in sigs.k8s.io/kueue/pkg/scheduler.
func (s *Scheduler) handleFailedTASReplacement(ctx context.Context, log logr.Logger, e *entry) {
	if err := s.evictWorkloadAfterFailedTASReplacement(ctx, log, e.Obj.DeepCopy()); client.IgnoreNotFound(err) != nil {
		log.V(2).Error(err, "Failed to evict workload")
		return
	}
	e.markEvicted()
}

// reserveCapacityForUnreclaimablePreempt runs when a head needs preemption and nothing may be preempted.
// Unless the ClusterQueue can always reclaim its quota later, it keeps the quota it is
// waiting for (up to what its limits allow) out of reach of the rest of the cohort for this
// cycle, so that lower-priority work elsewhere does not take it first. An active preemptor
// (PrioritizePreemptorWorkloads) always holds it: its victims are on their way out.
// Upstream's original: (*Scheduler).reserveCapacityForUnreclaimablePreempt in sigs.k8s.io/kueue/pkg/scheduler.
func (s *Scheduler) reserveCapacityForUnreclaimablePreempt(log logr.Logger, e *entry, cq *schdcache.ClusterQueueSnapshot) {
	log.V(2).Info("Workload requires preemption, but there are no candidate workloads allowed for preemption", "preemption", cq.Preemption)
	// timeshare: a head the preemptor says must hold the quota it waits for holds it in every
	// cycle.
	if s.holdQuotaWhileBlocked(log, e, cq) {
		return
	}
	if !preemption.CanAlwaysReclaim(cq) || (features.Enabled(features.PrioritizePreemptorWorkloads) && e.IsPreemptor) {
		cq.AddUsage(resourcesToReserve(log, e, cq))
	}
}

// issueMigration evicts the admitted sibling on a worse flavor; the variant is admitted once the
// sibling's quota is released.
// Upstream's original: (*Scheduler).issueMigration in sigs.k8s.io/kueue/pkg/scheduler.
func (s *Scheduler) issueMigration(ctx context.Context, log logr.Logger, e *entry, migrationVictim *workload.Info) {
	log.V(3).Info("Migrating to more favorable resource flavor", "targetWorkload", klog.KObj(migrationVictim.Obj), "evictorWorkload", klog.KObj(e.Obj))
	wlCopy := migrationVictim.Obj.DeepCopy()
	exposeLqMetrics := s.cache.ShouldExposeLocalQueueMetricsForWorkload(log, wlCopy)
	message := fmt.Sprintf("Evicted to accommodate a workload (UID: %s) due to migration to more favorable resource flavor", e.Obj.UID)
	err := workloadevict.Evict(
		ctx, s.client, s.recorder, wlCopy, kueue.WorkloadEvictedByFlavorMigration, message, "", s.clock, exposeLqMetrics, s.roleTracker, s.customLabels,
		workloadevict.WithLooseOnApply(), workloadevict.WithRetryOnConflict(),
	)
	if err != nil {
		log.Error(err, "Failed to evict workload for migration")
	}
	e.LastAssignment = nil
	e.requeueReason = qcache.RequeueReasonPendingMigration
	e.inadmissibleMsg += ". Pending the migration of 1 workload(s)"
}

// Upstream's original: (*Scheduler).issuePreemptions in sigs.k8s.io/kueue/pkg/scheduler.
func (s *Scheduler) issuePreemptions(ctx context.Context, log logr.Logger, e *entry, preemptionTargets []*preemption.Target) {
	preempted, errors, err := s.preemptor.IssuePreemptions(ctx, s.cache, &e.Info, preemptionTargets, e.clusterQueueSnapshot)
	// timeshare: our victims' drains are tracked; a refusal already reported is no failure to log.
	refusal, err := s.trackPreemptions(ctx, e, preemptionTargets, preempted, err)
	if err != nil {
		log.Error(err, "Failed to preempt workloads")
	}
	e.markPreemptionOutcome(preempted, errors)
	// timeshare: a refused preemption parks the head until it may be tried again.
	s.parkRefusedPreemption(ctx, e, refusal)
}

// waitForPodsReadyIfNeeded implements waitForPodsReady.blockAdmission: admission waits until
// every admitted workload is ready. A second pass is exempt: its quota is already held
// and it would wait on itself.
// Upstream's original: (*Scheduler).waitForPodsReadyIfNeeded in sigs.k8s.io/kueue/pkg/scheduler.
func (s *Scheduler) waitForPodsReadyIfNeeded(ctx context.Context, log logr.Logger, e *entry) {
	if workload.NeedsSecondPass(e.Obj) {
		return
	}
	if s.cache.PodsReadyForAllAdmittedWorkloads(log) {
		return
	}
	log.V(5).Info("Waiting for all admitted workloads to be in the PodsReady condition")
	wl := e.Obj.DeepCopy()
	if err := workloadpatching.PatchAdmissionStatus(ctx, s.client, wl, s.clock, func(wl *kueue.Workload) (bool, error) {
		reason := workload.UnadmittedWorkloadReasonWithFallback(
			kueue.WorkloadQuotaReservedReasonWaitingForPodsReady,
			kueue.WorkloadWaiting, //nolint:staticcheck // the fallback upstream uses
		)
		return workload.UnsetQuotaReservationWithCondition(wl, reason, "waiting for all admitted workloads to be in PodsReady condition", s.clock.Now()), nil
	}, workloadpatching.WithLooseOnApply(), workloadpatching.WithRetryOnConflict()); err != nil {
		log.Error(err, "Could not update Workload status")
	}
	s.cache.WaitForPodsReady(ctx)
	log.V(5).Info("Finished waiting for all admitted workloads to be in the PodsReady condition")
}

// replaceOldWorkloadSlice finishes the slice the admitted one replaces. On failure the job
// reconciler finds both slices admitted and finishes the old one.
// Upstream's original: (*Scheduler).replaceOldWorkloadSlice in sigs.k8s.io/kueue/pkg/scheduler.
func (s *Scheduler) replaceOldWorkloadSlice(ctx context.Context, log logr.Logger, e *entry, oldWorkloadSlice *preemption.Target) {
	if err := s.replaceWorkloadSlice(ctx, oldWorkloadSlice.WorkloadInfo.ClusterQueue, e.Obj, oldWorkloadSlice.WorkloadInfo.Obj.DeepCopy()); err != nil {
		log.Error(err, "Failed to finish old workload slice after admitting replacement; job reconciler will handle recovery")
	}
}

// assignmentUsage is the quota and topology this head adds to its ClusterQueue when admitted.
// Upstream's original: (*entry).assignmentUsage in sigs.k8s.io/kueue/pkg/scheduler.
func (e *entry) assignmentUsage(log logr.Logger) workload.Usage {
	return netUsage(log, e, e.assignment.Usage.Quota)
}

// readResourceToFlavorMapping maps each pod set's resources to the flavors of the current assignment.
// Upstream's original: (*entry).readResourceToFlavorMapping in sigs.k8s.io/kueue/pkg/scheduler.
func (e *entry) readResourceToFlavorMapping() workload.PodSetResourcesToFlavors {
	flavors := make(workload.PodSetResourcesToFlavors, len(e.assignment.PodSets))
	for _, ps := range e.assignment.PodSets {
		flavors[ps.Name] = make(workload.ResourceToFlavor)
		for resName, flavor := range ps.Flavors {
			flavors[ps.Name][resName] = flavor.Name
		}
	}
	return flavors
}

// nominate computes an assignment for every head that may be admitted. Heads that cannot
// be considered at all come back in rejected, with the reason already set; heads the
// cache already accounts for (and that need no second pass) are dropped.
// Upstream's original: (*Scheduler).nominate in sigs.k8s.io/kueue/pkg/scheduler.
func (s *Scheduler) nominate(ctx context.Context, heads []qcache.Head, snap *schdcache.Snapshot) ([]entry, []entry) {
	log := ctrl.LoggerFrom(ctx)
	entries := make([]entry, 0, len(heads))
	var inadmissibleEntries []entry
	for _, h := range heads {
		log := log.WithValues("workload", klog.KObj(h.Obj), "clusterQueue", klog.KRef("", string(h.ClusterQueue)))
		e := entry{Head: h}
		e.clusterQueueSnapshot = snap.ClusterQueue(h.ClusterQueue)
		if !workload.NeedsSecondPass(h.Obj) && s.cache.IsAdded(h.Info) {
			log.Info("Workload skipped from admission because it's already accounted in cache, and it does not need second pass", "workload", klog.KObj(h.Obj))
			continue
		} else if workload.HasRetryChecks(h.Obj) || workload.HasRejectedChecks(h.Obj) {
			e.inadmissibleMsg = "The workload has failed admission checks"
			e.quotaReservedReason = kueue.WorkloadQuotaReservedReasonPendingEvaluation
		} else if snap.InactiveClusterQueueSets.Has(h.ClusterQueue) {
			e.inadmissibleMsg = fmt.Sprintf("ClusterQueue %s is inactive", h.ClusterQueue)
			e.quotaReservedReason = kueue.WorkloadQuotaReservedReasonSuspended
		} else if e.clusterQueueSnapshot == nil {
			e.inadmissibleMsg = fmt.Sprintf("ClusterQueue %s not found", h.ClusterQueue)
			e.quotaReservedReason = kueue.WorkloadQuotaReservedReasonMisconfigured
		} else if err := workload.ValidateAdmissibility(ctx, s.client, &h.Info, e.clusterQueueSnapshot.NamespaceSelector); err != nil {
			e.inadmissibleMsg = err.Error()
			if errors.Is(err, workload.ErrInternal) {
				log.Error(err, "Failed to validate workload admissibility")
				e.skipStatusUpdate = true
			} else {
				e.quotaReservedReason = kueue.WorkloadQuotaReservedReasonMisconfigured
				if errors.Is(err, workload.ErrNamespaceMismatch) {
					e.requeueReason = qcache.RequeueReasonNamespaceMismatch
				}
			}
		} else {
			assignment, targets := s.getAssignments(ctx, &e.Info, snap)
			e.recordAssignment(assignment, targets)
			entries = append(entries, e)
			continue
		}
		inadmissibleEntries = append(inadmissibleEntries, e)
	}
	return entries, inadmissibleEntries
}

// updateAssignmentIfNeeded checks the nominated assignment against the snapshot as earlier heads
// left it, and computes it again when that may help: a TAS assignment that no longer fits
// (TASRecomputeAssignmentWithinSchedulingCycle), or victims already claimed by another head
// (RecomputeAssignmentUponPreemptionTargetsOverlap). Nominations are computed per head on
// the same snapshot, so without this later ClusterQueues keep losing to earlier ones.
// Upstream's original: (*Scheduler).updateAssignmentIfNeeded in sigs.k8s.io/kueue/pkg/scheduler.
func (s *Scheduler) updateAssignmentIfNeeded(
	ctx context.Context,
	log logr.Logger,
	e *entry,
	snapshot *schdcache.Snapshot,
	cq *schdcache.ClusterQueueSnapshot,
	preemptedWorkloads preemption.PreemptedWorkloads) (workload.Usage, bool) {
	usage := e.assignmentUsage(log)
	fitsCheck := fits(snapshot, cq, &usage, preemptedWorkloads, e.preemptionTargets)

	needsTASRecompute := fitsCheck == schdcache.FitsCheckNoTAS && features.Enabled(features.TASRecomputeAssignmentWithinSchedulingCycle)
	needsOverlapRecompute := preemptedWorkloads.HasAny(e.preemptionTargets) && features.Enabled(features.RecomputeAssignmentUponPreemptionTargetsOverlap)

	var revertRemoval func()
	switch {
	case needsOverlapRecompute:
		log.V(2).Info("Re-computing the assignment as preemption targets overlap")

		victimsOfOtherPreemptions := slices.Collect(maps.Values(preemptedWorkloads))
		revertRemoval = snapshot.SimulateWorkloadRemoval(victimsOfOtherPreemptions)
	case needsTASRecompute:
		log.V(2).Info("Re-computing the assignment as it doesn't fit for TAS")
	default:

		return usage, schdcache.FitsCheckOk == fitsCheck
	}

	e.LastAssignment = nil
	e.NominationMapping = e.readResourceToFlavorMapping()
	newAssignment, newTargets := s.getAssignments(ctx, &e.Info, snapshot)
	e.recordAssignment(newAssignment, newTargets)
	if needsOverlapRecompute {
		if revertRemoval != nil {
			revertRemoval()
		}
		if e.assignment.RepresentativeMode() == flavorassigner.Fit {
			e.assignment.SetRepresentativeMode(flavorassigner.DeferredFit)
		}
	}
	usage = e.assignmentUsage(log)
	fitsCheck = fits(snapshot, cq, &usage, preemptedWorkloads, newTargets)
	log.V(3).Info("Re-computed assignment", "newMode", newAssignment.RepresentativeMode(), "fitsCheck", fitsCheck)

	e.NominationMapping = nil

	return usage, schdcache.FitsCheckOk == fitsCheck
}

// fits checks usage against cq with this cycle's victims and targets removed.
// Upstream's original: fits in sigs.k8s.io/kueue/pkg/scheduler.
func fits(snapshot *schdcache.Snapshot, cq *schdcache.ClusterQueueSnapshot, usage *workload.Usage, preemptedWorkloads preemption.PreemptedWorkloads,
	newTargets []*preemption.Target) schdcache.FitsCheck {
	merged := preemptedWorkloads.MergeWithTargets(newTargets)
	revertUsage := snapshot.SimulateWorkloadUsageRemoval(merged.Workloads())
	defer revertUsage()
	return cq.Fits(*usage)
}

// resourcesToReserve is the usage a head that cannot preempt keeps for itself this cycle.
// Upstream's original: resourcesToReserve in sigs.k8s.io/kueue/pkg/scheduler.
func resourcesToReserve(log logr.Logger, e *entry, cq *schdcache.ClusterQueueSnapshot) workload.Usage {
	return netUsage(log, e, quotaResourcesToReserve(e, cq))
}

// netUsage adds what is new: a head that already holds quota (second pass) brings only its
// topology usage.
// Upstream's original: netUsage in sigs.k8s.io/kueue/pkg/scheduler.
func netUsage(log logr.Logger, e *entry, netQuota resources.FlavorResourceQuantities) workload.Usage {
	result := workload.Usage{}
	if features.Enabled(features.TopologyAwareScheduling) {
		result.TAS = e.assignment.ComputeTASNetUsage(log, e.clusterQueueSnapshot, &e.Info, e.Obj.Status.Admission)
	}
	if !workload.HasQuotaReservation(e.Obj) {
		result.Quota = netQuota
	}
	return result
}

// quotaResourcesToReserve is the quota a head that cannot preempt keeps for itself this cycle. A head
// that fits outright holds all it asked for. Otherwise it holds, per flavor and resource,
// no more than its ClusterQueue could still reach: up to the borrowing limit when the
// assignment borrows (everything when there is no limit), up to nominal quota when not.
// Upstream's original: quotaResourcesToReserve in sigs.k8s.io/kueue/pkg/scheduler.
func quotaResourcesToReserve(e *entry, cq *schdcache.ClusterQueueSnapshot) resources.FlavorResourceQuantities {
	if e.assignment.RepresentativeMode() != flavorassigner.Preempt {
		return e.assignment.Usage.Quota
	}
	reservedUsage := make(resources.FlavorResourceQuantities)
	for fr, usage := range e.assignment.Usage.Quota {
		cqQuota := cq.QuotaFor(fr)
		if e.assignment.Borrowing > 0 {
			if cqQuota.BorrowingLimit == nil {
				reservedUsage[fr] = usage
			} else {
				reservedUsage[fr] = resources.MinAmount(usage, cqQuota.Nominal.Add(*cqQuota.BorrowingLimit).Sub(cq.ResourceNode.Usage[fr]))
			}
		} else {
			reservedUsage[fr] = resources.MaxAmount(resources.NewAmount(0), resources.MinAmount(usage, cqQuota.Nominal.Sub(cq.ResourceNode.Usage[fr])))
		}
	}
	return reservedUsage
}

// getAssignments chooses flavors for wl and, when it needs preemption, the victims.
// Upstream's original: (*Scheduler).getAssignments in sigs.k8s.io/kueue/pkg/scheduler.
func (s *Scheduler) getAssignments(ctx context.Context, wl *workload.Info, snap *schdcache.Snapshot) (flavorassigner.Assignment, []*preemption.Target) {
	cq := snap.ClusterQueue(wl.ClusterQueue)

	if wl.LastAssignment != nil && lastAssignmentOutdated(wl.LastAssignment, cq.AllocatableResourceGeneration, s.schedulingCycle, wl.SchedulingHash) {
		log.FromContext(ctx).V(6).Info("Clearing Workload's last assignment because it was outdated",
			"cq.AllocatableResourceGeneration", cq.AllocatableResourceGeneration,
			"wl.LastAssignment.ClusterQueueGeneration", wl.LastAssignment.ClusterQueueGeneration)
		wl.LastAssignment = nil
	}
	// timeshare: whether the scan resumes, for rescanIfResumedScanFailed.
	resumed := wl.LastAssignment != nil && wl.LastAssignment.PendingFlavors()
	assignment, targets := s.getInitialAssignments(ctx, wl, snap)
	// timeshare: a resumed scan that found nothing usable may start again from the first flavor.
	assignment, targets = s.rescanIfResumedScanFailed(ctx, wl, snap, resumed, assignment, targets)
	updateAssignmentForTAS(ctx, snap, cq, wl, &assignment, targets)
	return assignment, targets
}

// lastAssignmentOutdated reports whether a recorded flavor scan no longer applies, so that the
// scan has to start from the first flavor.
// Upstream's original: lastAssignmentOutdated in sigs.k8s.io/kueue/pkg/scheduler.
func lastAssignmentOutdated(last *workload.AssignmentClusterQueueState, currentCQGeneration, currentSchedulingCycle int64, currentSchedulingHash workload.EquivalenceHash) bool {
	if features.Enabled(features.FlavorFungibilityPreserveScanProgress) {

		if !last.MatchesSchedulingShape(currentSchedulingHash) {
			return true
		}

		if currentSchedulingCycle-last.SchedulingCycle <= 1 {
			return false
		}
	}
	return currentCQGeneration > last.ClusterQueueGeneration
}

// getInitialAssignments tries the full pod counts first, then, if the workload allows it, smaller
// counts. An elastic workload's replaced slice is always among the targets.
// Upstream's original: (*Scheduler).getInitialAssignments in sigs.k8s.io/kueue/pkg/scheduler.
func (s *Scheduler) getInitialAssignments(ctx context.Context, wl *workload.Info, snap *schdcache.Snapshot) (flavorassigner.Assignment, []*preemption.Target) {
	cq := snap.ClusterQueue(wl.ClusterQueue)

	preemptionTargets, replaceableWorkloadSlice := workloadslicing.ReplacedWorkloadSlice(wl, snap)
	flvAssigner := flavorassigner.New(
		wl, cq, snap.ResourceFlavors, fairsharing.Enabled(s.fairSharing),
		// timeshare: the oracle is the preemptor's own.
		s.preemptor.Oracle(snap), replaceableWorkloadSlice,
		s.quotaCheckStrategy, s.resourceFormatter, s.schedulingCycle,
	)
	fullAssignment := flvAssigner.Assign(ctx, nil)

	arm := fullAssignment.RepresentativeMode()
	if arm == flavorassigner.Fit {
		return fullAssignment, preemptionTargets
	}

	if arm == flavorassigner.Preempt {
		faPreemptionTargets := s.preemptor.GetTargets(ctx, *wl, fullAssignment, snap)
		if len(faPreemptionTargets) > 0 {
			return fullAssignment, append(preemptionTargets, faPreemptionTargets...)
		}
	}

	if features.Enabled(features.PartialAdmission) && wl.CanBePartiallyAdmitted() {
		reducer := flavorassigner.NewPodSetReducer(wl.Obj.Spec.PodSets, func(nextCounts []int32) (*partialAssignment, bool) {
			assignment := flvAssigner.Assign(ctx, nextCounts)
			mode := assignment.RepresentativeMode()
			if mode == flavorassigner.Fit {
				return &partialAssignment{assignment: assignment}, true
			}

			if mode == flavorassigner.Preempt {
				preemptionTargets := s.preemptor.GetTargets(ctx, *wl, assignment, snap)
				if len(preemptionTargets) > 0 {
					return &partialAssignment{assignment: assignment, preemptionTargets: preemptionTargets}, true
				}
			}
			return nil, false
		})
		if pa, found := reducer.Search(); found {
			return pa.assignment, append(preemptionTargets, pa.preemptionTargets...)
		}
	}
	return fullAssignment, nil
}

// evictWorkloadAfterFailedTASReplacement evicts wl, whose unhealthy nodes have no replacement.
// Upstream's original: (*Scheduler).evictWorkloadAfterFailedTASReplacement in sigs.k8s.io/kueue/pkg/scheduler.
func (s *Scheduler) evictWorkloadAfterFailedTASReplacement(ctx context.Context, log logr.Logger, wl *kueue.Workload) error {
	unhealthyNodes := workload.UnhealthyNodeNames(wl)
	unhealthyNodesCsv := strings.Join(unhealthyNodes, ",")
	log.V(3).Info("Evicting workload after failed try to find a node replacement; TASFailedNodeReplacementFailFast enabled", "unhealthyNodes", unhealthyNodes)
	msg := fmt.Sprintf("Workload was evicted as there was no replacement for unhealthy node(s): %s", unhealthyNodesCsv)
	exposeLqMetrics := s.cache.ShouldExposeLocalQueueMetricsForWorkload(log, wl)
	if err := workloadevict.Evict(
		ctx, s.client, s.recorder, wl, kueue.WorkloadEvictedDueToNodeFailures, msg, "", s.clock, exposeLqMetrics, s.roleTracker, s.customLabels,
		workloadevict.WithLooseOnApply(), workloadevict.WithRetryOnConflict(),
	); err != nil {
		return fmt.Errorf("failed to evict workload after failed try to find a replacement for unhealthy nodes: %s, %w", unhealthyNodesCsv, err)
	}
	return nil
}

// updateAssignmentForTAS gives a TAS workload that must preempt a topology
// assignment: on the snapshot without its victims, or, with no victims, on an empty
// cluster, so that the capacity it waits for is held against lower-priority workloads.
// Upstream's original: updateAssignmentForTAS in sigs.k8s.io/kueue/pkg/scheduler.
func updateAssignmentForTAS(
	ctx context.Context,
	snapshot *schdcache.Snapshot,
	cq *schdcache.ClusterQueueSnapshot,
	wl *workload.Info,
	assignment *flavorassigner.Assignment,
	targets []*preemption.Target,
) {
	log := log.FromContext(ctx)

	if features.Enabled(features.TopologyAwareScheduling) && assignment.RepresentativeMode() == flavorassigner.Preempt &&
		(workload.IsExplicitlyRequestingTAS(wl.Obj.Spec.PodSets...) || cq.IsTASOnly()) && !workload.HasTopologyAssignmentWithUnhealthyNode(wl.Obj) {
		tasRequests := assignment.WorkloadsTopologyRequests(log, wl, cq)
		var tasResult schdcache.TASAssignmentsResult
		log = log.WithValues("workload", klog.KRef(wl.Obj.Namespace, wl.Obj.Name))

		if len(targets) > 0 {
			var targetWorkloads []*workload.Info
			for _, target := range targets {
				targetWorkloads = append(targetWorkloads, target.WorkloadInfo)
			}
			revertUsage := snapshot.SimulateWorkloadUsageRemoval(targetWorkloads)
			tasResult = cq.FindTopologyAssignmentsForWorkload(
				ctx,
				tasRequests,
				schdcache.WithWorkload(wl.Obj),
			)
			revertUsage()
		} else {

			tasResult = cq.FindTopologyAssignmentsForWorkload(
				ctx,
				tasRequests,
				schdcache.WithSimulateEmpty(true),
				schdcache.WithWorkload(wl.Obj),
			)
		}
		assignment.UpdateForTASResult(log, cq, wl, tasResult)
	}
}

// admit reserves quota for the head: it is assumed in the cache at once, so the next cycle
// counts it, and the API is written asynchronously. A failed write takes it out of the
// cache again and requeues it. Reserving quota does not by itself admit the workload: that
// waits for its admission checks.
// Upstream's original: (*Scheduler).admit in sigs.k8s.io/kueue/pkg/scheduler.
func (s *Scheduler) admit(ctx context.Context, e *entry, cq *schdcache.ClusterQueueSnapshot, oldWorkloadSlice *preemption.Target) error {
	log := ctrl.LoggerFrom(ctx)
	admission := &kueue.Admission{
		ClusterQueue:      e.ClusterQueue,
		PodSetAssignments: e.assignment.ToAPI(log),
	}
	consideredStr := flavorassigner.FormatFlavorAssignmentAttemptsForEvents(e.assignment)
	cacheWl, err := s.assumeWorkload(log, e, cq, admission)
	if err != nil {
		return err
	}
	newWorkload := e.Obj.DeepCopy()
	s.admissionRoutineWrapper.Run(func() {
		err := workloadpatching.PatchAdmissionStatus(ctx, s.client, newWorkload, s.clock, func(wl *kueue.Workload) (bool, error) {
			s.prepareWorkload(log, wl, cq, admission)
			if features.Enabled(features.TopologyAwareScheduling) && workload.HasUnhealthyNodes(e.Obj) {
				log.V(5).Info("Clearing the topology assignment recovery field from the workload status after successful recovery")
				wl.Status.UnhealthyNodes = nil
			}
			return true, nil
		}, workloadpatching.WithLooseOnApply(), workloadpatching.WithRetryOnConflict())
		if err == nil {
			// The preemptor may still wait on evictions made for this workload (kueue#11480).
			s.preemptor.SatisfyPreemptionExpectation(log, newWorkload)
			s.recordWorkloadAdmissionMetrics(log, newWorkload, e.Obj, admission, consideredStr)
			log.V(2).Info("Workload successfully admitted and assigned flavors", "assignments", admission.PodSetAssignments)
			if features.Enabled(features.ElasticJobsViaWorkloadSlices) && oldWorkloadSlice != nil {
				s.replaceOldWorkloadSlice(ctx, log, e, oldWorkloadSlice)
			}
			return
		}
		// timeshare: a write that failed may still have been applied; the API server is asked first.
		if s.keepWrittenReservation(ctx, log, e, s.reservedInAPIServerIfWritten(ctx, newWorkload, err), admission, consideredStr, oldWorkloadSlice, err) {
			return
		}
		// The workload or its ClusterQueue may be gone already; nothing to do then.
		_ = s.cache.DeleteWorkload(log, workload.Key(cacheWl))
		// timeshare: then the informer, read after the workload left the cache.
		if s.keepWrittenReservation(ctx, log, e, s.reservedDespiteError(ctx, cacheWl), admission, consideredStr, oldWorkloadSlice, err) {
			return
		}
		s.queues.NotifyWorkloadUpdateWatchers(cacheWl, nil)
		// timeshare: the workloads parked while its reservation was counted get that quota back.
		s.freeAssumedQuota(ctx, cacheWl)
		if s.shouldApplyEntryPenalty(e) {
			s.updateEntryPenalty(log, e, subtract)
		}
		if apierrors.IsNotFound(err) {
			log.V(2).Info("Workload not admitted because it was deleted")
			return
		}
		log.Error(err, errCouldNotAdmitWL)
		s.requeueAndUpdate(ctx, *e)
	})
	return nil
}

// prepareWorkload writes the admission into wl, and the Admitted condition when no admission
// check is left to wait for.
// Upstream's original: (*Scheduler).prepareWorkload in sigs.k8s.io/kueue/pkg/scheduler.
func (s *Scheduler) prepareWorkload(log logr.Logger, wl *kueue.Workload, cq *schdcache.ClusterQueueSnapshot, admission *kueue.Admission) {
	workload.SetQuotaReservation(wl, admission, s.clock)
	if workload.HasAllRequiredChecks(log, wl, cq.AdmissionChecks) {
		_ = workload.SyncAdmittedCondition(wl, s.clock.Now())
	}
}

// assumeWorkload counts the head in the cache at once, so that the next cycle sees its usage
// before the API write lands.
// Upstream's original: (*Scheduler).assumeWorkload in sigs.k8s.io/kueue/pkg/scheduler.
func (s *Scheduler) assumeWorkload(log logr.Logger, e *entry, cq *schdcache.ClusterQueueSnapshot, admission *kueue.Admission) (*kueue.Workload, error) {
	cacheWl := e.Obj.DeepCopy()
	s.prepareWorkload(log, cacheWl, cq, admission)
	if added := s.cache.AddOrUpdateWorkload(log, cacheWl); !added {
		return nil, fmt.Errorf("workload %s/%s could not be added to the cache", cacheWl.Namespace, cacheWl.Name)
	}
	e.markAssumed()
	log.V(2).Info("Workload assumed in the cache")
	if s.shouldApplyEntryPenalty(e) {
		s.updateEntryPenalty(log, e, add)
		// Lets the LocalQueue reconciler pick the pending penalty up.
		s.queues.NotifyWorkloadUpdateWatchers(e.Obj, cacheWl)
	}
	return cacheWl, nil
}

// makeIterator orders by fair sharing's tournament when it is on, else sorts once, in place, so
// that the requeue pass sees the same order.
// Upstream's original: makeIterator in sigs.k8s.io/kueue/pkg/scheduler.
func makeIterator(ctx context.Context, entries []entry, workloadOrdering workload.Ordering, enableFairSharing bool) entryIterator {
	if enableFairSharing {
		return makeFairSharingIterator(ctx, entries, workloadOrdering)
	}
	return makeClassicalIterator(ctrl.LoggerFrom(ctx), entries, workloadOrdering)
}

// Upstream's original: (*classicalIterator).hasNext in sigs.k8s.io/kueue/pkg/scheduler.
func (co *classicalIterator) hasNext() bool {
	return len(co.entries) > 0
}

// Upstream's original: (*classicalIterator).pop in sigs.k8s.io/kueue/pkg/scheduler.
func (co *classicalIterator) pop() *entry {
	head := &co.entries[0]
	co.entries = co.entries[1:]
	return head
}

// makeClassicalIterator orders heads from different ClusterQueues of a cycle by:
//  1. quota already reserved (a second pass) first;
//  2. active preemptors first (PrioritizePreemptorWorkloads);
//  3. lower borrowing height first, so nominal quota is served before borrowing;
//  4. higher effective priority first (PrioritySortingWithinCohort);
//  5. earlier queue-order timestamp first.
//
// Upstream's original: makeClassicalIterator in sigs.k8s.io/kueue/pkg/scheduler.
func makeClassicalIterator(log logr.Logger, entries []entry, workloadOrdering workload.Ordering) *classicalIterator {
	slices.SortFunc(entries, func(a, b entry) int {
		aHasQuota := workload.HasQuotaReservation(a.Obj)
		bHasQuota := workload.HasQuotaReservation(b.Obj)
		if aHasQuota != bHasQuota {
			if aHasQuota {
				return -1
			}
			return 1
		}
		if features.Enabled(features.PrioritizePreemptorWorkloads) {
			if a.IsPreemptor != b.IsPreemptor {
				if a.IsPreemptor {
					return -1
				}
				return 1
			}
		}
		aBorrows := a.assignment.Borrows()
		bBorrows := b.assignment.Borrows()
		if aBorrows != bBorrows {
			return cmp.Compare(aBorrows, bBorrows)
		}
		if features.Enabled(features.PrioritySortingWithinCohort) {
			p1 := priority.EffectivePriority(log, a.Obj)
			p2 := priority.EffectivePriority(log, b.Obj)
			if p1 != p2 {
				// Reversed: the higher priority comes first.
				return cmp.Compare(p2, p1)
			}
		}
		aComparisonTimestamp := workloadOrdering.GetQueueOrderTimestamp(a.Obj)
		bComparisonTimestamp := workloadOrdering.GetQueueOrderTimestamp(b.Obj)
		if aComparisonTimestamp.Before(bComparisonTimestamp) {
			return -1
		}
		if bComparisonTimestamp.Before(aComparisonTimestamp) {
			return 1
		}
		return 0
	})
	return &classicalIterator{
		entries: entries,
	}
}

// requeueAndUpdate gives an unadmitted head back to its queue (or to the second-pass queue)
// and tells the user why it waits.
// Upstream's original: (*Scheduler).requeueAndUpdate in sigs.k8s.io/kueue/pkg/scheduler.
func (s *Scheduler) requeueAndUpdate(ctx context.Context, e entry) {
	log := ctrl.LoggerFrom(ctx)
	if e.status != notNominated && e.requeueReason == qcache.RequeueReasonGeneric {
		// The queue decides from this whether the workload may come back at once.
		e.requeueReason = qcache.RequeueReasonFailedAfterNomination
	}
	// timeshare: the preemptor's refusals may depend on the workload, not only on its
	// equivalence class.
	e.requeueReason = s.withoutEquivalenceParking(e.requeueReason, &e.Info)
	if s.queues.QueueSecondPassIfNeeded(ctx, e.Obj, e.SecondPassIteration) {
		log.V(2).
			Info("Workload re-queued for second pass", "workload", klog.KObj(e.Obj), "clusterQueue", klog.KRef("", string(e.ClusterQueue)), "queue", klog.KRef(e.Obj.Namespace, string(e.Obj.Spec.QueueName)), "requeueReason", e.requeueReason, "status", e.status)
		s.recorder.Eventf(e.Obj, nil, corev1.EventTypeWarning, "SecondPassFailed", "SecondPassFailed", api.TruncateEventMessage(e.inadmissibleMsg))
		return
	}
	added := s.queues.RequeueWorkload(ctx, &e.Info, e.requeueReason, qcache.QuotaReservedReason(e.quotaReservedReason))
	// timeshare: what the queue now keeps as its preemptor, for the admission estimates.
	if e.clusterQueueSnapshot != nil {
		s.preemptors.requeued(e.clusterQueueSnapshot.Name, &e.Info, e.requeueReason, s.clock.Now())
	}
	log.V(2).
		Info("Workload re-queued", "workload", klog.KObj(e.Obj), "clusterQueue", klog.KRef("", string(e.ClusterQueue)), "queue", klog.KRef(e.Obj.Namespace, string(e.Obj.Spec.QueueName)), "requeueReason", e.requeueReason, "added", added, "status", e.status)
	if e.status == notNominated || e.status == skipped || e.status == preemptionGated {
		if e.skipStatusUpdate {
			log.V(3).Info("Skipping Workload status update", "workload", klog.KObj(e.Obj), "reason", e.inadmissibleMsg)
			return
		}
		wl := e.Obj.DeepCopy()
		condReason := workload.UnadmittedWorkloadReasonWithFallback(e.quotaReservedReason, "Pending")
		// timeshare: with pending-status writers, the write is queued off the cycle's path.
		if err := s.pendingStatus.patchAdmissionStatus(ctx, wl, func(wl *kueue.Workload) (bool, error) {
			updated := workload.UnsetQuotaReservationWithCondition(wl, condReason, e.inadmissibleMsg, s.clock.Now())
			if workload.PropagateResourceRequests(wl, &e.Info, s.resourceFormatter) {
				updated = true
			}
			if e.status == preemptionGated {
				updated = workload.SetBlockedOnPreemptionGatesCondition(wl, s.clock.Now(), kueue.PreemptionGated, e.inadmissibleMsg)
			}
			return updated, nil
		}, workloadpatching.WithLooseOnApply(), workloadpatching.WithRetryOnConflict()); err != nil {
			log.Error(err, "Could not update Workload status")
		}
		s.recorder.Eventf(e.Obj, nil, corev1.EventTypeWarning, condReason, condReason, api.TruncateEventMessage(e.inadmissibleMsg))
	}
}

// recordWorkloadAdmissionMetrics records a written reservation and, when no check is left, the admission.
// Upstream's original: (*Scheduler).recordWorkloadAdmissionMetrics in sigs.k8s.io/kueue/pkg/scheduler.
func (s *Scheduler) recordWorkloadAdmissionMetrics(log logr.Logger, newWorkload, originalWorkload *kueue.Workload, admission *kueue.Admission, consideredFlavors string) {
	waitTime := workload.QueuedWaitTime(newWorkload, s.clock)
	s.recordQuotaReservationMetrics(log, newWorkload, originalWorkload, admission, waitTime, consideredFlavors)
	s.recordWorkloadAdmissionEvents(log, newWorkload, originalWorkload, admission, waitTime)
}

// recordQuotaReservationMetrics emits the QuotaReserved event and metrics, once per reservation.
// Upstream's original: (*Scheduler).recordQuotaReservationMetrics in sigs.k8s.io/kueue/pkg/scheduler.
func (s *Scheduler) recordQuotaReservationMetrics(log logr.Logger, newWorkload, originalWorkload *kueue.Workload, admission *kueue.Admission, waitTime time.Duration, consideredFlavors string) {
	if workload.HasQuotaReservation(originalWorkload) {
		return
	}

	quotaReservedEventMessage := fmt.Sprintf("Quota reserved in ClusterQueue %s, wait time since queued was %.0fs", admission.ClusterQueue, waitTime.Seconds())
	if consideredFlavors != "" {
		quotaReservedEventMessage += fmt.Sprintf("; Flavors considered: %s", consideredFlavors)
	}

	s.recorder.Eventf(newWorkload, nil, corev1.EventTypeNormal, "QuotaReserved", "QuotaReserved", api.TruncateEventMessage(quotaReservedEventMessage))

	priorityClassName := workloadpatching.PriorityClassName(newWorkload)
	metrics.QuotaReservedWorkload(admission.ClusterQueue, priorityClassName, waitTime, s.customLabels.CQGet(admission.ClusterQueue), s.roleTracker)
	lqRef := metrics.LQRefFromWorkload(newWorkload)
	if s.cache.ShouldExposeLocalQueueMetricsForWorkload(log, newWorkload) {
		metrics.LocalQueueQuotaReservedWorkload(lqRef, priorityClassName, waitTime, s.customLabels.LQGet(utilqueue.KeyFromWorkload(newWorkload)), s.roleTracker)
	}
}

// recordWorkloadAdmissionEvents emits the Admitted event and metrics when the reservation also admitted
// the workload. A workload recovering from a failed node was admitted before: no event.
// Upstream's original: (*Scheduler).recordWorkloadAdmissionEvents in sigs.k8s.io/kueue/pkg/scheduler.
func (s *Scheduler) recordWorkloadAdmissionEvents(log logr.Logger, newWorkload, originalWorkload *kueue.Workload, admission *kueue.Admission, waitTime time.Duration) {
	if !workload.IsAdmitted(newWorkload) || workload.HasUnhealthyNodes(originalWorkload) {
		return
	}

	s.recorder.Eventf(newWorkload, nil, corev1.EventTypeNormal, "Admitted", "Admitted", "Admitted by ClusterQueue %s, wait time since reservation was 0s", admission.ClusterQueue)

	priorityClassName := workloadpatching.PriorityClassName(newWorkload)
	cqCustomLabels := s.customLabels.CQGet(admission.ClusterQueue)
	s.cache.ReportCohortSubtreeAdmittedWorkload(log, newWorkload)
	metrics.AdmittedWorkload(admission.ClusterQueue, priorityClassName, waitTime, cqCustomLabels, s.roleTracker)
	shouldExposeLqMetrics := s.cache.ShouldExposeLocalQueueMetricsForWorkload(log, newWorkload)
	if shouldExposeLqMetrics {
		lqRef := metrics.LQRefFromWorkload(newWorkload)
		lqCustomLabels := s.customLabels.LQGet(utilqueue.KeyFromWorkload(newWorkload))
		metrics.LocalQueueAdmittedWorkload(lqRef, priorityClassName, waitTime, lqCustomLabels, s.roleTracker)
	}

	if len(newWorkload.Status.AdmissionChecks) > 0 {
		metrics.ReportAdmissionChecksWaitTime(admission.ClusterQueue, priorityClassName, 0, cqCustomLabels, s.roleTracker)
		if shouldExposeLqMetrics {
			lqRef := metrics.LQRefFromWorkload(newWorkload)
			metrics.ReportLocalQueueAdmissionChecksWaitTime(lqRef, priorityClassName, 0, s.customLabels.LQGet(utilqueue.KeyFromWorkload(newWorkload)), s.roleTracker)
		}
	}
}

// replaceWorkloadSlice finishes the slice an admitted elastic workload replaces.
// Upstream's original: (*Scheduler).replaceWorkloadSlice in sigs.k8s.io/kueue/pkg/scheduler.
func (s *Scheduler) replaceWorkloadSlice(ctx context.Context, oldQueue kueue.ClusterQueueReference, newSlice, oldSlice *kueue.Workload) error {
	log := ctrl.LoggerFrom(ctx)
	if workloadfinish.IsFinished(oldSlice) {
		log.V(3).Info("Workload slice already finished", "old-slice", klog.KObj(oldSlice), "new-slice", klog.KObj(newSlice))
		return nil
	}
	reason := kueue.WorkloadSliceReplaced
	message := fmt.Sprintf("Replaced to accommodate a workload (UID: %s, JobUID: %s) due to workload slice aggregation", newSlice.UID, newSlice.Labels[controllerconstants.JobUIDLabel])
	if err := workloadfinish.Finish(ctx, s.client, oldSlice, reason, message, s.clock); err != nil {
		return fmt.Errorf("failed to replace workload slice: %w", err)
	}

	log.V(3).Info("Replaced", "old slice", klog.KObj(oldSlice), "new slice", klog.KObj(newSlice), "reason", reason, "message", message, "old-queue", klog.KRef("", string(oldQueue)))
	s.recorder.Eventf(oldSlice, nil, corev1.EventTypeNormal, reason, "Replaced", message)
	metrics.ReportReplacedWorkloadSlices(oldQueue, s.customLabels.CQGet(oldQueue), s.roleTracker)
	return nil
}

// allCoveredResources is every resource named by the resource groups.
// Upstream's original: allCoveredResources in sigs.k8s.io/kueue/pkg/scheduler.
func allCoveredResources(resourceGroups []schdcache.ResourceGroup) sets.Set[corev1.ResourceName] {
	covered := sets.New[corev1.ResourceName]()
	for _, rg := range resourceGroups {
		covered = covered.Union(rg.CoveredResources)
	}
	return covered
}

// filterByNames returns a copy of list restricted to the names in keep.
// Upstream's original: filterByNames in sigs.k8s.io/kueue/pkg/scheduler.
func filterByNames(requests corev1.ResourceList, allowed sets.Set[corev1.ResourceName]) corev1.ResourceList {
	filtered := make(corev1.ResourceList, len(requests))
	for name, qty := range requests {
		if allowed.Has(name) {
			filtered[name] = qty
		}
	}
	return filtered
}

// shouldApplyEntryPenalty decides both the push on assume and the rollback on a failed write, so
// the two always pair up.
// Upstream's original: (*Scheduler).shouldApplyEntryPenalty in sigs.k8s.io/kueue/pkg/scheduler.
func (s *Scheduler) shouldApplyEntryPenalty(e *entry) bool {
	if !afs.Enabled(s.admissionFairSharing) {
		return false
	}
	// Penalties are only settled for usage-based ClusterQueues; elsewhere they would
	// accumulate until restart.
	if e.clusterQueueSnapshot.AdmissionScope.AdmissionMode != kueue.UsageBasedAdmissionFairSharing {
		return false
	}
	// A second pass was charged on its first pass already.
	return !workload.HasQuotaReservation(e.Obj)
}

// Upstream's original: (*Scheduler).updateEntryPenalty in sigs.k8s.io/kueue/pkg/scheduler.
func (s *Scheduler) updateEntryPenalty(log logr.Logger, e *entry, op usageOp) {
	lqKey := utilqueue.NewLocalQueueReference(e.Obj.Namespace, e.Obj.Spec.QueueName)
	lqObjRef := klog.KRef(e.Obj.Namespace, string(e.Obj.Spec.QueueName))
	wlKey := queueafs.WorkloadReference(workload.Key(e.Obj))
	switch op {
	case add:
		totalRequests := e.SumTotalRequests(s.resourceFormatter)
		if flavorassigner.IgnoreUndeclaredResources(s.quotaCheckStrategy) {
			// Resources the ClusterQueue does not manage are not charged.
			totalRequests = filterByNames(totalRequests, allCoveredResources(e.clusterQueueSnapshot.ResourceGroups))
		}
		penalty := afs.CalculateEntryPenalty(totalRequests, s.admissionFairSharing)
		s.queues.AfsUsageLedger.PushPenalty(lqKey, wlKey, penalty, s.clock.Now())
		log.V(3).Info("Entry penalty added to localQueue", "localQueue", lqObjRef, "workload", wlKey, "penalty", penalty)
	case subtract:
		removed := s.queues.AfsUsageLedger.SubPenalty(lqKey, wlKey)
		log.V(3).Info("Entry penalty subtracted from localQueue", "localQueue", lqObjRef, "workload", wlKey, "penalty", removed)
	}
}

// findAdmittedLessFavorableSibling returns an admitted sibling on a flavor ranked below wl's.
// Upstream's original: (*Scheduler).findAdmittedLessFavorableSibling in sigs.k8s.io/kueue/pkg/scheduler.
func (s *Scheduler) findAdmittedLessFavorableSibling(wl *workload.Info, snap *schdcache.Snapshot) *workload.Info {
	return s.findAdmittedSibling(wl, snap, func(siblingIdx, wlIdx int) bool {
		return siblingIdx > wlIdx
	})
}

// findAdmittedMoreFavorableSibling returns an admitted sibling on a flavor ranked above wl's.
// Upstream's original: (*Scheduler).findAdmittedMoreFavorableSibling in sigs.k8s.io/kueue/pkg/scheduler.
func (s *Scheduler) findAdmittedMoreFavorableSibling(wl *workload.Info, snap *schdcache.Snapshot) *workload.Info {
	return s.findAdmittedSibling(wl, snap, func(siblingIdx, wlIdx int) bool {
		return wlIdx > siblingIdx
	})
}

// findAdmittedSibling returns an admitted variant of the same parent whose flavor rank
// satisfies compareFunc, or nil.
// Upstream's original: (*Scheduler).findAdmittedSibling in sigs.k8s.io/kueue/pkg/scheduler.
func (s *Scheduler) findAdmittedSibling(wl *workload.Info, snap *schdcache.Snapshot, compareFunc func(siblingIdx, wlIdx int) bool) *workload.Info {
	if !features.Enabled(features.ConcurrentAdmission) {
		return nil
	}
	parentUID := concurrentadmission.GetParentWorkloadUID(wl.Obj)
	if parentUID == "" {
		return nil
	}
	cq := snap.ClusterQueue(wl.ClusterQueue)
	if cq == nil || len(cq.ResourceGroups) == 0 {
		return nil
	}
	flavors := cq.ResourceGroups[0].Flavors
	wlFlavorIdx, err := resolveFlavorIndex(wl, flavors)
	if err != nil {
		return nil
	}
	return s.findAdmittedSiblingMatching(wl, cq, parentUID, func(sibling *workload.Info) bool {
		siblingFlavorIdx, err := resolveFlavorIndex(sibling, flavors)
		if err != nil {
			return false
		}
		return compareFunc(siblingFlavorIdx, wlFlavorIdx)
	})
}

// Upstream's original: (*Scheduler).findAdmittedSiblingMatching in sigs.k8s.io/kueue/pkg/scheduler.
func (s *Scheduler) findAdmittedSiblingMatching(wl *workload.Info, cq *schdcache.ClusterQueueSnapshot, parentUID types.UID, match func(sibling *workload.Info) bool) *workload.Info {
	for _, otherWl := range cq.Workloads {
		if otherWl.Obj.UID == wl.Obj.UID {
			continue
		}
		if concurrentadmission.GetParentWorkloadUID(otherWl.Obj) != parentUID {
			continue
		}
		if !workload.IsAdmitted(otherWl.Obj) {
			continue
		}
		ok := match(otherWl)
		if ok {
			return otherWl
		}
	}
	return nil
}

// isMigrationAllowed applies the policy's lastAcceptableFlavorName: a variant may not migrate
// to a flavor ranked below it. Without the constraint any migration is allowed.
// Upstream's original: (*Scheduler).isMigrationAllowed in sigs.k8s.io/kueue/pkg/scheduler.
func (s *Scheduler) isMigrationAllowed(cq *schdcache.ClusterQueueSnapshot, e *entry, log klog.Logger) bool {
	if cq.ConcurrentAdmissionPolicy == nil || cq.ConcurrentAdmissionPolicy.Migration.Constraints == nil || cq.ConcurrentAdmissionPolicy.Migration.Constraints.LastAcceptableFlavorName == nil {
		return true
	}
	lastAcceptableFlavor := *cq.ConcurrentAdmissionPolicy.Migration.Constraints.LastAcceptableFlavorName
	flavors := cq.ResourceGroups[0].Flavors
	// The ClusterQueue webhook guarantees the flavor is listed.
	lastAcceptableIdx := slices.Index(flavors, lastAcceptableFlavor)
	wlFlavorIdx, err := resolveFlavorIndex(&e.Info, flavors)
	if err != nil {
		log.Error(err, "Workload migration failed")
		return false
	}
	if wlFlavorIdx > lastAcceptableIdx {
		log.V(3).Info("Skipping migration as target flavor is below LastAcceptableFlavorName",
			"targetFlavor", concurrentadmission.GetVariantFlavor(e.Obj), "lastAcceptableFlavor", lastAcceptableFlavor)
		e.inadmissibleMsg = "Target flavor is below LastAcceptableFlavorName"
		return false
	}
	return true
}

// resolveFlavorIndex is the position of the variant's flavor in flavors.
// Upstream's original: resolveFlavorIndex in sigs.k8s.io/kueue/pkg/scheduler.
func resolveFlavorIndex(wl *workload.Info, flavors []kueue.ResourceFlavorReference) (int, error) {
	flavor := concurrentadmission.GetVariantFlavor(wl.Obj)
	if flavor == "" {
		return -1, errors.New("missing variant flavor annotation")
	}
	idx := slices.Index(flavors, flavor)
	if idx == -1 {
		return -1, fmt.Errorf("flavor %s not found in ClusterQueue flavors", flavor)
	}
	return idx, nil
}
