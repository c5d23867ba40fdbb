package scheduler

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"sync"
	"time"

	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	apimeta "k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/sets"
	"k8s.io/client-go/tools/events"
	"k8s.io/klog/v2"
	"k8s.io/utils/clock"
	"k8s.io/utils/ptr"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"

	kueue "sigs.k8s.io/kueue/apis/kueue/v1beta2"
	schdcache "sigs.k8s.io/kueue/pkg/cache/scheduler"
	"sigs.k8s.io/kueue/pkg/scheduler/preemption"
	"sigs.k8s.io/kueue/pkg/workload"
	workloadpatching "sigs.k8s.io/kueue/pkg/workload/patching"

	"github.com/kueue-timeshare/kueue-timeshare/pkg/features"
	"github.com/kueue-timeshare/kueue-timeshare/pkg/policy"
	"github.com/kueue-timeshare/kueue-timeshare/pkg/timeutil"
)

// drainMargin is added to a victim's grace period: the job controller deletes the Pods a moment
// after the Job is suspended, and a hold must not outlive Pods that never go away.
const drainMargin = 10 * time.Second

// defaultGracePeriod is the Pod default, for a template that sets none.
const defaultGracePeriod = 30 * time.Second

// drainHolds keeps the room of a workload evicted for one of our reasons (a turn that ended, an
// expected runtime) until its Pods are gone. Kueue releases a Job's quota once it has no active
// Pods, but terminating Pods are not active: without the hold the next holder is admitted while
// the victim's Pods still run their grace period, overcommitting the quota or starting its turn
// with Pods that cannot be scheduled. Only batch/v1 Jobs report terminating Pods
// (status.terminating); other owners get no hold. Upstream's own preemptions are left alone.
type drainHolds struct {
	client client.Client
	clock  clock.Clock
	// wake retries a ClusterQueue's inadmissible workloads.
	wake func(context.Context, kueue.ClusterQueueReference)
	// lead is how long before the victim's Pods are due to stop a wake is sent, so that Kueue's
	// batched retry lands just after (the queue manager's batch period less preWakeMargin).
	lead time.Duration
	// bound is the longest a hold lasts past its margin, whatever grace period the victim's Job
	// sets (the manager's timeshare.maxHandoverHold).
	bound time.Duration

	// recorder tells a victim's Workload that its Pods outlived the hold.
	recorder events.EventRecorder

	mu    sync.Mutex
	holds map[types.NamespacedName]*drainHold
}

type drainHold struct {
	uid   types.UID
	cq    kueue.ClusterQueueReference
	usage workload.Usage
	job   types.NamespacedName
	// preemptor is the workload the victim was evicted for: once the Pods are gone, the victim
	// stands aside until it is admitted (handoverWait at most).
	preemptor    types.NamespacedName
	preemptorUID types.UID
	// released is when the Pods were seen gone while the preemptor still waited; zero before.
	released time.Time
	// jobUID selects the Job's Pods (batch.kubernetes.io/controller-uid); empty if the Job could
	// not be read, and then only its status tells when they are gone.
	jobUID   types.UID
	deadline time.Time
	// preWake is when the last early wake was set for; zero if none.
	preWake time.Time
	// overstaying: the Pods outlived the deadline; the hold is over, and the time from the
	// deadline until they are gone is charged to the workload's next turn.
	overstaying bool
	// due is the latest time by which the Pods are to be gone, as last read (their
	// deletionTimestamp); a charge counts no further, however late it is seen.
	due time.Time
	// lookAfter: an overstaying hold is read again after this (or when one of its Pods or its
	// Job changes), not at every cycle: a tenant's day-long grace periods cost a read every
	// overstayLook each.
	lookAfter time.Time
}

// handoverWait bounds how long a victim whose Pods are gone stands aside for its preemptor. At the
// same priority the victim is usually the older, ahead in the queue's order: without it, the
// victim of an expected-runtime requeue took its quota straight back whenever it was a head in the
// cycle its Pods were seen gone, while its preemptor waited parked for the wake.
const handoverWait = time.Minute

// overstayLook is how often an overstaying hold is read when nothing about its Pods is heard.
const overstayLook = 10 * time.Second

// preWakeMargin is how long after the Pods' deletion deadline the early retry lands: time for
// the kubelet to stop them and for the informer to see it.
const preWakeMargin = 200 * time.Millisecond

