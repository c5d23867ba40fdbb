package scheduler

import (
	"context"
	"errors"
	"fmt"
	"slices"

	"github.com/go-logr/logr"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/klog/v2"

	kueue "sigs.k8s.io/kueue/apis/kueue/v1beta2"
	qcache "sigs.k8s.io/kueue/pkg/cache/queue"
	schdcache "sigs.k8s.io/kueue/pkg/cache/scheduler"
	"sigs.k8s.io/kueue/pkg/features"
	"sigs.k8s.io/kueue/pkg/workload"
	"sigs.k8s.io/kueue/pkg/workload/concurrentadmission"
	workloadevict "sigs.k8s.io/kueue/pkg/workload/evict"
)

// Concurrent admission (ConcurrentAdmission) queues one variant of a workload per flavor.
// Flavors are ranked by their order in the ClusterQueue's first resource group; a variant
// on a better flavor may displace an admitted sibling on a worse one ("migration").

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
