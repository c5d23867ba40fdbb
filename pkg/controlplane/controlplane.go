// Package controlplane starts a local Kubernetes control plane (etcd and kube-apiserver on
// loopback, through controller-runtime's envtest) with Kueue's CRDs and webhook configurations
// installed, for `make run` and the tests. Webhooks, and the conversion of Kueue's kinds that
// exist in two versions, point at a manager serving TLS on localhost with a self-signed CA that
// envtest creates, as the chart points them at the manager's Service. With Options.Pods it is a
// small cluster: kube-controller-manager, kube-scheduler and simulated Nodes whose kubelets are
// KWOK's (no container runs; Pods go through their phases as the stages in stages.yaml say).
package controlplane

import (
	"context"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"errors"
	"fmt"
	"maps"
	"math/big"
	"net"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"time"

	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/client-go/rest"
	certutil "k8s.io/client-go/util/cert"
	"sigs.k8s.io/controller-runtime/pkg/envtest"

	kueuev1beta1 "sigs.k8s.io/kueue/apis/kueue/v1beta1"
	kueuev1beta2 "sigs.k8s.io/kueue/apis/kueue/v1beta2"
)

// Paths are where build outputs live, relative to the repository root.
const (
	BinDir        = "bin"
	CRDDir        = "config/_output/crd"
	WebhookDir    = "config/_output/webhook"
	missingAdvice = "run `make envtest manifests` first"
)

// ControlPlane is a running etcd and kube-apiserver with Kueue's API installed.
type ControlPlane struct {
	Env    *envtest.Environment
	Config *rest.Config
	Root   string
	// tmp holds files the API server reads (the front proxy's CA and client certificate), and
	// the other processes' kubeconfig and certificates.
	tmp string
	// children are the processes of the cluster with Pods; logDir their logs.
	children []*child
	logDir   string
}

// Start brings up etcd and kube-apiserver. root is the repository root (see FindRoot).
// StartTimeout bounds the start of etcd and kube-apiserver and the CRDs' serving: envtest's own
// 20 s and 10 s are too short on a busy two-core machine, where the suites run side by side.
const StartTimeout = 2 * time.Minute

func Start(root string) (*ControlPlane, error) {
	return StartWith(root, Options{})
}

// StartEnv starts env, and stops it again if the start failed: a start that failed late (the
// CRDs not served in time) leaves etcd and kube-apiserver running, to load the machine for the
// suites after.
func StartEnv(env *envtest.Environment) (*rest.Config, error) {
	cfg, err := env.Start()
	if err != nil {
		_ = env.Stop()
	}
	return cfg, err
}

// StartWith brings up the control plane with the parts o asks for.
func StartWith(root string, o Options) (*ControlPlane, error) {
	if o.Pods != nil {
		if err := o.Pods.Nodes.Validate(); err != nil {
			return nil, err
		}
	}
	bin := filepath.Join(root, BinDir)
	for _, name := range []string{"etcd", "kube-apiserver"} {
		if _, err := os.Stat(filepath.Join(bin, name)); err != nil {
			return nil, fmt.Errorf("envtest binary %s not found in %s: %s", name, bin, missingAdvice)
		}
	}
	for _, dir := range []string{CRDDir, WebhookDir} {
		if _, err := os.Stat(filepath.Join(root, dir)); err != nil {
			return nil, fmt.Errorf("generated manifests not found in %s: %s", dir, missingAdvice)
		}
	}
	convertible, err := ConvertibleScheme()
	if err != nil {
		return nil, err
	}
	env := &envtest.Environment{
		BinaryAssetsDirectory:    bin,
		CRDDirectoryPaths:        []string{filepath.Join(root, CRDDir)},
		ErrorIfCRDPathMissing:    true,
		ControlPlaneStartTimeout: StartTimeout,
		// envtest points the CRDs of the scheme's convertible kinds at /convert of the local
		// webhook server, as the chart points them at the manager's Service: every version but
		// the stored one is served through the manager's conversion webhook.
		CRDInstallOptions: envtest.CRDInstallOptions{Scheme: convertible, MaxTime: StartTimeout},
		WebhookInstallOptions: envtest.WebhookInstallOptions{
			Paths:            []string{filepath.Join(root, WebhookDir)},
			LocalServingHost: "127.0.0.1",
		},
	}
	api := env.ControlPlane.GetAPIServer().Configure()
	if o.Pods == nil {
		// Since Kubernetes 1.36 a suspended Job's scheduling directives may only change once the
		// Job controller has set its JobSuspended condition. Without kube-controller-manager keep
		// the older rule (suspended and never started), which is what Kueue relies on when it
		// admits a Job. With it, the API server keeps its defaults, as a cluster has them.
		api.Append("feature-gates", "MutableSchedulingDirectivesForSuspendedJobs=false")
	} else {
		// New Nodes would get the not-ready taint, and nothing removes it with node lifecycle off.
		api.Append("disable-admission-plugins", "TaintNodesByCondition")
	}
	tmp, err := os.MkdirTemp("", "kueue-timeshare-controlplane-")
	if err != nil {
		return nil, err
	}
	if err := ConfigureFrontProxy(env, tmp); err != nil {
		_ = os.RemoveAll(tmp)
		return nil, err
	}
	cfg, err := StartEnv(env)
	if err != nil {
		_ = os.RemoveAll(tmp)
		return nil, fmt.Errorf("starting etcd and kube-apiserver: %w", err)
	}
	c := &ControlPlane{Env: env, Config: cfg, Root: root, tmp: tmp}
	if o.Pods != nil {
		if err := c.startPods(context.Background(), o.Pods); err != nil {
			_ = c.Stop()
			return nil, err
		}
	}
	return c, nil
}