func newDrainHolds(c client.Client, clk clock.Clock, wake func(context.Context, kueue.ClusterQueueReference), bound time.Duration, recorder events.EventRecorder) *drainHolds {
	return &drainHolds{client: c, clock: clk, wake: wake, bound: bound, recorder: recorder, holds: map[types.NamespacedName]*drainHold{}}
}

// withLead sets how long before the victim's Pods are due to stop the holds wake their
// ClusterQueue: the retry batch period of Kueue's queue manager.
func (d *drainHolds) withLead(batch time.Duration) *drainHolds {
	d.lead = max(batch-preWakeMargin, 0)
	return d
}

// record starts a hold for every target evicted for one of our reasons whose owner is a Job.
func (d *drainHolds) record(ctx context.Context, preemptor *workload.Info, targets []*preemption.Target) {
	if d == nil || !features.Enabled(features.HandoverAfterVictimTermination) {
		return
	}
	log := ctrl.LoggerFrom(ctx)
	for _, t := range targets {
		if !policy.IsOwnReason(t.Reason) {
			continue
		}
		wl := t.WorkloadInfo.Obj
		d.spendCharge(ctx, wl)
		owner := jobOwner(wl)
		if owner == nil {
			continue
		}
		job := types.NamespacedName{Namespace: wl.Namespace, Name: owner.Name}
		grace := defaultGracePeriod
		var obj batchv1.Job
		if err := d.client.Get(ctx, job, &obj); err == nil {
			grace = gracePeriod(&obj.Spec.Template.Spec)
		}
		// The tenant's Job sets the grace period: the admin's bound caps how long it holds the quota.
		grace = min(grace, d.bound)
		h := &drainHold{
			uid:          wl.UID,
			cq:           t.WorkloadInfo.ClusterQueue,
			usage:        t.WorkloadInfo.Usage(),
			job:          job,
			jobUID:       obj.UID,
			deadline:     d.clock.Now().Add(timeutil.Add(grace, drainMargin)),
			preemptor:    client.ObjectKeyFromObject(preemptor.Obj),
			preemptorUID: preemptor.Obj.UID,
		}
		d.mu.Lock()
		d.holds[client.ObjectKeyFromObject(wl)] = h
		d.mu.Unlock()
		log.V(3).Info("Holding the quota of a preempted workload until its Pods are gone", "victim", klog.KObj(wl), "preemptor", klog.KObj(preemptor.Obj), "job", job, "until", h.deadline)
		d.wakeAfter(ctx, h.cq, timeutil.Delay(d.clock.Now(), h.deadline, time.Millisecond))
	}
}

// draining is what the holds add to one scheduling cycle: per ClusterQueue, the victims whose
// quota Kueue released while their Pods still terminate.
type draining map[kueue.ClusterQueueReference]drainingVictims

// drainingVictims are one ClusterQueue's victims still terminating, and when the last of their
// holds ends at the latest (their grace period, within the bound), and the victims whose Pods are
// gone that stand aside for their preemptors (their quota is not held).
type drainingVictims struct {
	victims  []string
	until    time.Time
	yielding []string
}

// apply adds the usage of each victim still draining to the snapshot, drops the holds that are
// over, and returns the ClusterQueues that have victims draining.
func (d *drainHolds) apply(ctx context.Context, snap *schdcache.Snapshot) draining {
	if d == nil {
		return nil
	}
	out, ended := d.applyLocked(ctx, snap)
	// A hold may end here rather than at its Job's or Pod's event (a missed or early event, a
	// workload gone): its ClusterQueue's workloads parked behind it are tried again.
	for cq := range ended {
		d.wake(ctx, cq)
	}
	return out
}

