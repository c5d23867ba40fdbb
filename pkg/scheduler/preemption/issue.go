package preemption

import (
	"cmp"
	"context"
	"fmt"
	"slices"
	"strings"
	"sync"

	"github.com/go-logr/logr"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/util/workqueue"
	"k8s.io/klog/v2"
	ctrllog "sigs.k8s.io/controller-runtime/pkg/log"

	kueue "sigs.k8s.io/kueue/apis/kueue/v1beta2"
	schdcache "sigs.k8s.io/kueue/pkg/cache/scheduler"
	"sigs.k8s.io/kueue/pkg/controller/constants"
	"sigs.k8s.io/kueue/pkg/util/priority"
	"sigs.k8s.io/kueue/pkg/workload"
	workloadevict "sigs.k8s.io/kueue/pkg/workload/evict"

	"github.com/kueue-timeshare/kueue-timeshare/pkg/message"
	"github.com/kueue-timeshare/kueue-timeshare/pkg/policy"
)

// concurrentEvictions bounds the evictions written at once, as upstream's issuer does.
const concurrentEvictions = 8

// issue evicts the targets. Targets preempted for one of our reasons (see
// policy.IsOwnReason) are evicted here, with that reason on their Evicted condition; every other
// target goes to upstream's issuer unchanged. A target preempted for its expected runtime gets
// its cooldown once its eviction has gone through (or was already under way), never after a
// failed one.
func (p *Preemptor) issue(ctx context.Context, cache *schdcache.Cache, preemptor *workload.Info, targets []*Target, snap *schdcache.ClusterQueueSnapshot) (int, int, error) {
	if rf := p.refusals.held(preemptor.Obj.UID, targets, p.clock.Now()); rf != nil {
		ctrllog.FromContext(ctx).V(3).Info("Preemption held back after the API server refused it", "preemptingWorkload", klog.KObj(preemptor.Obj),
			"targets", rf.Targets, "retryAt", rf.RetryAt, "final", rf.Final)
		return 0, len(targets), rf
	}
	preempted, failed, err := p.issueTargets(ctx, cache, preemptor, targets, snap)
	if !isRefusal(err) {
		if err == nil {
			p.refusals.succeeded(preemptor.Obj.UID)
			for f := range pluginsOn[policy.IssueFollower](p) {
				f.AfterIssue(p.handleAt(ctx), preemptor, victimsOf(targets))
			}
		}
		return preempted, failed, err
	}
	rf, first := p.refusals.refused(preemptor.Obj.UID, targets, err, p.clock.Now())
	if first {
		// Said once: the same write is not tried again until a target changes.
		p.recorder.Eventf(preemptor.Obj, nil, corev1.EventTypeWarning, EventPreemptionRefused, "Preempt", "%s", message.Bound(message.ForNamespace(rf.Message(), preemptor.Obj.Namespace)))
	}
	return preempted, failed, rf
}

// EventPreemptionRefused is on a preemptor whose preemption the API server refused for good.
const EventPreemptionRefused = "PreemptionRefused"

// issueTargets writes the evictions and notices of one preemption.
func (p *Preemptor) issueTargets(ctx context.Context, cache *schdcache.Cache, preemptor *workload.Info, targets []*Target, snap *schdcache.ClusterQueueSnapshot) (int, int, error) {
	h := p.handleAt(ctx)
	for first := range pluginsOn[policy.FirstIssuer](p) {
		if issued, preempted, failed, err := first.IssueFirst(ctx, h, cache, preemptor, targets, snap); issued {
			return preempted, failed, err
		}
	}
	var theirs, ours []*Target
	for _, t := range targets {
		if policy.IsOwnReason(t.Reason) {
			ours = append(ours, t)
		} else {
			theirs = append(theirs, t)
		}
	}
	if len(ours) == 0 {
		return p.issuer.IssuePreemptions(ctx, cache, preemptor, targets, snap)
	}
	preempted, failed, err := 0, 0, error(nil)
	if len(theirs) > 0 {
		preempted, failed, err = p.issuer.IssuePreemptions(ctx, cache, preemptor, theirs, snap)
	}
	ok, bad, e := p.issueOwn(ctx, cache, preemptor, ours, snap)
	if err == nil {
		err = e
	}
	return preempted + ok, failed + bad, err
}

