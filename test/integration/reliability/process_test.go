package reliability_test

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/onsi/ginkgo/v2"
	"github.com/onsi/gomega"
	"k8s.io/client-go/tools/clientcmd"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/kueue-timeshare/kueue-timeshare/pkg/controlplane"
)

// cluster is a local control plane for one spec, with a proxy on the webhook address its
// webhook configurations call, which forwards each connection to a manager process that accepts
// it: several managers can serve webhooks, and one can die, as behind a Service.
type cluster struct {
	cp         *controlplane.ControlPlane
	client     client.Client
	kubeconfig string
	dir        string
	proxy      *webhookProxy
	// verbosity is the managers' log level (3 unless set before they start).
	verbosity int
}

func startCluster() *cluster {
	ginkgo.GinkgoHelper()
	cp, err := controlplane.Start(root)
	gomega.Expect(err).NotTo(gomega.HaveOccurred())
	ginkgo.DeferCleanup(func() { gomega.Expect(cp.Stop()).To(gomega.Succeed()) })
	return startClusterOn(cp, clusterDir())
}

// clusterDir is where a cluster's managers keep their logs and configuration: a temporary
// directory, or one under RELIABILITY_LOG_DIR that outlives the run.
func clusterDir() string {
	ginkgo.GinkgoHelper()
	d := os.Getenv("RELIABILITY_LOG_DIR")
	if d == "" {
		return ginkgo.GinkgoT().TempDir()
	}
	dir, err := os.MkdirTemp(d, "cluster-")
	gomega.Expect(err).NotTo(gomega.HaveOccurred())
	ginkgo.GinkgoWriter.Printf("reliability: manager logs in %s\n", dir)
	return dir
}

// startClusterOn readies a running control plane for manager processes: a kubeconfig, the
// webhook proxy and the managers' namespace, in dir.
func startClusterOn(cp *controlplane.ControlPlane, dir string) *cluster {
	ginkgo.GinkgoHelper()
	k := &cluster{cp: cp, dir: dir, verbosity: 3}
	var err error
	k.client, err = client.New(cp.Config, client.Options{Scheme: scheme})
	gomega.Expect(err).NotTo(gomega.HaveOccurred())
	k.kubeconfig = filepath.Join(k.dir, "kubeconfig")
	gomega.Expect(cp.WriteAdminKubeconfig(k.kubeconfig)).To(gomega.Succeed())
	w := cp.Env.WebhookInstallOptions
	k.proxy, err = startProxy(net.JoinHostPort(w.LocalServingHost, strconv.Itoa(w.LocalServingPort)))
	gomega.Expect(err).NotTo(gomega.HaveOccurred())
	ginkgo.DeferCleanup(k.proxy.close)
	createNamespace(context.Background(), k.client, managerNamespace)
	return k
}

// webhookProxy forwards TCP connections to the first backend that accepts them; TLS stays end to
// end between the API server and the manager.
type webhookProxy struct {
	l        net.Listener
	mu       sync.Mutex
	backends []string
}

func startProxy(addr string) (*webhookProxy, error) {
	l, err := net.Listen("tcp", addr)
	if err != nil {
		return nil, err
	}
	p := &webhookProxy{l: l}
	go p.serve()
	return p, nil
}

func (p *webhookProxy) close() { _ = p.l.Close() }

func (p *webhookProxy) add(addr string) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.backends = append(p.backends, addr)
}

func (p *webhookProxy) remove(addr string) {
	p.mu.Lock()
	defer p.mu.Unlock()
	for i, b := range p.backends {
		if b == addr {
			p.backends = append(p.backends[:i:i], p.backends[i+1:]...)
			return
		}
	}
}

func (p *webhookProxy) serve() {
	for {
		conn, err := p.l.Accept()
		if err != nil {
			return
		}
		go p.forward(conn)
	}
}

