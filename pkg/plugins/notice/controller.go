package notice

import (
	"context"
	"encoding/json"
	"fmt"
	"strings"
	"sync"
	"time"

	"github.com/go-logr/logr"
	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	apimeta "k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/tools/events"
	"k8s.io/klog/v2"
	"k8s.io/utils/clock"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/builder"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/event"
	"sigs.k8s.io/controller-runtime/pkg/handler"
	"sigs.k8s.io/controller-runtime/pkg/predicate"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"

	kueue "sigs.k8s.io/kueue/apis/kueue/v1beta2"
	"sigs.k8s.io/kueue/pkg/controller/core/indexer"
	podconstants "sigs.k8s.io/kueue/pkg/controller/jobs/pod/constants"
	kueuemetrics "sigs.k8s.io/kueue/pkg/metrics"
	"sigs.k8s.io/kueue/pkg/util/roletracker"
	workloadpatching "sigs.k8s.io/kueue/pkg/workload/patching"

	"github.com/kueue-timeshare/kueue-timeshare/apis/annotations"
	"github.com/kueue-timeshare/kueue-timeshare/pkg/cohorttree"
	"github.com/kueue-timeshare/kueue-timeshare/pkg/features"
	"github.com/kueue-timeshare/kueue-timeshare/pkg/jobowner"
	"github.com/kueue-timeshare/kueue-timeshare/pkg/message"
)

// fieldOwner owns the PreemptionNotice condition when this controller writes it.
const fieldOwner = client.FieldOwner(FieldOwner)

// preemptorIndex indexes Workloads under notice by their preemptor's UID, so that a change of a
// preemptor reaches its victims.
const preemptorIndex = "kueue-timeshare.io/notice-preemptor"

// uidIndex indexes Workloads by UID: a notice names a preemptor of another namespace than its
// victim's by UID only.
const uidIndex = "kueue-timeshare.io/uid"

// Reconciler keeps a Workload's notice visible and ends the notices that end without an eviction.
type Reconciler struct {
	Client   client.Client
	Recorder events.EventRecorder
	Clock    clock.Clock
	// Wake retries a ClusterQueue's pending workloads (and so its cohort tree's).
	Wake         func(context.Context, kueue.ClusterQueueReference)
	CustomLabels *kueuemetrics.CustomLabels
	RoleTracker  *roletracker.RoleTracker

	// invalid remembers the unreadable notice last reported per Workload, so it is reported once.
	mu      sync.Mutex
	invalid map[types.NamespacedName]string
}

// Setup registers the controller with mgr. It runs on the leader only: it writes.
func Setup(mgr ctrl.Manager, clk clock.Clock, wake func(context.Context, kueue.ClusterQueueReference), cl *kueuemetrics.CustomLabels, rt *roletracker.RoleTracker) error {
	if clk == nil {
		clk = clock.RealClock{}
	}
	if err := mgr.GetFieldIndexer().IndexField(context.Background(), &kueue.Workload{}, preemptorIndex, func(o client.Object) []string {
		if n, err := annotations.ParseNotice(o.GetAnnotations()); err == nil && n != nil {
			return []string{string(n.PreemptorUID)}
		}
		return nil
	}); err != nil {
		return fmt.Errorf("indexing Workloads by notice preemptor: %w", err)
	}
	if err := mgr.GetFieldIndexer().IndexField(context.Background(), &kueue.Workload{}, uidIndex, func(o client.Object) []string {
		return []string{string(o.GetUID())}
	}); err != nil {
		return fmt.Errorf("indexing Workloads by UID: %w", err)
	}
	r := &Reconciler{Client: mgr.GetClient(), Recorder: mgr.GetEventRecorder("kueue-timeshare"), Clock: clk, Wake: wake,
		CustomLabels: cl, RoleTracker: rt, invalid: map[types.NamespacedName]string{}}
	return ctrl.NewControllerManagedBy(mgr).
		Named("timeshare-preemption-notice").
		For(&kueue.Workload{}, builder.WithPredicates(predicate.NewPredicateFuncs(concerned))).
		Watches(&kueue.Workload{}, handler.EnqueueRequestsFromMapFunc(r.victimsOf), builder.WithPredicates(preemptorChanged())).
		Watches(&batchv1.Job{}, handler.EnqueueRequestsFromMapFunc(r.workloadsOfJob), builder.WithPredicates(checkpointChanged())).
		Watches(&corev1.Pod{}, handler.EnqueueRequestsFromMapFunc(r.workloadsOfPod), builder.WithPredicates(podCreated())).
		Complete(r)
}

