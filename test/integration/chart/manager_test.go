package chart_test

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"fmt"
	"io"
	"net/http"
	"os"
	"os/exec"
	"path"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/onsi/ginkgo/v2"
	"github.com/onsi/gomega"
	admissionv1 "k8s.io/api/admissionregistration/v1"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/tools/clientcmd"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/yaml"
)

// runningManager is the kueue-timeshare binary started from an installed release.
type runningManager struct {
	cmd         *exec.Cmd
	done        chan error
	once        sync.Once
	webhookPort int32
	// caBundle and serverName verify the webhook server as the API server does.
	caBundle   []byte
	serverName string
}

// stop ends the manager (SIGTERM, as the kubelet does) and waits for it; the spec that started
// it does so when it ends.
func (m *runningManager) stop() {
	ginkgo.GinkgoHelper()
	m.once.Do(func() {
		gomega.Expect(m.cmd.Process.Signal(syscall.SIGTERM)).To(gomega.Succeed())
		gomega.Eventually(m.done, timeout).Should(gomega.Receive())
	})
}

var (
	buildOnce sync.Once
	binary    string
)

// managerBinary builds cmd/kueue-timeshare once per run. Each manager runs in a process of its
// own: feature gates and controller names are process-wide, and upstream's certificate
// bootstrap registers a controller name that can exist once per process.
func managerBinary() string {
	ginkgo.GinkgoHelper()
	buildOnce.Do(func() {
		out := filepath.Join(scratch, "kueue-timeshare")
		cmd := exec.Command("go", "build", "-o", out, "./cmd/kueue-timeshare")
		cmd.Dir = root
		msg, err := cmd.CombinedOutput()
		gomega.Expect(err).NotTo(gomega.HaveOccurred(), "go build ./cmd/kueue-timeshare: %s", msg)
		binary = out
	})
	gomega.Expect(binary).NotTo(gomega.BeEmpty(), "the manager binary failed to build earlier")
	return binary
}

// startManager runs the manager binary of an installed release out of cluster, as its
// Deployment runs it: with the installed ConfigMap's configuration file and the Deployment's
// arguments, as the release's ServiceAccount (impersonated, so only the chart's RBAC applies),
// reachable through the release's webhook Service (an EndpointSlice sends it to this machine),
// and ready when its readiness probe says so. What cannot be the same out of cluster: the
// webhook certificate directory is a temporary one that the test fills from the Secret, as the
// kubelet would, and the visibility server writes its self-signed certificate to a temporary
// directory instead of /visibility.
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
	dir := ginkgo.GinkgoT().TempDir()
	certDir := filepath.Join(dir, "serving-certs")
	gomega.Expect(os.Mkdir(certDir, 0o700)).To(gomega.Succeed())
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
	pctx, cancelProjection := context.WithCancel(ctx)
	ginkgo.DeferCleanup(cancelProjection)
	go projectSecret(pctx, k.client, client.ObjectKey{Namespace: ns, Name: certSecret}, certDir)
	data, err := yaml.Marshal(file)
	gomega.Expect(err).NotTo(gomega.HaveOccurred())
	local := filepath.Join(dir, "config.yaml")
	gomega.Expect(os.WriteFile(local, data, 0o600)).To(gomega.Succeed())
	health, _ := file["health"].(map[string]any)["healthProbeBindAddress"].(string)
	gomega.Expect(health).To(gomega.HavePrefix(":"))

	visibilityCerts := filepath.Join(dir, "visibility")
	gomega.Expect(os.Mkdir(visibilityCerts, 0o700)).To(gomega.Succeed())
	args := []string{"--config=" + local, "--kubeconfig=" + k.serviceAccountKubeconfig(ns, pod.ServiceAccountName),
		"--visibility-cert-dir=" + visibilityCerts}
	for _, a := range c.Args {
		if !strings.HasPrefix(a, "--config=") && !strings.HasPrefix(a, "--kubeconfig=") {
			args = append(args, a)
		}
	}

	// The webhook Service's endpoint, and the visibility Service's if the release has one: this
	// machine, on the container's port.
	port := k.routeToThisMachine(ctx, ns, name+"-webhook-service", c)
	if hasPort(c, "visibility") {
		k.routeToThisMachine(ctx, ns, name+"-visibility-server", c)
	}

	cmd := exec.Command(managerBinary(), args...)
	cmd.Stdout = io.MultiWriter(ginkgo.GinkgoWriter, logs)
	cmd.Stderr = cmd.Stdout
	gomega.Expect(cmd.Start()).To(gomega.Succeed())
	m := &runningManager{cmd: cmd, done: make(chan error, 1), webhookPort: port, serverName: fmt.Sprintf("%s-webhook-service.%s.svc", name, ns)}
	go func() { m.done <- cmd.Wait() }()
	ginkgo.DeferCleanup(m.stop)

	ginkgo.By("waiting for the manager's readiness probe")
	probe := fmt.Sprintf("http://127.0.0.1%s/readyz", health)
	gomega.Eventually(func(g gomega.Gomega) {
		g.Expect(m.done).NotTo(gomega.Receive(), "the manager exited")
		resp, err := http.Get(probe)
		g.Expect(err).NotTo(gomega.HaveOccurred())
		resp.Body.Close()
		g.Expect(resp.StatusCode).To(gomega.Equal(http.StatusOK))
		// Starting takes minutes on a busy machine: certificates, informers, leader election.
	}, 3*timeout, interval).Should(gomega.Succeed())
	var secret corev1.Secret
	gomega.Expect(k.client.Get(ctx, client.ObjectKey{Namespace: ns, Name: certSecret}, &secret)).To(gomega.Succeed())
	m.caBundle = secret.Data["ca.crt"]
	return m
}

