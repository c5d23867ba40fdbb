package manager

import (
	"context"
	"time"

	"k8s.io/apimachinery/pkg/util/wait"
	"sigs.k8s.io/controller-runtime/pkg/client"

	kueue "sigs.k8s.io/kueue/apis/kueue/v1beta2"
	schdcache "sigs.k8s.io/kueue/pkg/cache/scheduler"
	"sigs.k8s.io/kueue/pkg/workload"

	"github.com/kueue-timeshare/kueue-timeshare/pkg/scheduler"
)

// loadBound is the longest the first scheduling cycle waits for the scheduler's cache to hold
// every workload that holds quota; past it the loop starts anyway, as upstream's does.
const loadBound = 30 * time.Second

// quotaLoaded reports whether the scheduler's cache counts every workload that r (the informer
// cache) shows holding quota: controller-runtime starts the loop once the informers have listed
// everything, but their event handlers, which fill the scheduler's cache, may still be behind,
// and a cycle then sees free quota that is taken: a restarted manager admitted into a full
// cohort.
func quotaLoaded(ctx context.Context, r client.Reader, cache *schdcache.Cache) (bool, error) {
	var list kueue.WorkloadList
	if err := r.List(ctx, &list); err != nil {
		return false, err
	}
	for i := range list.Items {
		wl := &list.Items[i]
		if scheduler.HoldsQuota(wl) && !cache.IsAdded(workload.Info{Obj: wl, ClusterQueue: wl.Status.Admission.ClusterQueue}) {
			return false, nil
		}
	}
	return true, nil
}

// waitForQuotaLoaded polls quotaLoaded until it holds, for at most bound; it says whether it
// held. A ClusterQueue deleted under its workloads would otherwise hold the loop for ever.
func waitForQuotaLoaded(ctx context.Context, r client.Reader, cache *schdcache.Cache, bound time.Duration) bool {
	ctx, cancel := context.WithTimeout(ctx, bound)
	defer cancel()
	err := wait.PollUntilContextCancel(ctx, 100*time.Millisecond, true, func(ctx context.Context) (bool, error) {
		ok, err := quotaLoaded(ctx, r, cache)
		return ok, client.IgnoreNotFound(err)
	})
	return err == nil
}