// concerned reports whether o carries a notice or the condition of one.
func concerned(o client.Object) bool {
	if !features.Enabled(features.PreemptionNotice) {
		return false
	}
	if _, ok := o.GetAnnotations()[annotations.PreemptionNotice]; ok {
		return true
	}
	if _, ok := o.GetAnnotations()[annotations.PreemptionDeadline]; ok {
		return true
	}
	wl, ok := o.(*kueue.Workload)
	return ok && apimeta.IsStatusConditionTrue(wl.Status.Conditions, Condition)
}

// victimsOf maps a Workload to the Workloads under notice for it.
func (r *Reconciler) victimsOf(ctx context.Context, o client.Object) []reconcile.Request {
	if !features.Enabled(features.PreemptionNotice) || o.GetUID() == "" {
		return nil
	}
	var list kueue.WorkloadList
	if err := r.Client.List(ctx, &list, client.MatchingFields{preemptorIndex: string(o.GetUID())}); err != nil {
		ctrl.LoggerFrom(ctx).V(2).Info("Could not list the victims of a preemptor", "preemptor", klog.KObj(o), "error", err.Error())
		return nil
	}
	return requests(list.Items, nil)
}

func requests(wls []kueue.Workload, keep func(*kueue.Workload) bool) []reconcile.Request {
	var out []reconcile.Request
	for i := range wls {
		if keep == nil || keep(&wls[i]) {
			out = append(out, reconcile.Request{NamespacedName: client.ObjectKeyFromObject(&wls[i])})
		}
	}
	return out
}

// workloadsOf lists the Workloads under notice in ns owned by the object of uid.
func (r *Reconciler) workloadsOf(ctx context.Context, ns string, uid types.UID) []reconcile.Request {
	if !features.Enabled(features.PreemptionNotice) || uid == "" {
		return nil
	}
	var list kueue.WorkloadList
	if err := r.Client.List(ctx, &list, client.InNamespace(ns), client.MatchingFields{indexer.OwnerReferenceUID: string(uid)}); err != nil {
		ctrl.LoggerFrom(ctx).V(2).Info("Could not list the Workloads of an owner", "namespace", ns, "uid", uid, "error", err.Error())
		return nil
	}
	return requests(list.Items, func(wl *kueue.Workload) bool { return concerned(wl) })
}

func (r *Reconciler) workloadsOfJob(ctx context.Context, o client.Object) []reconcile.Request {
	return r.workloadsOf(ctx, o.GetNamespace(), o.GetUID())
}

// workloadsOfPod maps a new Pod of a Job to the Job's Workload, whose notice the Pod must carry.
func (r *Reconciler) workloadsOfPod(ctx context.Context, o client.Object) []reconcile.Request {
	return r.workloadsOf(ctx, o.GetNamespace(), types.UID(o.GetLabels()[batchv1.ControllerUidLabel]))
}

func checkpointChanged() predicate.Predicate {
	return predicate.Funcs{
		CreateFunc: func(event.CreateEvent) bool { return false },
		UpdateFunc: func(e event.UpdateEvent) bool {
			return e.ObjectOld.GetAnnotations()[annotations.CheckpointDone] != e.ObjectNew.GetAnnotations()[annotations.CheckpointDone]
		},
		DeleteFunc:  func(event.DeleteEvent) bool { return false },
		GenericFunc: func(event.GenericEvent) bool { return false },
	}
}

// preemptorChanged passes the changes of a Workload that can withdraw a notice it gave: not its
// routine status updates, which would otherwise wake the victims' queues again.
func preemptorChanged() predicate.Predicate {
	return predicate.Funcs{
		CreateFunc: func(event.CreateEvent) bool { return false },
		UpdateFunc: func(e event.UpdateEvent) bool {
			o, okOld := e.ObjectOld.(*kueue.Workload)
			n, okNew := e.ObjectNew.(*kueue.Workload)
			return okOld && okNew && PreemptorOf(o) != PreemptorOf(n)
		},
		DeleteFunc:  func(event.DeleteEvent) bool { return true },
		GenericFunc: func(event.GenericEvent) bool { return false },
	}
}

