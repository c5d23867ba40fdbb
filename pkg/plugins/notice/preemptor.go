package notice

import (
	"context"
	"encoding/json"
	"fmt"
	"slices"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	apimeta "k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/klog/v2"
	"sigs.k8s.io/controller-runtime/pkg/client"
	ctrllog "sigs.k8s.io/controller-runtime/pkg/log"

	kueue "sigs.k8s.io/kueue/apis/kueue/v1beta2"
	schdcache "sigs.k8s.io/kueue/pkg/cache/scheduler"
	"sigs.k8s.io/kueue/pkg/workload"
	workloadevict "sigs.k8s.io/kueue/pkg/workload/evict"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/kueue-timeshare/kueue-timeshare/apis/annotations"
	tsconfig "github.com/kueue-timeshare/kueue-timeshare/apis/config/v1alpha1"
	"github.com/kueue-timeshare/kueue-timeshare/pkg/cohorttree"
	"github.com/kueue-timeshare/kueue-timeshare/pkg/message"
	"github.com/kueue-timeshare/kueue-timeshare/pkg/policy"
)

// Event reasons of a notice given by the preemptor.
const (
	// EventGiven is on the victim Workload and its job.
	EventGiven = "PreemptionNotice"
	// EventGivenFor is on the preemptor.
	EventGivenFor = "PreemptionNoticeGiven"
)

// Source supplies what a unit read off a ClusterQueue and the Cohorts above it, with the
// manager's default of it: for the notice's unit, the notice settings and default period. A
// preemptor given one turns the notice on.
type Source = policy.PathSource

// Plugin is the notice's part in the preemptor: a preemptor waits on victims under notice
// instead of searching again, gives notices instead of evicting, and ends a victim's notice with
// its eviction, whatever the eviction's reason.
type Plugin struct{}

// Feature is the plugin's gate.
func (Plugin) Feature() policy.Feature { return Feature }

// Status is what the local control plane's view says of a running workload under notice, and the
// part worth redrawing the view for.
func (Plugin) Status(wl *kueue.Workload, now time.Time) (detail, key string) {
	return noticeStatus(wl, now)
}

// NotCarried is what a simulation from a snapshot (the kubectl plugin's what-if) does not carry
// of a workload's notice annotations, and a note saying so.
func (Plugin) NotCarried(ann map[string]string) (note string, drop []string) {
	return noticeNotCarried(ann)
}

// Warns is how the notice warns a running workload before its eviction, as its job reads the
// warning: the simulator's jobs react to it.
func (Plugin) Warns() *policy.Warns {
	return &policy.Warns{Given: noticeGiven, Answer: annotations.CheckpointDone, Event: "noticed",
		Says: func(until, by, reason string) string {
			if by != "" {
				return fmt.Sprintf("is given notice until +%s for %s (%s)", until, by, reason)
			}
			return fmt.Sprintf("is given notice until +%s (%s)", until, reason)
		},
		Counter: "notices", Title: "Preemption notices (ended early: the checkpoint was done before the deadline)",
		Early: policy.Ending{Outcome: string(EndedEarly), Words: "its checkpoint done before the deadline"},
		Late:  policy.Ending{Outcome: string(EvictedAtDeadline), Words: "at its notice's deadline"},
	}
}

// Compared reports whether configuration c and the specs of the ClusterQueues and Cohorts give
// notices, so that a simulation's comparison adds a run with the notice's gate off.
func (Plugin) Compared(c *tsconfig.Configuration, specs []json.RawMessage) bool {
	return noticeCompared(c, specs)
}

// Clears are the annotations the notice's controller removes from a Workload once it is evicted,
// which the simulator removes in its place.
func (Plugin) Clears() []string { return noticeAnnotations }

// QueueMetrics builds the notice's per-ClusterQueue metrics (pkg/metrics reads them), whose label
// names labels gives, and returns them all with the gauge Count feeds.
func (Plugin) QueueMetrics(labels func(names ...string) []string) ([]prometheus.Collector, *prometheus.GaugeVec) {
	return noticeMetrics(labels)
}

