package chart_test

import (
	"context"
	"fmt"
	"os/exec"
	"path/filepath"
	"strings"

	"github.com/onsi/ginkgo/v2"
	"github.com/onsi/gomega"
	admissionv1 "k8s.io/api/admissionregistration/v1"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	kueue "sigs.k8s.io/kueue/apis/kueue/v1beta2"

	"github.com/kueue-timeshare/kueue-timeshare/test/util"
)

// upstreamManifests renders upstream Kueue v0.19.2's own install (its config/default, what its
// release manifests are built from) from the module this project builds against.
func upstreamManifests() []*unstructured.Unstructured {
	ginkgo.GinkgoHelper()
	out, err := exec.Command("go", "list", "-m", "-f", "{{.Dir}}", "sigs.k8s.io/kueue").Output()
	gomega.Expect(err).NotTo(gomega.HaveOccurred())
	dir := filepath.Join(strings.TrimSpace(string(out)), "config", "default")
	rendered, err := exec.Command(filepath.Join(root, "bin", "kubectl"), "kustomize", dir).Output()
	gomega.Expect(err).NotTo(gomega.HaveOccurred(), "kubectl kustomize %s", dir)
	objs, err := decodeAll(rendered)
	gomega.Expect(err).NotTo(gomega.HaveOccurred())
	return objs
}

// apply is `kubectl apply --server-side --force-conflicts` of objs.
func (k *cluster) apply(ctx context.Context, objs []*unstructured.Unstructured) {
	ginkgo.GinkgoHelper()
	for _, o := range objs {
		err := k.client.Apply(ctx, client.ApplyConfigurationFromUnstructured(o.DeepCopy()), client.FieldOwner("kubectl"), client.ForceOwnership)
		gomega.Expect(err).NotTo(gomega.HaveOccurred(), "%s %s", o.GetKind(), o.GetName())
	}
	for _, o := range objs {
		if o.GetKind() != "CustomResourceDefinition" {
			continue
		}
		gomega.Eventually(func(g gomega.Gomega) {
			var crd apiextensionsv1.CustomResourceDefinition
			g.Expect(k.client.Get(ctx, client.ObjectKey{Name: o.GetName()}, &crd)).To(gomega.Succeed())
			established := false
			for _, c := range crd.Status.Conditions {
				established = established || (c.Type == apiextensionsv1.Established && c.Status == apiextensionsv1.ConditionTrue)
			}
			g.Expect(established).To(gomega.BeTrue())
		}, timeout, interval).Should(gomega.Succeed())
	}
}

func split(objs []*unstructured.Unstructured, keep func(*unstructured.Unstructured) bool) (in, out []*unstructured.Unstructured) {
	for _, o := range objs {
		if keep(o) {
			in = append(in, o)
		} else {
			out = append(out, o)
		}
	}
	return in, out
}

