package chart_test

import (
	"context"
	"fmt"
	"net/http"
	"net/url"
	"os"
	"path"
	"path/filepath"
	"strings"
	"sync"
	"time"

	"github.com/onsi/ginkgo/v2"
	"github.com/onsi/gomega"
	admissionv1 "k8s.io/api/admissionregistration/v1"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/rest"
	"k8s.io/utils/ptr"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/webhook"
	"sigs.k8s.io/yaml"

	"github.com/kueue-timeshare/kueue-timeshare/pkg/manager"
)

// runningManager is a kueue-timeshare manager started from an installed release.
type runningManager struct {
	*manager.Manager
	cancel context.CancelFunc
	done   chan error
	once   sync.Once
}

// stop ends the manager and waits for it; the spec that started it does so when it ends.
func (m *runningManager) stop() {
	ginkgo.GinkgoHelper()
	m.once.Do(func() {
		m.cancel()
		gomega.Eventually(m.done, timeout).Should(gomega.Receive())
	})
}

// startManager runs the manager of an installed release out of cluster, as its Deployment runs
// it: with the installed ConfigMap's configuration file and the Deployment's --feature-gates,
// as the release's ServiceAccount (impersonated, so only the chart's RBAC applies), and
// reachable through the release's webhook Service (an EndpointSlice sends it to this machine).
// What cannot be the same out of cluster: the webhook certificate directory is a temporary
// one, and the visibility server, which writes its certificate to /visibility, is off.
func (k *cluster) startManager(ctx context.Context, ns, name string) *runningManager {
	ginkgo.GinkgoHelper()
	var d appsv1.Deployment
	gomega.Expect(k.client.Get(ctx, client.ObjectKey{Namespace: ns, Name: name + "-controller-manager"}, &d)).To(gomega.Succeed())
	pod := d.Spec.Template.Spec
	c := pod.Containers[0]

	// The configuration file, from the ConfigMap volume the --config flag points into.
	cfgPath, ok := flagValue(c.Args, "config")
	gomega.Expect(ok).To(gomega.BeTrue(), "the Deployment passes --config")
	var cmName string
	for _, m := range c.VolumeMounts {
		if m.MountPath == path.Dir(cfgPath) {
			cmName = volume(&d, m.Name).ConfigMap.Name
		}
	}
	gomega.Expect(cmName).NotTo(gomega.BeEmpty(), "no ConfigMap mounted at %s", path.Dir(cfgPath))
	var cm corev1.ConfigMap
	gomega.Expect(k.client.Get(ctx, client.ObjectKey{Namespace: ns, Name: cmName}, &cm)).To(gomega.Succeed())
	var file map[string]any
	gomega.Expect(yaml.Unmarshal([]byte(cm.Data[path.Base(cfgPath)]), &file)).To(gomega.Succeed())
	webhookCfg, _ := file["webhook"].(map[string]any)
	gomega.Expect(webhookCfg).NotTo(gomega.BeNil())
	certDir := ginkgo.GinkgoT().TempDir()
	webhookCfg["certDir"] = certDir
	// In the Pod the webhook certificate Secret is a volume at Kueue's default certificate
	// directory; the kubelet keeps the files in step with the Secret. Do its job here.
	var certSecret string
	for _, m := range c.VolumeMounts {
		if m.MountPath == "/tmp/k8s-webhook-server/serving-certs" {
			certSecret = volume(&d, m.Name).Secret.SecretName
		}
	}
	gomega.Expect(certSecret).NotTo(gomega.BeEmpty(), "no Secret mounted at the webhook certificate directory")
	go projectSecret(ctx, k.client, client.ObjectKey{Namespace: ns, Name: certSecret}, certDir)
	data, err := yaml.Marshal(file)
	gomega.Expect(err).NotTo(gomega.HaveOccurred())
	local := filepath.Join(ginkgo.GinkgoT().TempDir(), "config.yaml")
	gomega.Expect(os.WriteFile(local, data, 0o600)).To(gomega.Succeed())

	gates, _ := flagValue(c.Args, "feature-gates")
	if !strings.Contains(gates, "VisibilityOnDemand=") {
		gates = strings.Trim(gates+",VisibilityOnDemand=false", ",")
	}
	restoreGates(gates)

	// The webhook Service's endpoint: this machine, on the container's webhook port.
	var svc corev1.Service
	gomega.Expect(k.client.Get(ctx, client.ObjectKey{Namespace: ns, Name: name + "-webhook-service"}, &svc)).To(gomega.Succeed())
	gomega.Expect(svc.Spec.Ports).To(gomega.HaveLen(1))
	port := containerPort(c, svc.Spec.Ports[0].TargetPort.String())
	slice := &discoveryv1.EndpointSlice{
		ObjectMeta: metav1.ObjectMeta{
			Namespace: ns, GenerateName: svc.Name + "-",
			Labels: map[string]string{discoveryv1.LabelServiceName: svc.Name},
		},
		AddressType: discoveryv1.AddressTypeIPv4,
		Endpoints:   []discoveryv1.Endpoint{{Addresses: []string{hostIP()}, Conditions: discoveryv1.EndpointConditions{Ready: ptr.To(true)}}},
		Ports:       []discoveryv1.EndpointPort{{Name: ptr.To(svc.Spec.Ports[0].Name), Port: ptr.To(port), Protocol: ptr.To(corev1.ProtocolTCP)}},
	}
	gomega.Expect(k.client.Create(ctx, slice)).To(gomega.Succeed())
	ginkgo.DeferCleanup(func() { _ = k.client.Delete(context.Background(), slice) })

	sa := rest.CopyConfig(k.cfg)
	sa.Impersonate = rest.ImpersonationConfig{
		UserName: fmt.Sprintf("system:serviceaccount:%s:%s", ns, pod.ServiceAccountName),
		Groups:   []string{"system:serviceaccounts", "system:serviceaccounts:" + ns, "system:authenticated"},
	}

	ctrlOpts, cfg, err := manager.LoadConfig(scheme, local, gates)
	gomega.Expect(err).NotTo(gomega.HaveOccurred())
	// The install and migration specs each run a manager in this process.
	ctrlOpts.Controller.SkipNameValidation = ptr.To(true)
	mctx, cancel := context.WithCancel(ctx)
	m, err := manager.New(mctx, sa, ctrlOpts, cfg, manager.Options{Log: ctrl.Log.WithName("setup")})
	if err != nil {
		cancel()
	}
	gomega.Expect(err).NotTo(gomega.HaveOccurred())
	rm := &runningManager{Manager: m, cancel: cancel, done: make(chan error, 1)}
	go func() { rm.done <- m.Start(mctx) }()
	ginkgo.DeferCleanup(rm.stop)
	gomega.Eventually(func() error { return m.GetWebhookServer().StartedChecker()(nil) }, timeout, interval).Should(gomega.Succeed())
	return rm
}

