package notice_test

import (
	"context"
	"encoding/json"
	"time"

	"github.com/onsi/ginkgo/v2"
	"github.com/onsi/gomega"
	batchv1 "k8s.io/api/batch/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"

	kueue "sigs.k8s.io/kueue/apis/kueue/v1beta2"

	"github.com/kueue-timeshare/kueue-timeshare/apis/annotations"
	"github.com/kueue-timeshare/kueue-timeshare/pkg/plugins/notice"
	"github.com/kueue-timeshare/kueue-timeshare/pkg/plugins/timebased"
	"github.com/kueue-timeshare/kueue-timeshare/test/util"
)

// The three roles a namespace tenant is usually given: Kueue's batch-admin and batch-user, and
// Kubernetes' edit. Their rules come by aggregation, which kube-controller-manager does and
// envtest has not: aggregatedRole does the same from the roles on the API server.
var _ = ginkgo.Describe("Tenants with Kueue's batch-admin, batch-user and Kubernetes' edit roles", func() {
	ctx := context.Background()

	ginkgo.It("cannot forge a notice on a Workload nor through its Job, and the manager writes nothing back", func() {
		// Kueue's user roles as the chart installs them, with their aggregation labels.
		for _, role := range kueueRoles() {
			if err := env.Client.Create(ctx, role); err != nil && !apierrors.IsAlreadyExists(err) {
				gomega.Expect(err).NotTo(gomega.HaveOccurred())
			}
		}

		ns := queue(ctx, "roles")
		victim := running(ctx, ns, "victim")
		_, pre := pending(ctx, ns, "preemptor")
		var wl *kueue.Workload
		gomega.Eventually(func(g gomega.Gomega) { wl = util.WorkloadOf(g, ctx, env.Client, victim) }, timeout, interval).Should(gomega.Succeed())
		forged := annotations.Notice{Start: clk.Now(), Deadline: time.Date(2099, 1, 1, 0, 0, 0, 0, time.UTC), Reason: timebased.Reason,
			Preemptor: ns + "/" + pre.Name, PreemptorUID: pre.UID}
		values := map[string]any{}
		for k, v := range forged.Annotations() {
			values[k] = v
		}
		values[annotations.RequeueNotBefore] = "9999-12-31T23:59:59Z"
		body, err := json.Marshal(map[string]any{"metadata": map[string]any{"annotations": values}})
		gomega.Expect(err).NotTo(gomega.HaveOccurred())

		type outcome struct {
			Workload, Status, Job string
		}
		verdict := func(err error) string {
			switch {
			case err == nil:
				return "allowed"
			case apierrors.IsInvalid(err):
				return "invalid"
			case apierrors.IsForbidden(err):
				return "forbidden"
			}
			return err.Error()
		}
		want := map[string]outcome{
			"batch-admin-role": {Workload: "invalid", Status: "forbidden", Job: "allowed"},
			"batch-user-role":  {Workload: "forbidden", Status: "forbidden", Job: "allowed"},
			"edit":             {Workload: "forbidden", Status: "forbidden", Job: "allowed"},
		}
		got := map[string]outcome{}
		before := wl.ResourceVersion
		for role := range want {
			user := "tenant-" + role
			tenant := tenantWith(ctx, ns, user, aggregatedRole(ctx, role))
			var o outcome
			latest := &kueue.Workload{}
			gomega.Expect(env.Client.Get(ctx, client.ObjectKeyFromObject(wl), latest)).To(gomega.Succeed())
			o.Workload = verdict(tenant.Patch(ctx, latest, client.RawPatch(types.MergePatchType, body)))
			latest.Status.Conditions = append(latest.Status.Conditions, notice.ConditionOf(&forged, latest.Generation))
			o.Status = verdict(tenant.Status().Update(ctx, latest))
			job := &batchv1.Job{}
			gomega.Expect(env.Client.Get(ctx, client.ObjectKeyFromObject(victim), job)).To(gomega.Succeed())
			o.Job = verdict(tenant.Patch(ctx, job, client.RawPatch(types.MergePatchType, body)))
			got[role] = o
		}
		gomega.Expect(got).To(gomega.Equal(want))

		ginkgo.By("the Workload never gains the keys, no notice is recorded, and the manager writes nothing")
		gomega.Consistently(func(g gomega.Gomega) {
			var now kueue.Workload
			g.Expect(env.Client.Get(ctx, client.ObjectKeyFromObject(wl), &now)).To(gomega.Succeed())
			for _, k := range annotations.ManagerOwned() {
				g.Expect(now.Annotations).NotTo(gomega.HaveKey(k))
			}
			g.Expect(now.ResourceVersion).To(gomega.Equal(before))
		}, 3*time.Second, interval).Should(gomega.Succeed())
	})
})

// tenantWith binds user to role in ns and returns a client acting as it.
func tenantWith(ctx context.Context, ns, user string, role *rbacv1.ClusterRole) client.Client {
	ginkgo.GinkgoHelper()
	c, err := env.Tenant(ctx, ns, user, role)
	gomega.Expect(err).NotTo(gomega.HaveOccurred())
	return c
}

// aggregatedRole creates "tenant-test-<name>" with the rules that the ClusterRole aggregation
// controller would give the API server's ClusterRole name: those of every ClusterRole its
// aggregation rule selects.
func aggregatedRole(ctx context.Context, name string) *rbacv1.ClusterRole {
	ginkgo.GinkgoHelper()
	var src rbacv1.ClusterRole
	gomega.Expect(env.Client.Get(ctx, client.ObjectKey{Name: name}, &src)).To(gomega.Succeed())
	gomega.Expect(src.AggregationRule).NotTo(gomega.BeNil(), "%s aggregates nothing", name)
	out := &rbacv1.ClusterRole{ObjectMeta: metav1.ObjectMeta{Name: "tenant-test-" + name}}
	for _, sel := range src.AggregationRule.ClusterRoleSelectors {
		s, err := metav1.LabelSelectorAsSelector(&sel)
		gomega.Expect(err).NotTo(gomega.HaveOccurred())
		var list rbacv1.ClusterRoleList
		gomega.Expect(env.Client.List(ctx, &list, client.MatchingLabelsSelector{Selector: s})).To(gomega.Succeed())
		for _, r := range list.Items {
			out.Rules = append(out.Rules, r.Rules...)
		}
	}
	gomega.Expect(out.Rules).NotTo(gomega.BeEmpty(), "no role is aggregated into %s", name)
	if err := env.Client.Create(ctx, out); err != nil && !apierrors.IsAlreadyExists(err) {
		gomega.Expect(err).NotTo(gomega.HaveOccurred())
	}
	return out
}

// kueueRoles reads every ClusterRole of config/default/user-roles.yaml.
func kueueRoles() []*rbacv1.ClusterRole {
	ginkgo.GinkgoHelper()
	roles, err := util.KueueRoles()
	gomega.Expect(err).NotTo(gomega.HaveOccurred())
	return roles
}
