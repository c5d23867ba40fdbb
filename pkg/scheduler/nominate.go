package scheduler

import (
	"context"

	"k8s.io/klog/v2"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"

	kueue "sigs.k8s.io/kueue/apis/kueue/v1beta2"
	schdcache "sigs.k8s.io/kueue/pkg/cache/scheduler"
	"sigs.k8s.io/kueue/pkg/scheduler/flavorassigner"
	"sigs.k8s.io/kueue/pkg/scheduler/preemption"
	"sigs.k8s.io/kueue/pkg/workload"
)

// rescanIfResumedScanFailed scans all flavors again when the scan resumed past flavors this head
// lost only to other heads and the rest give it nothing. Those flavors are still its best: scan
// them all, as the next cycle would. Else the outcome, and the pending message written with it,
// alternates every cycle while another head keeps taking the first flavor (a head holding quota
// it waits for).
func (s *Scheduler) rescanIfResumedScanFailed(ctx context.Context, wl *workload.Info, snap *schdcache.Snapshot, resumed bool, a flavorassigner.Assignment, targets []*preemption.Target) (flavorassigner.Assignment, []*preemption.Target) {
	if !resumed || usable(a, targets) || !s.retriedEveryCycle(ctx, wl.ClusterQueue) {
		return a, targets
	}
	ctrl.LoggerFrom(ctx).V(3).Info("Resumed flavor scan found no usable flavor; scanning from the first", "workload", klog.KObj(wl.Obj))
	wl.LastAssignment = nil
	return s.getInitialAssignments(ctx, wl, snap)
}

// retriedEveryCycle reports whether the queue of the ClusterQueue gives a head back for the next
// cycle whatever its outcome: StrictFIFO never sets a head aside. Elsewhere a second scan could
// decide that: the queue parks a head as inadmissible once its progress says every flavor was
// tried, and retries it at once while flavors are left, which a scan from the first one leaves.
func (s *Scheduler) retriedEveryCycle(ctx context.Context, name kueue.ClusterQueueReference) bool {
	var cq kueue.ClusterQueue
	if err := s.client.Get(ctx, client.ObjectKey{Name: string(name)}, &cq); err != nil {
		// Without the strategy, do as upstream's loop does: keep the resumed scan.
		return false
	}
	return cq.Spec.QueueingStrategy == kueue.StrictFIFO
}

// usable reports whether an assignment lets the workload in: it fits, or its victims are known.
func usable(a flavorassigner.Assignment, targets []*preemption.Target) bool {
	switch a.RepresentativeMode() {
	case flavorassigner.Fit:
		return true
	case flavorassigner.Preempt:
		return len(targets) > 0
	}
	return false
}

// partialAssignment is one candidate of the partial admission search.
type partialAssignment struct {
	assignment        flavorassigner.Assignment
	preemptionTargets []*preemption.Target
}
