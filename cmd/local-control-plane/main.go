// Command local-control-plane is what `make run` starts: etcd and kube-apiserver on loopback,
// kube-controller-manager, kube-scheduler and simulated Nodes (KWOK) unless --pods=false,
// Kueue's CRDs and webhooks, the kueue-timeshare manager against them, an optional demo, and a
// live view of admitted and pending workloads per ClusterQueue with their Pods. Ctrl-C stops
// everything.
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"maps"
	"net/http"
	"os"
	"os/exec"
	"os/signal"
	"path/filepath"
	"slices"
	"strings"
	"syscall"
	"time"

	"golang.org/x/term"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/kueue-timeshare/kueue-timeshare/pkg/controlplane"
	"github.com/kueue-timeshare/kueue-timeshare/pkg/manager"
)

func main() {
	if err := run(); err != nil {
		fmt.Fprintf(os.Stderr, "local-control-plane: %v\n", err)
		os.Exit(1)
	}
}

type options struct {
	root        string
	demo        string
	metricsAddr string
	healthAddr  string
	visibility  string
	runFor      time.Duration
	refresh     time.Duration
	extraArgs   string
	pods        bool
	nodes       int
	nodeCPU     string
	nodeMemory  string
	nodeGPUs    string
}

func run() error {
	var o options
	flag.StringVar(&o.root, "root", "", "Repository root (default: found from the working directory).")
	flag.StringVar(&o.demo, "demo", "examples/demo", "Directory of manifests applied once the manager is ready, or \"none\".")
	flag.StringVar(&o.metricsAddr, "metrics-address", "127.0.0.1:8080", "Where the manager serves /metrics (plain HTTP).")
	flag.StringVar(&o.healthAddr, "health-address", "127.0.0.1:8081", "Where the manager serves /healthz and /readyz.")
	flag.StringVar(&o.visibility, "visibility-address", "127.0.0.1:8082", "Where the manager serves the visibility API (pending workloads), or \"\" to turn it off.")
	flag.DurationVar(&o.runFor, "run-for", 0, "Stop by itself after this long (0: run until interrupted).")
	flag.DurationVar(&o.refresh, "refresh", 2*time.Second, "How often the live view refreshes.")
	flag.StringVar(&o.extraArgs, "manager-args", "", "Extra flags for the manager, space separated.")
	def := controlplane.DefaultNodes()
	flag.BoolVar(&o.pods, "pods", true, "Run Pods: kube-controller-manager, kube-scheduler and simulated Nodes (KWOK). false: etcd and kube-apiserver only.")
	flag.IntVar(&o.nodes, "nodes", def.Count, "How many simulated Nodes (with --pods).")
	flag.StringVar(&o.nodeCPU, "node-cpu", def.CPU.String(), "CPU capacity of each simulated Node.")
	flag.StringVar(&o.nodeMemory, "node-memory", def.Memory.String(), "Memory capacity of each simulated Node.")
	flag.StringVar(&o.nodeGPUs, "node-gpus", def.GPU.String(), "nvidia.com/gpu capacity of each simulated Node (0: none).")
	flag.Parse()

	if o.root == "" {
		root, err := controlplane.FindRoot()
		if err != nil {
			return err
		}
		o.root = root
	}
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	if o.runFor > 0 {
		var cancel context.CancelFunc
		ctx, cancel = context.WithTimeout(ctx, o.runFor)
		defer cancel()
	}

	local := filepath.Join(o.root, ".local")
	if err := os.MkdirAll(local, 0o755); err != nil {
		return err
	}
	var opts controlplane.Options
	what := "etcd and kube-apiserver"
	if o.pods {
		shape, err := controlplane.ParseNodeShape(o.nodes, o.nodeCPU, o.nodeMemory, o.nodeGPUs)
		if err != nil {
			return err
		}
		opts.Pods = &controlplane.PodsOptions{Nodes: shape, LogDir: local}
		what = fmt.Sprintf("etcd, kube-apiserver, kube-controller-manager, kube-scheduler and %d simulated Nodes (KWOK)", shape.Count)
	}
	say("starting %s on loopback...", what)
	cp, err := controlplane.StartWith(o.root, opts)
	if err != nil {
		return err
	}
	defer func() {
		say("stopping %s...", what)
		if err := cp.Stop(); err != nil {
			fmt.Fprintf(os.Stderr, "stopping control plane: %v\n", err)
		}
	}()

	kubeconfig := filepath.Join(local, "kubeconfig")
	if err := cp.WriteAdminKubeconfig(kubeconfig); err != nil {
		return err
	}
	cfgPath := filepath.Join(local, "config.yaml")
	cfg := cp.ManagerConfig(controlplane.ManagerSettings{
		MetricsAddress:    o.metricsAddr,
		HealthAddress:     o.healthAddr,
		VisibilityAddress: o.visibility,
	})
	if err := os.WriteFile(cfgPath, []byte(cfg), 0o644); err != nil {
		return err
	}

	logPath := filepath.Join(local, "manager.log")
	caPath := filepath.Join(local, "serving-ca.crt")
	if err := os.WriteFile(caPath, cp.ServingCA(), 0o644); err != nil {
		return err
	}
	mgr, err := startManager(o, kubeconfig, cfgPath, logPath, cp.ServingCertDir())
	if err != nil {
		return err
	}
	defer mgr.stop()

	say("waiting for the manager to be ready (log: %s)...", rel(o.root, logPath))
	if err := waitReady(ctx, "http://"+o.healthAddr+"/readyz", mgr); err != nil {
		return fmt.Errorf("%w\nlast lines of %s:\n%s", err, logPath, controlplane.Tail(logPath, 20))
	}

	c, err := newClient(cp)
	if err != nil {
		return err
	}
	if o.demo != "none" {
		dir := o.demo
		if !filepath.IsAbs(dir) {
			dir = filepath.Join(o.root, dir)
		}
		n, err := applyDir(ctx, c, dir)
		if err != nil {
			return fmt.Errorf("applying demo from %s: %w", dir, err)
		}
		say("applied %d demo objects from %s", n, rel(o.root, dir))
	}

	banner := fmt.Sprintf(`
kueue-timeshare is running against a local %s.

  export KUBECONFIG=%s
  kubectl get clusterqueues,localqueues,workloads,pods -A   (bin/kubectl after `+"`make kubectl`"+`)
  curl -s http://%s/metrics | grep kueue_                 (manager metrics)
%s  logs: %s

Press Ctrl-C to stop everything.
`, planeSummary(opts), kubeconfig, o.metricsAddr, visibilityHint(o.visibility, caPath, kubeconfig, cfgPath), logSummary(o.root, logPath, cp))
	fmt.Print(banner)

	var estimates estimatesFunc
	if o.visibility != "" {
		if estimates, err = visibilityEstimates(cp, o.visibility); err != nil {
			return err
		}
	}
	err = watch(ctx, c, estimates, o.refresh, term.IsTerminal(int(os.Stdout.Fd())), banner, mgr, cp)
	if errors.Is(err, context.Canceled) || errors.Is(err, context.DeadlineExceeded) {
		return nil
	}
	return err
}

