package scheduler

import (
	"github.com/go-logr/logr"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/util/sets"
	"k8s.io/klog/v2"

	kueue "sigs.k8s.io/kueue/apis/kueue/v1beta2"
	queueafs "sigs.k8s.io/kueue/pkg/cache/queue/afs"
	schdcache "sigs.k8s.io/kueue/pkg/cache/scheduler"
	"sigs.k8s.io/kueue/pkg/scheduler/flavorassigner"
	afs "sigs.k8s.io/kueue/pkg/util/admissionfairsharing"
	utilqueue "sigs.k8s.io/kueue/pkg/util/queue"
	"sigs.k8s.io/kueue/pkg/workload"
)

// Admission fair sharing charges a LocalQueue an entry penalty when one of its workloads
// reserves quota, so that it does not win again before its usage is sampled.

// shouldApplyEntryPenalty decides both the push on assume and the rollback on a failed write, so
// the two always pair up.
// Upstream's original: (*Scheduler).shouldApplyEntryPenalty in sigs.k8s.io/kueue/pkg/scheduler.
func (s *Scheduler) shouldApplyEntryPenalty(e *entry) bool {
	if !s.afsEnabled() {
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

func penaltyKeys(e *entry) (utilqueue.LocalQueueReference, queueafs.WorkloadReference, klog.ObjectRef) {
	return utilqueue.NewLocalQueueReference(e.Obj.Namespace, e.Obj.Spec.QueueName),
		queueafs.WorkloadReference(workload.Key(e.Obj)),
		klog.KRef(e.Obj.Namespace, string(e.Obj.Spec.QueueName))
}

// Upstream's original: (*Scheduler).updateEntryPenalty in sigs.k8s.io/kueue/pkg/scheduler.
func (s *Scheduler) pushEntryPenalty(log logr.Logger, e *entry) {
	lq, wl, lqRef := penaltyKeys(e)
	requests := e.SumTotalRequests(s.resourceFormatter)
	if flavorassigner.IgnoreUndeclaredResources(s.quotaCheckStrategy) {
		// Resources the ClusterQueue does not manage are not charged.
		requests = filterByNames(requests, allCoveredResources(e.clusterQueueSnapshot.ResourceGroups))
	}
	penalty := afs.CalculateEntryPenalty(requests, s.admissionFairSharing)
	s.queues.AfsUsageLedger.PushPenalty(lq, wl, penalty, s.clock.Now())
	log.V(3).Info("Entry penalty added to localQueue", "localQueue", lqRef, "workload", wl, "penalty", penalty)
}

// Upstream's original: (*Scheduler).updateEntryPenalty in sigs.k8s.io/kueue/pkg/scheduler.
func (s *Scheduler) dropEntryPenalty(log logr.Logger, e *entry) {
	lq, wl, lqRef := penaltyKeys(e)
	removed := s.queues.AfsUsageLedger.SubPenalty(lq, wl)
	log.V(3).Info("Entry penalty subtracted from localQueue", "localQueue", lqRef, "workload", wl, "penalty", removed)
}

// allCoveredResources is every resource named by the resource groups.
// Upstream's original: allCoveredResources in sigs.k8s.io/kueue/pkg/scheduler.
func allCoveredResources(groups []schdcache.ResourceGroup) sets.Set[corev1.ResourceName] {
	out := sets.New[corev1.ResourceName]()
	for _, g := range groups {
		out.Insert(g.CoveredResources.UnsortedList()...)
	}
	return out
}

// filterByNames returns a copy of list restricted to the names in keep.
// Upstream's original: filterByNames in sigs.k8s.io/kueue/pkg/scheduler.
func filterByNames(list corev1.ResourceList, keep sets.Set[corev1.ResourceName]) corev1.ResourceList {
	out := make(corev1.ResourceList, len(list))
	for name, q := range list {
		if keep.Has(name) {
			out[name] = q
		}
	}
	return out
}
