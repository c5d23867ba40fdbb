package chart_test

import (
	"context"
	"fmt"
	"strings"

	"github.com/onsi/ginkgo/v2"
	"github.com/onsi/gomega"
	admissionv1 "k8s.io/api/admissionregistration/v1"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/util/sets"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/kueue-timeshare/kueue-timeshare/pkg/manager"
)

// Kinds whose CRDs (cert-manager's, the Prometheus operator's) a bare API server does not have:
// they are checked structurally instead, against the objects that refer to them.
var structurallyChecked = sets.New("Certificate", "Issuer", "ServiceMonitor")

// dryRunApply sends every object as a server-side apply with dryRun=All, so the API server runs
// its full validation (schemas, CRD structural checks, admission) without storing anything.
func dryRunApply(ctx context.Context, c client.Client, objs []*unstructured.Unstructured) (applied int) {
	ginkgo.GinkgoHelper()
	for _, o := range objs {
		if structurallyChecked.Has(o.GetKind()) {
			continue
		}
		err := c.Apply(ctx, client.ApplyConfigurationFromUnstructured(o.DeepCopy()),
			client.FieldOwner("chart-test"), client.ForceOwnership, client.DryRunAll)
		gomega.Expect(err).NotTo(gomega.HaveOccurred(), "%s %s", o.GetKind(), o.GetName())
		applied++
	}
	return applied
}

