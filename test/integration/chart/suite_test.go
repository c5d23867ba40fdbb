// Package chart_test checks the Helm chart (charts/kueue-timeshare) and the kustomize install
// (config/default): lint and schema, server-side validation of every rendered object, the values
// that reach the manager, RBAC, and installs against a local control plane with the manager
// running out of cluster as the chart's ServiceAccount.
package chart_test

import (
	"bufio"
	"bytes"
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/onsi/ginkgo/v2"
	"github.com/onsi/gomega"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	utilyaml "k8s.io/apimachinery/pkg/util/yaml"
	"k8s.io/client-go/rest"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/envtest"
	"sigs.k8s.io/controller-runtime/pkg/log/zap"
	"sigs.k8s.io/yaml"

	"github.com/kueue-timeshare/kueue-timeshare/pkg/controlplane"
	"github.com/kueue-timeshare/kueue-timeshare/pkg/manager"
)

const (
	timeout  = 60 * time.Second
	interval = 250 * time.Millisecond
	// The release every test installs or renders, unless it says otherwise.
	release   = "kueue-timeshare"
	namespace = "kueue-system"
	fullname  = "kueue-timeshare"
)

var (
	// logs holds what managers started by the specs log.
	logs = &syncBuffer{}
	// scratch holds what the whole run shares (the manager binary).
	scratch  string
	root     string
	chartDir string
	helmBin  string
	scheme   *runtime.Scheme
)

func TestChart(t *testing.T) {
	gomega.RegisterFailHandler(ginkgo.Fail)
	ginkgo.RunSpecs(t, "Helm chart and kustomize install suite")
}

var _ = ginkgo.BeforeSuite(func() {
	ctrl.SetLogger(zap.New(zap.WriteTo(io.MultiWriter(ginkgo.GinkgoWriter, logs)), zap.UseDevMode(true)))
	var err error
	root, err = controlplane.FindRoot()
	gomega.Expect(err).NotTo(gomega.HaveOccurred())
	chartDir = filepath.Join(root, "charts", "kueue-timeshare")
	helmBin = filepath.Join(root, controlplane.BinDir, "helm")
	for path, advice := range map[string]string{
		helmBin: "run `make tools`",
		filepath.Join(chartDir, "generated", "crd"):         "run `make helm-generate`",
		filepath.Join(root, controlplane.BinDir, "kubectl"): "run `make kubectl`",
	} {
		_, err := os.Stat(path)
		gomega.Expect(err).NotTo(gomega.HaveOccurred(), "%s is missing: %s", path, advice)
	}
	scratch, err = os.MkdirTemp("", "kueue-timeshare-chart-test-")
	gomega.Expect(err).NotTo(gomega.HaveOccurred())
	scheme, err = manager.NewScheme()
	gomega.Expect(err).NotTo(gomega.HaveOccurred())
	// The specs read CRDs too; the manager does not need them typed.
	gomega.Expect(apiextensionsv1.AddToScheme(scheme)).To(gomega.Succeed())
})

var _ = ginkgo.AfterSuite(func() {
	if scratch != "" {
		gomega.Expect(os.RemoveAll(scratch)).To(gomega.Succeed())
	}
})

// helmCmd runs bin/helm with its state kept in a temporary home; kubeconfig may be empty.
func helmCmd(kubeconfig string, args ...string) (string, error) {
	home := ginkgo.GinkgoT().TempDir()
	cmd := exec.Command(helmBin, args...)
	cmd.Env = append(os.Environ(),
		"HELM_CACHE_HOME="+filepath.Join(home, "cache"),
		"HELM_CONFIG_HOME="+filepath.Join(home, "config"),
		"HELM_DATA_HOME="+filepath.Join(home, "data"),
		"KUBECONFIG="+kubeconfig,
	)
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	if err := cmd.Run(); err != nil {
		return stdout.String(), fmt.Errorf("helm %s: %w\n%s", strings.Join(args, " "), err, stderr.String())
	}
	return stdout.String(), nil
}

// render runs `helm template` for the test release with the given --set values.
func render(sets ...string) ([]*unstructured.Unstructured, error) {
	args := []string{"template", release, chartDir, "--namespace", namespace}
	for _, s := range sets {
		args = append(args, "--set", s)
	}
	out, err := helmCmd("", args...)
	if err != nil {
		return nil, err
	}
	return decodeAll([]byte(out))
}

// decodeAll splits a multi-document YAML stream into objects, skipping empty documents.
func decodeAll(data []byte) ([]*unstructured.Unstructured, error) {
	r := utilyaml.NewYAMLReader(bufio.NewReader(bytes.NewReader(data)))
	var objs []*unstructured.Unstructured
	for {
		doc, err := r.Read()
		if errors.Is(err, io.EOF) {
			return objs, nil
		}
		if err != nil {
			return nil, err
		}
		var m map[string]any
		if err := yaml.Unmarshal(doc, &m); err != nil {
			return nil, fmt.Errorf("%w in\n%s", err, doc)
		}
		if len(m) == 0 {
			continue
		}
		objs = append(objs, &unstructured.Unstructured{Object: m})
	}
}

// find returns the rendered object of that kind and name, failing the spec if there is none.
func find(objs []*unstructured.Unstructured, kind, name string) *unstructured.Unstructured {
	ginkgo.GinkgoHelper()
	for _, o := range objs {
		if o.GetKind() == kind && o.GetName() == name {
			return o
		}
	}
	ginkgo.Fail(fmt.Sprintf("no %s %q rendered", kind, name))
	return nil
}

