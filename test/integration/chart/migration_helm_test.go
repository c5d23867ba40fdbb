package chart_test

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"

	"github.com/onsi/ginkgo/v2"
	"github.com/onsi/gomega"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	kueue "sigs.k8s.io/kueue/apis/kueue/v1beta2"

	"github.com/kueue-timeshare/kueue-timeshare/test/util"
)

// The steps of docs/migrating-from-kueue.md for an install made with upstream's Helm chart:
// the release is upgraded to this chart, and back, with bin/helm against the local API server.
var _ = ginkgo.Describe("Replacing an upstream Kueue v0.19.2 Helm release in place, and back", ginkgo.Ordered, func() {
	const (
		upstreamRelease = "kueue"
		upstreamName    = "kueue"                 // upstream's full name for release kueue
		ourName         = "kueue-kueue-timeshare" // ours for the same release
		teamNS          = "team-c"
		queueName       = "team-c"
	)
	var (
		ctx         context.Context
		k           *cluster
		upstreamDir string
		uids        map[string]types.UID
		m           *runningManager
		// The release's values saved before the upgrade (step 1), for the way back too.
		savedValues string
	)
	kept := func() []client.Object {
		return []client.Object{
			&kueue.ResourceFlavor{ObjectMeta: metav1.ObjectMeta{Name: "default-flavor"}},
			&kueue.Cohort{ObjectMeta: metav1.ObjectMeta{Name: "org"}},
			&kueue.ClusterQueue{ObjectMeta: metav1.ObjectMeta{Name: queueName}},
			&kueue.LocalQueue{ObjectMeta: metav1.ObjectMeta{Namespace: teamNS, Name: queueName}},
			&kueue.Workload{ObjectMeta: metav1.ObjectMeta{Namespace: teamNS, Name: "submitted-before"}},
		}
	}
	expectKept := func() {
		ginkgo.GinkgoHelper()
		for _, o := range kept() {
			gomega.Expect(k.client.Get(ctx, client.ObjectKeyFromObject(o), o)).To(gomega.Succeed(), objectID(o))
			gomega.Expect(o.GetUID()).To(gomega.Equal(uids[objectID(o)]), "%s was recreated", objectID(o))
		}
		var crds apiextensionsv1.CustomResourceDefinitionList
		gomega.Expect(k.client.List(ctx, &crds)).To(gomega.Succeed())
		gomega.Expect(crds.Items).To(gomega.HaveLen(11))
		for _, crd := range crds.Items {
			gomega.Expect(crd.UID).To(gomega.Equal(uids["CRD "+crd.Name]), "CRD %s was recreated", crd.Name)
		}
	}
	conversionService := func(crd string) string {
		ginkgo.GinkgoHelper()
		var c apiextensionsv1.CustomResourceDefinition
		gomega.Expect(k.client.Get(ctx, client.ObjectKey{Name: crd}, &c)).To(gomega.Succeed())
		return c.Spec.Conversion.Webhook.ClientConfig.Service.Name
	}
	exists := func(o client.Object) bool {
		ginkgo.GinkgoHelper()
		err := k.client.Get(ctx, client.ObjectKeyFromObject(o), o)
		if apierrors.IsNotFound(err) {
			return false
		}
		gomega.Expect(err).NotTo(gomega.HaveOccurred())
		return true
	}

	ginkgo.BeforeAll(func() {
		ctx = context.Background()
		k = startCluster()
		upstreamDir = upstreamChartDir()
		savedValues = filepath.Join(ginkgo.GinkgoT().TempDir(), "saved-values.yaml")
		// The admin's values for upstream's chart.
		adminValues := filepath.Join(ginkgo.GinkgoT().TempDir(), "kueue-values.yaml")
		gomega.Expect(os.WriteFile(adminValues, []byte("controllerManager:\n  featureGates:\n    - name: PartialAdmission\n      enabled: true\n"), 0o600)).To(gomega.Succeed())

		// Objects created while upstream's manager ran. No Pod runs here, so they are created
		// before the release's webhooks exist: the CRDs first, as upstream's release renders
		// them and with its ownership, so that `helm install` then adopts them.
		rendered, err := renderWith(upstreamDir, adminValues)
		gomega.Expect(err).NotTo(gomega.HaveOccurred())
		crds := ofKind(rendered, "CustomResourceDefinition")
		gomega.Expect(crds).To(gomega.HaveLen(11))
		for _, c := range crds {
			c.SetAnnotations(merged(c.GetAnnotations(), map[string]string{
				"meta.helm.sh/release-name": upstreamRelease, "meta.helm.sh/release-namespace": namespace,
			}))
		}
		k.apply(ctx, crds)
		gomega.Expect(k.client.Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: teamNS}})).To(gomega.Succeed())
		cq := util.CPUClusterQueue(queueName, "2")
		cq.Spec.CohortName = "org"
		wl := &kueue.Workload{
			ObjectMeta: metav1.ObjectMeta{Namespace: teamNS, Name: "submitted-before"},
			Spec: kueue.WorkloadSpec{
				QueueName: kueue.LocalQueueName(queueName),
				PodSets: []kueue.PodSet{{
					Name:  kueue.DefaultPodSetName,
					Count: 1,
					Template: corev1.PodTemplateSpec{Spec: corev1.PodSpec{
						RestartPolicy: corev1.RestartPolicyNever,
						Containers: []corev1.Container{{
							Name: "c", Image: "busybox",
							Resources: corev1.ResourceRequirements{Requests: corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("1")}},
						}},
					}},
				}},
			},
		}
		uids = map[string]types.UID{}
		for _, o := range []client.Object{
			&kueue.ResourceFlavor{ObjectMeta: metav1.ObjectMeta{Name: "default-flavor"}},
			&kueue.Cohort{ObjectMeta: metav1.ObjectMeta{Name: "org"}},
			cq,
			&kueue.LocalQueue{ObjectMeta: metav1.ObjectMeta{Namespace: teamNS, Name: queueName}, Spec: kueue.LocalQueueSpec{ClusterQueue: kueue.ClusterQueueReference(queueName)}},
			wl,
		} {
			gomega.Expect(k.client.Create(ctx, o)).To(gomega.Succeed())
			uids[objectID(o)] = o.GetUID()
		}
		var live apiextensionsv1.CustomResourceDefinitionList
		gomega.Expect(k.client.List(ctx, &live)).To(gomega.Succeed())
		for _, c := range live.Items {
			uids["CRD "+c.Name] = c.UID
		}

		ginkgo.By("installing upstream's chart as release kueue (no Pod runs, so no --wait)")
		k.helm("install", upstreamRelease, upstreamDir, "--namespace", namespace, "--create-namespace", "-f", adminValues)
		gomega.Expect(exists(&appsv1.Deployment{ObjectMeta: metav1.ObjectMeta{Namespace: namespace, Name: upstreamName + "-controller-manager"}})).To(gomega.BeTrue())
		gomega.Expect(exists(&rbacv1.ClusterRole{ObjectMeta: metav1.ObjectMeta{Name: upstreamName + "-batch-admin-role"}})).To(gomega.BeTrue())
		gomega.Expect(conversionService("workloads.kueue.x-k8s.io")).To(gomega.Equal(upstreamName + "-webhook-service"))
		expectKept()
	})

	ginkgo.It("upgrades the release to kueue-timeshare with the admin's values, deleting only upstream's manager objects", func() {
		ginkgo.By("1. saving the release's values")
		values := k.helm("get", "values", upstreamRelease, "--namespace", namespace, "--output", "yaml")
		gomega.Expect(os.WriteFile(savedValues, []byte(values), 0o600)).To(gomega.Succeed())
		gomega.Expect(values).To(gomega.ContainSubstring("PartialAdmission"))

		ginkgo.By("2. keeping upstream's ClusterRoles for people, which role bindings may name")
		var roles rbacv1.ClusterRoleList
		gomega.Expect(k.client.List(ctx, &roles, client.MatchingLabels{"app.kubernetes.io/instance": upstreamRelease})).To(gomega.Succeed())
		var userRoles []string
		for i := range roles.Items {
			r := &roles.Items[i]
			if !strings.HasSuffix(r.Name, "-batch-admin-role") && !strings.HasSuffix(r.Name, "-batch-user-role") {
				continue
			}
			patch := client.MergeFrom(r.DeepCopy())
			r.Annotations = merged(r.Annotations, map[string]string{"helm.sh/resource-policy": "keep"})
			gomega.Expect(k.client.Patch(ctx, r, patch)).To(gomega.Succeed())
			userRoles = append(userRoles, r.Name)
		}
		gomega.Expect(userRoles).To(gomega.ConsistOf(upstreamName+"-batch-admin-role", upstreamName+"-batch-user-role"))

		ginkgo.By("3. stopping upstream's manager")
		var d appsv1.Deployment
		gomega.Expect(k.client.Get(ctx, client.ObjectKey{Namespace: namespace, Name: upstreamName + "-controller-manager"}, &d)).To(gomega.Succeed())
		patch := client.MergeFrom(d.DeepCopy())
		d.Spec.Replicas = ptr.To[int32](0)
		gomega.Expect(k.client.Patch(ctx, &d, patch)).To(gomega.Succeed())

		ginkgo.By("4. helm upgrade of the release to this chart")
		k.helm("upgrade", upstreamRelease, chartDir, "--namespace", namespace, "-f", savedValues,
			"--set", fmt.Sprintf("webhook.port=%d", freePort()),
			"--set", fmt.Sprintf("health.port=%d", freePort()),
			"--set", fmt.Sprintf("metrics.port=%d", freePort()),
			"--set", fmt.Sprintf("visibility.port=%d", freePort()))

		ginkgo.By("keeping every CRD and object, and removing upstream's manager objects")
		expectKept()
		gomega.Expect(exists(&appsv1.Deployment{ObjectMeta: metav1.ObjectMeta{Namespace: namespace, Name: upstreamName + "-controller-manager"}})).To(gomega.BeFalse())
		gomega.Expect(exists(&corev1.Service{ObjectMeta: metav1.ObjectMeta{Namespace: namespace, Name: upstreamName + "-webhook-service"}})).To(gomega.BeFalse())
		gomega.Expect(exists(&rbacv1.ClusterRole{ObjectMeta: metav1.ObjectMeta{Name: upstreamName + "-job-editor-role"}})).To(gomega.BeFalse())
		for _, name := range userRoles {
			gomega.Expect(exists(&rbacv1.ClusterRole{ObjectMeta: metav1.ObjectMeta{Name: name}})).To(gomega.BeTrue(), "%s kept", name)
		}
		gomega.Expect(conversionService("workloads.kueue.x-k8s.io")).To(gomega.Equal(ourName + "-webhook-service"))
		for _, v := range []string{"v1beta1", "v1beta2"} {
			api := &unstructured.Unstructured{}
			api.SetAPIVersion("apiregistration.k8s.io/v1")
			api.SetKind("APIService")
			gomega.Expect(k.client.Get(ctx, client.ObjectKey{Name: v + ".visibility.kueue.x-k8s.io"}, api)).To(gomega.Succeed())
			svc, _, _ := unstructured.NestedString(api.Object, "spec", "service", "name")
			gomega.Expect(svc).To(gomega.Equal(ourName+"-visibility-server"), v)
		}

		ginkgo.By("5. running kueue-timeshare's manager with the admin's feature gates")
		var ours appsv1.Deployment
		gomega.Expect(k.client.Get(ctx, client.ObjectKey{Namespace: namespace, Name: ourName + "-controller-manager"}, &ours)).To(gomega.Succeed())
		gates, _ := flagValue(ours.Spec.Template.Spec.Containers[0].Args, "feature-gates")
		gomega.Expect(gates).To(gomega.Equal("PartialAdmission=true"))
		logs.reset()
		m = k.startManager(ctx, namespace, ourName)
		k.expectCAInjected(ctx, ourName)
		k.expectPathsServed(ctx, m, ourName)

		ginkgo.By("admitting a Job on the queues created under upstream's manager")
		job := util.CPUJob(teamNS, "after-upgrade", queueName, "1")
		gomega.Expect(k.client.Create(ctx, job)).To(gomega.Succeed())
		gomega.Expect(ptr.Deref(job.Spec.Suspend, false)).To(gomega.BeTrue())
		gomega.Eventually(func(g gomega.Gomega) {
			g.Expect(util.Unsuspended(g, ctx, k.client, job)).To(gomega.BeTrue())
		}, timeout, interval).Should(gomega.Succeed())
		// The Workload submitted under upstream is admitted too (2 CPUs, 1 each).
		gomega.Eventually(func(g gomega.Gomega) {
			var wl kueue.Workload
			g.Expect(k.client.Get(ctx, client.ObjectKey{Namespace: teamNS, Name: "submitted-before"}, &wl)).To(gomega.Succeed())
			g.Expect(wl.Status.Admission).NotTo(gomega.BeNil())
		}, timeout, interval).Should(gomega.Succeed())
		expectKept()
		gomega.Expect(logs.lines("forbidden")).To(gomega.BeEmpty())
	})

	ginkgo.It("upgrades the release back to upstream's chart with the same values, keeping CRDs and objects", func() {
		m.stop()

		ginkgo.By("1. stopping kueue-timeshare's manager")
		var d appsv1.Deployment
		gomega.Expect(k.client.Get(ctx, client.ObjectKey{Namespace: namespace, Name: ourName + "-controller-manager"}, &d)).To(gomega.Succeed())
		patch := client.MergeFrom(d.DeepCopy())
		d.Spec.Replicas = ptr.To[int32](0)
		gomega.Expect(k.client.Patch(ctx, &d, patch)).To(gomega.Succeed())

		ginkgo.By("2. helm upgrade of the release to upstream's chart with the values saved before")
		k.helm("upgrade", upstreamRelease, upstreamDir, "--namespace", namespace, "-f", savedValues)

		expectKept()
		gomega.Expect(exists(&appsv1.Deployment{ObjectMeta: metav1.ObjectMeta{Namespace: namespace, Name: ourName + "-controller-manager"}})).To(gomega.BeFalse())
		gomega.Expect(exists(&appsv1.Deployment{ObjectMeta: metav1.ObjectMeta{Namespace: namespace, Name: upstreamName + "-controller-manager"}})).To(gomega.BeTrue())
		gomega.Expect(exists(&rbacv1.ClusterRole{ObjectMeta: metav1.ObjectMeta{Name: upstreamName + "-job-editor-role"}})).To(gomega.BeTrue())
		gomega.Expect(exists(&rbacv1.ClusterRole{ObjectMeta: metav1.ObjectMeta{Name: ourName + "-job-editor-role"}})).To(gomega.BeFalse())
		gomega.Expect(conversionService("workloads.kueue.x-k8s.io")).To(gomega.Equal(upstreamName + "-webhook-service"))
		var crd apiextensionsv1.CustomResourceDefinition
		gomega.Expect(k.client.Get(ctx, client.ObjectKey{Name: "clusterqueues.kueue.x-k8s.io"}, &crd)).To(gomega.Succeed())
		for _, v := range crd.Spec.Versions {
			gomega.Expect(v.Schema.OpenAPIV3Schema.Properties["spec"].Properties["preemption"].Properties).NotTo(gomega.HaveKey("withinClusterQueueConfig"), "upstream's schema again")
		}
		var wl kueue.Workload
		gomega.Expect(k.client.Get(ctx, client.ObjectKey{Namespace: teamNS, Name: "submitted-before"}, &wl)).To(gomega.Succeed())
		gomega.Expect(wl.Status.Admission).NotTo(gomega.BeNil(), "the admission made by kueue-timeshare stays")
	})
})

