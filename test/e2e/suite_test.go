// Package e2e_test runs kueue-timeshare against a local cluster with Pods: kube-apiserver,
// kube-controller-manager (the Job controller, the garbage collector), kube-scheduler and
// simulated Nodes whose kubelets are KWOK's (pkg/controlplane). The manager runs out of cluster as
// the Helm chart's ServiceAccount, with Kueue's batch/job and pod integrations. The specs assert
// what a user sees in Pods and Workloads, in real time.
package e2e_test

import (
	"bufio"
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/onsi/ginkgo/v2"
	"github.com/onsi/gomega"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	utilyaml "k8s.io/apimachinery/pkg/util/yaml"
	"k8s.io/client-go/tools/clientcmd"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/log/zap"
	"sigs.k8s.io/yaml"

	"github.com/kueue-timeshare/kueue-timeshare/pkg/controlplane"
	"github.com/kueue-timeshare/kueue-timeshare/pkg/manager"
)

const (
	interval = 250 * time.Millisecond
	// chartNamespace is where the chart's ServiceAccount and RBAC are installed.
	chartNamespace = "kueue-system"
	// podsReadyTimeout is the manager's waitForPodsReady timeout.
	podsReadyTimeout = 30 * time.Second
)

var (
	root    string
	cp      *controlplane.ControlPlane
	k8s     client.Client
	scheme  *runtime.Scheme
	logDir  string
	mgr     *managerProcess
	mgrArgs []string
	// mgrKubeconfig acts as the chart's ServiceAccount.
	mgrKubeconfig string
	// readyzURL is the manager's readiness probe, served at health.
	readyzURL string
	health    string
	// cfgPath is the manager's configuration file.
	cfgPath string
	// visibilityAddress is where the manager serves the visibility API while a spec turns it on
	// (withVisibility); empty: off.
	visibilityAddress string
	// metricsAddress is where the manager serves /metrics while a spec turns it on; "0": off.
	metricsAddress = "0"
	// managerGates are feature gates a spec sets in the manager's configuration.
	managerGates map[string]bool
	failed       bool
)

// defaultManagerExtra is the part of the manager's configuration that the specs choose: both
// integrations, and waitForPodsReady without blocking admission.
var defaultManagerExtra = fmt.Sprintf(`integrations:
  frameworks: ["batch/job", "pod"]
waitForPodsReady:
  timeout: %s
  blockAdmission: false
`, podsReadyTimeout)

// writeManagerConfig writes the manager's configuration with extra (top-level keys).
func writeManagerConfig(extra string) {
	ginkgo.GinkgoHelper()
	cfg := cp.ManagerConfig(controlplane.ManagerSettings{MetricsAddress: metricsAddress, HealthAddress: health, VisibilityAddress: visibilityAddress,
		FeatureGates: managerGates, Extra: extra})
	gomega.Expect(os.WriteFile(cfgPath, []byte(cfg), 0o600)).To(gomega.Succeed())
}

// freshAddresses moves the manager's health probe and, when it is on, its visibility API to
// new ports and rewrites its configuration with extra: while a killed manager is down, another
// process may take the ports it listened on.
func freshAddresses(extra string) {
	ginkgo.GinkgoHelper()
	var err error
	health, err = controlplane.FreeLoopbackAddress()
	gomega.Expect(err).NotTo(gomega.HaveOccurred())
	readyzURL = "http://" + health + "/readyz"
	if visibilityAddress != "" {
		visibilityAddress, err = controlplane.FreeLoopbackAddress()
		gomega.Expect(err).NotTo(gomega.HaveOccurred())
	}
	writeManagerConfig(extra)
}

// reconfigureManager restarts the manager with extra as its configuration's chosen part.
func reconfigureManager(extra string) {
	ginkgo.GinkgoHelper()
	mgr.stop()
	writeManagerConfig(extra)
	mgr = startManager(readyzURL)
}

func TestE2E(t *testing.T) {
	gomega.RegisterFailHandler(ginkgo.Fail)
	ginkgo.RunSpecs(t, "End-to-end suite on a local cluster with Pods")
}

