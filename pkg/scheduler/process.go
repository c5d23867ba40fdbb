package scheduler

import (
	"context"

	"github.com/go-logr/logr"

	kueue "sigs.k8s.io/kueue/apis/kueue/v1beta2"
	qcache "sigs.k8s.io/kueue/pkg/cache/queue"
	schdcache "sigs.k8s.io/kueue/pkg/cache/scheduler"
	"sigs.k8s.io/kueue/pkg/scheduler/flavorassigner"
	"sigs.k8s.io/kueue/pkg/scheduler/preemption"
	"sigs.k8s.io/kueue/pkg/workload"

	"github.com/kueue-timeshare/kueue-timeshare/pkg/message"
)

// waitForDrainingVictims holds back a head that needs preemption while victims of ours in its
// ClusterQueue still terminate: their quota is held, so preempting again would take more than
// is needed.
func (s *Scheduler) waitForDrainingVictims(log logr.Logger, e *entry) bool {
	dv := s.draining[e.ClusterQueue]
	victims := dv.victims
	if len(victims) == 0 {
		return false
	}
	// The victims may be other teams': named by name only in the head's own namespace.
	e.inadmissibleMsg = message.ForNamespace(drainMessage(victims, string(workload.Key(e.Obj)), dv.until), e.Obj.Namespace)
	e.quotaReservedReason = kueue.WorkloadQuotaReservedReasonWaitingForPreemptedWorkloads
	// Inadmissible, not retried every cycle: the Job's update or the hold's deadline wakes
	// the ClusterQueue (drainHolds).
	e.requeueReason = qcache.RequeueReasonGeneric
	e.LastAssignment = nil
	log.V(3).Info("Waiting for preempted workloads' Pods to terminate", "victims", victims)
	return true
}

// vetoAdmission holds back a head that fits when the preemptor's hook says another workload
// waited longer for its turn. It stays pending, not skipped: it must step aside (inadmissible)
// so that the workload whose turn it is becomes the head, not come straight back to the heap.
func (s *Scheduler) vetoAdmission(ctx context.Context, e *entry, snapshot *schdcache.Snapshot, mode flavorassigner.FlavorAssignmentMode) bool {
	if mode != flavorassigner.Fit {
		return false
	}
	// A StrictFIFO queue gives its head back at once: one standing aside there would hold the
	// whole queue, its preemptor included, so its strict order is kept.
	if s.draining[e.ClusterQueue].yieldsToPreemptor(string(workload.Key(e.Obj))) && !s.retriedEveryCycle(ctx, e.ClusterQueue) {
		// Its preemptor may be of another namespace: not named.
		e.inadmissibleMsg = "waiting for the workload it was preempted for to be admitted before taking quota again"
		e.requeueReason = qcache.RequeueReasonGeneric
		e.quotaReservedReason = kueue.WorkloadQuotaReservedReasonWaitingForQuota
		return true
	}
	msg := s.admissionVeto(ctx, e, snapshot)
	if msg == "" {
		return false
	}
	e.inadmissibleMsg = msg
	s.waitedForTurn.Insert(e.ClusterQueue)
	e.requeueReason = qcache.RequeueReasonGeneric
	e.quotaReservedReason = kueue.WorkloadQuotaReservedReasonWaitingForQuota
	return true
}

// holdQuotaWhileBlocked keeps the quota a blocked head waits for (WaitVerdict.HoldQuota). It is
// not parked with the inadmissible workloads: it must hold the quota in every cycle.
func (s *Scheduler) holdQuotaWhileBlocked(log logr.Logger, e *entry, cq *schdcache.ClusterQueueSnapshot) bool {
	if !e.holdQuota {
		return false
	}
	e.requeueReason = qcache.RequeueReasonFailedAfterNomination
	cq.AddUsage(resourcesToReserve(log, e, cq))
	return true
}

// trackPreemptions records the victims whose Pods the loop waits for, and splits err into the
// refusal it may carry and what is left to log.
func (s *Scheduler) trackPreemptions(ctx context.Context, e *entry, targets []*preemption.Target, preempted int, err error) (refusal, toLog error) {
	if preempted > 0 {
		s.drains.record(ctx, &e.Info, targets)
	}
	if heldBack(err) {
		return err, nil
	}
	return err, err
}