// applyLocked is apply under the holds' lock; ended are the ClusterQueues of the holds it ended.
func (d *drainHolds) applyLocked(ctx context.Context, snap *schdcache.Snapshot) (draining, sets.Set[kueue.ClusterQueueReference]) {
	d.mu.Lock()
	defer d.mu.Unlock()
	if len(d.holds) == 0 {
		return nil, nil
	}
	log := ctrl.LoggerFrom(ctx)
	var out draining
	ended := sets.New[kueue.ClusterQueueReference]()
	for key, h := range d.holds {
		yieldedBefore := !h.released.IsZero()
		held, why := d.holding(ctx, key, h)
		if !held {
			log.V(3).Info("Stopped holding the quota of a preempted workload", "victim", key, "reason", why)
			delete(d.holds, key)
			ended.Insert(h.cq)
			continue
		}
		if why == reasonYielding {
			if out == nil {
				out = draining{}
			}
			dv := out[h.cq]
			dv.yielding = append(dv.yielding, key.String())
			out[h.cq] = dv
			if !yieldedBefore {
				// Just released: the preemptor, parked behind the hold, is tried again.
				ended.Insert(h.cq)
			}
			continue
		}
		if why != reasonDraining {
			continue
		}
		cq := snap.ClusterQueue(h.cq)
		if cq == nil {
			continue
		}
		cq.AddUsage(h.usage)
		if out == nil {
			out = draining{}
		}
		dv := out[h.cq]
		dv.victims = append(dv.victims, key.String())
		if h.deadline.After(dv.until) {
			dv.until = h.deadline
		}
		out[h.cq] = dv
	}
	for _, dv := range out {
		slices.Sort(dv.victims)
	}
	return out, ended
}

const (
	reasonDraining = "its Pods are terminating"
	// reasonOverstaying: the hold is over, its Pods still run, and the time they take is charged.
	reasonOverstaying = "its Pods outlive the hold"
	// reasonYielding: the Pods are gone and the victim stands aside until its preemptor is admitted.
	reasonYielding = "its Pods are gone; it stands aside for the workload it was preempted for"
)

// holding says whether the hold on key still applies and why; reasonDraining means the victim's
// quota is released and its Pods are not gone yet, so the hold's usage must be added. Past its
// deadline a hold adds nothing, but is kept while the Pods run (reasonOverstaying), so that the
// time they take is charged to the workload's next turn.
func (d *drainHolds) holding(ctx context.Context, key types.NamespacedName, h *drainHold) (bool, string) {
	now := d.clock.Now()
	if h.overstaying && now.Before(h.lookAfter) {
		return true, reasonOverstaying
	}
	wl, over, why := d.over(ctx, key, h)
	switch {
	case over && !h.overstaying && d.yielding(ctx, wl, h, now):
		return true, reasonYielding
	case over && !h.overstaying:
		return false, why
	case over:
		d.charge(ctx, wl, h, now)
		return false, why + "; the time they outlived the hold is charged to its next turn"
	case now.Before(h.deadline):
		return true, why
	case !h.overstaying:
		h.overstaying = true
		d.warnOverstay(wl)
	case overstayOver(h, now):
		// Pods stuck past their deletion deadline (a lost node) are charged up to it, no more,
		// and not watched for ever.
		d.charge(ctx, wl, h, now)
		return false, "its Pods' deletion deadline is past; the time they outlived the hold until then is charged to its next turn"
	}
	h.lookAfter = now.Add(overstayLook)
	return true, reasonOverstaying
}

// yielding says whether the victim wl, whose hold is otherwise over, still stands aside for its
// preemptor: the victim does not hold quota, and the preemptor is the same workload, still active
// and pending, for at most handoverWait since the victim's Pods were seen gone. A preemptor that
// was deleted, deactivated or admitted, or that waits longer, ends it.
func (d *drainHolds) yielding(ctx context.Context, wl *kueue.Workload, h *drainHold, now time.Time) bool {
	if wl == nil || workload.HasQuotaReservation(wl) || h.preemptorUID == "" {
		return false
	}
	if !h.released.IsZero() && now.Sub(h.released) >= handoverWait {
		return false
	}
	var p kueue.Workload
	if err := d.client.Get(ctx, h.preemptor, &p); err != nil || p.UID != h.preemptorUID ||
		workload.HasQuotaReservation(&p) || !workload.IsActive(&p) || apimeta.IsStatusConditionTrue(p.Status.Conditions, kueue.WorkloadFinished) {
		return false
	}
	if h.released.IsZero() {
		h.released = now
		// The victim parked behind its preemptor is tried again once the wait is over.
		d.wakeAfter(ctx, h.cq, handoverWait)
	}
	return true
}