// Why docs/migrating-from-kueue.md upgrades upstream's release instead of uninstalling it.
var _ = ginkgo.Describe("helm uninstall of upstream's release", func() {
	ginkgo.It("deletes its CRDs and every Kueue object even when the live CRDs carry the keep policy", func() {
		ctx := context.Background()
		k := startCluster()
		k.helm("install", "kueue", upstreamChartDir(), "--namespace", namespace, "--create-namespace")
		var crds apiextensionsv1.CustomResourceDefinitionList
		gomega.Expect(k.client.List(ctx, &crds)).To(gomega.Succeed())
		gomega.Expect(crds.Items).To(gomega.HaveLen(11))
		for i := range crds.Items {
			c := &crds.Items[i]
			patch := client.MergeFrom(c.DeepCopy())
			c.Annotations = merged(c.Annotations, map[string]string{"helm.sh/resource-policy": "keep"})
			gomega.Expect(k.client.Patch(ctx, c, patch)).To(gomega.Succeed())
		}
		k.helm("uninstall", "kueue", "--namespace", namespace)
		gomega.Eventually(func(g gomega.Gomega) {
			g.Expect(k.client.List(ctx, &crds)).To(gomega.Succeed())
			g.Expect(crds.Items).To(gomega.BeEmpty())
		}, timeout, interval).Should(gomega.Succeed())
	})
})