// The steps of docs/migrating-from-kueue.md, in order, each as the client call of its command.
var _ = ginkgo.Describe("Replacing an upstream Kueue v0.19.2 install, and back", ginkgo.Ordered, func() {
	const upstreamNS = "kueue-system"
	var (
		ctx       context.Context
		k         *cluster
		upstream  []*unstructured.Unstructured
		uids      map[string]types.UID
		teamNS    = "team-b"
		queueName = "team-b"
	)
	// kept are the Kueue objects users created under upstream's manager.
	kept := func() []client.Object {
		return []client.Object{
			&kueue.ResourceFlavor{ObjectMeta: metav1.ObjectMeta{Name: "default-flavor"}},
			&kueue.Cohort{ObjectMeta: metav1.ObjectMeta{Name: "org"}},
			&kueue.ClusterQueue{ObjectMeta: metav1.ObjectMeta{Name: queueName}},
			&kueue.LocalQueue{ObjectMeta: metav1.ObjectMeta{Namespace: teamNS, Name: queueName}},
		}
	}
	expectKept := func() {
		ginkgo.GinkgoHelper()
		for _, o := range kept() {
			gomega.Expect(k.client.Get(ctx, client.ObjectKeyFromObject(o), o)).To(gomega.Succeed())
			gomega.Expect(o.GetUID()).To(gomega.Equal(uids[objectID(o)]), "%s was recreated", objectID(o))
		}
		var crds apiextensionsv1.CustomResourceDefinitionList
		gomega.Expect(k.client.List(ctx, &crds)).To(gomega.Succeed())
		gomega.Expect(crds.Items).To(gomega.HaveLen(11))
	}

	ginkgo.BeforeAll(func() {
		ctx = context.Background()
		k = startCluster()
		upstream = upstreamManifests()
		crds, rest := split(upstream, func(o *unstructured.Unstructured) bool {
			return o.GetKind() == "CustomResourceDefinition" || o.GetKind() == "Namespace"
		})
		// Upstream's install, with objects created while its manager ran. (No Pod runs here: the
		// objects come first, before upstream's webhooks, which nothing would answer.)
		k.apply(ctx, crds)
		gomega.Expect(k.client.Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: teamNS}})).To(gomega.Succeed())
		cq := util.CPUClusterQueue(queueName, "2")
		cq.Spec.CohortName = "org"
		objs := []client.Object{
			&kueue.ResourceFlavor{ObjectMeta: metav1.ObjectMeta{Name: "default-flavor"}},
			&kueue.Cohort{ObjectMeta: metav1.ObjectMeta{Name: "org"}},
			cq,
			&kueue.LocalQueue{ObjectMeta: metav1.ObjectMeta{Namespace: teamNS, Name: queueName}, Spec: kueue.LocalQueueSpec{ClusterQueue: kueue.ClusterQueueReference(queueName)}},
		}
		uids = map[string]types.UID{}
		for _, o := range objs {
			gomega.Expect(k.client.Create(ctx, o)).To(gomega.Succeed())
			uids[objectID(o)] = o.GetUID()
		}
		k.apply(ctx, rest)
	})

	ginkgo.It("installs kueue-timeshare over it, keeping CRDs and objects, and admits on the existing queues", func() {
		ginkgo.By("1. scaling upstream's manager down")
		var d appsv1.Deployment
		gomega.Expect(k.client.Get(ctx, client.ObjectKey{Namespace: upstreamNS, Name: "kueue-controller-manager"}, &d)).To(gomega.Succeed())
		patch := client.MergeFrom(d.DeepCopy())
		d.Spec.Replicas = ptr.To[int32](0)
		gomega.Expect(k.client.Patch(ctx, &d, patch)).To(gomega.Succeed())

		ginkgo.By("2. handing the CRDs to the Helm release, and removing upstream's visibility APIServices")
		// Helm would adopt an APIService without changing its spec (it patches objects of kinds
		// it does not know from the rendered manifest alone), so it keeps pointing at upstream's
		// Service: the release creates its own instead.
		for _, o := range upstream {
			if o.GetKind() == "APIService" {
				gomega.Expect(k.client.Delete(ctx, o.DeepCopy())).To(gomega.Succeed())
				continue
			}
			if o.GetKind() != "CustomResourceDefinition" {
				continue
			}
			live := &unstructured.Unstructured{}
			live.SetGroupVersionKind(o.GroupVersionKind())
			gomega.Expect(k.client.Get(ctx, client.ObjectKeyFromObject(o), live)).To(gomega.Succeed())
			patch := client.MergeFrom(live.DeepCopy())
			live.SetLabels(merged(live.GetLabels(), map[string]string{"app.kubernetes.io/managed-by": "Helm"}))
			live.SetAnnotations(merged(live.GetAnnotations(), map[string]string{
				"meta.helm.sh/release-name": release, "meta.helm.sh/release-namespace": upstreamNS,
			}))
			gomega.Expect(k.client.Patch(ctx, live, patch)).To(gomega.Succeed())
		}

		ginkgo.By("3. installing the chart in upstream's namespace")
		k.helm("install", release, chartDir, "--namespace", upstreamNS,
			"--set", fmt.Sprintf("webhook.port=%d", freePort()),
			"--set", fmt.Sprintf("health.port=%d", freePort()),
			"--set", fmt.Sprintf("metrics.port=%d", freePort()),
			"--set", fmt.Sprintf("visibility.port=%d", freePort()))

		ginkgo.By("4. waiting for kueue-timeshare's manager")
		logs.reset()
		m := k.startManager(ctx, upstreamNS, fullname)
		k.expectCAInjected(ctx, fullname)

		ginkgo.By("5. removing upstream's webhook configurations")
		gomega.Expect(k.client.Delete(ctx, &admissionv1.MutatingWebhookConfiguration{ObjectMeta: metav1.ObjectMeta{Name: "kueue-mutating-webhook-configuration"}})).To(gomega.Succeed())
		gomega.Expect(k.client.Delete(ctx, &admissionv1.ValidatingWebhookConfiguration{ObjectMeta: metav1.ObjectMeta{Name: "kueue-validating-webhook-configuration"}})).To(gomega.Succeed())

		ginkgo.By("6. removing the rest of upstream's manager")
		gomega.Expect(k.client.Delete(ctx, &d)).To(gomega.Succeed())
		for _, name := range []string{"kueue-webhook-service", "kueue-visibility-server", "kueue-controller-manager-metrics-service"} {
			gomega.Expect(k.client.Delete(ctx, &corev1.Service{ObjectMeta: metav1.ObjectMeta{Namespace: upstreamNS, Name: name}})).To(gomega.Succeed())
		}

		ginkgo.By("keeping every object and CRD, and serving the CRDs through kueue-timeshare")
		expectKept()
		k.expectPathsServed(ctx, m, fullname)
		var apis unstructured.UnstructuredList
		apis.SetAPIVersion("apiregistration.k8s.io/v1")
		apis.SetKind("APIServiceList")
		gomega.Expect(k.client.List(ctx, &apis)).To(gomega.Succeed())
		for _, a := range apis.Items {
			if strings.HasSuffix(a.GetName(), ".visibility.kueue.x-k8s.io") {
				svc, _, _ := unstructured.NestedString(a.Object, "spec", "service", "name")
				gomega.Expect(svc).To(gomega.Equal(fullname+"-visibility-server"), a.GetName())
			}
		}

		ginkgo.By("admitting a Job on the queues created under upstream's manager")
		job := util.CPUJob(teamNS, "after-migration", queueName, "1")
		gomega.Expect(k.client.Create(ctx, job)).To(gomega.Succeed())
		gomega.Expect(ptr.Deref(job.Spec.Suspend, false)).To(gomega.BeTrue())
		gomega.Eventually(func(g gomega.Gomega) {
			g.Expect(util.Unsuspended(g, ctx, k.client, job)).To(gomega.BeTrue())
		}, timeout, interval).Should(gomega.Succeed())

		ginkgo.By("using kueue-timeshare's fields on the existing ClusterQueue")
		raw := &unstructured.Unstructured{}
		raw.SetGroupVersionKind(kueue.SchemeGroupVersion.WithKind("ClusterQueue"))
		// The manager writes the ClusterQueue's status meanwhile: a conflict is read again.
		gomega.Eventually(func(g gomega.Gomega) {
			g.Expect(k.client.Get(ctx, client.ObjectKey{Name: queueName}, raw)).To(gomega.Succeed())
			g.Expect(unstructured.SetNestedMap(raw.Object, map[string]any{
				"withinClusterQueue":       "LowerOrNewerEqualPriority",
				"withinClusterQueueConfig": map[string]any{"minAdmitDuration": "1h"},
			}, "spec", "preemption")).To(gomega.Succeed())
			g.Expect(k.client.Update(ctx, raw)).To(gomega.Succeed())
		}, timeout, interval).Should(gomega.Succeed())
		gomega.Expect(k.client.Get(ctx, client.ObjectKey{Name: queueName}, raw)).To(gomega.Succeed())
		got, _, _ := unstructured.NestedString(raw.Object, "spec", "preemption", "withinClusterQueueConfig", "minAdmitDuration")
		gomega.Expect(got).To(gomega.Equal("1h"))
		gomega.Expect(logs.lines("forbidden")).To(gomega.BeEmpty())
	})

	ginkgo.It("goes back to upstream's manager, keeping CRDs and objects", func() {
		ginkgo.By("1. scaling kueue-timeshare's manager down (its manager was stopped with the previous step)")
		var d appsv1.Deployment
		gomega.Expect(k.client.Get(ctx, client.ObjectKey{Namespace: upstreamNS, Name: fullname + "-controller-manager"}, &d)).To(gomega.Succeed())
		patch := client.MergeFrom(d.DeepCopy())
		d.Spec.Replicas = ptr.To[int32](0)
		gomega.Expect(k.client.Patch(ctx, &d, patch)).To(gomega.Succeed())

		ginkgo.By("2. applying upstream's manifests again")
		k.apply(ctx, upstream)
		var crd apiextensionsv1.CustomResourceDefinition
		gomega.Expect(k.client.Get(ctx, client.ObjectKey{Name: "workloads.kueue.x-k8s.io"}, &crd)).To(gomega.Succeed())
		gomega.Expect(crd.Spec.Conversion.Webhook.ClientConfig.Service.Name).To(gomega.Equal("kueue-webhook-service"))

		ginkgo.By("3. uninstalling the release, which keeps the CRDs")
		k.helm("uninstall", release, "--namespace", upstreamNS)
		err := k.client.Get(ctx, client.ObjectKeyFromObject(&d), &d)
		gomega.Expect(apierrors.IsNotFound(err)).To(gomega.BeTrue(), "kueue-timeshare's Deployment is gone: %v", err)
		expectKept()

		ginkgo.By("4. applying upstream's manifests once more for the APIServices the uninstall removed")
		k.apply(ctx, upstream)
		for _, o := range upstream {
			live := &unstructured.Unstructured{}
			live.SetGroupVersionKind(o.GroupVersionKind())
			gomega.Expect(k.client.Get(ctx, client.ObjectKeyFromObject(o), live)).To(gomega.Succeed(), "%s %s", o.GetKind(), o.GetName())
		}
		expectKept()

		ginkgo.By("leaving kueue-timeshare's fields to upstream's schema, which prunes them")
		raw := &unstructured.Unstructured{}
		raw.SetGroupVersionKind(kueue.SchemeGroupVersion.WithKind("ClusterQueue"))
		gomega.Expect(k.client.Get(ctx, client.ObjectKey{Name: queueName}, raw)).To(gomega.Succeed())
		_, found, _ := unstructured.NestedMap(raw.Object, "spec", "preemption", "withinClusterQueueConfig")
		gomega.Expect(found).To(gomega.BeFalse())
	})
})

func merged(a, b map[string]string) map[string]string {
	out := map[string]string{}
	for k, v := range a {
		out[k] = v
	}
	for k, v := range b {
		out[k] = v
	}
	return out
}

func objectID(o client.Object) string {
	return fmt.Sprintf("%T %s", o, client.ObjectKeyFromObject(o))
}