var _ = ginkgo.BeforeSuite(func() {
	ctrl.SetLogger(zap.New(zap.WriteTo(ginkgo.GinkgoWriter), zap.UseDevMode(true)))
	var err error
	root, err = controlplane.FindRoot()
	gomega.Expect(err).NotTo(gomega.HaveOccurred())
	bin := filepath.Join(root, controlplane.BinDir)
	for name, advice := range map[string]string{
		"helm": "run `make tools`", "kube-controller-manager": "run `make cluster`",
		"kube-scheduler": "run `make cluster`", "kwok": "run `make cluster`",
		"etcd": "run `make envtest`", "kube-apiserver": "run `make envtest`",
	} {
		_, err := os.Stat(filepath.Join(bin, name))
		gomega.Expect(err).NotTo(gomega.HaveOccurred(), "bin/%s is missing: %s", name, advice)
	}
	logDir, err = os.MkdirTemp("", "kueue-timeshare-e2e-")
	gomega.Expect(err).NotTo(gomega.HaveOccurred())
	scheme, err = manager.NewScheme()
	gomega.Expect(err).NotTo(gomega.HaveOccurred())

	ginkgo.By("building the manager")
	managerBin := filepath.Join(logDir, "kueue-timeshare")
	build := exec.Command("go", "build", "-o", managerBin, "./cmd/kueue-timeshare")
	build.Dir = root
	out, err := build.CombinedOutput()
	gomega.Expect(err).NotTo(gomega.HaveOccurred(), "go build ./cmd/kueue-timeshare: %s", out)

	ginkgo.By("starting the local cluster with Pods")
	start := time.Now()
	cp, err = controlplane.StartWith(root, controlplane.Options{Pods: &controlplane.PodsOptions{
		Nodes: controlplane.DefaultNodes(), LogDir: logDir,
	}})
	gomega.Expect(err).NotTo(gomega.HaveOccurred())
	ginkgo.AddReportEntry("cluster start", time.Since(start).Round(time.Millisecond).String())
	k8s, err = client.New(cp.Config, client.Options{Scheme: scheme})
	gomega.Expect(err).NotTo(gomega.HaveOccurred())

	ginkgo.By("installing the chart's ServiceAccount and RBAC")
	sa := installChartRBAC(context.Background())

	health, err = controlplane.FreeLoopbackAddress()
	gomega.Expect(err).NotTo(gomega.HaveOccurred())
	cfgPath = filepath.Join(logDir, "config.yaml")
	writeManagerConfig(defaultManagerExtra)
	mgrKubeconfig = serviceAccountKubeconfig(chartNamespace, sa)
	mgrArgs = []string{managerBin, "--config=" + cfgPath, "--kubeconfig=" + mgrKubeconfig,
		"--zap-log-level=2", "--metrics-insecure", "--visibility-cert-dir=" + cp.ServingCertDir()}
	readyzURL = "http://" + health + "/readyz"
	mgr = startManager(readyzURL)
})

var _ = ginkgo.ReportAfterEach(func(r ginkgo.SpecReport) {
	if r.Failed() {
		failed = true
	}
})

var _ = ginkgo.AfterSuite(func() {
	if mgr != nil {
		mgr.stop()
	}
	if cp != nil {
		gomega.Expect(cp.Stop()).To(gomega.Succeed())
	}
	if logDir == "" {
		return
	}
	if os.Getenv("E2E_KEEP_LOGS") != "" {
		ginkgo.GinkgoWriter.Printf("logs kept in %s (E2E_KEEP_LOGS)\n", logDir)
		return
	}
	if failed {
		// The processes' logs say what the cluster did; keep them and show their ends.
		for _, name := range []string{"manager", "kube-controller-manager", "kube-scheduler", "kwok"} {
			path := filepath.Join(logDir, name+".log")
			ginkgo.GinkgoWriter.Printf("\n=== last lines of %s\n%s\n", path, controlplane.Tail(path, 60))
		}
		ginkgo.GinkgoWriter.Printf("logs kept in %s\n", logDir)
		return
	}
	gomega.Expect(os.RemoveAll(logDir)).To(gomega.Succeed())
})

// installChartRBAC applies the ServiceAccount and RBAC objects `helm template` renders for the
// chart, and returns the name of the ServiceAccount the Deployment runs as.
func installChartRBAC(ctx context.Context) string {
	ginkgo.GinkgoHelper()
	cmd := exec.Command(filepath.Join(root, controlplane.BinDir, "helm"), "template", "kueue-timeshare",
		filepath.Join(root, "charts", "kueue-timeshare"), "--namespace", chartNamespace)
	home := ginkgo.GinkgoT().TempDir()
	cmd.Env = append(os.Environ(), "HELM_CACHE_HOME="+home, "HELM_CONFIG_HOME="+home, "HELM_DATA_HOME="+home)
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	gomega.Expect(err).NotTo(gomega.HaveOccurred(), "helm template: %s", stderr.String())
	gomega.Expect(k8s.Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: chartNamespace}})).To(gomega.Succeed())
	r := utilyaml.NewYAMLReader(bufio.NewReader(bytes.NewReader(out)))
	sa := ""
	applied := 0
	for {
		doc, err := r.Read()
		if errors.Is(err, io.EOF) {
			break
		}
		gomega.Expect(err).NotTo(gomega.HaveOccurred())
		var m map[string]any
		gomega.Expect(yaml.Unmarshal(doc, &m)).To(gomega.Succeed())
		if len(m) == 0 {
			continue
		}
		u := &unstructured.Unstructured{Object: m}
		switch u.GetKind() {
		case "ServiceAccount", "ClusterRole", "ClusterRoleBinding", "Role", "RoleBinding":
			gomega.Expect(k8s.Create(ctx, u)).To(gomega.Succeed(), "%s %s", u.GetKind(), u.GetName())
			applied++
		case "Deployment":
			var d appsv1.Deployment
			gomega.Expect(runtime.DefaultUnstructuredConverter.FromUnstructured(m, &d)).To(gomega.Succeed())
			sa = d.Spec.Template.Spec.ServiceAccountName
		}
	}
	gomega.Expect(sa).NotTo(gomega.BeEmpty(), "the chart's Deployment names a ServiceAccount")
	gomega.Expect(applied).To(gomega.BeNumerically(">", 2))
	return sa
}