// issueOwn evicts targets preempted for one of our reasons, a few at a time. After the first
// failure no further eviction starts; the scheduler retries the preemptor later. It returns how
// many targets are being evicted (now or already), how many evictions failed, and one error.
func (p *Preemptor) issueOwn(ctx context.Context, cache *schdcache.Cache, preemptor *workload.Info, targets []*Target, snap *schdcache.ClusterQueueSnapshot) (preempted, failed int, firstErr error) {
	ctx, stop := context.WithCancel(ctx)
	defer stop()
	var mu sync.Mutex
	workqueue.ParallelizeUntil(ctx, concurrentEvictions, len(targets), func(i int) {
		t := targets[i]
		err := p.evict(ctx, cache, preemptor, t, snap)
		if err == nil && policy.IsOwnReason(t.Reason) {
			h := p.handleAt(ctx)
			for f := range pluginsOn[policy.OwnEvictionFollower](p) {
				f.AfterOwnEviction(ctx, h, t.WorkloadInfo.Obj, t.Reason)
			}
		}
		mu.Lock()
		defer mu.Unlock()
		if err != nil {
			failed++
			if firstErr == nil {
				firstErr = err
			}
			stop()
			return
		}
		preempted++
	})
	return preempted, failed, firstErr
}

// evict does for one target what upstream's issuer does, except that the Evicted condition's
// reason is the preemption reason. A target already evicted, or whose eviction this process wrote
// and has not seen come back yet, counts as preempted without a second write.
func (p *Preemptor) evict(ctx context.Context, cache *schdcache.Cache, preemptor *workload.Info, t *Target, snap *schdcache.ClusterQueueSnapshot) error {
	log := ctrllog.FromContext(ctx)
	victim := t.WorkloadInfo.Obj
	key := types.NamespacedName{Namespace: victim.Namespace, Name: victim.Name}
	if workloadevict.IsEvicted(victim) {
		log.V(3).Info("Preemption ongoing", "targetWorkload", klog.KObj(victim), "preemptingWorkload", klog.KObj(preemptor.Obj))
		p.observed(log, key, victim.UID)
		return nil
	}
	if p.expectations != nil && !p.expectations.Satisfied(log, key) {
		log.V(3).Info("Preemption already issued, waiting for observation", "targetWorkload", klog.KObj(victim), "preemptingWorkload", klog.KObj(preemptor.Obj))
		return nil
	}

	preemptorPath := cohortPath(string(preemptor.ClusterQueue), snap)
	victimPath := cohortPath(string(t.WorkloadInfo.ClusterQueue), t.WorkloadCq)
	if p.expectations != nil {
		p.expectations.ExpectUIDs(log, key, []types.UID{victim.UID})
	}
	msg := evictionMessage(preemptor.Obj, t.Reason, preemptorPath, victimPath)
	written := victim.DeepCopy()
	lqMetrics := cache != nil && cache.ShouldExposeLocalQueueMetricsForWorkload(log, written)
	markPreempted := func(wl *kueue.Workload) { workload.SetPreemptedCondition(wl, p.clock.Now(), t.Reason, msg) }
	// Upstream's reasons keep upstream's Evicted reason; a target of theirs comes here only to
	// end its notice in the same write.
	evictedReason := t.Reason
	if !policy.IsOwnReason(t.Reason) {
		evictedReason = kueue.WorkloadEvictedByPreemption
	}
	if err := workloadevict.Evict(ctx, p.client, p.recorder, written, evictedReason, msg, "", p.clock, lqMetrics, p.tracker, p.customLabels,
		workloadevict.WithCustomPrepare(markPreempted), workloadevict.WithLooseOnApply(), workloadevict.WithRetryOnConflict()); err != nil {
		p.observed(log, key, victim.UID)
		return err
	}
	for f := range pluginsOn[policy.EvictionFollower](p) {
		f.AfterEviction(ctx, p.handleAt(ctx), victim, t.WorkloadInfo.ClusterQueue)
	}

	by, victimPri := priorities(log, preemptor.Obj), priorities(log, victim)
	log.V(3).Info("Preempted", "targetWorkload", klog.KObj(victim), "preemptingWorkload", klog.KObj(preemptor.Obj),
		"preemptorUID", string(preemptor.Obj.UID), "preemptorJobUID", preemptor.Obj.Labels[constants.JobUIDLabel],
		"reason", t.Reason, "message", msg, "targetClusterQueue", klog.KRef("", string(t.WorkloadInfo.ClusterQueue)),
		"preemptorPath", preemptorPath, "preempteePath", victimPath,
		"preemptorEffectivePriority", by.effective, "preemptorBoost", by.boost,
		"targetEffectivePriority", victimPri.effective, "targetBoost", victimPri.boost)
	both := fmt.Sprintf("preemptor effective priority: %s; preemptee effective priority: %s", by, victimPri)
	p.recorder.Eventf(victim, nil, corev1.EventTypeNormal, "Preempted", "Preempted", "%s; %s", msg, both)
	// The preemptor's owner reads this event: a victim of another namespace is named by UID only.
	p.recorder.Eventf(preemptor.Obj, nil, corev1.EventTypeNormal, "PreemptedWorkload", "PreemptedWorkload", "%s",
		message.ForNamespace(fmt.Sprintf("Preempted workload %s (UID: %s) in ClusterQueue %s; %s", klog.KObj(victim), victim.UID, t.WorkloadInfo.ClusterQueue, both), preemptor.Obj.Namespace))
	// A target whose notice is due carries the notice's reason, read from an annotation.
	workloadevict.ReportPreemption(preemptor.ClusterQueue, policy.ReasonLabel(t.Reason), t.WorkloadInfo.ClusterQueue, p.tracker, p.customLabels)
	return nil
}