func (p *webhookProxy) forward(in net.Conn) {
	defer in.Close()
	p.mu.Lock()
	backends := append([]string(nil), p.backends...)
	p.mu.Unlock()
	for _, b := range backends {
		out, err := net.DialTimeout("tcp", b, time.Second)
		if err != nil {
			continue
		}
		defer out.Close()
		go func() {
			_, _ = io.Copy(out, in)
			_ = out.(*net.TCPConn).CloseWrite()
		}()
		_, _ = io.Copy(in, out)
		return
	}
}

// managerProcess is the kueue-timeshare binary running against a cluster, logging JSON at
// verbosity 3 (admissions and preemptions; cluster.verbosity) into its own file.
type managerProcess struct {
	name    string
	cmd     *exec.Cmd
	logPath string
	health  string
	webhook string
	// metrics is where /metrics is served ("" if it is not); scraped once more before a kill,
	// so that what a spec's last moments counted is seen.
	metrics string
	done    chan struct{}
	k       *cluster
	// startedAt and killedAt bound its life, by the test's clock.
	startedAt, killedAt time.Time
}

// startManager starts a manager process named name (its log file and identification in
// messages); le turns leader election on. It returns once the process runs, not once it is
// ready (see waitReady). Its /metrics is scraped while it runs (see served).
func (k *cluster) startManager(name string, le *controlplane.LeaderElection) *managerProcess {
	ginkgo.GinkgoHelper()
	metrics, err := controlplane.FreeLoopbackAddress()
	gomega.Expect(err).NotTo(gomega.HaveOccurred())
	p := k.startManagerWith(name, le, metrics)
	p.metrics = metrics
	served.watch(metrics, p.done)
	return p
}

// startManagerWith is startManager with /metrics served over plain HTTP at metricsAddress ("0":
// none).
func (k *cluster) startManagerWith(name string, le *controlplane.LeaderElection, metricsAddress string) *managerProcess {
	ginkgo.GinkgoHelper()
	health, err := controlplane.FreeLoopbackAddress()
	gomega.Expect(err).NotTo(gomega.HaveOccurred())
	webhook, err := controlplane.FreeLoopbackAddress()
	gomega.Expect(err).NotTo(gomega.HaveOccurred())
	_, portText, _ := net.SplitHostPort(webhook)
	port, _ := strconv.Atoi(portText)
	cfg := k.cp.ManagerConfig(controlplane.ManagerSettings{
		MetricsAddress: metricsAddress, HealthAddress: health,
		WebhookPort: port, LeaderElection: le,
	})
	cfgPath := filepath.Join(k.dir, name+".yaml")
	gomega.Expect(os.WriteFile(cfgPath, []byte(cfg), 0o600)).To(gomega.Succeed())
	logPath := filepath.Join(k.dir, name+".log")
	logFile, err := os.Create(logPath)
	gomega.Expect(err).NotTo(gomega.HaveOccurred())
	// Development mode without sampling (production logging drops repeated messages), in JSON.
	cmd := exec.Command(managerBinary(), "--config="+cfgPath, "--kubeconfig="+k.kubeconfig,
		"--metrics-insecure", "--zap-devel", "--zap-encoder=json", fmt.Sprintf("--zap-log-level=%d", k.verbosity), "--zap-stacktrace-level=panic")
	cmd.Stdout, cmd.Stderr = logFile, logFile
	gomega.Expect(cmd.Start()).To(gomega.Succeed())
	p := &managerProcess{name: name, cmd: cmd, logPath: logPath, health: health, webhook: webhook, done: make(chan struct{}), k: k, startedAt: time.Now()}
	go func() {
		_ = cmd.Wait()
		logFile.Close()
		close(p.done)
	}()
	k.proxy.add(webhook)
	ginkgo.DeferCleanup(p.kill)
	return p
}

// errPortTaken: a port FreeLoopbackAddress found free was taken before the manager bound it,
// by another listener or any connection's ephemeral port (a hundred restarts meet it).
var errPortTaken = errors.New("a port given to the manager was taken meanwhile")

