package e2e_test

import (
	"context"
	"encoding/json"
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/onsi/ginkgo/v2"
	"github.com/onsi/gomega"
	authorizationv1 "k8s.io/api/authorization/v1"
	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	apimeta "k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/rest"
	"sigs.k8s.io/controller-runtime/pkg/client"

	kueue "sigs.k8s.io/kueue/apis/kueue/v1beta2"

	"github.com/kueue-timeshare/kueue-timeshare/apis/annotations"
	"github.com/kueue-timeshare/kueue-timeshare/pkg/plugins/notice"
	"github.com/kueue-timeshare/kueue-timeshare/pkg/plugins/timebased"
)

// Kueue's roles for people, as the chart installs them (installChartRBAC renders the release
// "kueue-timeshare"; test/integration/chart checks they equal config/default/user-roles.yaml).
const (
	batchAdminRole = "kueue-timeshare-batch-admin-role"
	batchUserRole  = "kueue-timeshare-batch-user-role"
	// editRole is Kubernetes' own; Kueue's viewer roles join it.
	editRole = "edit"
)

// tenant is a user of one namespace, bound there to one ClusterRole, and a client acting as it.
type tenant struct {
	role string
	c    client.Client
}

// access is one request a tenant's role must allow before the spec relies on the role.
type access struct{ group, resource, subresource, verb string }

var (
	getWorkloads   = access{group: kueue.SchemeGroupVersion.Group, resource: "workloads", verb: "get"}
	patchWorkloads = access{group: kueue.SchemeGroupVersion.Group, resource: "workloads", verb: "patch"}
	patchJobs      = access{group: batchv1.GroupName, resource: "jobs", verb: "patch"}
)

// roleGrants is what each role is known to grant in a namespace, and so what is waited for.
var roleGrants = map[string][]access{
	batchAdminRole: {getWorkloads, patchWorkloads, patchJobs},
	batchUserRole:  {getWorkloads, patchJobs},
	editRole:       {getWorkloads, patchJobs},
}

// newTenant binds user to role in ns with a RoleBinding, and returns a client impersonating it.
// Aggregated roles get their rules from kube-controller-manager, and RBAC's cache follows the
// binding: it waits until the tenant may do what its role grants, so that a Forbidden later is
// the role's answer and not a role still empty.
func newTenant(ctx context.Context, ns, user, role string) tenant {
	ginkgo.GinkgoHelper()
	submit(ctx, &rbacv1.RoleBinding{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: user},
		RoleRef:    rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "ClusterRole", Name: role},
		Subjects:   []rbacv1.Subject{{Kind: rbacv1.UserKind, APIGroup: rbacv1.GroupName, Name: user}},
	})
	cfg := rest.CopyConfig(cp.Config)
	cfg.Impersonate = rest.ImpersonationConfig{UserName: user, Groups: []string{"system:authenticated"}}
	c, err := client.New(cfg, client.Options{Scheme: scheme})
	gomega.Expect(err).NotTo(gomega.HaveOccurred())
	gomega.Expect(roleGrants).To(gomega.HaveKey(role))
	gomega.Eventually(func(g gomega.Gomega) {
		for _, a := range roleGrants[role] {
			review := &authorizationv1.SelfSubjectAccessReview{Spec: authorizationv1.SelfSubjectAccessReviewSpec{
				ResourceAttributes: &authorizationv1.ResourceAttributes{Namespace: ns, Group: a.group, Resource: a.resource,
					Subresource: a.subresource, Verb: a.verb}}}
			g.Expect(c.Create(ctx, review)).To(gomega.Succeed())
			g.Expect(review.Status.Allowed).To(gomega.BeTrue(), "%s (%s) may %s %s", user, role, a.verb, a.resource)
		}
	}, time.Minute, interval).Should(gomega.Succeed())
	return tenant{role: role, c: c}
}

// annotate merge-patches obj's annotations as c: a nil value removes the key.
func annotate(ctx context.Context, c client.Client, obj client.Object, values map[string]any) error {
	body, err := json.Marshal(map[string]any{"metadata": map[string]any{"annotations": values}})
	gomega.Expect(err).NotTo(gomega.HaveOccurred())
	return c.Patch(ctx, obj, client.RawPatch(types.MergePatchType, body))
}

