package queuesettings

import (
	"context"
	"fmt"

	apimeta "k8s.io/apimachinery/pkg/api/meta"
	"sigs.k8s.io/controller-runtime/pkg/client"

	kueue "sigs.k8s.io/kueue/apis/kueue/v1beta2"
)

// HoldingQuotaKey indexes the Workloads that hold quota and have not finished, under their
// ClusterQueue's name and under AnyClusterQueue. Finished workloads keep their QuotaReserved
// condition and admission, so Kueue's own indexes list them too; the Waker reads this one every
// second and must not grow with the workloads a cluster keeps after they finish.
const HoldingQuotaKey = "timeshare.status.holdingQuota"

// AnyClusterQueue is the HoldingQuotaKey value every holding Workload has (not a valid name).
const AnyClusterQueue = "*"

// SetupIndexes registers our field indexes with indexer (the manager's, or the simulator's fake
// client's).
func SetupIndexes(ctx context.Context, indexer client.FieldIndexer) error {
	if err := indexer.IndexField(ctx, &kueue.Workload{}, HoldingQuotaKey, indexHoldingQuota); err != nil {
		return fmt.Errorf("setting the holding-quota index on Workloads: %w", err)
	}
	if err := indexer.IndexField(ctx, &kueue.Workload{}, PendingKey, indexPending); err != nil {
		return fmt.Errorf("setting the pending index on Workloads: %w", err)
	}
	return nil
}

func indexHoldingQuota(obj client.Object) []string {
	wl, ok := obj.(*kueue.Workload)
	if !ok || wl.Status.Admission == nil ||
		!apimeta.IsStatusConditionTrue(wl.Status.Conditions, kueue.WorkloadQuotaReserved) ||
		apimeta.IsStatusConditionTrue(wl.Status.Conditions, kueue.WorkloadFinished) {
		return nil
	}
	return []string{string(wl.Status.Admission.ClusterQueue), AnyClusterQueue}
}