// yieldsToPreemptor says whether head (key) is a victim whose Pods are gone and that stands aside
// for its preemptor in this cycle.
func (dv drainingVictims) yieldsToPreemptor(key string) bool {
	return slices.Contains(dv.yielding, key)
}

// overstayOver says whether an overstay is watched no longer: a minute past its Pods' deletion
// deadline, or a day after it began when that is unknown.
func overstayOver(h *drainHold, now time.Time) bool {
	if !h.due.IsZero() {
		return now.After(h.due.Add(time.Minute))
	}
	return now.Sub(h.deadline) > 24*time.Hour
}

// over reads whether the hold on key has nothing left to wait for, and why (reasonDraining when
// it does); wl is the victim, nil if it could not be read.
func (d *drainHolds) over(ctx context.Context, key types.NamespacedName, h *drainHold) (*kueue.Workload, bool, string) {
	var wl kueue.Workload
	if err := d.client.Get(ctx, key, &wl); err != nil {
		if apierrors.IsNotFound(err) {
			return nil, true, "the workload is gone"
		}
		return nil, false, "the workload could not be read"
	}
	if wl.UID != h.uid {
		return nil, true, "the workload was replaced"
	}
	if workload.HasQuotaReservation(&wl) {
		if apimeta.IsStatusConditionTrue(wl.Status.Conditions, kueue.WorkloadEvicted) {
			return &wl, false, "its eviction is under way"
		}
		return &wl, true, "it holds quota again"
	}
	var job batchv1.Job
	if err := d.client.Get(ctx, h.job, &job); err != nil {
		if apierrors.IsNotFound(err) {
			return &wl, true, "its Job is gone"
		}
		return &wl, false, reasonDraining
	}
	if job.Status.Active == 0 && ptr.Deref(job.Status.Terminating, 0) == 0 {
		return &wl, true, "its Pods are gone"
	}
	// The Job controller batches Pod events for up to a second before it updates the Job's
	// status; the Pods themselves say it first.
	if h.jobUID != "" && job.UID == h.jobUID {
		left, due, err := d.podsLeft(ctx, h)
		if err == nil && left == 0 {
			return &wl, true, "its Pods are gone"
		}
		if !due.IsZero() {
			h.due = due
		}
		d.wakeBefore(ctx, h, due)
	}
	return &wl, false, reasonDraining
}

// warnOverstay tells the victim's Workload that its Pods outlived the hold: its quota went to the
// next workload, and the time they keep running is charged to its next turn.
func (d *drainHolds) warnOverstay(wl *kueue.Workload) {
	if wl == nil || d.recorder == nil {
		return
	}
	d.recorder.Eventf(wl, nil, corev1.EventTypeWarning, "PodsOutlivedHold", "HoldQuota",
		"Its Pods still run past the longest hold the manager allows after a preemption (maxHandoverHold %s): its quota went to the next workload, and the time they keep running is charged to its next turn", d.bound)
}

// charge writes the time h's Pods outlived the hold (until now, or their deletion deadline if
// that is earlier: a late look charges no more) on wl's TurnCharge condition, added to a charge it
// still owes.
func (d *drainHolds) charge(ctx context.Context, wl *kueue.Workload, h *drainHold, now time.Time) {
	if wl == nil {
		return
	}
	end := now
	if !h.due.IsZero() && h.due.Before(end) {
		end = h.due
	}
	overstay := end.Sub(h.deadline)
	if overstay < time.Second {
		return
	}
	// The update sees only what this owner applies, so the charge owed is read before.
	total := timeutil.Add(policy.TurnChargeOf(wl), overstay)
	err := workloadpatching.PatchStatus(ctx, d.client, wl, chargeOwner, func(w *kueue.Workload) (bool, error) {
		return apimeta.SetStatusCondition(&w.Status.Conditions, metav1.Condition{
			Type: policy.TurnChargeCondition, Status: metav1.ConditionTrue, Reason: policy.TurnChargeOwed,
			Message: policy.TurnChargeMessage(total, d.bound), LastTransitionTime: metav1.NewTime(now), ObservedGeneration: w.Generation,
		}), nil
	}, workloadpatching.WithLooseOnApply())
	if err != nil {
		ctrl.LoggerFrom(ctx).Error(err, "Could not charge a workload's next turn", "workload", klog.KObj(wl), "overstay", overstay)
	}
}