// Count is the label under which the notices-in-force gauge counts c, a workload holding quota:
// its notice's preemption reason; ok false when it is under no notice.
func (Plugin) Count(c *policy.Candidate) (string, bool) {
	if n := fact.Of(c); n != nil && !c.Evicted {
		return n.Reason, true
	}
	return "", false
}

// WaitTargets: see policy.Waiter and noticeTargets.
func (Plugin) WaitTargets(ctx context.Context, h policy.Handle, wl *workload.Info, snapshot *schdcache.Snapshot) ([]*policy.Target, bool) {
	return waitForNotices(ctx, h, wl, snapshot)
}

// ExplainWait: see explainNotice.
func (Plugin) ExplainWait(h policy.Handle, wl *workload.Info, snapshot *schdcache.Snapshot) string {
	return explainNotice(h, wl, snapshot)
}

// IssueFirst: see issueNotices.
func (Plugin) IssueFirst(ctx context.Context, h policy.Handle, cache *schdcache.Cache, preemptor *workload.Info, targets []*policy.Target,
	snap *schdcache.ClusterQueueSnapshot) (bool, int, int, error) {
	return issueNotices(ctx, h, cache, preemptor, targets, snap)
}

// AfterEviction: see endNotice.
func (Plugin) AfterEviction(ctx context.Context, h policy.Handle, victim *kueue.Workload, cq kueue.ClusterQueueReference) {
	endNotice(ctx, h, victim, cq)
}

// notices is the source of the notice settings among src, or nil.
func notices(src policy.Sources) Source {
	s, _ := policy.SourceOf[Source](src)
	return s
}

// periodOf is the notice period cq's workloads get before an eviction, by reason, as the
// preemptor resolves it from the settings of src (Unit.Delays); nil while the feature's gate is
// off or src holds no notice settings.
func periodOf(src policy.Sources, cq *schdcache.ClusterQueueSnapshot) func(reason string) time.Duration {
	ns := notices(src)
	if ns == nil || !policy.GateOn(Feature) {
		return nil
	}
	path, def := Path(ns.SettingsPath(Feature, cq.Name, cohorttree.Parents(cq)))
	return func(reason string) time.Duration {
		d, _ := Resolve(path, reason, def)
		return d
	}
}

// waitForNotices is what a preemptor whose victims are under notice does instead of a search
// (see noticeTargets).
func waitForNotices(ctx context.Context, h policy.Handle, wl *workload.Info, snapshot *schdcache.Snapshot) ([]*policy.Target, bool) {
	targets, held := noticeTargets(h, wl, snapshot)
	if held {
		ctrllog.FromContext(ctx).V(3).Info("Victims under preemption notice", "due", len(targets) > 0)
	}
	return targets, held
}

// issueNotices takes a preemption's targets first: those whose notice is due are evicted here
// whatever their reason, so that the eviction's own write also ends the notice; new targets may
// get a notice instead of their eviction.
func issueNotices(ctx context.Context, h policy.Handle, cache *schdcache.Cache, preemptor *workload.Info, targets []*policy.Target,
	snap *schdcache.ClusterQueueSnapshot) (bool, int, int, error) {
	settings := notices(h.Sources())
	if settings == nil {
		return false, 0, 0, nil
	}
	if hasNotice(targets, preemptor) {
		preempted, failed, err := h.Evict(ctx, cache, preemptor, targets, snap)
		return true, preempted, failed, err
	}
	given, pending, failed, err := giveNotices(ctx, h, settings, preemptor, targets)
	return given, pending, failed, err
}

// noticed is a workload under notice for a preemptor.
type noticed struct {
	info   *workload.Info
	cq     *schdcache.ClusterQueueSnapshot
	notice *annotations.Notice
}