// ConvertibleScheme holds every version of Kueue's API kinds: envtest gives conversion through
// the webhook to the kinds with a hub version and convertible others (the five the chart wires).
func ConvertibleScheme() (*runtime.Scheme, error) {
	s := runtime.NewScheme()
	if err := kueuev1beta1.AddToScheme(s); err != nil {
		return nil, err
	}
	if err := kueuev1beta2.AddToScheme(s); err != nil {
		return nil, err
	}
	return s, nil
}

// ConfigureFrontProxy gives kube-apiserver the aggregation layer's settings a cluster has: the
// request-header settings, published with their CA in kube-system's
// extension-apiserver-authentication ConfigMap (which an extension API server such as the
// manager's visibility server reads, and complains about until they are there), and the client
// certificate kube-apiserver presents when it proxies an APIService's requests. dir receives the
// files, which kube-apiserver reads while it runs.
func ConfigureFrontProxy(env *envtest.Environment, dir string) error {
	caKey, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return fmt.Errorf("front proxy CA key: %w", err)
	}
	ca, err := certutil.NewSelfSignedCACert(certutil.Config{CommonName: "front-proxy-ca"}, caKey)
	if err != nil {
		return fmt.Errorf("front proxy CA: %w", err)
	}
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return fmt.Errorf("front proxy client key: %w", err)
	}
	serial, err := rand.Int(rand.Reader, big.NewInt(1<<62))
	if err != nil {
		return err
	}
	now := time.Now()
	tmpl := &x509.Certificate{
		SerialNumber: serial,
		Subject:      pkix.Name{CommonName: frontProxyClient},
		NotBefore:    now.Add(-time.Hour),
		NotAfter:     now.Add(365 * 24 * time.Hour),
		KeyUsage:     x509.KeyUsageDigitalSignature,
		ExtKeyUsage:  []x509.ExtKeyUsage{x509.ExtKeyUsageClientAuth},
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, ca, key.Public(), caKey)
	if err != nil {
		return fmt.Errorf("front proxy client certificate: %w", err)
	}
	keyDER, err := x509.MarshalECPrivateKey(key)
	if err != nil {
		return err
	}
	files := map[string][]byte{
		"front-proxy-ca.crt":     pem.EncodeToMemory(&pem.Block{Type: certutil.CertificateBlockType, Bytes: ca.Raw}),
		"front-proxy-client.crt": pem.EncodeToMemory(&pem.Block{Type: certutil.CertificateBlockType, Bytes: der}),
		"front-proxy-client.key": pem.EncodeToMemory(&pem.Block{Type: "EC PRIVATE KEY", Bytes: keyDER}),
	}
	for name, data := range files {
		if err := os.WriteFile(filepath.Join(dir, name), data, 0o600); err != nil {
			return err
		}
	}
	args := env.ControlPlane.GetAPIServer().Configure()
	args.Set("requestheader-client-ca-file", filepath.Join(dir, "front-proxy-ca.crt"))
	args.Set("requestheader-allowed-names", frontProxyClient)
	args.Set("requestheader-username-headers", "X-Remote-User")
	args.Set("requestheader-group-headers", "X-Remote-Group")
	args.Set("requestheader-extra-headers-prefix", "X-Remote-Extra-")
	args.Set("proxy-client-cert-file", filepath.Join(dir, "front-proxy-client.crt"))
	args.Set("proxy-client-key-file", filepath.Join(dir, "front-proxy-client.key"))
	return nil
}

const frontProxyClient = "front-proxy-client"

// Stop ends every process Start began.
func (c *ControlPlane) Stop() error {
	c.stopPods()
	err := c.Env.Stop()
	if c.tmp != "" {
		_ = os.RemoveAll(c.tmp)
	}
	return err
}

// WriteAdminKubeconfig writes a kubeconfig for a cluster-admin user to path.
func (c *ControlPlane) WriteAdminKubeconfig(path string) error {
	user, err := c.Env.AddUser(envtest.User{Name: "admin", Groups: []string{"system:masters"}}, c.Config)
	if err != nil {
		return fmt.Errorf("creating admin user: %w", err)
	}
	data, err := user.KubeConfig()
	if err != nil {
		return fmt.Errorf("rendering admin kubeconfig: %w", err)
	}
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		return err
	}
	return os.WriteFile(path, data, 0o600)
}

