package chart_test

import (
	"context"
	"encoding/json"
	"fmt"
	"regexp"
	"slices"
	"strings"

	"github.com/onsi/ginkgo/v2"
	"github.com/onsi/gomega"
	admissionv1 "k8s.io/api/admissionregistration/v1"
	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/rest"
	"sigs.k8s.io/controller-runtime/pkg/client"

	kueue "sigs.k8s.io/kueue/apis/kueue/v1beta2"

	"github.com/kueue-timeshare/kueue-timeshare/apis/annotations"
)

const (
	workloadPolicy = fullname + "-workload-manager-annotations"
	// What helm install learns from a cluster that serves v1 policies; helm template knows no kinds.
	vapAPI = "admissionregistration.k8s.io/v1/ValidatingAdmissionPolicy"
	// The rule, in the webhook's words (pkg/webhooks).
	managerOnly = "may be written only by the kueue-timeshare manager"
)

// renderFlags runs `helm template` for the test release with extra flags and --set values.
func renderFlags(flags []string, sets ...string) []*unstructured.Unstructured {
	ginkgo.GinkgoHelper()
	args := append([]string{"template", release, chartDir, "--namespace", namespace}, flags...)
	for _, s := range sets {
		args = append(args, "--set", s)
	}
	out, err := helmCmd("", args...)
	gomega.Expect(err).NotTo(gomega.HaveOccurred())
	objs, err := decodeAll([]byte(out))
	gomega.Expect(err).NotTo(gomega.HaveOccurred())
	return objs
}

var celKey = regexp.MustCompile(`'([^']*)'`)

// listedKeys reads the keys of the CEL list literal an expression starts with.
func listedKeys(expr string) []string {
	ginkgo.GinkgoHelper()
	list, _, ok := strings.Cut(expr, "]")
	gomega.Expect(ok && strings.HasPrefix(list, "[")).To(gomega.BeTrue(), "%q does not start with a list", expr)
	var keys []string
	for _, m := range celKey.FindAllStringSubmatch(list, -1) {
		keys = append(keys, m[1])
	}
	return keys
}

var _ = ginkgo.Describe("The Workload admission policy in the chart", func() {
	ginkgo.It("guards exactly the manager-owned annotations, as the webhook does", func() {
		objs := renderFlags(nil, "workloadAdmissionPolicy.enabled=true")
		vap := into[admissionv1.ValidatingAdmissionPolicy](find(objs, "ValidatingAdmissionPolicy", workloadPolicy))
		want := annotations.ManagerOwned()
		gomega.Expect(vap.Spec.MatchConditions).To(gomega.HaveLen(2))
		gomega.Expect(listedKeys(vap.Spec.MatchConditions[1].Expression)).To(gomega.Equal(want))
		gomega.Expect(vap.Spec.Variables).To(gomega.HaveLen(1))
		gomega.Expect(listedKeys(vap.Spec.Variables[0].Expression)).To(gomega.Equal(want))

		hooks := into[admissionv1.ValidatingWebhookConfiguration](find(objs, "ValidatingWebhookConfiguration", fullname+"-validating-webhook-configuration"))
		var checked bool
		for _, h := range hooks.Webhooks {
			if h.Name == "vworkload.timeshare.kueue.x-k8s.io" {
				gomega.Expect(h.MatchConditions).To(gomega.HaveLen(1))
				gomega.Expect(listedKeys(h.MatchConditions[0].Expression)).To(gomega.Equal(want))
				checked = true
			}
		}
		gomega.Expect(checked).To(gomega.BeTrue(), "no Workload webhook rendered")
	})

	ginkgo.It("renders where the cluster serves v1 policies, unless told otherwise, for the chart's ServiceAccount", func() {
		count := func(objs []*unstructured.Unstructured) int {
			return len(ofKind(objs, "ValidatingAdmissionPolicy")) + len(ofKind(objs, "ValidatingAdmissionPolicyBinding"))
		}
		served := []string{"--api-versions", vapAPI}
		gomega.Expect(count(renderFlags(nil))).To(gomega.Equal(0), "auto, on a cluster without v1 policies")
		gomega.Expect(count(renderFlags(served))).To(gomega.Equal(2), "auto, on a cluster with them")
		gomega.Expect(count(renderFlags(served, "workloadAdmissionPolicy.enabled=false"))).To(gomega.Equal(0))
		gomega.Expect(count(renderFlags(nil, "workloadAdmissionPolicy.enabled=true"))).To(gomega.Equal(2))

		objs := renderFlags(served, "serviceAccount.create=false", "serviceAccount.name=kueue-sa")
		vap := into[admissionv1.ValidatingAdmissionPolicy](find(objs, "ValidatingAdmissionPolicy", workloadPolicy))
		gomega.Expect(vap.Spec.MatchConditions[0].Expression).To(gomega.Equal(
			"request.userInfo.username != 'system:serviceaccount:" + namespace + ":kueue-sa'"))
		binding := into[admissionv1.ValidatingAdmissionPolicyBinding](find(objs, "ValidatingAdmissionPolicyBinding", workloadPolicy))
		gomega.Expect(binding.Spec.PolicyName).To(gomega.Equal(workloadPolicy))
		gomega.Expect(binding.Spec.ValidationActions).To(gomega.Equal([]admissionv1.ValidationAction{admissionv1.Deny}))

		_, err := render("workloadAdmissionPolicy.enabled=yes")
		gomega.Expect(err).To(gomega.MatchError(gomega.ContainSubstring("workloadAdmissionPolicy")))
	})
})