// noticedFor lists the workloads of wl's cohort tree under notice for wl, oldest deadline first.
// With an index it looks up only the workloads listed there; without one, or before it has
// synced, it reads every admitted workload of the tree.
func noticedFor(h policy.Handle, wl *workload.Info, snapshot *schdcache.Snapshot) []noticed {
	cq := snapshot.ClusterQueue(wl.ClusterQueue)
	keys, indexed := h.Marked()
	if cq == nil || (indexed && len(keys) == 0) {
		return nil
	}
	tree := []*schdcache.ClusterQueueSnapshot{cq}
	if cq.HasParent() {
		tree = cq.Parent().Root().SubtreeClusterQueues()
	}
	var out []noticed
	consider := func(q *schdcache.ClusterQueueSnapshot, info *workload.Info) {
		if !apimeta.IsStatusConditionTrue(info.Obj.Status.Conditions, Condition) {
			return
		}
		n, err := Read(info.Obj)
		if err != nil || n == nil || n.PreemptorUID != wl.Obj.UID || workloadevict.IsEvicted(info.Obj) {
			return
		}
		out = append(out, noticed{info: info, cq: q, notice: n})
	}
	if indexed {
		for _, key := range keys {
			for _, q := range tree {
				if info := q.Workloads[key]; info != nil {
					consider(q, info)
				}
			}
		}
	} else {
		for _, q := range tree {
			for _, info := range q.Workloads {
				consider(q, info)
			}
		}
	}
	slices.SortFunc(out, func(a, b noticed) int {
		if c := a.notice.Deadline.Compare(b.notice.Deadline); c != 0 {
			return c
		}
		return strings.Compare(string(workload.Key(a.info.Obj)), string(workload.Key(b.info.Obj)))
	})
	return out
}

// noticeTargets is what a preemptor whose victims are under notice does instead of a search: it
// looks for no other victims, and takes its noticed ones once every one of their notices is due
// (they leave together, so that the room they free is whole when it frees). held reports
// whether it has victims under notice at all.
func noticeTargets(h policy.Handle, wl *workload.Info, snapshot *schdcache.Snapshot) (targets []*policy.Target, held bool) {
	ns := noticedFor(h, wl, snapshot)
	if len(ns) == 0 {
		return nil, false
	}
	now := h.Now()
	for _, n := range ns {
		if due, _ := Due(n.notice, n.info.Obj, now); !due {
			return nil, true
		}
	}
	for _, n := range ns {
		targets = append(targets, &policy.Target{WorkloadInfo: n.info, Reason: n.notice.Reason, WorkloadCq: n.cq})
	}
	return targets, true
}

// hasNotice reports whether some target is under notice for preemptor.
func hasNotice(targets []*policy.Target, preemptor *workload.Info) bool {
	return slices.ContainsFunc(targets, func(t *policy.Target) bool {
		n, err := Read(t.WorkloadInfo.Obj)
		return err == nil && n != nil && n.PreemptorUID == preemptor.Obj.UID
	})
}

// explainNotice says that wl waits for its victims' notices, and until when, or "".
func explainNotice(h policy.Handle, wl *workload.Info, snapshot *schdcache.Snapshot) string {
	ns := noticedFor(h, wl, snapshot)
	if len(ns) == 0 {
		return ""
	}
	names := make([]string, len(ns))
	for i, n := range ns {
		names[i] = klog.KObj(n.info.Obj).String()
	}
	last := ns[len(ns)-1].notice.Deadline
	return fmt.Sprintf("waiting for the preemption notice of %d workload(s) (%s) to end at %s, or sooner once they say their checkpoint is done",
		len(ns), strings.Join(names, ", "), last.UTC().Format(time.RFC3339))
}

// noticeFor resolves the notice a target gets from its own ClusterQueue's settings up.
func noticeFor(settings Source, t *policy.Target) (time.Duration, string) {
	path, def := Path(settings.SettingsPath(Feature, t.WorkloadInfo.ClusterQueue, cohorttree.Parents(t.WorkloadCq)))
	d, src := Resolve(path, t.Reason, def)
	return d, src.String()
}