// startReady starts a manager named name and waits until it is ready; one that could not bind
// a port is killed and started again on other ports, as name-2, then name-3. It returns the ready
// process and every process it started (each may have logged admissions before it exited).
func (k *cluster) startReady(name string, le *controlplane.LeaderElection) (*managerProcess, []*managerProcess) {
	ginkgo.GinkgoHelper()
	var all []*managerProcess
	for attempt := 1; ; attempt++ {
		n := name
		if attempt > 1 {
			n = fmt.Sprintf("%s-%d", name, attempt)
		}
		p := k.startManager(n, le)
		all = append(all, p)
		err := p.ready()
		if err == nil {
			return p, all
		}
		p.kill()
		if !errors.Is(err, errPortTaken) || attempt == 3 {
			ginkgo.Fail(err.Error())
		}
		ginkgo.GinkgoWriter.Printf("reliability: %s: %v; starting it again\n", n, err)
	}
}

// ready polls the manager's readiness probe until it answers OK, the process exits, or it logs
// that it could not bind a port.
func (p *managerProcess) ready() error {
	deadline := time.Now().Add(timeout)
	for {
		if data, _ := os.ReadFile(p.logPath); strings.Contains(string(data), "address already in use") {
			return fmt.Errorf("%s: %w", p.name, errPortTaken)
		}
		if !p.alive() {
			return fmt.Errorf("manager %s exited; the end of its log:\n%s", p.name, p.tail())
		}
		if resp, err := http.Get("http://" + p.health + "/readyz"); err == nil {
			resp.Body.Close()
			if resp.StatusCode == http.StatusOK {
				return nil
			}
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("manager %s not ready after %s; the end of its log:\n%s", p.name, timeout, p.tail())
		}
		<-time.After(interval)
	}
}

// waitReady waits until the manager's readiness probe (webhooks served) answers OK.
func (p *managerProcess) waitReady() {
	ginkgo.GinkgoHelper()
	gomega.Eventually(p.expectReady, timeout, interval).Should(gomega.Succeed())
}

// expectReady fails g unless the manager's readiness probe answers OK, and stops an Eventually
// once the process has exited.
func (p *managerProcess) expectReady(g gomega.Gomega) {
	if !p.alive() {
		gomega.StopTrying(fmt.Sprintf("manager %s exited; the end of its log:\n%s", p.name, p.tail())).Now()
	}
	resp, err := http.Get("http://" + p.health + "/readyz")
	g.Expect(err).NotTo(gomega.HaveOccurred())
	resp.Body.Close()
	g.Expect(resp.StatusCode).To(gomega.Equal(http.StatusOK))
}

// kill ends the process with SIGKILL: no shutdown hook, no lease release, writes in flight cut.
func (p *managerProcess) kill() {
	select {
	case <-p.done:
		return
	default:
	}
	if p.metrics != "" {
		served.scrape(p.metrics)
	}
	p.k.proxy.remove(p.webhook)
	p.killedAt = time.Now()
	_ = p.cmd.Process.Kill()
	<-p.done
}

// alive reports whether the process still runs.
func (p *managerProcess) alive() bool {
	select {
	case <-p.done:
		return false
	default:
		return true
	}
}

func (p *managerProcess) tail() string {
	data, _ := os.ReadFile(p.logPath)
	if len(data) > 4000 {
		data = data[len(data)-4000:]
	}
	return string(data)
}

// logEntry is what the specs read from a manager's JSON log line.
type logEntry struct {
	Msg            string  `json:"msg"`
	Level          string  `json:"level"`
	Error          string  `json:"error"`
	Workload       *objRef `json:"workload"`
	TargetWorkload *objRef `json:"targetWorkload"`
	Reason         string  `json:"reason"`
	// Reflector and Type name a client-go informer's reflector and its kind in its messages.
	Reflector looseString `json:"reflector"`
	Type      looseString `json:"type"`
	// raw is the whole line.
	raw string
}

// looseString is a string field that other messages may use for something else: any other
// value is left empty rather than failing the whole line.
type looseString string