// serviceAccountKubeconfig is the admin kubeconfig impersonating the ServiceAccount, so that
// only the chart's RBAC applies to the manager.
func serviceAccountKubeconfig(ns, sa string) string {
	ginkgo.GinkgoHelper()
	admin := filepath.Join(logDir, "admin.kubeconfig")
	gomega.Expect(cp.WriteAdminKubeconfig(admin)).To(gomega.Succeed())
	cfg, err := clientcmd.LoadFromFile(admin)
	gomega.Expect(err).NotTo(gomega.HaveOccurred())
	for _, user := range cfg.AuthInfos {
		user.Impersonate = fmt.Sprintf("system:serviceaccount:%s:%s", ns, sa)
		user.ImpersonateGroups = []string{"system:serviceaccounts", "system:serviceaccounts:" + ns, "system:authenticated"}
	}
	out := filepath.Join(logDir, "manager.kubeconfig")
	gomega.Expect(clientcmd.WriteToFile(*cfg, out)).To(gomega.Succeed())
	return out
}

// managerProcess is the kueue-timeshare binary running out of cluster.
type managerProcess struct {
	cmd  *exec.Cmd
	done chan struct{}
	log  *os.File
}

// startManager runs the manager, its output appended to manager.log, and waits for readiness.
func startManager(readyz string) *managerProcess {
	ginkgo.GinkgoHelper()
	return startProcess(mgrArgs, "manager.log", readyz)
}

// startProcess runs args, its output appended to logName in logDir, and waits until readyz
// answers.
func startProcess(args []string, logName, readyz string) *managerProcess {
	ginkgo.GinkgoHelper()
	f, err := os.OpenFile(filepath.Join(logDir, logName), os.O_CREATE|os.O_APPEND|os.O_WRONLY, 0o644)
	gomega.Expect(err).NotTo(gomega.HaveOccurred())
	cmd := exec.Command(args[0], args[1:]...)
	cmd.Stdout, cmd.Stderr = f, f
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true, Pdeathsig: syscall.SIGKILL}
	gomega.Expect(cmd.Start()).To(gomega.Succeed())
	m := &managerProcess{cmd: cmd, done: make(chan struct{}), log: f}
	go func() {
		_ = cmd.Wait()
		f.Close()
		close(m.done)
	}()
	gomega.Eventually(func(g gomega.Gomega) {
		if m.exited() {
			gomega.StopTrying("the manager exited:\n" + controlplane.Tail(f.Name(), 20)).Now()
		}
		resp, err := http.Get(readyz)
		g.Expect(err).NotTo(gomega.HaveOccurred())
		resp.Body.Close()
		g.Expect(resp.StatusCode).To(gomega.Equal(http.StatusOK))
	}, 2*time.Minute, interval).Should(gomega.Succeed())
	return m
}

func (m *managerProcess) exited() bool {
	select {
	case <-m.done:
		return true
	default:
		return false
	}
}

// stop ends the manager as the kubelet would (SIGTERM).
func (m *managerProcess) stop() {
	if m.exited() {
		return
	}
	_ = m.cmd.Process.Signal(syscall.SIGTERM)
	select {
	case <-m.done:
	case <-time.After(30 * time.Second):
		_ = m.cmd.Process.Kill()
		<-m.done
	}
}

// kill ends the manager at once, as a crash or a lost node would.
func (m *managerProcess) kill() {
	_ = m.cmd.Process.Kill()
	<-m.done
}

// managerLogLines are the manager's log lines holding substr.
func managerLogLines(substr string) []string {
	data, _ := os.ReadFile(filepath.Join(logDir, "manager.log"))
	return slices.DeleteFunc(strings.Split(string(data), "\n"), func(l string) bool { return !strings.Contains(l, substr) })
}
