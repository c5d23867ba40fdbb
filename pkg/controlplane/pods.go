package controlplane

import (
	"bufio"
	"context"
	"crypto/tls"
	_ "embed"
	"fmt"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"
)

// Annotations the simulated kubelets read on a Pod (or a Job's Pod template).
const (
	// SimulatedRuntimeAnnotation is how long a Pod runs, from its start, before it succeeds (a Go
	// duration, e.g. "20m"). Without it a Pod runs until it is deleted.
	SimulatedRuntimeAnnotation = "kueue-timeshare.io/simulated-runtime"
	// SimulatedReadyAfterAnnotation is how long after its start a Pod becomes Ready (a Go
	// duration). Without it a Pod is Ready as soon as it runs.
	SimulatedReadyAfterAnnotation = "kueue-timeshare.io/simulated-ready-after"
	// SimulatedUnreadyEveryAnnotation makes a running Pod's readiness probe fail for 2 s every
	// so often (a Go duration) from its last Ready transition, for as long as it runs; not with a
	// simulated runtime.
	SimulatedUnreadyEveryAnnotation = "kueue-timeshare.io/simulated-unready-every"
)

// stages are the KWOK stages the simulated kubelets follow.
//
//go:embed stages.yaml
var stages []byte

// Options choose what Start brings up besides etcd and kube-apiserver.
type Options struct {
	// Pods, when set, adds kube-controller-manager, kube-scheduler and simulated Nodes (KWOK), so
	// that Jobs create Pods that are scheduled, run, finish and terminate.
	Pods *PodsOptions
}

// PodsOptions shape the cluster with Pods.
type PodsOptions struct {
	Nodes NodeShape
	// LogDir receives one log file per process (kube-controller-manager.log, ...); empty means a
	// temporary directory removed by Stop.
	LogDir string
}

// NodeShape is how many simulated Nodes there are and what each one has.
type NodeShape struct {
	Count  int
	CPU    resource.Quantity
	Memory resource.Quantity
	GPU    resource.Quantity
}

// GPUResource is the extended resource simulated Nodes offer for GPUs.
const GPUResource corev1.ResourceName = "nvidia.com/gpu"

// DefaultNodes is large enough for every demo and example: four Nodes of 8 CPUs, 32Gi and 8 GPUs.
func DefaultNodes() NodeShape {
	return NodeShape{Count: 4, CPU: resource.MustParse("8"), Memory: resource.MustParse("32Gi"), GPU: resource.MustParse("8")}
}

// Validate names the first field that cannot describe a Node.
func (s NodeShape) Validate() error {
	switch {
	case s.Count < 1:
		return fmt.Errorf("nodes: %d: at least one Node is needed", s.Count)
	case s.CPU.Sign() <= 0:
		return fmt.Errorf("node CPU: %s: must be positive", s.CPU.String())
	case s.Memory.Sign() <= 0:
		return fmt.Errorf("node memory: %s: must be positive", s.Memory.String())
	case s.GPU.Sign() < 0:
		return fmt.Errorf("node GPUs: %s: must not be negative", s.GPU.String())
	}
	return nil
}

// child is one process of the cluster with Pods.
type child struct {
	name string
	log  string
	cmd  *exec.Cmd
	done chan struct{}
	err  error
}

func (c *child) exited() bool {
	select {
	case <-c.done:
		return true
	default:
		return false
	}
}

// stop sends SIGTERM, and SIGKILL if the process is still there after a few seconds.
func (c *child) stop() {
	if c.exited() {
		return
	}
	_ = c.cmd.Process.Signal(syscall.SIGTERM)
	select {
	case <-c.done:
	case <-time.After(5 * time.Second):
		_ = c.cmd.Process.Kill()
		<-c.done
	}
}

// startChild runs bin/name with its output in logDir/name.log. The child has its own process
// group, so that a Ctrl-C in a terminal reaches only us and we stop it in order, and it is killed
// if we die without stopping it.
func startChild(binDir, logDir, name string, env []string, args ...string) (*child, error) {
	bin := filepath.Join(binDir, name)
	if _, err := os.Stat(bin); err != nil {
		return nil, fmt.Errorf("%s not found in %s: run `make cluster` first", name, binDir)
	}
	logPath := filepath.Join(logDir, name+".log")
	f, err := os.Create(logPath)
	if err != nil {
		return nil, err
	}
	cmd := exec.Command(bin, args...)
	cmd.Stdout, cmd.Stderr = f, f
	cmd.Env = append(os.Environ(), env...)
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true, Pdeathsig: syscall.SIGKILL}
	if err := cmd.Start(); err != nil {
		f.Close()
		return nil, fmt.Errorf("starting %s: %w", name, err)
	}
	c := &child{name: name, log: logPath, cmd: cmd, done: make(chan struct{})}
	go func() {
		c.err = cmd.Wait()
		f.Close()
		close(c.done)
	}()
	return c, nil
}