// giveNotices gives every target of one preemption the same deadline, the longest notice any of
// them gets, when some gets one; it returns false when none does and they are to be evicted now.
// A target whose notice write conflicts (the snapshot is older than the object: a notice may
// already be on its way) counts as pending, not as failed; the next cycle sees which it is.
func giveNotices(ctx context.Context, h policy.Handle, settings Source, preemptor *workload.Info, targets []*policy.Target) (given bool, pending, failed int, err error) {
	// A target already evicted (its Pods may still be terminating) is on its way out: it gets no
	// notice and counts as pending, as its eviction does.
	var leaving int
	targets = slices.DeleteFunc(slices.Clone(targets), func(t *policy.Target) bool {
		if workloadevict.IsEvicted(t.WorkloadInfo.Obj) {
			leaving++
			return true
		}
		return false
	})
	if len(targets) == 0 {
		return false, 0, 0, nil
	}
	var longest time.Duration
	var source string
	for _, t := range targets {
		if d, src := noticeFor(settings, t); d > longest {
			longest, source = d, src
		}
	}
	if longest <= 0 {
		return false, 0, 0, nil
	}
	pending = leaving
	now := h.Now()
	// A deadline is written to the second; round it up, so that no notice is shorter than set.
	deadline := now.Add(longest)
	if s := deadline.Truncate(time.Second); !s.Equal(deadline) {
		deadline = s.Add(time.Second)
	}
	log := ctrllog.FromContext(ctx)
	for _, t := range targets {
		n := annotations.Notice{Start: now, Deadline: deadline, Reason: t.Reason, PreemptorUID: preemptor.Obj.UID}
		// The victim's owner reads the notice: it names a preemptor of another namespace by UID only.
		if preemptor.Obj.Namespace == t.WorkloadInfo.Obj.Namespace {
			n.Preemptor = klog.KObj(preemptor.Obj).String()
		}
		if e := writeNotice(ctx, h, t.WorkloadInfo.Obj, n); e != nil {
			if apierrors.IsConflict(e) {
				pending++
				continue
			}
			failed++
			if err == nil {
				err = e
			}
			continue
		}
		pending++
		victim := t.WorkloadInfo.Obj
		log.V(2).Info("Preemption notice given", "targetWorkload", klog.KObj(victim), "preemptingWorkload", klog.KObj(preemptor.Obj),
			"reason", t.Reason, "deadline", deadline, "setting", source)
		msg := fmt.Sprintf("To be evicted at %s (%s) to make room for %s due to %s; set the annotation %s=true on its job or Workload once its work is saved to be evicted sooner",
			deadline.UTC().Format(time.RFC3339), source, n.PreemptorText(), policy.HumanReason(t.Reason), annotations.CheckpointDone)
		h.Recorder().Eventf(victim, nil, corev1.EventTypeNormal, EventGiven, "Preempt", msg)
		if owner := ownerRef(victim); owner != nil {
			h.Recorder().Eventf(owner, nil, corev1.EventTypeNormal, EventGiven, "Preempt", msg)
		}
		h.Recorder().Eventf(preemptor.Obj, nil, corev1.EventTypeNormal, EventGivenFor, "Preempt", "%s",
			message.ForNamespace(fmt.Sprintf("Gave workload %s in ClusterQueue %s notice of preemption until %s", klog.KObj(victim), t.WorkloadInfo.ClusterQueue, deadline.UTC().Format(time.RFC3339)), preemptor.Obj.Namespace))
	}
	return true, pending, failed, err
}