// serviceAccountKubeconfig is the admin kubeconfig impersonating the ServiceAccount.
func (k *cluster) serviceAccountKubeconfig(ns, sa string) string {
	ginkgo.GinkgoHelper()
	cfg, err := clientcmd.LoadFromFile(k.kubeconfig)
	gomega.Expect(err).NotTo(gomega.HaveOccurred())
	for _, user := range cfg.AuthInfos {
		user.Impersonate = fmt.Sprintf("system:serviceaccount:%s:%s", ns, sa)
		user.ImpersonateGroups = []string{"system:serviceaccounts", "system:serviceaccounts:" + ns, "system:authenticated"}
	}
	out := filepath.Join(ginkgo.GinkgoT().TempDir(), "kubeconfig")
	gomega.Expect(clientcmd.WriteToFile(*cfg, out)).To(gomega.Succeed())
	return out
}

// routeToThisMachine gives Service ns/name an EndpointSlice that sends its one port to this
// machine, on the container port the Service targets, and returns that port.
func (k *cluster) routeToThisMachine(ctx context.Context, ns, name string, c corev1.Container) int32 {
	ginkgo.GinkgoHelper()
	var svc corev1.Service
	gomega.Expect(k.client.Get(ctx, client.ObjectKey{Namespace: ns, Name: name}, &svc)).To(gomega.Succeed())
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
	return port
}

func hasPort(c corev1.Container, name string) bool {
	for _, p := range c.Ports {
		if p.Name == name {
			return true
		}
	}
	return false
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
// has a handler on the manager's webhook server (a chart entry without one would reject every
// request it matches), calling it over TLS as the API server does: trusting the CA in the
// release's Secret and expecting a certificate for the webhook Service's name.
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
	gomega.Expect(paths).To(gomega.ContainElements("/convert", "/validate-timeshare-kueue-x-k8s-io-v1beta2-clusterqueue"))

	pool := x509.NewCertPool()
	gomega.Expect(pool.AppendCertsFromPEM(m.caBundle)).To(gomega.BeTrue(), "ca.crt in the webhook Secret")
	hc := &http.Client{Timeout: 10 * time.Second, Transport: &http.Transport{
		TLSClientConfig: &tls.Config{RootCAs: pool, ServerName: m.serverName, MinVersion: tls.VersionTLS12},
	}}
	// The unknown path answers 404; a registered one answers anything else to an empty POST.
	get := func(p string) int {
		resp, err := hc.Post(fmt.Sprintf("https://127.0.0.1:%d%s", m.webhookPort, p), "application/json", strings.NewReader(""))
		gomega.Expect(err).NotTo(gomega.HaveOccurred())
		resp.Body.Close()
		return resp.StatusCode
	}
	gomega.Expect(get("/no-such-webhook")).To(gomega.Equal(http.StatusNotFound))
	for _, p := range paths {
		gomega.Expect(get(p)).NotTo(gomega.Equal(http.StatusNotFound), "the manager serves no handler for %s", p)
	}
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