func podCreated() predicate.Predicate {
	return predicate.Funcs{
		CreateFunc:  func(e event.CreateEvent) bool { return e.Object.GetLabels()[batchv1.ControllerUidLabel] != "" },
		UpdateFunc:  func(event.UpdateEvent) bool { return false },
		DeleteFunc:  func(event.DeleteEvent) bool { return false },
		GenericFunc: func(event.GenericEvent) bool { return false },
	}
}

// ReasonWriteRefused (Warning) is on a Workload whose notice the API server refused to record or
// clean for good; the controller tries again only when the Workload changes.
const ReasonWriteRefused = "PreemptionNoticeWriteRefused"

// Reconcile keeps one Workload's notice. A write the API server refuses is retried with the
// controller's per-item backoff; one that cannot succeed on retry (the write is invalid) is not
// retried, and is said once.
func (r *Reconciler) Reconcile(ctx context.Context, req ctrl.Request) (ctrl.Result, error) {
	res, err := r.reconcile(ctx, req)
	if !refusedForGood(err) {
		return res, err
	}
	var wl kueue.Workload
	if r.Client.Get(ctx, req.NamespacedName, &wl) == nil {
		r.Recorder.Eventf(&wl, nil, corev1.EventTypeWarning, ReasonWriteRefused, "Notice", "%s",
			message.Bound("The API server refused to record this workload's preemption notice; not retried until the workload changes: "+err.Error()))
	}
	return res, reconcile.TerminalError(err)
}

// refusedForGood reports whether a write failed in a way a retry of the same write cannot mend.
func refusedForGood(err error) bool {
	return apierrors.IsInvalid(err) || apierrors.IsBadRequest(err) || apierrors.IsRequestEntityTooLargeError(err)
}

func (r *Reconciler) reconcile(ctx context.Context, req ctrl.Request) (ctrl.Result, error) {
	log := ctrl.LoggerFrom(ctx)
	var wl kueue.Workload
	if err := r.Client.Get(ctx, req.NamespacedName, &wl); err != nil {
		if apierrors.IsNotFound(err) {
			r.mu.Lock()
			delete(r.invalid, req.NamespacedName)
			r.mu.Unlock()
		}
		return ctrl.Result{}, client.IgnoreNotFound(err)
	}
	if !features.Enabled(features.PreemptionNotice) {
		return ctrl.Result{}, nil
	}
	n, err := Read(&wl)
	if err != nil {
		// Only the manager writes the record; one it cannot read (an older format) ends here.
		r.reportInvalid(ctx, &wl, err.Error())
		if err := r.setCondition(ctx, &wl, metav1.ConditionFalse, string(Withdrawn),
			"The notice could not be read ("+err.Error()+"); the workload keeps running"); err != nil {
			return ctrl.Result{}, ignoreConflict(err)
		}
		return ctrl.Result{}, r.clean(ctx, &wl, nil)
	}
	if n == nil {
		return ctrl.Result{}, r.leftovers(ctx, &wl)
	}
	if !Copied(&wl, n) {
		if err := r.copyNotice(ctx, &wl, n); err != nil {
			return ctrl.Result{}, err
		}
	}
	pre, err := r.preemptor(ctx, n, &wl)
	if err != nil {
		return ctrl.Result{}, err
	}
	d := Decide(&wl, n, pre, r.Clock.Now())
	log.V(3).Info("Preemption notice", "workload", klog.KObj(&wl), "preemptor", n.Preemptor, "deadline", n.Deadline, "action", d.Action, "due", d.Due)
	switch d.Action {
	case Clean:
		return ctrl.Result{}, r.clean(ctx, &wl, n)
	case Record:
		_, message := EvictionOutcome(n, &wl)
		if err := r.setCondition(ctx, &wl, metav1.ConditionFalse, string(d.Outcome), message); err != nil {
			return ctrl.Result{}, ignoreConflict(err)
		}
		return ctrl.Result{}, r.clean(ctx, &wl, n)
	case End:
		return ctrl.Result{}, r.end(ctx, &wl, n, d)
	case Tell:
		return r.tell(ctx, &wl, n, d)
	}
	return ctrl.Result{}, nil
}