type managerProcess struct {
	cmd  *exec.Cmd
	done chan struct{}
	err  error
}

func startManager(o options, kubeconfig, cfgPath, logPath, certDir string) (*managerProcess, error) {
	bin := filepath.Join(o.root, "bin", "kueue-timeshare")
	if _, err := os.Stat(bin); err != nil {
		return nil, fmt.Errorf("manager binary %s not found: run `make build`", bin)
	}
	logFile, err := os.Create(logPath)
	if err != nil {
		return nil, err
	}
	args := []string{"--kubeconfig", kubeconfig, "--config", cfgPath, "--metrics-insecure", "--zap-log-level=2", "--visibility-cert-dir", certDir}
	args = append(args, strings.Fields(o.extraArgs)...)
	cmd := exec.Command(bin, args...)
	cmd.Stdout, cmd.Stderr = logFile, logFile
	// Own process group: a Ctrl-C in the terminal reaches us, and we stop the manager in order.
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	if err := cmd.Start(); err != nil {
		logFile.Close()
		return nil, fmt.Errorf("starting manager: %w", err)
	}
	p := &managerProcess{cmd: cmd, done: make(chan struct{})}
	go func() {
		p.err = cmd.Wait()
		logFile.Close()
		close(p.done)
	}()
	return p, nil
}