// observed clears the expectation of an eviction of key (uid), if any.
func (p *Preemptor) observed(log logr.Logger, key types.NamespacedName, uid types.UID) {
	if p.expectations != nil {
		p.expectations.ObservedUID(log, key, uid)
	}
}

// evictionMessage words a preemption as upstream does (policy.HumanReason).
func evictionMessage(preemptor *kueue.Workload, reason, preemptorPath, victimPath string) string {
	const unknown = "UNKNOWN"
	return fmt.Sprintf("Preempted to accommodate a workload (UID: %s, JobUID: %s) due to %s; preemptor path: %s; preemptee path: %s",
		cmp.Or(string(preemptor.UID), unknown), cmp.Or(preemptor.Labels[constants.JobUIDLabel], unknown),
		policy.HumanReason(reason), cmp.Or(preemptorPath, unknown), cmp.Or(victimPath, unknown))
}

// cohortPath is "/root/.../parent/cq": a ClusterQueue and the cohorts above it, root first.
func cohortPath(cq string, snap *schdcache.ClusterQueueSnapshot) string {
	names := []string{cq}
	if snap != nil {
		for c := range snap.PathParentToRoot() {
			names = append(names, string(c.GetName()))
		}
	}
	slices.Reverse(names)
	return "/" + strings.Join(names, "/")
}

// priorityFacts are a workload's effective priority, its base and the boost between them.
type priorityFacts struct {
	effective int64
	base      int32
	boost     int32
}

func priorities(log logr.Logger, wl *kueue.Workload) priorityFacts {
	base := priority.Priority(wl)
	effective := priority.EffectivePriority(log, wl)
	return priorityFacts{effective: effective, base: base, boost: int32(effective - int64(base))}
}

func (f priorityFacts) String() string {
	return fmt.Sprintf("%d (base: %d, boost: %d)", f.effective, f.base, f.boost)
}
