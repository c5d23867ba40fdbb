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

// usageOp says whether updateEntryPenalty charges a penalty or takes it back.
type usageOp int

const (
	add usageOp = iota
	subtract
)

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
