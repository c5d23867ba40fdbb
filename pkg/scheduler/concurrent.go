package scheduler

import (
	"context"
	"errors"
	"fmt"
	"slices"

	"github.com/go-logr/logr"
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

// siblingRank says which admitted siblings a variant looks for, given their flavor ranks
// (a lower rank is a more preferred flavor).
type siblingRank func(siblingRank, ownRank int) bool

func moreFavorable(sibling, own int) bool { return sibling < own }
func lessFavorable(sibling, own int) bool { return sibling > own }

// findAdmittedSibling returns an admitted variant of the same parent whose flavor rank
// satisfies want, or nil.
// Upstream's original: (*Scheduler).findAdmittedSibling in sigs.k8s.io/kueue/pkg/scheduler.
func (s *Scheduler) findAdmittedSibling(wl *workload.Info, snap *schdcache.Snapshot, want siblingRank) *workload.Info {
	if !features.Enabled(features.ConcurrentAdmission) {
		return nil
	}
	parent := concurrentadmission.GetParentWorkloadUID(wl.Obj)
	if parent == "" {
		return nil
	}
	cq := snap.ClusterQueue(wl.ClusterQueue)
	if cq == nil || len(cq.ResourceGroups) == 0 {
		return nil
	}
	flavors := cq.ResourceGroups[0].Flavors
	own, err := resolveFlavorIndex(wl, flavors)
	if err != nil {
		return nil
	}
	for _, other := range cq.Workloads {
		if other.Obj.UID == wl.Obj.UID || concurrentadmission.GetParentWorkloadUID(other.Obj) != parent || !workload.IsAdmitted(other.Obj) {
			continue
		}
		if rank, err := resolveFlavorIndex(other, flavors); err == nil && want(rank, own) {
			return other
		}
	}
	return nil
}

// resolveFlavorIndex is the position of the variant's flavor in flavors.
// Upstream's original: resolveFlavorIndex in sigs.k8s.io/kueue/pkg/scheduler.
func resolveFlavorIndex(wl *workload.Info, flavors []kueue.ResourceFlavorReference) (int, error) {
	f := concurrentadmission.GetVariantFlavor(wl.Obj)
	if f == "" {
		return -1, errors.New("missing variant flavor annotation")
	}
	i := slices.Index(flavors, f)
	if i < 0 {
		return -1, fmt.Errorf("flavor %s not found in ClusterQueue flavors", f)
	}
	return i, nil
}

// isMigrationAllowed applies the policy's lastAcceptableFlavorName: a variant may not migrate
// to a flavor ranked below it. Without the constraint any migration is allowed.
// Upstream's original: (*Scheduler).isMigrationAllowed in sigs.k8s.io/kueue/pkg/scheduler.
func (s *Scheduler) isMigrationAllowed(log logr.Logger, cq *schdcache.ClusterQueueSnapshot, e *entry) bool {
	p := cq.ConcurrentAdmissionPolicy
	if p == nil || p.Migration.Constraints == nil || p.Migration.Constraints.LastAcceptableFlavorName == nil {
		return true
	}
	last := *p.Migration.Constraints.LastAcceptableFlavorName
	flavors := cq.ResourceGroups[0].Flavors
	// The ClusterQueue webhook guarantees the flavor is listed.
	lastRank := slices.Index(flavors, last)
	rank, err := resolveFlavorIndex(&e.Info, flavors)
	if err != nil {
		log.Error(err, "Workload migration failed")
		return false
	}
	if rank <= lastRank {
		return true
	}
	log.V(3).Info("Skipping migration as target flavor is below LastAcceptableFlavorName",
		"targetFlavor", concurrentadmission.GetVariantFlavor(e.Obj), "lastAcceptableFlavor", last)
	e.inadmissibleMsg = "Target flavor is below LastAcceptableFlavorName"
	return false
}

// issueMigration evicts the admitted sibling on a worse flavor; the variant is admitted once the
// sibling's quota is released.
// Upstream's original: (*Scheduler).issueMigration in sigs.k8s.io/kueue/pkg/scheduler.
func (s *Scheduler) issueMigration(ctx context.Context, log logr.Logger, e *entry, victim *workload.Info) {
	log.V(3).Info("Migrating to more favorable resource flavor", "targetWorkload", klog.KObj(victim.Obj), "evictorWorkload", klog.KObj(e.Obj))
	wl := victim.Obj.DeepCopy()
	msg := fmt.Sprintf("Evicted to accommodate a workload (UID: %s) due to migration to more favorable resource flavor", e.Obj.UID)
	err := workloadevict.Evict(ctx, s.client, s.recorder, wl, kueue.WorkloadEvictedByFlavorMigration, msg, "", s.clock,
		s.cache.ShouldExposeLocalQueueMetricsForWorkload(log, wl), s.roleTracker, s.customLabels,
		workloadevict.WithLooseOnApply(), workloadevict.WithRetryOnConflict())
	if err != nil {
		log.Error(err, "Failed to evict workload for migration")
	}
	e.LastAssignment = nil
	e.requeueReason = qcache.RequeueReasonPendingMigration
	e.inadmissibleMsg += ". Pending the migration of 1 workload(s)"
}