// writeNotice gives the victim notice n: the True PreemptionNotice condition in its status, the
// notice itself (Read), written only if the victim is unchanged since the snapshot so
// that a cycle working on a stale snapshot cannot give a second notice; then its copy in the
// annotations, which the notice controller writes too if this write is lost.
func writeNotice(ctx context.Context, h policy.Handle, victim *kueue.Workload, n annotations.Notice) error {
	n.Start = n.Start.UTC().Truncate(time.Second)
	record := ConditionOf(&n, victim.Generation)
	// Listed before it can be read back, so that no snapshot shows a notice the index misses.
	h.Mark(workload.Key(victim), record.Message)
	if err := applyCondition(ctx, h.Client(), victim, victim.ResourceVersion, record); err != nil {
		return err
	}
	patch, err := json.Marshal(map[string]any{"metadata": map[string]any{"annotations": n.Annotations()}})
	if err == nil {
		err = h.Client().Patch(ctx, victim.DeepCopy(), client.RawPatch(types.MergePatchType, patch))
	}
	if err != nil {
		ctrllog.FromContext(ctx).V(2).Info("Could not copy a notice to its victim's annotations; the notice controller will", "workload", klog.KObj(victim), "error", err.Error())
	}
	return nil
}

// ownerRef is a reference to wl's controlling job, for its events, or nil.
func ownerRef(wl *kueue.Workload) *metav1.PartialObjectMetadata {
	o := metav1.GetControllerOf(wl)
	if o == nil {
		return nil
	}
	gv, err := schema.ParseGroupVersion(o.APIVersion)
	if err != nil {
		return nil
	}
	obj := &metav1.PartialObjectMetadata{ObjectMeta: metav1.ObjectMeta{Name: o.Name, Namespace: wl.Namespace, UID: o.UID}}
	obj.SetGroupVersionKind(gv.WithKind(o.Kind))
	return obj
}

// endNotice records, after the victim's eviction, how its notice ended: the condition False with
// the outcome, and the count. Upstream's eviction write carries only Kueue's own conditions, so
// this is a write of its own; a failed one is left to the notice controller, which ends the
// notices of evicted workloads.
func endNotice(ctx context.Context, h policy.Handle, victim *kueue.Workload, cq kueue.ClusterQueueReference) {
	if notices(h.Sources()) == nil {
		return
	}
	n, err := Read(victim)
	if err != nil || n == nil {
		return
	}
	now := h.Now()
	outcome, msg := EvictionOutcome(n, victim)
	cond := metav1.Condition{Type: Condition, Status: metav1.ConditionFalse, Reason: string(outcome), Message: msg,
		LastTransitionTime: metav1.NewTime(now), ObservedGeneration: victim.Generation}
	if err := ApplyCondition(ctx, h.Client(), victim, cond); err != nil {
		ctrllog.FromContext(ctx).V(2).Info("Could not record the end of a preemption notice", "workload", klog.KObj(victim), "error", err.Error())
	}
	ReportEnded(h.QueueLabels(cq), cq, n.Reason, string(outcome), h.Role(), true, now.Sub(n.Start))
}

// ApplyCondition writes only the PreemptionNotice condition of wl, by server-side apply.
func ApplyCondition(ctx context.Context, c client.Client, wl *kueue.Workload, cond metav1.Condition) error {
	return applyCondition(ctx, c, wl, "", cond)
}

// applyCondition is ApplyCondition, only if wl is still at resourceVersion when set.
func applyCondition(ctx context.Context, c client.Client, wl *kueue.Workload, resourceVersion string, cond metav1.Condition) error {
	u := &unstructured.Unstructured{}
	u.SetResourceVersion(resourceVersion)
	u.SetGroupVersionKind(kueue.SchemeGroupVersion.WithKind("Workload"))
	u.SetNamespace(wl.Namespace)
	u.SetName(wl.Name)
	u.SetUID(wl.UID)
	raw, err := runtime.DefaultUnstructuredConverter.ToUnstructured(&cond)
	if err != nil {
		return err
	}
	if err := unstructured.SetNestedSlice(u.Object, []any{raw}, "status", "conditions"); err != nil {
		return err
	}
	return c.Status().Patch(ctx, u, client.Apply, client.FieldOwner(FieldOwner), client.ForceOwnership) //nolint:staticcheck // as upstream's patching does
}