func (p *managerProcess) exited() bool {
	select {
	case <-p.done:
		return true
	default:
		return false
	}
}

func (p *managerProcess) stop() {
	if p.exited() {
		return
	}
	say("stopping the manager...")
	_ = p.cmd.Process.Signal(syscall.SIGTERM)
	select {
	case <-p.done:
	case <-time.After(15 * time.Second):
		_ = p.cmd.Process.Kill()
		<-p.done
	}
}

func waitReady(ctx context.Context, url string, p *managerProcess) error {
	deadline := time.After(3 * time.Minute)
	for {
		if p.exited() {
			return fmt.Errorf("manager exited before becoming ready: %v", p.err)
		}
		resp, err := http.Get(url)
		if err == nil {
			_, _ = io.Copy(io.Discard, resp.Body)
			resp.Body.Close()
			if resp.StatusCode == http.StatusOK {
				return nil
			}
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-deadline:
			return errors.New("manager not ready after 3 minutes")
		case <-time.After(500 * time.Millisecond):
		}
	}
}

func newClient(cp *controlplane.ControlPlane) (client.Client, error) {
	scheme, err := manager.NewScheme()
	if err != nil {
		return nil, err
	}
	return client.New(cp.Config, client.Options{Scheme: scheme})
}

func say(format string, args ...any) {
	fmt.Fprintf(os.Stderr, "==> "+format+"\n", args...)
}

func rel(root, path string) string {
	if r, err := filepath.Rel(root, path); err == nil {
		return r
	}
	return path
}

// planeSummary says what kind of cluster runs, and what it is not.
func planeSummary(o controlplane.Options) string {
	if o.Pods == nil {
		return "control plane without nodes (--pods=false): Pods never start,\nadmission shows as Jobs being unsuspended"
	}
	n := o.Pods.Nodes
	return fmt.Sprintf("cluster of %d simulated Nodes (%s CPUs, %s memory, %s nvidia.com/gpu each):\n"+
		"kube-scheduler places Pods and KWOK's simulated kubelets run them; no container runs.\n"+
		"Annotations on a Pod (or a Job's Pod template): %s (e.g. 20m; none: runs until\n"+
		"deleted), %s (e.g. 60s); a deleted Pod terminates for its grace period",
		n.Count, n.CPU.String(), n.Memory.String(), n.GPU.String(), controlplane.SimulatedRuntimeAnnotation, controlplane.SimulatedReadyAfterAnnotation)
}

func logSummary(root, managerLog string, cp *controlplane.ControlPlane) string {
	files := []string{rel(root, managerLog)}
	for _, name := range slices.Sorted(maps.Keys(cp.LogFiles())) {
		files = append(files, rel(root, cp.LogFiles()[name]))
	}
	return strings.Join(files, ", ")
}

// visibilityHint says how to read the visibility API, which the manager serves itself here: no
// APIService routes it through kube-apiserver, since the control plane has no Service network.
func visibilityHint(addr, caPath, kubeconfig, cfgPath string) string {
	if addr == "" {
		return ""
	}
	return fmt.Sprintf("  kubectl --server https://%s --certificate-authority %s \\\n"+
		"    get --raw /apis/visibility.kueue.x-k8s.io/v1beta2/clusterqueues/<name>/pendingworkloads\n"+
		"                                                        (pending workloads in the order they will be admitted)\n"+
		"  bin/kubectl-timeshare --kubeconfig %s --manager-config %s \\\n"+
		"    --visibility-server https://%s --visibility-certificate-authority %s queues\n"+
		"                                                        (turns, protections and admission estimates)\n",
		addr, caPath, kubeconfig, cfgPath, addr, caPath)
}