// leftovers deals with notice annotations on a Workload under no notice: those of a notice that
// ended (the condition False since its start) are cleaned; any others the manager never gave
// (written by hand, or by a tenant past the webhook) are removed with a Warning, once.
func (r *Reconciler) leftovers(ctx context.Context, wl *kueue.Workload) error {
	_, notice := wl.Annotations[annotations.PreemptionNotice]
	_, deadline := wl.Annotations[annotations.PreemptionDeadline]
	if !notice && !deadline {
		r.reportInvalid(ctx, wl, "")
		return nil
	}
	old, err := annotations.ParseNotice(wl.Annotations)
	if err == nil && old != nil && Ended(wl, old) {
		return r.clean(ctx, wl, old)
	}
	if notice {
		problem := fmt.Sprintf("annotations %s and %s: not a notice the manager gave (the Workload's %s condition does not record one)",
			annotations.PreemptionNotice, annotations.PreemptionDeadline, Condition)
		if err != nil {
			problem = err.Error()
		}
		r.reportInvalid(ctx, wl, problem)
	}
	return r.clean(ctx, wl, nil)
}

// copyNotice writes the notice in force as the Workload's annotations, over whatever is there:
// the preemptor writes them after the record, and a tenant past the webhook may have changed them.
func (r *Reconciler) copyNotice(ctx context.Context, wl *kueue.Workload, n *annotations.Notice) error {
	if _, ok := wl.Annotations[annotations.PreemptionNotice]; ok {
		r.reportInvalid(ctx, wl, fmt.Sprintf("annotations %s and %s: changed after the notice was given; restored from the %s condition",
			annotations.PreemptionNotice, annotations.PreemptionDeadline, Condition))
	}
	values := map[string]any{}
	for k, v := range n.Annotations() {
		values[k] = v
	}
	if err := r.patchAnnotations(ctx, wl, values); err != nil {
		return client.IgnoreNotFound(err)
	}
	ctrl.LoggerFrom(ctx).V(3).Info("Wrote the notice's annotations from its record", "workload", klog.KObj(wl))
	return nil
}

// preemptor reads the Workload named in n; one whose ClusterQueue is not in the victim's cohort
// tree cannot use the room the notice promises, and is treated as gone.
func (r *Reconciler) preemptor(ctx context.Context, n *annotations.Notice, victim *kueue.Workload) (Preemptor, error) {
	p, err := r.findPreemptor(ctx, n)
	if p == nil || err != nil {
		return Preemptor{}, err
	}
	pre := PreemptorOf(p)
	if pre.Found && pre.UID == n.PreemptorUID && !pre.QuotaReserved {
		same, err := r.sameTree(ctx, r.clusterQueue(ctx, p), r.clusterQueue(ctx, victim))
		if err != nil {
			return Preemptor{}, err
		}
		pre.ElsewhereInTree = !same
	}
	return pre, nil
}

// sameTree reports whether ClusterQueues a and b share the root of their cohort tree.
func (r *Reconciler) sameTree(ctx context.Context, a, b kueue.ClusterQueueReference) (bool, error) {
	if a == "" || b == "" {
		return a == b, nil
	}
	if a == b {
		return true, nil
	}
	ra, err := r.root(ctx, a)
	if err != nil {
		return false, err
	}
	rb, err := r.root(ctx, b)
	return err == nil && ra == rb, err
}

// root names the root of cq's cohort tree (see cohorttree.Root).
func (r *Reconciler) root(ctx context.Context, cq kueue.ClusterQueueReference) (string, error) {
	parents, err := cohorttree.Read(ctx, r.Client, cq)
	if err != nil {
		return "", err
	}
	return cohorttree.Root(cq, parents), nil
}

func (r *Reconciler) reportInvalid(ctx context.Context, wl *kueue.Workload, problem string) {
	key := client.ObjectKeyFromObject(wl)
	r.mu.Lock()
	last := r.invalid[key]
	if problem == "" {
		delete(r.invalid, key)
	} else {
		r.invalid[key] = problem
	}
	r.mu.Unlock()
	if problem != "" && problem != last {
		ctrl.LoggerFrom(ctx).V(2).Info("Preemption notice annotations not honoured", "workload", klog.KObj(wl), "problem", message.Bound(problem))
		r.Recorder.Eventf(wl, nil, corev1.EventTypeWarning, ReasonInvalid, "Notice", "%s", message.Bound("preemption notice annotations not honoured: "+problem))
	}
}

