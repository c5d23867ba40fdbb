package notice_test

import (
	"context"
	"encoding/json"
	"time"

	"github.com/onsi/ginkgo/v2"
	"github.com/onsi/gomega"
	rbacv1 "k8s.io/api/rbac/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	kueue "sigs.k8s.io/kueue/apis/kueue/v1beta2"

	"github.com/kueue-timeshare/kueue-timeshare/apis/annotations"
	"github.com/kueue-timeshare/kueue-timeshare/pkg/plugins/notice"
	"github.com/kueue-timeshare/kueue-timeshare/test/util"
)

// A tenant with Kueue's batch-admin rights on Workloads in its namespace (the workload-editor
// role that batch-admin aggregates), bound by a RoleBinding and impersonated through the API
// server's RBAC and the manager's webhook over TLS.
var _ = ginkgo.Describe("A tenant with Kueue's batch-admin rights on its Workloads", func() {
	ctx := context.Background()

	// tenantIn binds user to Kueue's workload-editor role in ns and returns a client acting as it.
	tenantIn := func(ns, user string) client.Client {
		ginkgo.GinkgoHelper()
		role := kueueRole("workload-editor-role")
		role.Name = "tenant-test-" + role.Name
		if err := env.Client.Create(ctx, role); err != nil && !apierrors.IsAlreadyExists(err) {
			gomega.Expect(err).NotTo(gomega.HaveOccurred())
		}
		return tenantWith(ctx, ns, user, role)
	}
	annotate := func(c client.Client, wl *kueue.Workload, values map[string]any) error {
		body, err := json.Marshal(map[string]any{"metadata": map[string]any{"annotations": values}})
		gomega.Expect(err).NotTo(gomega.HaveOccurred())
		return c.Patch(ctx, wl, client.RawPatch(types.MergePatchType, body))
	}

	ginkgo.It("cannot write, move or remove the manager's state, nor its record, and keeps its other rights", func() {
		ns := queue(ctx, "tenant")
		victim := running(ctx, ns, "victim")
		_, pre := pending(ctx, ns, "preemptor")
		var wl *kueue.Workload
		gomega.Eventually(func(g gomega.Gomega) { wl = util.WorkloadOf(g, ctx, env.Client, victim) }, timeout, interval).Should(gomega.Succeed())
		tenant := tenantIn(ns, "team-lead")

		ginkgo.By("refusing a forged notice, naming the field and the rule")
		forged := annotations.Notice{Start: clk.Now(), Deadline: time.Date(2099, 1, 1, 0, 0, 0, 0, time.UTC), Reason: "Anything",
			Preemptor: ns + "/" + pre.Name, PreemptorUID: pre.UID}
		values := map[string]any{}
		for k, v := range forged.Annotations() {
			values[k] = v
		}
		err := annotate(tenant, wl, values)
		gomega.Expect(apierrors.IsInvalid(err)).To(gomega.BeTrue(), "got %v", err)
		gomega.Expect(err.Error()).To(gomega.ContainSubstring("metadata.annotations[kueue-timeshare.io/preemption-notice]"))
		gomega.Expect(err.Error()).To(gomega.ContainSubstring("may be written only by the kueue-timeshare manager"))

		ginkgo.By("refusing a cooldown written or removed by the tenant")
		err = annotate(tenant, wl, map[string]any{annotations.RequeueNotBefore: "9999-12-31T23:59:59Z"})
		gomega.Expect(apierrors.IsInvalid(err)).To(gomega.BeTrue(), "got %v", err)

		ginkgo.By("forbidding the tenant to write the Workload's status, where the notice lives")
		forgedRecord := notice.ConditionOf(&forged, wl.Generation)
		var latest kueue.Workload
		gomega.Expect(env.Client.Get(ctx, client.ObjectKeyFromObject(wl), &latest)).To(gomega.Succeed())
		latest.Status.Conditions = append(latest.Status.Conditions, forgedRecord)
		err = tenant.Status().Update(ctx, &latest)
		gomega.Expect(apierrors.IsForbidden(err)).To(gomega.BeTrue(), "got %v", err)

		ginkgo.By("refusing to move the deadline of a notice the manager gave, or to remove it")
		_, n := giveNotice(ctx, victim, pre, 10*time.Minute)
		err = annotate(tenant, wl, map[string]any{annotations.PreemptionDeadline: "2099-01-01T00:00:00Z"})
		gomega.Expect(apierrors.IsInvalid(err)).To(gomega.BeTrue(), "got %v", err)
		err = annotate(tenant, wl, map[string]any{annotations.PreemptionNotice: nil, annotations.PreemptionDeadline: nil})
		gomega.Expect(apierrors.IsInvalid(err)).To(gomega.BeTrue(), "got %v", err)

		ginkgo.By("letting the tenant say its checkpoint is done, which ends its own notice sooner")
		gomega.Expect(annotate(tenant, wl, map[string]any{annotations.CheckpointDone: "true"})).To(gomega.Succeed())
		gomega.Eventually(func(g gomega.Gomega) {
			c, _ := noticeCondition(g, ctx, client.ObjectKeyFromObject(wl))
			g.Expect(c).NotTo(gomega.BeNil())
			g.Expect(c.Status).To(gomega.Equal(metav1.ConditionFalse))
			g.Expect(c.Reason).To(gomega.Equal(string(notice.EndedEarly)))
		}, timeout, interval).Should(gomega.Succeed())
		gomega.Expect(n.Deadline).To(gomega.BeTemporally(">", clk.Now()), "ended before its deadline")
	})

	ginkgo.It("cannot make the manager read an object through a forged ownerReference: only a job kind Kueue integrates, with the UID the reference names", func() {
		ns := queue(ctx, "owner")
		tenant := tenantIn(ns, "owner-lead")

		ginkgo.By("an admin's Job in the tenant's namespace that Kueue does not manage, and a cluster-scoped object, both annotated with an expected runtime")
		job := util.CPUJob(ns, "annotated", ns, "1")
		job.Labels = nil
		job.Spec.Suspend = ptr.To(true)
		job.Annotations = map[string]string{annotations.ExpectedRuntime: "10m"}
		gomega.Expect(env.Client.Create(ctx, job)).To(gomega.Succeed())
		clusterScoped := &rbacv1.ClusterRole{ObjectMeta: metav1.ObjectMeta{Name: "owner-test-" + ns, Annotations: map[string]string{annotations.ExpectedRuntime: "20m"}}}
		gomega.Expect(env.Client.Create(ctx, clusterScoped)).To(gomega.Succeed())

		ownedBy := func(name string, ref metav1.OwnerReference) *kueue.Workload {
			ginkgo.GinkgoHelper()
			ref.Controller = ptr.To(true)
			wl := &kueue.Workload{
				ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name, OwnerReferences: []metav1.OwnerReference{ref}},
				Spec:       kueue.WorkloadSpec{PodSets: []kueue.PodSet{{Name: kueue.DefaultPodSetName, Count: 1, Template: job.Spec.Template}}},
			}
			gomega.Expect(tenant.Create(ctx, wl)).To(gomega.Succeed())
			return wl
		}
		jobRef := metav1.OwnerReference{APIVersion: "batch/v1", Kind: "Job", Name: job.Name}
		honestRef := jobRef
		honestRef.UID = job.UID
		forgedRef := jobRef
		forgedRef.UID = types.UID("00000000-0000-0000-0000-000000000001")
		honest := ownedBy("honest", honestRef)
		forged := ownedBy("forged-uid", forgedRef)
		cluster := ownedBy("cluster-scoped", metav1.OwnerReference{APIVersion: "rbac.authorization.k8s.io/v1", Kind: "ClusterRole", Name: clusterScoped.Name, UID: clusterScoped.UID})

		ginkgo.By("copying the annotations of the Job the reference names, UID included")
		gomega.Eventually(func(g gomega.Gomega) {
			var wl kueue.Workload
			g.Expect(env.Client.Get(ctx, client.ObjectKeyFromObject(honest), &wl)).To(gomega.Succeed())
			g.Expect(wl.Annotations).To(gomega.HaveKeyWithValue(annotations.ExpectedRuntime, "10m"))
		}, timeout, interval).Should(gomega.Succeed())

		ginkgo.By("reading nothing through a reference with another UID, or to a kind Kueue does not integrate")
		gomega.Consistently(func(g gomega.Gomega) {
			for _, w := range []*kueue.Workload{forged, cluster} {
				var wl kueue.Workload
				g.Expect(env.Client.Get(ctx, client.ObjectKeyFromObject(w), &wl)).To(gomega.Succeed())
				g.Expect(wl.Annotations).NotTo(gomega.HaveKey(annotations.ExpectedRuntime), w.Name)
			}
		}, 2*time.Second, interval).Should(gomega.Succeed())
	})
})

// kueueRole reads one of Kueue's user-facing ClusterRoles from the manifests the chart installs.
func kueueRole(name string) *rbacv1.ClusterRole {
	ginkgo.GinkgoHelper()
	for _, role := range kueueRoles() {
		if role.Name == name {
			return role
		}
	}
	ginkgo.Fail("no ClusterRole " + name + " in config/default/user-roles.yaml")
	return nil
}