func (s *looseString) UnmarshalJSON(b []byte) error {
	var v string
	if json.Unmarshal(b, &v) == nil {
		*s = looseString(v)
	}
	return nil
}

type objRef struct {
	Name      string `json:"name"`
	Namespace string `json:"namespace"`
}

func (r *objRef) String() string {
	if r == nil {
		return ""
	}
	return r.Namespace + "/" + r.Name
}

// Messages the specs look for. The first two are upstream's, kept by our scheduler and
// preemptor; the lease message is client-go's leader election.
const (
	msgAdmitted      = "Workload successfully admitted and assigned flavors"
	msgPreempted     = "Preempted"
	msgAcquiredLease = "Successfully acquired lease"
)

// entries parses the process's log so far, skipping lines that are not JSON (klog's, if any).
func (p *managerProcess) entries() []logEntry {
	ginkgo.GinkgoHelper()
	f, err := os.Open(p.logPath)
	gomega.Expect(err).NotTo(gomega.HaveOccurred())
	defer f.Close()
	var out []logEntry
	sc := bufio.NewScanner(f)
	sc.Buffer(make([]byte, 1<<20), 16<<20)
	for sc.Scan() {
		var e logEntry
		if json.Unmarshal(sc.Bytes(), &e) != nil {
			// klog's leader election messages are plain text; keep them as messages.
			e = logEntry{Msg: sc.Text()}
		}
		e.raw = sc.Text()
		out = append(out, e)
	}
	gomega.Expect(sc.Err()).NotTo(gomega.HaveOccurred())
	return out
}

// preemptionsLogged counts, per target workload (namespace/name), the evictions the process
// issued.
func preemptionsLogged(procs []*managerProcess) map[string]int {
	ginkgo.GinkgoHelper()
	out := map[string]int{}
	for _, p := range procs {
		for _, e := range p.entries() {
			if e.Msg == msgPreempted && e.TargetWorkload != nil {
				out[e.TargetWorkload.String()]++
			}
		}
	}
	return out
}

// errNoLease is returned by leaseIndex when the process never acquired the lease.
var errNoLease = errors.New("never acquired the lease")

// leaseIndex is the index of the process's first log entry saying it acquired the lease.
func leaseIndex(entries []logEntry) (int, error) {
	for i, e := range entries {
		if e.Msg == msgAcquiredLease {
			return i, nil
		}
	}
	return -1, errNoLease
}

func (p *managerProcess) String() string {
	return fmt.Sprintf("manager %s (pid %d)", p.name, p.cmd.Process.Pid)
}

// expectNoSecrets fails if a manager log holds what must never be logged: bearer tokens,
// passwords, PEM blocks (certificates or keys), or any line of the private key of the
// kubeconfig the managers used.
func (k *cluster) expectNoSecrets(procs []*managerProcess) {
	ginkgo.GinkgoHelper()
	cfg, err := clientcmd.LoadFromFile(k.kubeconfig)
	gomega.Expect(err).NotTo(gomega.HaveOccurred())
	var keyLines []string
	for _, user := range cfg.AuthInfos {
		gomega.Expect(user.ClientKeyData).NotTo(gomega.BeEmpty(), "the admin kubeconfig carries a client key")
		for _, l := range strings.Split(string(user.ClientKeyData), "\n") {
			if len(l) >= 32 && !strings.HasPrefix(l, "-----") {
				keyLines = append(keyLines, l)
			}
		}
	}
	gomega.Expect(keyLines).NotTo(gomega.BeEmpty())
	for _, p := range procs {
		data, err := os.ReadFile(p.logPath)
		gomega.Expect(err).NotTo(gomega.HaveOccurred())
		text := strings.ToLower(string(data))
		for _, word := range []string{"token", "password", "bearer", "-----begin", "private key"} {
			gomega.Expect(text).NotTo(gomega.ContainSubstring(word), "%s logged %q", p.name, word)
		}
		for _, l := range keyLines {
			gomega.Expect(string(data)).NotTo(gomega.ContainSubstring(l), "%s logged a line of its client key", p.name)
		}
	}
}
