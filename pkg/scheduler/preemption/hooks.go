package preemption

import (
	"context"

	kueue "sigs.k8s.io/kueue/apis/kueue/v1beta2"
	schdcache "sigs.k8s.io/kueue/pkg/cache/scheduler"
	"sigs.k8s.io/kueue/pkg/workload"
)

// The points where a feature's file adds steps of its own to the preemptor; each registers its
// own from its init, so that the preemptor's files name no feature.
var (
	// waitsOn are what a preemptor may wait on instead of a search.
	waitsOn []waiter
	// issuesFirst take a preemption's targets before they are evicted: one that issues them
	// itself says so (issued) with what issueTargets returns.
	issuesFirst []func(p *Preemptor, ctx context.Context, cache *schdcache.Cache, preemptor *workload.Info, targets []*Target,
		snap *schdcache.ClusterQueueSnapshot) (issued bool, preempted, failed int, err error)
	// afterAnyEviction follow the eviction of any victim of ours, whatever its reason.
	afterAnyEviction []func(p *Preemptor, ctx context.Context, victim *kueue.Workload, cq kueue.ClusterQueueReference)
	// afterSearch see a search's outcome, its targets (none: the preemptor waits).
	afterSearch []func(p *Preemptor, s *search, targets []*Target)
	// afterIssue follow a preemption whose evictions (or notices) all went through.
	afterIssue []func(p *Preemptor, preemptor *workload.Info, targets []*Target)
)

// waiter is one thing a preemptor may wait on instead of a search.
type waiter struct {
	// targets are the victims due now; held reports whether wl waits on some at all.
	targets func(p *Preemptor, ctx context.Context, wl *workload.Info, snapshot *schdcache.Snapshot) (targets []*Target, held bool)
	// explain says what wl waits on, or "".
	explain func(p *Preemptor, wl *workload.Info, snapshot *schdcache.Snapshot) string
}