// The policy alone, with no manager and no webhook: what the API server enforces while the
// webhook is unreachable.
var _ = ginkgo.Describe("The Workload admission policy on the API server, without the webhook", ginkgo.Ordered, func() {
	const tenantNS = "team-a"
	var (
		ctx             context.Context
		k               *cluster
		tenant, manager client.Client
	)
	impersonating := func(user string, groups ...string) client.Client {
		ginkgo.GinkgoHelper()
		cfg := rest.CopyConfig(k.cfg)
		cfg.Impersonate = rest.ImpersonationConfig{UserName: user, Groups: groups}
		c, err := client.New(cfg, client.Options{Scheme: scheme})
		gomega.Expect(err).NotTo(gomega.HaveOccurred())
		return c
	}
	newWorkload := func(name string, ann map[string]string) *kueue.Workload {
		return &kueue.Workload{
			ObjectMeta: metav1.ObjectMeta{Namespace: tenantNS, Name: name, Annotations: ann},
			Spec: kueue.WorkloadSpec{QueueName: "queue", PodSets: []kueue.PodSet{{
				Name: "main", Count: 1,
				Template: corev1.PodTemplateSpec{Spec: corev1.PodSpec{
					RestartPolicy: corev1.RestartPolicyNever,
					Containers:    []corev1.Container{{Name: "c", Image: "busybox"}},
				}},
			}}},
		}
	}
	annotate := func(c client.Client, wl *kueue.Workload, values map[string]any) error {
		body, err := json.Marshal(map[string]any{"metadata": map[string]any{"annotations": values}})
		gomega.Expect(err).NotTo(gomega.HaveOccurred())
		return c.Patch(ctx, wl, client.RawPatch(types.MergePatchType, body))
	}
	// refused checks that err is the policy's refusal of exactly these keys, in the webhook's words.
	refused := func(err error, keys ...string) {
		ginkgo.GinkgoHelper()
		gomega.Expect(err).To(gomega.HaveOccurred())
		gomega.Expect(apierrors.IsInvalid(err)).To(gomega.BeTrue(), "got %v", err)
		gomega.Expect(err.Error()).To(gomega.ContainSubstring(workloadPolicy))
		for _, key := range annotations.ManagerOwned() {
			field := "metadata.annotations[" + key + "]: Forbidden: " + managerOnly
			if slices.Contains(keys, key) {
				gomega.Expect(err.Error()).To(gomega.ContainSubstring(field))
			} else {
				gomega.Expect(err.Error()).NotTo(gomega.ContainSubstring(field))
			}
		}
	}
	ownedValues := func(suffix string) map[string]string {
		return map[string]string{
			annotations.PreemptionNotice:   `{"preemptor":"team-b/big","reason":"Manager` + suffix + `"}`,
			annotations.PreemptionDeadline: "2030-01-01T00:00:0" + suffix + "Z",
			annotations.RequeueNotBefore:   "2030-01-02T00:00:0" + suffix + "Z",
		}
	}

	ginkgo.BeforeAll(func() {
		ctx = context.Background()
		k = startCluster()
		for _, ns := range []string{namespace, tenantNS} {
			gomega.Expect(k.client.Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}})).To(gomega.Succeed())
		}
		objs := renderFlags([]string{"--api-versions", vapAPI})
		apply := func(o *unstructured.Unstructured) {
			gomega.Expect(k.client.Apply(ctx, client.ApplyConfigurationFromUnstructured(o.DeepCopy()),
				client.FieldOwner("chart-test"), client.ForceOwnership)).To(gomega.Succeed(), "%s %s", o.GetKind(), o.GetName())
		}
		// The Workload CRD; its writes in the stored version need no conversion webhook.
		apply(find(objs, "CustomResourceDefinition", "workloads.kueue.x-k8s.io"))
		gomega.Eventually(func(g gomega.Gomega) {
			var crd apiextensionsv1.CustomResourceDefinition
			g.Expect(k.client.Get(ctx, client.ObjectKey{Name: "workloads.kueue.x-k8s.io"}, &crd)).To(gomega.Succeed())
			established := false
			for _, c := range crd.Status.Conditions {
				established = established || (c.Type == apiextensionsv1.Established && c.Status == apiextensionsv1.ConditionTrue)
			}
			g.Expect(established).To(gomega.BeTrue())
		}, timeout, interval).Should(gomega.Succeed())
		apply(find(objs, "ValidatingAdmissionPolicy", workloadPolicy))
		apply(find(objs, "ValidatingAdmissionPolicyBinding", workloadPolicy))
		apply(find(objs, "ServiceAccount", fullname+"-controller-manager"))
		apply(find(objs, "ClusterRole", fullname+"-manager-role"))
		apply(find(objs, "ClusterRoleBinding", fullname+"-manager-rolebinding"))
		apply(find(objs, "ClusterRole", fullname+"-workload-editor-role"))
		gomega.Expect(k.client.Create(ctx, &rbacv1.RoleBinding{
			ObjectMeta: metav1.ObjectMeta{Namespace: tenantNS, Name: "team-lead"},
			RoleRef:    rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "ClusterRole", Name: fullname + "-workload-editor-role"},
			Subjects:   []rbacv1.Subject{{Kind: rbacv1.UserKind, APIGroup: rbacv1.GroupName, Name: "team-lead"}},
		})).To(gomega.Succeed())
		tenant = impersonating("team-lead", "system:authenticated")
		manager = impersonating(fmt.Sprintf("system:serviceaccount:%s:%s-controller-manager", namespace, fullname),
			"system:serviceaccounts", "system:serviceaccounts:"+namespace, "system:authenticated")

		// The API server compiles a new policy in the background: wait until it refuses (dry run,
		// so that nothing is stored before then).
		gomega.Eventually(func(g gomega.Gomega) {
			err := tenant.Create(ctx, newWorkload("warm-up", ownedValues("0")), client.DryRunAll)
			g.Expect(apierrors.IsInvalid(err)).To(gomega.BeTrue(), "got %v", err)
		}, timeout, interval).Should(gomega.Succeed())
	})

	ginkgo.It("refuses a tenant's forged notice or cooldown, on create and as an added annotation, naming the field", func() {
		for i, key := range annotations.ManagerOwned() {
			ginkgo.By("creating a Workload with " + key)
			refused(tenant.Create(ctx, newWorkload(fmt.Sprintf("forged-%d", i), map[string]string{key: ownedValues("1")[key]})), key)
		}
		ginkgo.By("creating a Workload with all of them")
		refused(tenant.Create(ctx, newWorkload("forged-all", ownedValues("1"))), annotations.ManagerOwned()...)

		ginkgo.By("adding them to a Workload created without")
		wl := newWorkload("plain", map[string]string{"team/owner": "alice"})
		gomega.Expect(tenant.Create(ctx, wl)).To(gomega.Succeed())
		for _, key := range annotations.ManagerOwned() {
			refused(annotate(tenant, wl, map[string]any{key: ownedValues("1")[key]}), key)
			refused(annotate(tenant, wl, map[string]any{key: ""}), key)
		}
		var got kueue.Workload
		gomega.Expect(k.client.Get(ctx, client.ObjectKeyFromObject(wl), &got)).To(gomega.Succeed())
		gomega.Expect(got.Annotations).To(gomega.Equal(map[string]string{"team/owner": "alice"}))
	})

	ginkgo.It("refuses to move or remove what the manager wrote, and lets the tenant edit the Workload's other annotations", func() {
		wl := newWorkload("noticed", map[string]string{"team/owner": "alice"})
		gomega.Expect(tenant.Create(ctx, wl)).To(gomega.Succeed())
		gomega.Expect(annotate(manager, wl, map[string]any{
			annotations.PreemptionNotice:   ownedValues("2")[annotations.PreemptionNotice],
			annotations.PreemptionDeadline: ownedValues("2")[annotations.PreemptionDeadline],
			annotations.RequeueNotBefore:   ownedValues("2")[annotations.RequeueNotBefore],
		})).To(gomega.Succeed())

		for _, key := range annotations.ManagerOwned() {
			ginkgo.By("changing " + key)
			refused(annotate(tenant, wl, map[string]any{key: ownedValues("9")[key]}), key)
			ginkgo.By("removing " + key)
			refused(annotate(tenant, wl, map[string]any{key: nil}), key)
		}
		ginkgo.By("removing them all at once")
		refused(annotate(tenant, wl, map[string]any{
			annotations.PreemptionNotice: nil, annotations.PreemptionDeadline: nil, annotations.RequeueNotBefore: nil,
		}), annotations.ManagerOwned()...)

		ginkgo.By("editing other annotations with a patch, and with a whole-object update")
		gomega.Expect(annotate(tenant, wl, map[string]any{"team/owner": "bob", annotations.CheckpointDone: "true"})).To(gomega.Succeed())
		// The manager may write the Workload's status between the read and the update.
		gomega.Eventually(func(g gomega.Gomega) {
			var latest kueue.Workload
			g.Expect(tenant.Get(ctx, client.ObjectKeyFromObject(wl), &latest)).To(gomega.Succeed())
			delete(latest.Annotations, "team/owner")
			g.Expect(tenant.Update(ctx, &latest)).To(gomega.Succeed())
		}, timeout, interval).Should(gomega.Succeed())

		var got kueue.Workload
		gomega.Expect(k.client.Get(ctx, client.ObjectKeyFromObject(wl), &got)).To(gomega.Succeed())
		want := ownedValues("2")
		want[annotations.CheckpointDone] = "true"
		gomega.Expect(got.Annotations).To(gomega.Equal(want))
	})

	ginkgo.It("holds for a cluster admin too, as the webhook does", func() {
		wl := newWorkload("admin", nil)
		gomega.Expect(k.client.Create(ctx, wl)).To(gomega.Succeed())
		refused(annotate(k.client, wl, map[string]any{annotations.PreemptionDeadline: "2099-01-01T00:00:00Z"}), annotations.PreemptionDeadline)
	})

	ginkgo.It("lets the manager's ServiceAccount write, move and remove them", func() {
		wl := newWorkload("managed", ownedValues("3"))
		gomega.Expect(manager.Create(ctx, wl)).To(gomega.Succeed())
		gomega.Expect(annotate(manager, wl, map[string]any{annotations.PreemptionDeadline: ownedValues("4")[annotations.PreemptionDeadline]})).To(gomega.Succeed())
		gomega.Expect(annotate(manager, wl, map[string]any{
			annotations.PreemptionNotice: nil, annotations.PreemptionDeadline: nil, annotations.RequeueNotBefore: nil,
		})).To(gomega.Succeed())
		var got kueue.Workload
		gomega.Expect(k.client.Get(ctx, client.ObjectKeyFromObject(wl), &got)).To(gomega.Succeed())
		gomega.Expect(got.Annotations).To(gomega.BeEmpty())
	})
})