// ManagerSettings are the loopback addresses a manager uses next to this control plane.
type ManagerSettings struct {
	// MetricsAddress is host:port for /metrics, or "0" to turn metrics off.
	MetricsAddress string
	// HealthAddress is host:port for /healthz and /readyz, or "0" to turn them off.
	HealthAddress string
	// FeatureGates are written into the configuration's featureGates map.
	FeatureGates map[string]bool
	// Extra is appended verbatim to the configuration (top-level YAML keys).
	Extra string
	// MetricsExtra is appended verbatim to the metrics section (keys indented by two spaces),
	// for example customLabels.
	MetricsExtra string
	// WebhookPort is where the webhook server listens; 0 means the port the installed webhook
	// configurations call. Another port is for managers behind a proxy on that one.
	WebhookPort int
	// LeaderElection, when set, turns leader election on with these durations; nil leaves it off.
	LeaderElection *LeaderElection
	// VisibilityAddress is host:port for the visibility API server, which serves with the
	// certificate in ServingCertDir; empty turns it off (VisibilityOnDemand=false).
	VisibilityAddress string
}

// LeaderElection is the leaderElection section of a manager's configuration.
type LeaderElection struct {
	// Namespace holds the Lease; it must exist.
	Namespace                                 string
	LeaseDuration, RenewDeadline, RetryPeriod time.Duration
}

// ManagerConfig renders a Kueue Configuration whose webhook server listens where the installed
// webhook configurations call, with the certificates envtest generated.
func (c *ControlPlane) ManagerConfig(s ManagerSettings) string {
	w := c.Env.WebhookInstallOptions
	var b strings.Builder
	fmt.Fprintf(&b, "apiVersion: config.kueue.x-k8s.io/v1beta2\nkind: Configuration\n")
	fmt.Fprintf(&b, "health:\n  healthProbeBindAddress: %q\n", s.HealthAddress)
	fmt.Fprintf(&b, "metrics:\n  bindAddress: %q\n", s.MetricsAddress)
	b.WriteString(s.MetricsExtra)
	port := w.LocalServingPort
	if s.WebhookPort != 0 {
		port = s.WebhookPort
	}
	fmt.Fprintf(&b, "webhook:\n  host: %s\n  port: %d\n  certDir: %s\n", w.LocalServingHost, port, w.LocalServingCertDir)
	// No in-cluster certificate rotation: there is no Service. No leader election unless asked
	// for: usually there is one replica.
	if le := s.LeaderElection; le != nil {
		fmt.Fprintf(&b, "leaderElection:\n  leaderElect: true\n  resourceNamespace: %s\n  leaseDuration: %s\n  renewDeadline: %s\n  retryPeriod: %s\n",
			le.Namespace, le.LeaseDuration, le.RenewDeadline, le.RetryPeriod)
	} else {
		b.WriteString("leaderElection:\n  leaderElect: false\n")
	}
	b.WriteString("internalCertManagement:\n  enable: false\n")
	gates := maps.Clone(s.FeatureGates)
	if s.VisibilityAddress != "" {
		host, port, _ := net.SplitHostPort(s.VisibilityAddress)
		fmt.Fprintf(&b, "visibilityServer:\n  bindAddress: %q\n  bindPort: %s\n", host, port)
	} else if _, set := gates["VisibilityOnDemand"]; !set {
		if gates == nil {
			gates = map[string]bool{}
		}
		gates["VisibilityOnDemand"] = false
	}
	if len(gates) > 0 {
		b.WriteString("featureGates:\n")
		for _, name := range slices.Sorted(maps.Keys(gates)) {
			fmt.Fprintf(&b, "  %s: %t\n", name, gates[name])
		}
	}
	b.WriteString(s.Extra)
	return b.String()
}

// ServingCertDir holds tls.crt and tls.key for 127.0.0.1 and localhost, signed by ServingCA: the
// webhook server's, and the visibility server's when a manager runs one here.
func (c *ControlPlane) ServingCertDir() string {
	return c.Env.WebhookInstallOptions.LocalServingCertDir
}

// ServingCA is the PEM certificate of the CA that signed the certificate in ServingCertDir.
func (c *ControlPlane) ServingCA() []byte {
	return c.Env.WebhookInstallOptions.LocalServingCAData
}

// FindRoot walks up from the working directory to the directory holding go.mod.
func FindRoot() (string, error) {
	dir, err := os.Getwd()
	if err != nil {
		return "", err
	}
	for {
		if _, err := os.Stat(filepath.Join(dir, "go.mod")); err == nil {
			return dir, nil
		}
		parent := filepath.Dir(dir)
		if parent == dir {
			return "", errors.New("go.mod not found above the working directory")
		}
		dir = parent
	}
}

// FreeLoopbackAddress returns 127.0.0.1:port for a port that was free a moment ago.
func FreeLoopbackAddress() (string, error) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return "", err
	}
	defer l.Close()
	return net.JoinHostPort("127.0.0.1", strconv.Itoa(l.Addr().(*net.TCPAddr).Port)), nil
}