func ofKind(objs []*unstructured.Unstructured, kind string) []*unstructured.Unstructured {
	var out []*unstructured.Unstructured
	for _, o := range objs {
		if o.GetKind() == kind {
			out = append(out, o)
		}
	}
	return out
}

// into converts a rendered object into a typed one.
func into[T any](u *unstructured.Unstructured) *T {
	ginkgo.GinkgoHelper()
	var out T
	gomega.Expect(runtime.DefaultUnstructuredConverter.FromUnstructured(u.Object, &out)).To(gomega.Succeed())
	return &out
}

// managerContainer is the manager container of the rendered Deployment.
func managerContainer(objs []*unstructured.Unstructured) (*appsv1.Deployment, corev1.Container) {
	ginkgo.GinkgoHelper()
	d := into[appsv1.Deployment](find(objs, "Deployment", fullname+"-controller-manager"))
	gomega.Expect(d.Spec.Template.Spec.Containers).To(gomega.HaveLen(1))
	return d, d.Spec.Template.Spec.Containers[0]
}

// flagValue is the value of --name=value among args, and whether it is there.
func flagValue(args []string, name string) (string, bool) {
	for _, a := range args {
		if v, ok := strings.CutPrefix(a, "--"+name+"="); ok {
			return v, true
		}
	}
	return "", false
}

// cluster is a bare local control plane (etcd and kube-apiserver, nothing installed) with an
// admin kubeconfig for helm and kubectl. The API server resolves Services to their
// EndpointSlices (--enable-aggregator-routing), so webhooks, conversion and APIServices reach a
// manager running out of cluster through the chart's own Services; it has the aggregation layer's
// front-proxy settings, so that it can proxy the visibility API.
type cluster struct {
	env        *envtest.Environment
	cfg        *rest.Config
	client     client.Client
	kubeconfig string
}

func startCluster() *cluster {
	ginkgo.GinkgoHelper()
	env := &envtest.Environment{BinaryAssetsDirectory: filepath.Join(root, controlplane.BinDir), ControlPlaneStartTimeout: controlplane.StartTimeout}
	api := env.ControlPlane.GetAPIServer().Configure()
	// As in pkg/controlplane: no job controller runs, so keep the pre-1.36 rule Kueue relies on.
	api.Append("feature-gates", "MutableSchedulingDirectivesForSuspendedJobs=false")
	api.Set("enable-aggregator-routing", "true")
	// So that kube-apiserver can proxy the chart's visibility APIService to the manager.
	gomega.Expect(controlplane.ConfigureFrontProxy(env, ginkgo.GinkgoT().TempDir())).To(gomega.Succeed())
	cfg, err := controlplane.StartEnv(env)
	gomega.Expect(err).NotTo(gomega.HaveOccurred(), "starting etcd and kube-apiserver (run `make envtest`)")
	c := &cluster{env: env, cfg: cfg}
	ginkgo.DeferCleanup(func() { gomega.Expect(env.Stop()).To(gomega.Succeed()) })
	c.client, err = client.New(cfg, client.Options{Scheme: scheme})
	gomega.Expect(err).NotTo(gomega.HaveOccurred())
	c.kubeconfig = filepath.Join(ginkgo.GinkgoT().TempDir(), "kubeconfig")
	cp := &controlplane.ControlPlane{Env: env, Config: cfg, Root: root}
	gomega.Expect(cp.WriteAdminKubeconfig(c.kubeconfig)).To(gomega.Succeed())
	return c
}

// helm runs bin/helm against this cluster.
func (c *cluster) helm(args ...string) string {
	ginkgo.GinkgoHelper()
	out, err := helmCmd(c.kubeconfig, args...)
	gomega.Expect(err).NotTo(gomega.HaveOccurred())
	return out
}

// hostIP is an address of this machine the API server can be sent to: EndpointSlices may not
// hold loopback addresses.
func hostIP() string {
	ginkgo.GinkgoHelper()
	addrs, err := net.InterfaceAddrs()
	gomega.Expect(err).NotTo(gomega.HaveOccurred())
	for _, a := range addrs {
		if n, ok := a.(*net.IPNet); ok && n.IP.To4() != nil && n.IP.IsGlobalUnicast() {
			return n.IP.String()
		}
	}
	ginkgo.Fail("this machine has no non-loopback IPv4 address for the webhook EndpointSlice")
	return ""
}

// freePort is a TCP port that was free a moment ago.
func freePort() int {
	ginkgo.GinkgoHelper()
	portsMu.Lock()
	defer portsMu.Unlock()
	// The kernel may hand a port just closed out again: one release's health and visibility
	// servers once got the same one. A port is given out once per suite.
	for {
		l, err := net.Listen("tcp", ":0")
		gomega.Expect(err).NotTo(gomega.HaveOccurred())
		port := l.Addr().(*net.TCPAddr).Port
		gomega.Expect(l.Close()).To(gomega.Succeed())
		if !portsGiven[port] {
			portsGiven[port] = true
			return port
		}
	}
}

var (
	portsMu    sync.Mutex
	portsGiven = map[int]bool{}
)

// syncBuffer collects log output written from many goroutines.
type syncBuffer struct {
	mu  sync.Mutex
	buf bytes.Buffer
}

func (b *syncBuffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.Write(p)
}

func (b *syncBuffer) reset() {
	b.mu.Lock()
	defer b.mu.Unlock()
	b.buf.Reset()
}

func (b *syncBuffer) lines(substr string) []string {
	b.mu.Lock()
	defer b.mu.Unlock()
	var out []string
	for _, l := range strings.Split(b.buf.String(), "\n") {
		if strings.Contains(l, substr) {
			out = append(out, l)
		}
	}
	return out
}