// outcome names how the API server answered a write, for tables compared as a whole.
func outcome(err error) string {
	switch {
	case err == nil:
		return "allowed"
	case apierrors.IsInvalid(err):
		return "Invalid"
	case apierrors.IsForbidden(err):
		return "Forbidden"
	}
	return err.Error()
}

// managerOwnedOn lists the manager-owned annotations obj carries, with their values.
func managerOwnedOn(obj metav1.Object) map[string]string {
	out := map[string]string{}
	for _, k := range annotations.ManagerOwned() {
		if v, ok := obj.GetAnnotations()[k]; ok {
			out[k] = v
		}
	}
	return out
}

// expectRefusedByWebhook checks that err is the Workload webhook's refusal naming every key.
func expectRefusedByWebhook(err error, keys ...string) {
	ginkgo.GinkgoHelper()
	gomega.Expect(apierrors.IsInvalid(err)).To(gomega.BeTrue(), "got %v", err)
	for _, k := range keys {
		gomega.Expect(err.Error()).To(gomega.ContainSubstring("metadata.annotations[" + k + "]"))
	}
	gomega.Expect(err.Error()).To(gomega.ContainSubstring("may be written only by the kueue-timeshare manager"))
}

// victimPodsDeletedAt polls j's Pods every 100 ms and returns when one was first seen being
// deleted (or all gone), with the Pods as then seen.
func victimPodsDeletedAt(ctx context.Context, j *batchv1.Job, within time.Duration) (time.Time, []corev1.Pod) {
	ginkgo.GinkgoHelper()
	var at time.Time
	var seen []corev1.Pod
	gomega.Eventually(func(g gomega.Gomega) {
		pods := jobPods(ctx, j)
		deleting := len(pods) == 0 || slices.ContainsFunc(pods, func(p corev1.Pod) bool { return p.DeletionTimestamp != nil })
		g.Expect(deleting).To(gomega.BeTrue(), "%s's Pods being deleted", j.Name)
		at, seen = time.Now(), pods
	}, within, 100*time.Millisecond).Should(gomega.Succeed())
	return at, seen
}