// kubeControllers are kube-controller-manager's controllers minus those that need what this
// cluster lacks: ServiceAccount signing keys, a Pod network, a cloud and real kubelets (node
// lifecycle would mark the simulated Nodes unreachable and evict their Pods).
const kubeControllers = "*,-serviceaccount-token,-nodeipam,-nodelifecycle,-cloud-node-lifecycle,-service-lb-controller,-route"

// startPods starts the processes of the cluster with Pods and creates the Nodes; the control
// plane is up already.
func (c *ControlPlane) startPods(ctx context.Context, o *PodsOptions) error {
	logDir := o.LogDir
	if logDir == "" {
		logDir = filepath.Join(c.tmp, "logs")
	}
	if err := os.MkdirAll(logDir, 0o755); err != nil {
		return err
	}
	c.logDir = logDir
	kubeconfig := filepath.Join(c.tmp, "admin.kubeconfig")
	if err := c.WriteAdminKubeconfig(kubeconfig); err != nil {
		return err
	}
	bin := filepath.Join(c.Root, BinDir)
	common := func(component string) ([]string, string, error) {
		addr, err := FreeLoopbackAddress()
		if err != nil {
			return nil, "", err
		}
		_, port, _ := strings.Cut(addr, ":")
		certDir := filepath.Join(c.tmp, component)
		return []string{
			"--kubeconfig=" + kubeconfig,
			"--authentication-kubeconfig=" + kubeconfig,
			"--authorization-kubeconfig=" + kubeconfig,
			"--leader-elect=false",
			"--bind-address=127.0.0.1",
			"--secure-port=" + port,
			"--cert-dir=" + certDir,
			"--v=2",
		}, addr, nil
	}

	args, schedulerAddr, err := common("kube-scheduler")
	if err != nil {
		return err
	}
	sched, err := startChild(bin, logDir, "kube-scheduler", nil, args...)
	if err != nil {
		return err
	}
	c.children = append(c.children, sched)

	args, _, err = common("kube-controller-manager")
	if err != nil {
		return err
	}
	args = append(args, "--controllers="+kubeControllers, "--use-service-account-credentials=false")
	kcm, err := startChild(bin, logDir, "kube-controller-manager", nil, args...)
	if err != nil {
		return err
	}
	c.children = append(c.children, kcm)

	stagesPath := filepath.Join(c.tmp, "kwok-stages.yaml")
	if err := os.WriteFile(stagesPath, stages, 0o600); err != nil {
		return err
	}
	// KWOK also reads ~/.kwok/kwok.yaml if there is one: give it a home of its own.
	home := filepath.Join(c.tmp, "kwok-home")
	if err := os.MkdirAll(home, 0o700); err != nil {
		return err
	}
	kwok, err := startChild(bin, logDir, "kwok", []string{"HOME=" + home},
		"--kubeconfig="+kubeconfig, "--config="+stagesPath, "--manage-all-nodes=true")
	if err != nil {
		return err
	}
	c.children = append(c.children, kwok)

	cl, err := client.New(c.Config, client.Options{})
	if err != nil {
		return err
	}
	for i := range o.Nodes.Count {
		if err := cl.Create(ctx, simulatedNode(fmt.Sprintf("node-%d", i+1), o.Nodes)); err != nil {
			return fmt.Errorf("creating simulated node: %w", err)
		}
	}
	return c.waitForPods(ctx, cl, "https://"+schedulerAddr+"/healthz", o.Nodes.Count)
}

func simulatedNode(name string, s NodeShape) *corev1.Node {
	capacity := corev1.ResourceList{
		corev1.ResourceCPU:    s.CPU,
		corev1.ResourceMemory: s.Memory,
		corev1.ResourcePods:   resource.MustParse("110"),
	}
	if s.GPU.Sign() > 0 {
		capacity[GPUResource] = s.GPU
	}
	return &corev1.Node{
		ObjectMeta: metav1.ObjectMeta{
			Name: name,
			Labels: map[string]string{
				corev1.LabelHostname:   name,
				corev1.LabelOSStable:   "linux",
				corev1.LabelArchStable: "amd64",
				"type":                 "kwok",
			},
			Annotations: map[string]string{"kwok.x-k8s.io/node": "fake"},
		},
		Status: corev1.NodeStatus{Capacity: capacity, Allocatable: capacity.DeepCopy()},
	}
}