func containerPort(c corev1.Container, name string) int32 {
	ginkgo.GinkgoHelper()
	for _, p := range c.Ports {
		if p.Name == name {
			return p.ContainerPort
		}
	}
	ginkgo.Fail("no container port " + name)
	return 0
}

// expectCAInjected waits until the manager's certificate rotator has written its CA into the
// release's webhook configurations and into the CRDs that convert through its webhook.
func (k *cluster) expectCAInjected(ctx context.Context, name string) {
	ginkgo.GinkgoHelper()
	gomega.Eventually(func(g gomega.Gomega) {
		var v admissionv1.ValidatingWebhookConfiguration
		g.Expect(k.client.Get(ctx, client.ObjectKey{Name: name + "-validating-webhook-configuration"}, &v)).To(gomega.Succeed())
		for _, w := range v.Webhooks {
			g.Expect(w.ClientConfig.CABundle).NotTo(gomega.BeEmpty(), w.Name)
		}
		var m admissionv1.MutatingWebhookConfiguration
		g.Expect(k.client.Get(ctx, client.ObjectKey{Name: name + "-mutating-webhook-configuration"}, &m)).To(gomega.Succeed())
		for _, w := range m.Webhooks {
			g.Expect(w.ClientConfig.CABundle).NotTo(gomega.BeEmpty(), w.Name)
		}
		var crds apiextensionsv1.CustomResourceDefinitionList
		g.Expect(k.client.List(ctx, &crds)).To(gomega.Succeed())
		converted := 0
		for _, crd := range crds.Items {
			if crd.Spec.Conversion == nil || crd.Spec.Conversion.Strategy != apiextensionsv1.WebhookConverter {
				continue
			}
			converted++
			g.Expect(crd.Spec.Conversion.Webhook.ClientConfig.Service.Name).To(gomega.Equal(name+"-webhook-service"), crd.Name)
			g.Expect(crd.Spec.Conversion.Webhook.ClientConfig.CABundle).NotTo(gomega.BeEmpty(), crd.Name)
		}
		g.Expect(converted).To(gomega.Equal(5))
	}, timeout, interval).Should(gomega.Succeed())
}