// tell makes the notice in force visible, copies checkpoint-done from the job, and wakes the
// preemptor once the notice is due.
func (r *Reconciler) tell(ctx context.Context, wl *kueue.Workload, n *annotations.Notice, d Decision) (ctrl.Result, error) {
	log := ctrl.LoggerFrom(ctx)
	job, err := r.owner(ctx, wl)
	if err != nil {
		return ctrl.Result{}, err
	}
	if job != nil && annotations.CheckpointIsDone(job.GetAnnotations()) && !annotations.CheckpointIsDone(wl.Annotations) {
		if err := r.patchAnnotations(ctx, wl, map[string]any{annotations.CheckpointDone: "true"}); err != nil {
			return ctrl.Result{}, err
		}
		log.V(2).Info("Checkpoint done on the job: the notice is due", "workload", klog.KObj(wl), "job", job.GetName())
		d.Due, d.Wait = true, 0
	}
	if err := r.annotatePods(ctx, wl, job, n); err != nil {
		return ctrl.Result{}, err
	}
	if d.Due {
		log.V(2).Info("Preemption notice due: waking the preemptor", "workload", klog.KObj(wl), "preemptor", n.Preemptor)
		r.wake(ctx, wl, n)
		return ctrl.Result{}, nil
	}
	// A backstop to the preemptor's own wake at the deadline.
	return ctrl.Result{RequeueAfter: d.Wait}, nil
}

// end ends n without an eviction: condition False, counted once, then the annotations removed.
func (r *Reconciler) end(ctx context.Context, wl *kueue.Workload, n *annotations.Notice, d Decision) error {
	message := EndedMessage(n, d)
	if err := r.setCondition(ctx, wl, metav1.ConditionFalse, string(d.Outcome), message); err != nil {
		return ignoreConflict(err)
	}
	ctrl.LoggerFrom(ctx).V(2).Info("Preemption notice ended without an eviction", "workload", klog.KObj(wl), "preemptor", n.Preemptor, "outcome", d.Outcome, "why", d.Why)
	cq := r.clusterQueue(ctx, wl)
	ReportEnded(r.CustomLabels.CQGet(cq), cq, n.Reason, string(d.Outcome), roletracker.GetRole(r.RoleTracker), false, 0)
	reason := ReasonEnded
	if d.Outcome == Withdrawn {
		reason = ReasonWithdrawn
	}
	r.Recorder.Eventf(wl, nil, corev1.EventTypeNormal, reason, "Notice", message)
	job, err := r.owner(ctx, wl)
	if err == nil && job != nil {
		r.Recorder.Eventf(job, nil, corev1.EventTypeNormal, reason, "Notice", message)
	}
	if d.Outcome == Withdrawn {
		// The room the preemptor waited for may be free for another workload now.
		r.wake(ctx, wl, n)
	}
	return r.clean(ctx, wl, n)
}

// clean removes the notice's annotations from wl's Pods and checkpoint-done from its job, then
// the annotations from wl (with its checkpoint-done), unless a newer notice replaced n meanwhile.
// checkpoint-done belonged to this notice: left on the job, it would make the next notice due the
// moment it is given.
func (r *Reconciler) clean(ctx context.Context, wl *kueue.Workload, n *annotations.Notice) error {
	job, err := r.owner(ctx, wl)
	if err != nil {
		return err
	}
	if job != nil {
		if _, ok := job.GetAnnotations()[annotations.CheckpointDone]; ok {
			if err := r.Client.Patch(ctx, job, client.RawPatch(types.MergePatchType, removal(annotations.CheckpointDone))); client.IgnoreNotFound(err) != nil {
				return err
			}
		}
	}
	pods, err := r.pods(ctx, wl, job, false)
	if err != nil {
		return err
	}
	for i := range pods {
		if _, ok := pods[i].Annotations[annotations.PreemptionDeadline]; !ok {
			continue
		}
		if err := r.Client.Patch(ctx, &pods[i], client.RawPatch(types.MergePatchType, removal(annotations.PreemptionDeadline))); client.IgnoreNotFound(err) != nil {
			return err
		}
	}
	var ops []map[string]any
	if n != nil {
		ops = append(ops, map[string]any{"op": "test", "path": annotationPath(annotations.PreemptionNotice), "value": wl.Annotations[annotations.PreemptionNotice]})
	}
	for _, k := range []string{annotations.PreemptionNotice, annotations.PreemptionDeadline, annotations.CheckpointDone} {
		if _, ok := wl.Annotations[k]; ok {
			ops = append(ops, map[string]any{"op": "remove", "path": annotationPath(k)})
		}
	}
	body, err := json.Marshal(ops)
	if err != nil {
		return err
	}
	if err := r.Client.Patch(ctx, wl, client.RawPatch(types.JSONPatchType, body)); err != nil {
		// A failed test op is answered Invalid: a newer notice replaced this one. Without a test op,
		// Invalid is a refusal, for Reconcile to report.
		if (n != nil && apierrors.IsInvalid(err)) || apierrors.IsConflict(err) || apierrors.IsNotFound(err) {
			ctrl.LoggerFrom(ctx).V(3).Info("Notice annotations changed while being removed", "workload", klog.KObj(wl), "error", err.Error())
			return nil
		}
		return err
	}
	ctrl.LoggerFrom(ctx).V(3).Info("Removed the notice annotations", "workload", klog.KObj(wl), "pods", len(pods))
	return nil
}

