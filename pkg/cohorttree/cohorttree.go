// Package cohorttree walks from a ClusterQueue up its cohort tree: the one path every feature that
// inherits settings, or asks whether two queues share a tree, reads.
package cohorttree

import (
	"context"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"sigs.k8s.io/controller-runtime/pkg/client"

	kueue "sigs.k8s.io/kueue/apis/kueue/v1beta2"
	schdcache "sigs.k8s.io/kueue/pkg/cache/scheduler"
)

// MaxDepth bounds a walk: Kueue refuses cycles, but a walk over objects read one by one may meet
// one mid-change.
const MaxDepth = 64

// Walk lists the cohorts from first up to the root, nearest first, asking parentOf for each one's
// parent ("" at the root). It stops at a cohort seen before, after MaxDepth, or at parentOf's
// error, which it returns with the cohorts listed so far.
func Walk(first kueue.CohortReference, parentOf func(kueue.CohortReference) (kueue.CohortReference, error)) ([]kueue.CohortReference, error) {
	var out []kueue.CohortReference
	seen := map[kueue.CohortReference]bool{}
	for c := first; c != "" && !seen[c] && len(out) < MaxDepth; {
		seen[c] = true
		out = append(out, c)
		parent, err := parentOf(c)
		if err != nil {
			return out, err
		}
		c = parent
	}
	return out, nil
}

// Parents lists the cohorts above cq in a scheduler snapshot, nearest first; none for nil.
func Parents(cq *schdcache.ClusterQueueSnapshot) []kueue.CohortReference {
	if cq == nil {
		return nil
	}
	var out []kueue.CohortReference
	for c := range cq.PathParentToRoot() {
		out = append(out, c.Name)
	}
	return out
}

// Read lists the cohorts above cq as c reads them, nearest first. A cohort that does not exist
// (a ClusterQueue may name one before it is created) ends the path; a ClusterQueue that does not
// exist has none.
func Read(ctx context.Context, c client.Reader, cq kueue.ClusterQueueReference) ([]kueue.CohortReference, error) {
	var q kueue.ClusterQueue
	if err := c.Get(ctx, client.ObjectKey{Name: string(cq)}, &q); err != nil {
		return nil, client.IgnoreNotFound(err)
	}
	return Walk(q.Spec.CohortName, func(name kueue.CohortReference) (kueue.CohortReference, error) {
		var co kueue.Cohort
		if err := c.Get(ctx, client.ObjectKey{Name: string(name)}, &co); err != nil {
			if apierrors.IsNotFound(err) {
				return "", nil
			}
			return "", err
		}
		return co.Spec.ParentName, nil
	})
}

// Root names the root of cq's tree: "Cohort/<name>", or "ClusterQueue/<cq>" for a ClusterQueue
// in no cohort.
func Root(cq kueue.ClusterQueueReference, parents []kueue.CohortReference) string {
	if len(parents) == 0 {
		return "ClusterQueue/" + string(cq)
	}
	return "Cohort/" + string(parents[len(parents)-1])
}