var _ = ginkgo.Describe("tenants against the preemption notice, with Pods", func() {
	ginkgo.It("cannot forge a notice on their running Workload, by any role or through their Job, and are preempted as if they had not tried", func() {
		ctx := context.Background()
		ns := newNamespace(ctx, "tenant-forge")
		priorityClass(ctx, "e2e-tenant-forge-low", 100, nil)
		priorityClass(ctx, "e2e-tenant-forge-high", 1000, nil)
		clusterQueue(ctx, ns, "tenant-forge", "4", map[string]any{"withinClusterQueue": "LowerPriority"})
		victim := newJob(ns, jobSpec{name: "victim", queue: "tenant-forge", cpu: "4", grace: 5, priorityClass: "e2e-tenant-forge-low"})
		// The forged notice names it as the preemptor the victim's room would be promised to.
		waiting := newJob(ns, jobSpec{name: "waiting", queue: "tenant-forge", cpu: "4", grace: 5, priorityClass: "e2e-tenant-forge-low"})
		high := newJob(ns, jobSpec{name: "high", queue: "tenant-forge", cpu: "4", grace: 5, priorityClass: "e2e-tenant-forge-high"})
		submit(ctx, victim)
		expectRunning(ctx, victim, time.Minute)
		submit(ctx, waiting)
		var pending *kueue.Workload
		gomega.Eventually(func(g gomega.Gomega) {
			pending = workload(g, ctx, waiting)
			c := apimeta.FindStatusCondition(pending.Status.Conditions, kueue.WorkloadQuotaReserved)
			g.Expect(c).NotTo(gomega.BeNil())
			g.Expect(c.Status).To(gomega.Equal(metav1.ConditionFalse))
		}, 30*time.Second, interval).Should(gomega.Succeed())

		tenants := []tenant{
			newTenant(ctx, ns, "team-lead", batchAdminRole),
			newTenant(ctx, ns, "researcher", batchUserRole),
			newTenant(ctx, ns, "editor", editRole),
		}
		var wl *kueue.Workload
		gomega.Eventually(func(g gomega.Gomega) { wl = workload(g, ctx, victim) }, time.Minute, interval).Should(gomega.Succeed())
		forged := annotations.Notice{Start: time.Now(), Deadline: time.Date(2099, 1, 1, 0, 0, 0, 0, time.UTC),
			Reason: timebased.Reason, Preemptor: ns + "/" + pending.Name, PreemptorUID: pending.UID}
		values := map[string]any{}
		for k, v := range forged.Annotations() {
			values[k] = v
		}

		ginkgo.By("refusing the forged notice on the Workload and its record in the status to every tenant; letting them write it on the Job")
		type attempt struct{ Workload, Status, Job string }
		got := map[string]attempt{}
		for _, t := range tenants {
			var a attempt
			err := annotate(ctx, t.c, &kueue.Workload{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: wl.Name}}, values)
			a.Workload = outcome(err)
			if t.role == batchAdminRole {
				expectRefusedByWebhook(err, annotations.PreemptionNotice, annotations.PreemptionDeadline)
			}
			var latest kueue.Workload
			gomega.Expect(k8s.Get(ctx, client.ObjectKeyFromObject(wl), &latest)).To(gomega.Succeed())
			apimeta.SetStatusCondition(&latest.Status.Conditions, notice.ConditionOf(&forged, latest.Generation))
			a.Status = outcome(t.c.Status().Update(ctx, &latest))
			a.Job = outcome(annotate(ctx, t.c, &batchv1.Job{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: victim.Name}}, values))
			got[t.role] = a
		}
		want := map[string]attempt{
			// The webhook refuses what RBAC lets through; RBAC refuses the rest first.
			batchAdminRole: {Workload: "Invalid", Status: "Forbidden", Job: "allowed"},
			batchUserRole:  {Workload: "Forbidden", Status: "Forbidden", Job: "allowed"},
			editRole:       {Workload: "Forbidden", Status: "Forbidden", Job: "allowed"},
		}
		gomega.Expect(cmp.Diff(want, got)).To(gomega.BeEmpty(), "outcomes by role (-want +got)")
		var j batchv1.Job
		gomega.Expect(k8s.Get(ctx, client.ObjectKeyFromObject(victim), &j)).To(gomega.Succeed())
		gomega.Expect(cmp.Diff(forged.Annotations(), managerOwnedOn(&j))).To(gomega.BeEmpty(), "the Job carries the forged keys")

		ginkgo.By("never giving the victim's Workload the keys written on its Job, nor a notice")
		gomega.Consistently(func(g gomega.Gomega) {
			wl := workload(g, ctx, victim)
			g.Expect(managerOwnedOn(wl)).To(gomega.BeEmpty())
			g.Expect(apimeta.FindStatusCondition(wl.Status.Conditions, notice.Condition)).To(gomega.BeNil())
			g.Expect(holding(wl)).To(gomega.BeTrue())
			g.Expect(running(jobPods(ctx, victim))).To(gomega.Equal(1))
		}, 10*time.Second, interval).Should(gomega.Succeed())

		ginkgo.By("preempting the victim for a higher-priority Job at once, as if nothing had been written")
		submit(ctx, high)
		arrived := time.Now()
		var h handover
		heldByNotice := ""
		gomega.Eventually(func(g gomega.Gomega) {
			if c := apimeta.FindStatusCondition(workload(g, ctx, high).Status.Conditions, kueue.WorkloadQuotaReserved); c != nil &&
				strings.Contains(c.Message, "preemption notice") {
				heldByNotice = c.Message
			}
			wl := workload(g, ctx, victim)
			c := apimeta.FindStatusCondition(wl.Status.Conditions, kueue.WorkloadPreempted)
			g.Expect(c).NotTo(gomega.BeNil())
			g.Expect(c.Status).To(gomega.Equal(metav1.ConditionTrue))
			h.reason = c.Reason
			h.evicted = c.LastTransitionTime.Time
			h.seen = time.Now()
		}, time.Minute, 100*time.Millisecond).Should(gomega.Succeed())
		gomega.Expect(h.reason).To(gomega.Equal(kueue.InClusterQueueReason))
		gomega.Expect(heldByNotice).To(gomega.BeEmpty(), "the preemptor never waited for a notice")
		gomega.Eventually(func(g gomega.Gomega) {
			now := time.Now()
			if h.victimGone.IsZero() && len(jobPods(ctx, victim)) == 0 {
				h.victimGone = now
			}
			if h.nextRunning.IsZero() && running(jobPods(ctx, high)) == 1 {
				h.nextRunning = now
			}
			g.Expect(h.victimGone).NotTo(gomega.BeZero(), "the victim's Pods gone")
			g.Expect(h.nextRunning).NotTo(gomega.BeZero(), "the preemptor's Pods Running")
		}, 2*time.Minute, 100*time.Millisecond).Should(gomega.Succeed())
		expectRunning(ctx, high, time.Second)
		gomega.Expect(apimeta.FindStatusCondition(workload(gomega.Default, ctx, victim).Status.Conditions, notice.Condition)).To(gomega.BeNil(),
			"no notice was ever recorded")
		gomega.Expect(holding(workload(gomega.Default, ctx, waiting))).To(gomega.BeFalse(), "the forged notice's preemptor got nothing")
		report := fmt.Sprintf("preemptor arrived %s; %s", arrived.Format("15:04:05.000"), h)
		ginkgo.GinkgoWriter.Println(report)
		ginkgo.AddReportEntry("forged notice, then a priority preemption with Pods (5 s grace)", report)
	})

	ginkgo.It("cannot move the deadline of a notice the manager gave, nor remove it: the Pods run until that deadline and no longer", func() {
		ctx := context.Background()
		ns := newNamespace(ctx, "tenant-move")
		priorityClass(ctx, "e2e-tenant-move-low", 100, nil)
		priorityClass(ctx, "e2e-tenant-move-high", 1000, nil)
		clusterQueue(ctx, ns, "tenant-move", "4", map[string]any{
			"withinClusterQueue": "LowerPriority", "noticePeriod": "20s", "noticeOnPriorityPreemption": true})
		const grace = 5
		victim := newJob(ns, jobSpec{name: "victim", queue: "tenant-move", cpu: "4", grace: grace, priorityClass: "e2e-tenant-move-low"})
		high := newJob(ns, jobSpec{name: "high", queue: "tenant-move", cpu: "4", grace: grace, priorityClass: "e2e-tenant-move-high"})
		submit(ctx, victim)
		expectRunning(ctx, victim, time.Minute)
		// Bound before the notice, so that its 20 s are not spent waiting for RBAC.
		lead := newTenant(ctx, ns, "team-lead", batchAdminRole)
		submit(ctx, high)

		ginkgo.By("giving the victim the notice: the condition, and its copy in the annotations")
		var n *annotations.Notice
		var wl *kueue.Workload
		gomega.Eventually(func(g gomega.Gomega) {
			wl = workload(g, ctx, victim)
			var err error
			n, err = notice.Read(wl)
			g.Expect(err).NotTo(gomega.HaveOccurred())
			g.Expect(n).NotTo(gomega.BeNil(), "the PreemptionNotice condition is True")
			g.Expect(notice.Copied(wl, n)).To(gomega.BeTrue(), "the annotations copy the notice")
		}, 30*time.Second, interval).Should(gomega.Succeed())
		given := time.Now()
		preemptor := workload(gomega.Default, ctx, high)
		gomega.Expect(n.Preemptor).To(gomega.Equal(ns + "/" + preemptor.Name))
		gomega.Expect(n.PreemptorUID).To(gomega.Equal(preemptor.UID))
		deadline := n.Deadline
		gomega.Expect(time.Until(deadline)).To(gomega.BeNumerically(">", 10*time.Second), "the notice lasts its 20 s")
		copied := managerOwnedOn(wl)

		ginkgo.By("refusing the batch admin's moved deadline, removed notice and rewritten record")
		ref := &kueue.Workload{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: wl.Name}}
		expectRefusedByWebhook(annotate(ctx, lead.c, ref, map[string]any{annotations.PreemptionDeadline: "2099-01-01T00:00:00Z"}),
			annotations.PreemptionDeadline)
		expectRefusedByWebhook(annotate(ctx, lead.c, ref, map[string]any{annotations.PreemptionNotice: nil, annotations.PreemptionDeadline: nil}),
			annotations.PreemptionNotice, annotations.PreemptionDeadline)
		moved := *n
		moved.Deadline = time.Date(2099, 1, 1, 0, 0, 0, 0, time.UTC)
		var latest kueue.Workload
		gomega.Expect(k8s.Get(ctx, client.ObjectKeyFromObject(wl), &latest)).To(gomega.Succeed())
		apimeta.SetStatusCondition(&latest.Status.Conditions, notice.ConditionOf(&moved, latest.Generation))
		err := lead.c.Status().Update(ctx, &latest)
		gomega.Expect(apierrors.IsForbidden(err)).To(gomega.BeTrue(), "got %v", err)

		ginkgo.By(fmt.Sprintf("keeping the victim's Pods running, its notice and its copy unchanged, until the deadline %s", deadline.Format(time.TimeOnly)))
		gomega.Consistently(func(g gomega.Gomega) {
			wl := workload(g, ctx, victim)
			now, err := notice.Read(wl)
			g.Expect(err).NotTo(gomega.HaveOccurred())
			g.Expect(cmp.Diff(n, now)).To(gomega.BeEmpty(), "the notice (-given +now)")
			g.Expect(cmp.Diff(copied, managerOwnedOn(wl))).To(gomega.BeEmpty(), "the copy (-given +now)")
			g.Expect(holding(wl)).To(gomega.BeTrue())
			pods := jobPods(ctx, victim)
			g.Expect(running(pods)).To(gomega.Equal(1), "the victim's Pod runs and is not being deleted")
			g.Expect(jobPods(ctx, high)).To(gomega.BeEmpty())
		}, time.Until(deadline)-500*time.Millisecond, 250*time.Millisecond).Should(gomega.Succeed())

		ginkgo.By("deleting the victim's Pods at the deadline, not later")
		// The eviction chain (waker, scheduler, Kueue's job reconciler, the Job controller) on a
		// loaded machine.
		const tolerance = 5 * time.Second
		deleted, pods := victimPodsDeletedAt(ctx, victim, time.Until(deadline)+time.Minute)
		for _, p := range pods {
			if p.DeletionTimestamp != nil {
				// deletionTimestamp is the deletion request plus the grace period, to the second.
				requested := p.DeletionTimestamp.Add(-grace * time.Second)
				gomega.Expect(requested).To(gomega.BeTemporally(">=", deadline), "Pod %s deleted at %s, not before the deadline", p.Name, requested)
			}
		}
		gomega.Expect(deleted.Sub(deadline)).To(gomega.BeNumerically("<", tolerance), "Pods seen deleted %s after the deadline", deleted.Sub(deadline))
		var evicted time.Time
		gomega.Eventually(func(g gomega.Gomega) {
			wl := workload(g, ctx, victim)
			c := apimeta.FindStatusCondition(wl.Status.Conditions, kueue.WorkloadEvicted)
			g.Expect(c).NotTo(gomega.BeNil())
			g.Expect(c.Status).To(gomega.Equal(metav1.ConditionTrue))
			evicted = c.LastTransitionTime.Time
			c = apimeta.FindStatusCondition(wl.Status.Conditions, notice.Condition)
			g.Expect(c).NotTo(gomega.BeNil())
			g.Expect(c.Status).To(gomega.Equal(metav1.ConditionFalse))
			g.Expect(c.Reason).To(gomega.Equal(string(notice.EvictedAtDeadline)))
		}, 30*time.Second, interval).Should(gomega.Succeed())
		gomega.Expect(evicted).To(gomega.BeTemporally(">=", deadline), "evicted at the deadline, not before")

		ginkgo.By("running the preemptor's Pods once the victim's are gone")
		gomega.Eventually(func() []corev1.Pod { return jobPods(ctx, victim) }, time.Minute, interval).Should(gomega.BeEmpty())
		gone := time.Now()
		runningAt := expectRunning(ctx, high, time.Minute)
		report := fmt.Sprintf("notice seen %s, deadline %s (from the PreemptionNotice condition); evicted %s; "+
			"victim's Pods seen deleted deadline+%s, gone deadline+%s; preemptor's Pods Running deadline+%s",
			given.Format("15:04:05.000"), deadline.Format(time.TimeOnly), evicted.Format(time.TimeOnly),
			deleted.Sub(deadline).Round(10*time.Millisecond), gone.Sub(deadline).Round(10*time.Millisecond),
			runningAt.Sub(deadline).Round(10*time.Millisecond))
		ginkgo.GinkgoWriter.Println(report)
		ginkgo.AddReportEntry("moved deadline refused, notice handover with Pods (20 s notice, 5 s grace)", report)
	})
})