func annotationPath(key string) string {
	return "/metadata/annotations/" + strings.ReplaceAll(strings.ReplaceAll(key, "~", "~0"), "/", "~1")
}

func removal(key string) []byte {
	return fmt.Appendf(nil, `{"metadata":{"annotations":{%q:null}}}`, key)
}

// setCondition writes the PreemptionNotice condition alone, with the resourceVersion read: a
// Workload changed since is reconciled again. A False condition always gets a new transition
// time, even over the False of an earlier notice: Ended tells by it that this notice is over.
func (r *Reconciler) setCondition(ctx context.Context, wl *kueue.Workload, status metav1.ConditionStatus, reason, message string) error {
	return workloadpatching.PatchStatus(ctx, r.Client, wl, fieldOwner, func(w *kueue.Workload) (bool, error) {
		if status == metav1.ConditionFalse {
			apimeta.RemoveStatusCondition(&w.Status.Conditions, Condition)
		}
		return apimeta.SetStatusCondition(&w.Status.Conditions, metav1.Condition{
			Type: Condition, Status: status, Reason: reason, Message: message,
			LastTransitionTime: metav1.NewTime(r.Clock.Now()), ObservedGeneration: w.Generation,
		}), nil
	})
}

func ignoreConflict(err error) error {
	if apierrors.IsConflict(err) || apierrors.IsNotFound(err) {
		return nil
	}
	return err
}

func (r *Reconciler) patchAnnotations(ctx context.Context, obj client.Object, values map[string]any) error {
	raw, err := json.Marshal(values)
	if err != nil {
		return err
	}
	return r.Client.Patch(ctx, obj, client.RawPatch(types.MergePatchType, fmt.Appendf(nil, `{"metadata":{"annotations":%s}}`, raw)))
}

// owner reads wl's controlling job (jobowner.Of); nil when there is none, it cannot be
// read, or one of the same name replaced it.
func (r *Reconciler) owner(ctx context.Context, wl *kueue.Workload) (client.Object, error) {
	return jobowner.Of(ctx, r.Client, wl)
}

// annotatePods writes n's deadline on wl's Pods that may still run.
func (r *Reconciler) annotatePods(ctx context.Context, wl *kueue.Workload, job client.Object, n *annotations.Notice) error {
	pods, err := r.pods(ctx, wl, job, true)
	if err != nil {
		return err
	}
	deadline := n.Deadline.UTC().Format(time.RFC3339)
	for i := range pods {
		if pods[i].Annotations[annotations.PreemptionDeadline] == deadline {
			continue
		}
		if err := r.patchAnnotations(ctx, &pods[i], map[string]any{annotations.PreemptionDeadline: deadline}); client.IgnoreNotFound(err) != nil {
			return err
		}
		ctrl.LoggerFrom(ctx).V(3).Info("Told a Pod its preemption deadline", "workload", klog.KObj(wl), "pod", klog.KObj(&pods[i]), "deadline", deadline)
	}
	return nil
}