// waitForPods returns once every part of the cluster with Pods works: the Nodes are Ready
// (KWOK), the default ServiceAccount exists (kube-controller-manager) and kube-scheduler answers
// its health check.
func (c *ControlPlane) waitForPods(ctx context.Context, cl client.Client, schedulerHealth string, nodes int) error {
	// kube-scheduler serves a self-signed certificate on loopback; only its health is read.
	hc := &http.Client{Timeout: 2 * time.Second, Transport: &http.Transport{
		TLSClientConfig: &tls.Config{InsecureSkipVerify: true}, //nolint:gosec // loopback health check
	}}
	deadline := time.Now().Add(2 * time.Minute)
	var waiting string
	for {
		for _, ch := range c.children {
			if ch.exited() {
				return fmt.Errorf("%s exited: %v\nlast lines of %s:\n%s", ch.name, ch.err, ch.log, Tail(ch.log, 20))
			}
		}
		waiting = ""
		var list corev1.NodeList
		if err := cl.List(ctx, &list); err != nil {
			waiting = "listing Nodes: " + err.Error()
		} else if ready := readyNodes(list.Items); ready < nodes {
			waiting = fmt.Sprintf("%d of %d simulated Nodes Ready (kwok)", ready, nodes)
		}
		if waiting == "" {
			var sa corev1.ServiceAccount
			if err := cl.Get(ctx, client.ObjectKey{Namespace: "default", Name: "default"}, &sa); err != nil {
				waiting = "the default ServiceAccount (kube-controller-manager)"
				if !apierrors.IsNotFound(err) {
					waiting += ": " + err.Error()
				}
			}
		}
		if waiting == "" {
			resp, err := hc.Get(schedulerHealth)
			if err != nil {
				waiting = "kube-scheduler's health check: " + err.Error()
			} else {
				resp.Body.Close()
				if resp.StatusCode != http.StatusOK {
					waiting = "kube-scheduler's health check: " + resp.Status
				}
			}
		}
		if waiting == "" {
			return nil
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("cluster with Pods not ready after 2 minutes: waiting for %s (logs in %s)", waiting, c.logDir)
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(250 * time.Millisecond):
		}
	}
}

func readyNodes(nodes []corev1.Node) int {
	n := 0
	for _, node := range nodes {
		for _, cond := range node.Status.Conditions {
			if cond.Type == corev1.NodeReady && cond.Status == corev1.ConditionTrue {
				n++
			}
		}
	}
	return n
}

// stopPods ends the processes startPods began, the last started first.
func (c *ControlPlane) stopPods() {
	for i := len(c.children) - 1; i >= 0; i-- {
		c.children[i].stop()
	}
	c.children = nil
}

// Pods says whether this control plane runs Pods (kube-controller-manager, kube-scheduler, KWOK).
func (c *ControlPlane) Pods() bool {
	return c.logDir != ""
}

// LogFiles are the log files of the processes of the cluster with Pods, by process name.
func (c *ControlPlane) LogFiles() map[string]string {
	out := map[string]string{}
	for _, ch := range c.children {
		out[ch.name] = ch.log
	}
	return out
}

// Exited names a process of the cluster with Pods that has stopped by itself, if one has.
func (c *ControlPlane) Exited() error {
	for _, ch := range c.children {
		if ch.exited() {
			return fmt.Errorf("%s exited: %v (log: %s)", ch.name, ch.err, ch.log)
		}
	}
	return nil
}

// Tail returns the last n lines of the file at path.
func Tail(path string, n int) string {
	f, err := os.Open(path)
	if err != nil {
		return ""
	}
	defer f.Close()
	var lines []string
	sc := bufio.NewScanner(f)
	sc.Buffer(make([]byte, 0, 64*1024), 1024*1024)
	for sc.Scan() {
		lines = append(lines, sc.Text())
		if len(lines) > n {
			lines = lines[1:]
		}
	}
	return strings.Join(lines, "\n")
}

// ParseNodeShape reads the --nodes style flags: a count and quantities.
func ParseNodeShape(count int, cpu, memory, gpu string) (NodeShape, error) {
	s := NodeShape{Count: count}
	for _, f := range []struct {
		name, value string
		into        *resource.Quantity
	}{{"node CPU", cpu, &s.CPU}, {"node memory", memory, &s.Memory}, {"node GPUs", gpu, &s.GPU}} {
		q, err := resource.ParseQuantity(f.value)
		if err != nil {
			return s, fmt.Errorf("%s: %q is not a quantity: %w", f.name, f.value, err)
		}
		*f.into = q
	}
	return s, s.Validate()
}