// chargeOwner owns the TurnCharge condition.
const chargeOwner = client.FieldOwner("kueue-timeshare-turn-charge")

// spendCharge marks a charge wl owed as spent: our eviction ends the turn it shortened. wl is the
// snapshot's, older than the eviction just written: the condition is applied without its
// resourceVersion, and it is the only field this owner applies.
func (d *drainHolds) spendCharge(ctx context.Context, wl *kueue.Workload) {
	charge := policy.TurnChargeOf(wl)
	if charge == 0 {
		return
	}
	err := workloadpatching.PatchStatus(ctx, d.client, wl.DeepCopy(), chargeOwner, func(w *kueue.Workload) (bool, error) {
		return apimeta.SetStatusCondition(&w.Status.Conditions, metav1.Condition{
			Type: policy.TurnChargeCondition, Status: metav1.ConditionFalse, Reason: policy.TurnChargeSpent,
			Message:            fmt.Sprintf("The turn that ended at this preemption was shorter by %s, the time its Pods had outlived the hold after the turn before", charge),
			LastTransitionTime: metav1.NewTime(d.clock.Now()), ObservedGeneration: w.Generation,
		}), nil
	}, workloadpatching.WithLooseOnApply())
	if err != nil {
		ctrl.LoggerFrom(ctx).Error(err, "Could not mark a workload's turn charge as spent", "workload", klog.KObj(wl))
	}
}

// podsLeft counts the held Job's Pods that may still run (not Succeeded or Failed), and returns
// the latest time by which they are to be stopped (their deletionTimestamp; zero if one has none).
func (d *drainHolds) podsLeft(ctx context.Context, h *drainHold) (int, time.Time, error) {
	var pods corev1.PodList
	if err := d.client.List(ctx, &pods, client.InNamespace(h.job.Namespace),
		client.MatchingLabels{batchv1.ControllerUidLabel: string(h.jobUID)}); err != nil {
		return 0, time.Time{}, err
	}
	n := 0
	var due time.Time
	for _, p := range pods.Items {
		if p.Status.Phase == corev1.PodSucceeded || p.Status.Phase == corev1.PodFailed {
			continue
		}
		n++
		if p.DeletionTimestamp == nil {
			return n, time.Time{}, nil
		}
		due = later(due, p.DeletionTimestamp.Time)
	}
	return n, due, nil
}

// wakeBefore wakes h's ClusterQueue the lead before its Pods are due to stop: a Pod that uses
// its whole grace period is removed at that time, and the retry then lands just after it rather
// than a batch period after the event. Pods that stop earlier wake it by their events.
func (d *drainHolds) wakeBefore(ctx context.Context, h *drainHold, due time.Time) {
	if d.lead <= 0 || due.IsZero() || due.Equal(h.preWake) {
		return
	}
	h.preWake = due
	at := due.Add(-d.lead)
	if !at.After(d.clock.Now()) {
		return
	}
	d.wakeAfter(ctx, h.cq, timeutil.Until(d.clock.Now(), at))
}

// wakeAfter wakes cq after delay, on a clock that can run a function later (the real one and
// the tests' fake one can); on one that cannot, the cycles' own checks end the holds.
func (d *drainHolds) wakeAfter(ctx context.Context, cq kueue.ClusterQueueReference, delay time.Duration) {
	if after, ok := d.clock.(clock.WithDelayedExecution); ok {
		after.AfterFunc(delay, func() { d.wake(context.WithoutCancel(ctx), cq) })
	}
}

func later(a, b time.Time) time.Time {
	if b.After(a) {
		return b
	}
	return a
}

// podChanged wakes the ClusterQueue of a hold when one of its Job's Pods is gone or has stopped,
// so that the check of the remaining Pods runs at once.
func (d *drainHolds) podChanged(ctx context.Context, pod *corev1.Pod, gone bool) {
	if d == nil || (!gone && pod.Status.Phase != corev1.PodSucceeded && pod.Status.Phase != corev1.PodFailed) {
		return
	}
	uid := types.UID(pod.Labels[batchv1.ControllerUidLabel])
	if uid == "" {
		return
	}
	d.wakeWhere(ctx, func(h *drainHold) bool { return h.jobUID == uid && h.job.Namespace == pod.Namespace })
}