// pods finds wl's Pods: a batch/v1 Job's by its controller-uid label; for the pod integration the
// Pods owning wl and those of its pod group; for other kinds the Pods the job controls directly
// (not those of a child object, such as a JobSet's Jobs). running keeps only the Pods that may
// still run.
func (r *Reconciler) pods(ctx context.Context, wl *kueue.Workload, job client.Object, running bool) ([]corev1.Pod, error) {
	var found []corev1.Pod
	seen := map[types.UID]bool{}
	add := func(p *corev1.Pod) {
		if seen[p.UID] || (running && !mayRun(p)) {
			return
		}
		seen[p.UID] = true
		found = append(found, *p)
	}
	list := func(opts ...client.ListOption) ([]corev1.Pod, error) {
		var pods corev1.PodList
		err := r.Client.List(ctx, &pods, append(opts, client.InNamespace(wl.Namespace))...)
		return pods.Items, err
	}
	podOwned := false
	for _, ref := range wl.OwnerReferences {
		if ref.Kind != "Pod" || ref.APIVersion != "v1" {
			continue
		}
		podOwned = true
		var p corev1.Pod
		if err := r.Client.Get(ctx, types.NamespacedName{Namespace: wl.Namespace, Name: ref.Name}, &p); err != nil {
			if apierrors.IsNotFound(err) {
				continue
			}
			return nil, err
		}
		if p.UID == ref.UID {
			add(&p)
		}
	}
	if podOwned {
		group, err := list(client.MatchingLabels{podconstants.GroupNameLabel: wl.Name})
		if err != nil {
			return nil, err
		}
		for i := range group {
			add(&group[i])
		}
		return found, nil
	}
	if job == nil {
		return nil, nil
	}
	if _, isJob := job.(*batchv1.Job); isJob {
		pods, err := list(client.MatchingLabels{batchv1.ControllerUidLabel: string(job.GetUID())})
		if err != nil {
			return nil, err
		}
		for i := range pods {
			add(&pods[i])
		}
		return found, nil
	}
	pods, err := list()
	if err != nil {
		return nil, err
	}
	for i := range pods {
		if ref := metav1.GetControllerOf(&pods[i]); ref != nil && ref.UID == job.GetUID() {
			add(&pods[i])
		}
	}
	return found, nil
}

func mayRun(p *corev1.Pod) bool {
	return p.DeletionTimestamp == nil && p.Status.Phase != corev1.PodSucceeded && p.Status.Phase != corev1.PodFailed
}

// clusterQueue is wl's ClusterQueue: the one it is admitted to, else its LocalQueue's.
func (r *Reconciler) clusterQueue(ctx context.Context, wl *kueue.Workload) kueue.ClusterQueueReference {
	if wl.Status.Admission != nil {
		return wl.Status.Admission.ClusterQueue
	}
	if wl.Spec.QueueName == "" {
		return ""
	}
	var lq kueue.LocalQueue
	if err := r.Client.Get(ctx, types.NamespacedName{Namespace: wl.Namespace, Name: string(wl.Spec.QueueName)}, &lq); err != nil {
		return ""
	}
	return lq.Spec.ClusterQueue
}

// findPreemptor reads the Workload n names: by name when the notice has it, else by UID (a
// preemptor of another namespace than the victim's, which the notice names by UID only). Nil when
// it is gone; the UID is checked by the callers.
func (r *Reconciler) findPreemptor(ctx context.Context, n *annotations.Notice) (*kueue.Workload, error) {
	if ns, name, ok := strings.Cut(n.Preemptor, "/"); ok && ns != "" && name != "" {
		var p kueue.Workload
		if err := r.Client.Get(ctx, types.NamespacedName{Namespace: ns, Name: name}, &p); err != nil {
			return nil, client.IgnoreNotFound(err)
		}
		return &p, nil
	}
	var list kueue.WorkloadList
	if err := r.Client.List(ctx, &list, client.MatchingFields{uidIndex: string(n.PreemptorUID)}); err != nil {
		return nil, err
	}
	if len(list.Items) == 0 {
		return nil, nil
	}
	return &list.Items[0], nil
}

// wake retries the victim's and the preemptor's ClusterQueues.
func (r *Reconciler) wake(ctx context.Context, wl *kueue.Workload, n *annotations.Notice) {
	if r.Wake == nil {
		return
	}
	cqs := map[kueue.ClusterQueueReference]bool{r.clusterQueue(ctx, wl): true}
	if p, err := r.findPreemptor(ctx, n); err == nil && p != nil && p.UID == n.PreemptorUID {
		cqs[r.clusterQueue(ctx, p)] = true
	}
	for cq := range cqs {
		if cq != "" {
			logr.FromContextOrDiscard(ctx).V(3).Info("Waking a ClusterQueue for a preemption notice", "clusterQueue", cq, "workload", klog.KObj(wl))
			r.Wake(ctx, cq)
		}
	}
}
