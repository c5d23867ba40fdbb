package chart_test

import (
	"context"
	"encoding/json"
	"fmt"
	"slices"

	"github.com/onsi/ginkgo/v2"
	"github.com/onsi/gomega"
	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/rest"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	kueue "sigs.k8s.io/kueue/apis/kueue/v1beta2"
)

// The chart's optional tenant policies (tenantPolicies), on the API server, as a namespace's user
// with the rules of Kubernetes' edit role meets them.
var _ = ginkgo.Describe("The chart's tenant policies on the API server", ginkgo.Ordered, func() {
	const (
		shared    = "shared"    // labelled as sharing time-sharing queues
		other     = "other"     // not labelled
		protected = "protected" // may name the reserved class
		class     = "long-toleration"
		gracePol  = fullname + "-grace-period"
		classPol  = fullname + "-priority-class-" + class
	)
	var (
		ctx           context.Context
		k             *cluster
		dev, manager  client.Client
		createdBefore *batchv1.Job
	)
	impersonating := func(user string, groups ...string) client.Client {
		ginkgo.GinkgoHelper()
		cfg := rest.CopyConfig(k.cfg)
		cfg.Impersonate = rest.ImpersonationConfig{UserName: user, Groups: groups}
		c, err := client.New(cfg, client.Options{Scheme: scheme})
		gomega.Expect(err).NotTo(gomega.HaveOccurred())
		return c
	}
	job := func(ns, name string, grace int64, labels map[string]string) *batchv1.Job {
		return &batchv1.Job{
			ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name, Labels: labels},
			Spec: batchv1.JobSpec{Suspend: ptr.To(true), Template: corev1.PodTemplateSpec{Spec: corev1.PodSpec{
				RestartPolicy:                 corev1.RestartPolicyNever,
				TerminationGracePeriodSeconds: ptr.To(grace),
				Containers:                    []corev1.Container{{Name: "c", Image: "busybox"}},
			}}},
		}
	}
	pod := func(ns, name string, grace int64) *corev1.Pod {
		return &corev1.Pod{
			ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name},
			Spec: corev1.PodSpec{
				RestartPolicy:                 corev1.RestartPolicyNever,
				TerminationGracePeriodSeconds: ptr.To(grace),
				Containers:                    []corev1.Container{{Name: "c", Image: "busybox"}},
			},
		}
	}
	workloadOfClass := func(ns, name string) *kueue.Workload {
		return &kueue.Workload{
			ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name},
			Spec: kueue.WorkloadSpec{QueueName: "queue",
				PriorityClassRef: &kueue.PriorityClassRef{Group: kueue.WorkloadPriorityClassGroup, Kind: kueue.WorkloadPriorityClassKind, Name: class},
				Priority:         ptr.To[int32](100),
				PodSets: []kueue.PodSet{{Name: "main", Count: 1, Template: corev1.PodTemplateSpec{Spec: corev1.PodSpec{
					RestartPolicy: corev1.RestartPolicyNever, Containers: []corev1.Container{{Name: "c", Image: "busybox"}},
				}}}}},
		}
	}
	classLabel := map[string]string{"kueue.x-k8s.io/priority-class": class}
	// refusedBy checks that err is the named policy's refusal and says what it says.
	refusedBy := func(err error, policy, says string) {
		ginkgo.GinkgoHelper()
		gomega.Expect(err).To(gomega.HaveOccurred())
		gomega.Expect(apierrors.IsInvalid(err) || apierrors.IsForbidden(err)).To(gomega.BeTrue(), "got %v", err)
		gomega.Expect(err.Error()).To(gomega.ContainSubstring(policy))
		gomega.Expect(err.Error()).To(gomega.ContainSubstring(says))
	}

	ginkgo.BeforeAll(func() {
		ctx = context.Background()
		k = startCluster()
		for ns, labels := range map[string]map[string]string{
			namespace: nil,
			shared:    {"kueue-timeshare.io/time-sharing": "true"},
			other:     nil,
			protected: {"kueue-timeshare.io/time-sharing": "true", "team-tier": "protected"},
		} {
			gomega.Expect(k.client.Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns, Labels: labels}})).To(gomega.Succeed())
			if ns == namespace {
				continue
			}
			gomega.Expect(k.client.Create(ctx, &rbacv1.RoleBinding{
				ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "dev"},
				// edit's rules: without kube-controller-manager, envtest does not aggregate them into edit.
				RoleRef:  rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "ClusterRole", Name: "system:aggregate-to-edit"},
				Subjects: []rbacv1.Subject{{Kind: rbacv1.UserKind, APIGroup: rbacv1.GroupName, Name: "dev"}},
			})).To(gomega.Succeed())
		}
		dev = impersonating("dev", "system:authenticated")
		manager = impersonating(fmt.Sprintf("system:serviceaccount:%s:%s-controller-manager", namespace, fullname),
			"system:serviceaccounts", "system:serviceaccounts:"+namespace, "system:authenticated")

		// A Job from before the policies, with the grace period and class they refuse. RBAC's
		// cache follows the bindings a moment later: until then the create is Forbidden.
		createdBefore = job(shared, "from-before", 86400, classLabel)
		gomega.Eventually(func() error { return dev.Create(ctx, createdBefore.DeepCopy()) }, timeout, interval).Should(gomega.Succeed())
		for _, ns := range []string{other, protected} {
			gomega.Eventually(func() error {
				return dev.Create(ctx, job(ns, "rbac-ready", 30, nil), client.DryRunAll)
			}, timeout, interval).Should(gomega.Succeed())
		}

		objs := renderFlags([]string{"--api-versions", vapAPI},
			"tenantPolicies.gracePeriod.enabled=true",
			"tenantPolicies.priorityClasses.enabled=true",
			"tenantPolicies.priorityClasses.reserved[0].className="+class,
			"tenantPolicies.priorityClasses.reserved[0].namespaceLabels.team-tier=protected")
		apply := func(o *unstructured.Unstructured) {
			gomega.Expect(k.client.Apply(ctx, client.ApplyConfigurationFromUnstructured(o.DeepCopy()),
				client.FieldOwner("chart-test"), client.ForceOwnership)).To(gomega.Succeed(), "%s %s", o.GetKind(), o.GetName())
		}
		apply(find(objs, "CustomResourceDefinition", "workloads.kueue.x-k8s.io"))
		gomega.Eventually(func(g gomega.Gomega) {
			var crd apiextensionsv1.CustomResourceDefinition
			g.Expect(k.client.Get(ctx, client.ObjectKey{Name: "workloads.kueue.x-k8s.io"}, &crd)).To(gomega.Succeed())
			g.Expect(slices.ContainsFunc(crd.Status.Conditions, func(c apiextensionsv1.CustomResourceDefinitionCondition) bool {
				return c.Type == apiextensionsv1.Established && c.Status == apiextensionsv1.ConditionTrue
			})).To(gomega.BeTrue(), "the Workload CRD is established")
		}, timeout, interval).Should(gomega.Succeed())
		for _, name := range []string{gracePol, classPol} {
			apply(find(objs, "ValidatingAdmissionPolicy", name))
			apply(find(objs, "ValidatingAdmissionPolicyBinding", name))
		}
		// The manager's identity and rights, as the chart grants them.
		apply(find(objs, "ServiceAccount", fullname+"-controller-manager"))
		apply(find(objs, "ClusterRole", fullname+"-manager-role"))
		apply(find(objs, "ClusterRoleBinding", fullname+"-manager-rolebinding"))
		// The API server compiles a new policy in the background: wait until both refuse (dry
		// run, so that nothing is stored before then).
		gomega.Eventually(func(g gomega.Gomega) {
			err := dev.Create(ctx, job(other, "warm-up", 30, classLabel), client.DryRunAll)
			g.Expect(err).To(gomega.HaveOccurred())
			err = dev.Create(ctx, job(shared, "warm-up", 86400, nil), client.DryRunAll)
			g.Expect(err).To(gomega.HaveOccurred())
		}, timeout, interval).Should(gomega.Succeed())
	})

	ginkgo.It("refuses a Job or Pod whose grace period is past the bound, in a namespace that shares time-sharing queues, naming the field", func() {
		refusedBy(dev.Create(ctx, job(shared, "day-long", 86400, nil)), gracePol,
			"spec.template.spec.terminationGracePeriodSeconds: Invalid value: 86400: must be at most 300")
		refusedBy(dev.Create(ctx, pod(shared, "day-long", 86400)), gracePol,
			"spec.terminationGracePeriodSeconds: Invalid value: 86400: must be at most 300")
		gomega.Expect(dev.Create(ctx, job(shared, "bounded", 300, nil))).To(gomega.Succeed())
		gomega.Expect(dev.Create(ctx, pod(shared, "bounded", 30))).To(gomega.Succeed())
		ginkgo.By("elsewhere, the bound does not apply")
		gomega.Expect(dev.Create(ctx, job(other, "day-long", 86400, nil))).To(gomega.Succeed())
	})

	ginkgo.It("refuses a WorkloadPriorityClass reserved for other namespaces, on Jobs, Pods and Workloads, to the admin too", func() {
		refusedBy(dev.Create(ctx, job(shared, "reserved", 30, classLabel)), classPol,
			"the WorkloadPriorityClass long-toleration is reserved for namespaces labelled team-tier=protected")
		refusedBy(dev.Create(ctx, job(other, "reserved", 30, classLabel)), classPol, "reserved")
		refusedBy(k.client.Create(ctx, workloadOfClass(shared, "reserved")), classPol, "reserved")
		ginkgo.By("adding the label to a Job that had none")
		plain := job(shared, "plain", 30, nil)
		gomega.Expect(dev.Create(ctx, plain)).To(gomega.Succeed())
		body, err := json.Marshal(map[string]any{"metadata": map[string]any{"labels": classLabel}})
		gomega.Expect(err).NotTo(gomega.HaveOccurred())
		refusedBy(dev.Patch(ctx, plain, client.RawPatch(types.MergePatchType, body)), classPol, "reserved")

		ginkgo.By("in a namespace with the labels, and for the manager's own Workloads, it passes")
		gomega.Expect(dev.Create(ctx, job(protected, "reserved", 30, classLabel))).To(gomega.Succeed())
		gomega.Eventually(func() error { return manager.Create(ctx, workloadOfClass(shared, "for-a-job")) }, timeout, interval).Should(gomega.Succeed())
	})

	ginkgo.It("lets Kueue start a Job created before the policies", func() {
		body, err := json.Marshal(map[string]any{"spec": map[string]any{"suspend": false}})
		gomega.Expect(err).NotTo(gomega.HaveOccurred())
		gomega.Expect(dev.Patch(ctx, createdBefore, client.RawPatch(types.MergePatchType, body))).To(gomega.Succeed())
	})

	ginkgo.It("renders nothing unless asked", func() {
		objs := renderFlags([]string{"--api-versions", vapAPI})
		for _, name := range []string{gracePol, classPol} {
			for _, kind := range []string{"ValidatingAdmissionPolicy", "ValidatingAdmissionPolicyBinding"} {
				for _, o := range ofKind(objs, kind) {
					gomega.Expect(o.GetName()).NotTo(gomega.Equal(name))
				}
			}
		}
		_, err := render("tenantPolicies.priorityClasses.reserved[0].className=x")
		gomega.Expect(err).To(gomega.MatchError(gomega.ContainSubstring("namespaceLabels")))
	})
})