// wakeWhere wakes the ClusterQueue of every hold that match selects.
func (d *drainHolds) wakeWhere(ctx context.Context, match func(*drainHold) bool) {
	var wake []kueue.ClusterQueueReference
	d.mu.Lock()
	for _, h := range d.holds {
		if match(h) {
			wake = append(wake, h.cq)
			h.lookAfter = time.Time{}
		}
	}
	d.mu.Unlock()
	for _, cq := range wake {
		d.wake(ctx, cq)
	}
}

// jobChanged wakes the ClusterQueue of a hold whose Job has no Pods left, so that the workload
// waiting for the room is retried at once rather than at the hold's deadline.
func (d *drainHolds) jobChanged(ctx context.Context, job *batchv1.Job) {
	if d == nil || job.Status.Active != 0 || ptr.Deref(job.Status.Terminating, 0) != 0 {
		return
	}
	key := types.NamespacedName{Namespace: job.Namespace, Name: job.Name}
	d.wakeWhere(ctx, func(h *drainHold) bool { return h.job == key })
}

// drainMessage is the pending message of a head (key self) whose ClusterQueue waits for victims'
// Pods, until at the latest. A victim that is itself the head, back in the queue, is told it
// waits for its own. The time is the holds' end, fixed when they start, so the message does not
// change (and cost a write) at every cycle.
func drainMessage(victims []string, self string, until time.Time) string {
	others := slices.DeleteFunc(slices.Clone(victims), func(v string) bool { return v == self })
	var msg string
	switch {
	case len(others) == len(victims):
		msg = fmt.Sprintf("waiting for the Pods of the preempted workload(s) %s to terminate before taking their quota", strings.Join(victims, ", "))
	case len(others) == 0:
		msg = "waiting for its own Pods, stopped at its preemption, to terminate before taking quota again"
	default:
		msg = fmt.Sprintf("waiting for its own Pods, stopped at its preemption, and those of the preempted workload(s) %s to terminate before taking quota again", strings.Join(others, ", "))
	}
	if until.IsZero() {
		return msg
	}
	return msg + "; the quota is held until " + until.UTC().Format(time.RFC3339) + " at the latest"
}

// JobChanged tells the scheduler that a Job's Pods changed (its status was updated); the manager
// calls it from its Job informer.
func (s *Scheduler) JobChanged(ctx context.Context, job *batchv1.Job) {
	s.drains.jobChanged(ctx, job)
}

// PodChanged tells the scheduler that a Pod stopped (gone: deleted); the manager calls it from its
// Pod informer.
func (s *Scheduler) PodChanged(ctx context.Context, pod *corev1.Pod, gone bool) {
	s.drains.podChanged(ctx, pod, gone)
}

// jobOwner is wl's owning batch/v1 Job, if a Job owns it: only those report terminating Pods.
func jobOwner(wl *kueue.Workload) *metav1.OwnerReference {
	owner := metav1.GetControllerOf(wl)
	if owner == nil || owner.Kind != "Job" || owner.APIVersion != batchv1.SchemeGroupVersion.String() {
		return nil
	}
	return owner
}

// DrainWithin gives about how long the scheduler keeps a workload's quota after evicting it for
// one of this project's reasons (the hold ends when its Pods are gone): the longest grace period
// of its pod sets, at most bound (timeshare.maxHandoverHold), while HandoverAfterVictimTermination
// is on and a Job owns it, zero otherwise.
func DrainWithin(bound time.Duration) func(wl *kueue.Workload) time.Duration {
	return func(wl *kueue.Workload) time.Duration {
		if !features.Enabled(features.HandoverAfterVictimTermination) || jobOwner(wl) == nil {
			return 0
		}
		var d time.Duration
		for i := range wl.Spec.PodSets {
			d = max(d, gracePeriod(&wl.Spec.PodSets[i].Template.Spec))
		}
		return min(d, bound)
	}
}

// gracePeriod is a Pod template's termination grace period. The tenant's Job sets it, to any
// int64 of seconds: it saturates rather than wrapping to a hold that is over at once.
func gracePeriod(spec *corev1.PodSpec) time.Duration {
	if spec.TerminationGracePeriodSeconds == nil {
		return defaultGracePeriod
	}
	return timeutil.Seconds(max(*spec.TerminationGracePeriodSeconds, 0))
}