var _ = ginkgo.Describe("Rendered objects pass server-side validation", ginkgo.Ordered, func() {
	var (
		ctx context.Context
		k   *cluster
	)
	ginkgo.BeforeAll(func() {
		ctx = context.Background()
		k = startCluster()
		gomega.Expect(k.client.Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: namespace}})).To(gomega.Succeed())
	})

	ginkgo.DescribeTable("every object of the chart, CRDs included",
		func(wantKinds []string, values ...string) {
			objs, err := render(values...)
			gomega.Expect(err).NotTo(gomega.HaveOccurred())
			kinds := sets.New[string]()
			for _, o := range objs {
				kinds.Insert(o.GetKind())
			}
			gomega.Expect(sets.List(kinds)).To(gomega.ConsistOf(wantKinds))
			applied := dryRunApply(ctx, k.client, objs)
			gomega.Expect(applied).To(gomega.BeNumerically(">=", 10))
		},
		ginkgo.Entry("with default values",
			[]string{"APIService", "ClusterRole", "ClusterRoleBinding", "ConfigMap", "CustomResourceDefinition", "Deployment",
				"MutatingWebhookConfiguration", "Role", "RoleBinding", "Secret", "Service", "ServiceAccount", "ValidatingWebhookConfiguration"}),
		ginkgo.Entry("with cert-manager and a ServiceMonitor",
			[]string{"APIService", "Certificate", "ClusterRole", "ClusterRoleBinding", "ConfigMap", "CustomResourceDefinition", "Deployment",
				"Issuer", "MutatingWebhookConfiguration", "Role", "RoleBinding", "Service", "ServiceAccount", "ServiceMonitor", "ValidatingWebhookConfiguration"},
			"certManager.enabled=true", "metrics.serviceMonitor.enabled=true"),
		ginkgo.Entry("without the visibility API or CRDs, with an existing ServiceAccount and two replicas",
			[]string{"ClusterRole", "ClusterRoleBinding", "ConfigMap", "Deployment",
				"MutatingWebhookConfiguration", "Role", "RoleBinding", "Secret", "Service", "ValidatingWebhookConfiguration"},
			"visibility.enabled=false", "crds.install=false", "serviceAccount.create=false", "serviceAccount.name=kueue-sa", "replicas=2"),
		ginkgo.Entry("with production settings: a PDB, spread, update strategy, probe timings, Service settings",
			[]string{"APIService", "ClusterRole", "ClusterRoleBinding", "ConfigMap", "CustomResourceDefinition", "Deployment",
				"MutatingWebhookConfiguration", "PodDisruptionBudget", "Role", "RoleBinding", "Secret", "Service", "ServiceAccount", "ValidatingWebhookConfiguration"},
			"replicas=2", "podDisruptionBudget.enabled=true",
			"topologySpreadConstraints[0].maxSkew=1", "topologySpreadConstraints[0].topologyKey=kubernetes.io/hostname",
			"topologySpreadConstraints[0].whenUnsatisfiable=ScheduleAnyway",
			"strategy.rollingUpdate.maxSurge=0", "strategy.rollingUpdate.maxUnavailable=1",
			"readinessProbe.periodSeconds=3", "livenessProbe.timeoutSeconds=5",
			"webhook.service.type=NodePort", "webhook.service.annotations.team=platform", "webhook.reinvocationPolicy=IfNeeded",
			"metrics.service.type=LoadBalancer", "metrics.service.port=9090"),
	)

	ginkgo.It("applies the CRDs with conversion through the webhook Service, and keeps them on uninstall", func() {
		objs, err := render()
		gomega.Expect(err).NotTo(gomega.HaveOccurred())
		crds := ofKind(objs, "CustomResourceDefinition")
		gomega.Expect(crds).To(gomega.HaveLen(11))
		var converted []string
		for _, o := range crds {
			crd := into[apiextensionsv1.CustomResourceDefinition](o)
			gomega.Expect(crd.Annotations).To(gomega.HaveKeyWithValue("helm.sh/resource-policy", "keep"))
			if crd.Spec.Conversion == nil {
				continue
			}
			converted = append(converted, crd.Name)
			gomega.Expect(crd.Spec.Conversion.Strategy).To(gomega.Equal(apiextensionsv1.WebhookConverter))
			svc := crd.Spec.Conversion.Webhook.ClientConfig.Service
			gomega.Expect(*svc).To(gomega.Equal(apiextensionsv1.ServiceReference{
				Namespace: namespace, Name: fullname + "-webhook-service", Path: new("/convert"), Port: new(int32(443)),
			}))
		}
		// The kinds sigs.k8s.io/kueue converts, and the CRDs its certificate rotator injects a CA into.
		gomega.Expect(converted).To(gomega.ConsistOf("clusterqueues.kueue.x-k8s.io", "cohorts.kueue.x-k8s.io",
			"localqueues.kueue.x-k8s.io", "multikueueclusters.kueue.x-k8s.io", "workloads.kueue.x-k8s.io"))
	})

	ginkgo.It("runs the manager non-root on a read-only root filesystem, with probes, resources and writable scratch space", func() {
		objs, err := render()
		gomega.Expect(err).NotTo(gomega.HaveOccurred())
		d, c := managerContainer(objs)
		pod := d.Spec.Template.Spec
		gomega.Expect(*pod.SecurityContext.RunAsNonRoot).To(gomega.BeTrue())
		gomega.Expect(*c.SecurityContext.ReadOnlyRootFilesystem).To(gomega.BeTrue())
		gomega.Expect(*c.SecurityContext.AllowPrivilegeEscalation).To(gomega.BeFalse())
		gomega.Expect(c.SecurityContext.Capabilities.Drop).To(gomega.Equal([]corev1.Capability{"ALL"}))
		gomega.Expect(c.LivenessProbe.HTTPGet.Path).To(gomega.Equal("/healthz"))
		gomega.Expect(c.ReadinessProbe.HTTPGet.Path).To(gomega.Equal("/readyz"))
		gomega.Expect(c.LivenessProbe.HTTPGet.Port.String()).To(gomega.Equal("health"))
		gomega.Expect(c.Ports).To(gomega.ContainElement(corev1.ContainerPort{Name: "health", ContainerPort: 8081, Protocol: corev1.ProtocolTCP}))
		gomega.Expect(c.Resources.Requests).To(gomega.HaveKey(corev1.ResourceCPU))
		gomega.Expect(c.Resources.Requests).To(gomega.HaveKey(corev1.ResourceMemory))
		// Everything the manager writes (self-managed certificates, the visibility server's
		// certificate) lands on emptyDir volumes.
		mounts := map[string]string{}
		for _, m := range c.VolumeMounts {
			mounts[m.MountPath] = m.Name
		}
		for _, path := range []string{"/tmp", "/visibility"} {
			gomega.Expect(mounts).To(gomega.HaveKey(path))
			gomega.Expect(volume(d, mounts[path]).EmptyDir).NotTo(gomega.BeNil(), path)
		}
		// The Secret the certificate rotator fills is where the webhook server reads its
		// certificate (Kueue's default certDir).
		secret := find(objs, "Secret", fullname+"-webhook-server-cert")
		gomega.Expect(volume(d, mounts["/tmp/k8s-webhook-server/serving-certs"]).Secret.SecretName).To(gomega.Equal(secret.GetName()))
	})

	ginkgo.It("wires cert-manager: Certificates for each Service, mounted where the manager reads them, CA injected everywhere", func() {
		objs, err := render("certManager.enabled=true", "metrics.serviceMonitor.enabled=true")
		gomega.Expect(err).NotTo(gomega.HaveOccurred())
		issuer := find(objs, "Issuer", fullname+"-selfsigned")
		gomega.Expect(issuer.GetNamespace()).To(gomega.Equal(namespace))
		_, found, _ := unstructured.NestedMap(issuer.Object, "spec", "selfSigned")
		gomega.Expect(found).To(gomega.BeTrue())

		d, c := managerContainer(objs)
		mounts := map[string]string{}
		for _, m := range c.VolumeMounts {
			mounts[m.Name] = m.MountPath
		}
		// Certificate name -> where the manager expects the Secret's tls.crt and tls.key.
		wantMounts := map[string]string{
			fullname + "-webhook-cert":    "/tmp/k8s-webhook-server/serving-certs",
			fullname + "-metrics-cert":    manager.DefaultMetricsCertDir,
			fullname + "-visibility-cert": "/visibility",
		}
		services := map[string]string{
			fullname + "-webhook-cert":    fullname + "-webhook-service",
			fullname + "-metrics-cert":    fullname + "-metrics-service",
			fullname + "-visibility-cert": fullname + "-visibility-server",
		}
		gomega.Expect(ofKind(objs, "Certificate")).To(gomega.HaveLen(len(wantMounts)))
		for name, path := range wantMounts {
			cert := find(objs, "Certificate", name)
			secret, _, _ := unstructured.NestedString(cert.Object, "spec", "secretName")
			dnsNames, _, _ := unstructured.NestedStringSlice(cert.Object, "spec", "dnsNames")
			issuerName, _, _ := unstructured.NestedString(cert.Object, "spec", "issuerRef", "name")
			gomega.Expect(issuerName).To(gomega.Equal(issuer.GetName()))
			find(objs, "Service", services[name])
			gomega.Expect(dnsNames).To(gomega.ContainElement(fmt.Sprintf("%s.%s.svc", services[name], namespace)))
			var volumeName string
			for _, v := range d.Spec.Template.Spec.Volumes {
				if v.Secret != nil && v.Secret.SecretName == secret {
					volumeName = v.Name
				}
			}
			gomega.Expect(volumeName).NotTo(gomega.BeEmpty(), "no volume for Secret %s", secret)
			gomega.Expect(mounts[volumeName]).To(gomega.Equal(path), name)
		}

		webhookCA := namespace + "/" + fullname + "-webhook-cert"
		for _, kind := range []string{"MutatingWebhookConfiguration", "ValidatingWebhookConfiguration"} {
			for _, o := range ofKind(objs, kind) {
				gomega.Expect(o.GetAnnotations()).To(gomega.HaveKeyWithValue("cert-manager.io/inject-ca-from", webhookCA))
			}
		}
		for _, o := range ofKind(objs, "CustomResourceDefinition") {
			if _, conv, _ := unstructured.NestedMap(o.Object, "spec", "conversion"); conv {
				gomega.Expect(o.GetAnnotations()).To(gomega.HaveKeyWithValue("cert-manager.io/inject-ca-from", webhookCA), o.GetName())
			}
		}
		for _, o := range ofKind(objs, "APIService") {
			gomega.Expect(o.GetAnnotations()).To(gomega.HaveKeyWithValue("cert-manager.io/inject-ca-from", namespace+"/"+fullname+"-visibility-cert"))
			_, skip, _ := unstructured.NestedBool(o.Object, "spec", "insecureSkipTLSVerify")
			gomega.Expect(skip).To(gomega.BeFalse())
		}
		// No self-managed certificate Secret and no rotation: the configuration says so.
		gomega.Expect(ofKind(objs, "Secret")).To(gomega.BeEmpty())

		// The ServiceMonitor selects the metrics Service and scrapes its HTTPS port with the CA.
		sm := find(objs, "ServiceMonitor", fullname+"-metrics")
		svc := into[corev1.Service](find(objs, "Service", fullname+"-metrics-service"))
		selector, _, _ := unstructured.NestedStringMap(sm.Object, "spec", "selector", "matchLabels")
		for k, v := range selector {
			gomega.Expect(svc.Labels).To(gomega.HaveKeyWithValue(k, v))
		}
		endpoints, _, _ := unstructured.NestedSlice(sm.Object, "spec", "endpoints")
		gomega.Expect(endpoints).To(gomega.HaveLen(1))
		ep := endpoints[0].(map[string]any)
		gomega.Expect(ep).To(gomega.HaveKeyWithValue("port", svc.Spec.Ports[0].Name))
		gomega.Expect(ep).To(gomega.HaveKeyWithValue("scheme", "https"))
		caSecret, _, _ := unstructured.NestedString(ep, "tlsConfig", "ca", "secret", "name")
		gomega.Expect(caSecret).To(gomega.Equal(fullname + "-metrics-server-cert"))
		serverName, _, _ := unstructured.NestedString(ep, "tlsConfig", "serverName")
		gomega.Expect(serverName).To(gomega.Equal(fmt.Sprintf("%s.%s.svc", svc.Name, namespace)))
	})

	ginkgo.It("uses an existing cert-manager issuer when given one", func() {
		objs, err := render("certManager.enabled=true", "certManager.issuerRef.name=corp-ca", "certManager.issuerRef.kind=ClusterIssuer")
		gomega.Expect(err).NotTo(gomega.HaveOccurred())
		gomega.Expect(ofKind(objs, "Issuer")).To(gomega.BeEmpty())
		for _, cert := range ofKind(objs, "Certificate") {
			ref, _, _ := unstructured.NestedStringMap(cert.Object, "spec", "issuerRef")
			gomega.Expect(ref).To(gomega.Equal(map[string]string{"name": "corp-ca", "kind": "ClusterIssuer", "group": "cert-manager.io"}))
		}
	})

	ginkgo.It("puts upstream's webhooks and ours behind the one Service, job webhooks skipping system namespaces", func() {
		objs, err := render()
		gomega.Expect(err).NotTo(gomega.HaveOccurred())
		validating := into[admissionv1.ValidatingWebhookConfiguration](find(objs, "ValidatingWebhookConfiguration", fullname+"-validating-webhook-configuration"))
		mutating := into[admissionv1.MutatingWebhookConfiguration](find(objs, "MutatingWebhookConfiguration", fullname+"-mutating-webhook-configuration"))
		gomega.Expect(ofKind(objs, "ValidatingWebhookConfiguration")).To(gomega.HaveLen(1), "ours must share upstream's configuration to get its CA")
		var paths []string
		check := func(name string, cc admissionv1.WebhookClientConfig, rules []admissionv1.RuleWithOperations, sel *metav1.LabelSelector) {
			gomega.Expect(cc.Service).NotTo(gomega.BeNil(), name)
			gomega.Expect(cc.Service.Name).To(gomega.Equal(fullname+"-webhook-service"), name)
			gomega.Expect(cc.Service.Namespace).To(gomega.Equal(namespace), name)
			paths = append(paths, *cc.Service.Path)
			kueueKind := false
			for _, r := range rules {
				kueueKind = kueueKind || sets.New(r.APIGroups...).Has("kueue.x-k8s.io")
			}
			// Only upstream's job integration webhooks skip system namespaces; Kueue's kinds
			// and our webhooks (cluster-level queue and priority settings) are always checked.
			if kueueKind || strings.HasSuffix(name, ".timeshare.kueue.x-k8s.io") {
				gomega.Expect(sel).To(gomega.BeNil(), name)
				return
			}
			gomega.Expect(sel).NotTo(gomega.BeNil(), name)
			gomega.Expect(sel.MatchExpressions).To(gomega.ConsistOf(metav1.LabelSelectorRequirement{
				Key: "kubernetes.io/metadata.name", Operator: metav1.LabelSelectorOpNotIn, Values: []string{namespace, "kube-system"},
			}), name)
		}
		for _, w := range validating.Webhooks {
			check(w.Name, w.ClientConfig, w.Rules, w.NamespaceSelector)
		}
		for _, w := range mutating.Webhooks {
			check(w.Name, w.ClientConfig, w.Rules, w.NamespaceSelector)
		}
		gomega.Expect(paths).To(gomega.ContainElements(
			"/validate-timeshare-kueue-x-k8s-io-v1beta2-clusterqueue",
			"/validate-kueue-x-k8s-io-v1beta2-clusterqueue",
			"/mutate-batch-v1-job",
		))
		gomega.Expect(strings.Join(paths, " ")).To(gomega.ContainSubstring("/validate-timeshare-"))
	})
})

func volume(d *appsv1.Deployment, name string) corev1.Volume {
	ginkgo.GinkgoHelper()
	for _, v := range d.Spec.Template.Spec.Volumes {
		if v.Name == name {
			return v
		}
	}
	ginkgo.Fail("no volume " + name)
	return corev1.Volume{}
}