// expectPathsServed checks that every path the release's webhook configurations and CRDs call
// is registered on the manager's webhook server: a chart entry without a handler would reject
// every request it matches.
func (k *cluster) expectPathsServed(ctx context.Context, m *runningManager, name string) {
	ginkgo.GinkgoHelper()
	paths := []string{}
	var v admissionv1.ValidatingWebhookConfiguration
	gomega.Expect(k.client.Get(ctx, client.ObjectKey{Name: name + "-validating-webhook-configuration"}, &v)).To(gomega.Succeed())
	for _, w := range v.Webhooks {
		paths = append(paths, *w.ClientConfig.Service.Path)
	}
	var mw admissionv1.MutatingWebhookConfiguration
	gomega.Expect(k.client.Get(ctx, client.ObjectKey{Name: name + "-mutating-webhook-configuration"}, &mw)).To(gomega.Succeed())
	for _, w := range mw.Webhooks {
		paths = append(paths, *w.ClientConfig.Service.Path)
	}
	var crds apiextensionsv1.CustomResourceDefinitionList
	gomega.Expect(k.client.List(ctx, &crds)).To(gomega.Succeed())
	for _, crd := range crds.Items {
		if c := crd.Spec.Conversion; c != nil && c.Webhook != nil && c.Webhook.ClientConfig.Service != nil {
			paths = append(paths, *c.Webhook.ClientConfig.Service.Path)
		}
	}
	server, ok := m.GetWebhookServer().(*webhook.DefaultServer)
	gomega.Expect(ok).To(gomega.BeTrue())
	mux := server.WebhookMux()
	gomega.Expect(paths).To(gomega.ContainElements("/convert", "/validate-timeshare-kueue-x-k8s-io-v1beta2-clusterqueue"))
	for _, p := range paths {
		_, pattern := mux.Handler(&http.Request{Method: http.MethodPost, Host: "localhost", URL: mustURL(p)})
		gomega.Expect(pattern).NotTo(gomega.BeEmpty(), "the manager serves no handler for %s", p)
	}
}

func mustURL(p string) *url.URL {
	ginkgo.GinkgoHelper()
	u, err := url.Parse(p)
	gomega.Expect(err).NotTo(gomega.HaveOccurred())
	return u
}

// projectSecret writes the Secret's tls.crt and tls.key into dir once they are there, as the
// kubelet does for a secret volume.
func projectSecret(ctx context.Context, c client.Client, key client.ObjectKey, dir string) {
	defer ginkgo.GinkgoRecover()
	ticker := time.NewTicker(interval)
	defer ticker.Stop()
	for {
		var s corev1.Secret
		if err := c.Get(ctx, key, &s); err == nil && len(s.Data["tls.crt"]) > 0 && len(s.Data["tls.key"]) > 0 {
			for _, name := range []string{"tls.key", "tls.crt"} {
				if err := os.WriteFile(filepath.Join(dir, name), s.Data[name], 0o600); err != nil {
					ginkgo.GinkgoWriter.Printf("writing %s: %v\n", name, err)
				}
			}
			return
		}
		select {
		case <-ctx.Done():
			return
		case <-ticker.C:
		}
	}
}
