package main

import (
	"context"
	"flag"
	"fmt"
	"maps"
	"net/http"
	"os"
	"os/exec"
	"os/signal"
	"path/filepath"
	goruntime "runtime"
	"runtime/pprof"
	"runtime/trace"
	"strings"
	"sync"
	"syscall"
	"time"

	"go.uber.org/zap/zapcore"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/client-go/tools/clientcmd"
	"k8s.io/klog/v2"
	"k8s.io/utils/ptr"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/log/zap"
	crmetrics "sigs.k8s.io/controller-runtime/pkg/metrics"

	"sigs.k8s.io/kueue/test/performance/scheduler/runner/stats"

	"github.com/kueue-timeshare/kueue-timeshare/pkg/manager"
)

// managerCommand is the name of the subcommand that runs the manager: the benchmark starts its
// own binary with it, so that the manager's CPU time and memory are its own, as with upstream's
// minimalkueue.
const managerCommand = "manager"

// countsFileName is where the manager subcommand writes what its scheduler did (managerCounts).
const countsFileName = "scheduler-counts.yaml"

// managerCounts is what the manager subcommand reports about its scheduler at exit.
type managerCounts struct {
	// Requests the scheduler sent, by operation and kind (callCounter).
	Requests map[string]int `json:"requests"`
	// Cycles are the admission cycles by result, from Kueue's kueue_admission_attempts_total, which
	// both schedulers report once per cycle; CycleSeconds is the time spent in them
	// (kueue_admission_attempt_duration_seconds).
	Cycles       map[string]int `json:"cycles"`
	CycleSeconds float64        `json:"cycleSeconds"`
	// ClientQPS and ClientBurst are the manager's client rate limit as its configuration set it
	// (a negative QPS: none); both schedulers write through it.
	ClientQPS   float32 `json:"clientQPS"`
	ClientBurst int32   `json:"clientBurst"`
	// ClientRequests are every request the manager's clients sent, events included, by HTTP
	// method (client-go's rest_client_requests_total): what the rate limit above bounds.
	ClientRequests map[string]int `json:"clientRequests"`
}

// admissionCycles reads Kueue's admission cycle metrics and the client's requests by method from
// the process's registry.
func admissionCycles() (map[string]int, float64, map[string]int) {
	families, err := crmetrics.Registry.Gather()
	if err != nil {
		return nil, 0, nil
	}
	cycles := map[string]int{}
	requests := map[string]int{}
	seconds := 0.0
	for _, f := range families {
		for _, m := range f.GetMetric() {
			result, method := "", ""
			for _, l := range m.GetLabel() {
				switch l.GetName() {
				case "result":
					result = l.GetValue()
				case "method":
					method = l.GetValue()
				}
			}
			switch f.GetName() {
			case "rest_client_requests_total":
				requests[method] += int(m.GetCounter().GetValue())
			case "kueue_admission_attempts_total":
				cycles[result] += int(m.GetCounter().GetValue())
			case "kueue_admission_attempt_duration_seconds":
				seconds += m.GetHistogram().GetSampleSum()
			}
		}
	}
	return cycles, seconds, requests
}

// runManagerCommand runs kueue-timeshare's manager (pkg/manager, the same code as the
// kueue-timeshare binary) until SIGINT or SIGTERM, optionally with upstream's scheduler and a CPU
// profile.
func runManagerCommand(args []string) int {
	fs := flag.NewFlagSet(managerCommand, flag.ExitOnError)
	kubeconfig := fs.String("kubeconfig", "", "kubeconfig of the control plane")
	configFile := fs.String("config", "", "Kueue Configuration file")
	visibilityCerts := fs.String("visibility-cert-dir", "", "the visibility server's tls.crt and tls.key, when the configuration runs it")
	upstream := fs.Bool("upstream-scheduler", false, "run upstream's admission loop instead of ours")
	cpuProfile := fs.String("cpuprofile", "", "write a CPU profile of the whole run to this file")
	lockProfiles := fs.String("lockprofiles", "", "write block and mutex profiles of the whole run to this prefix's .block.prof and .mutex.prof")
	traceFile := fs.String("trace", "", "write an execution trace of the whole run to this file")
	callsFile := fs.String("counts", "", "write the scheduler's API requests and admission cycles to this file at exit")
	verbosity := fs.Int("v", -1, "log verbosity: -1 errors only, 0 info, N for V(N)")
	_ = fs.Parse(args)

	level := zapcore.ErrorLevel
	if *verbosity >= 0 {
		level = zapcore.Level(-*verbosity)
	}
	log := zap.New(zap.WriteTo(os.Stderr), zap.Level(level))
	ctrl.SetLogger(log)
	klog.SetLogger(log)

	if *cpuProfile != "" {
		f, err := os.Create(*cpuProfile)
		if err != nil {
			fmt.Fprintln(os.Stderr, err)
			return 1
		}
		defer f.Close()
		if err := pprof.StartCPUProfile(f); err != nil {
			fmt.Fprintln(os.Stderr, err)
			return 1
		}
		defer pprof.StopCPUProfile()
	}
	if *lockProfiles != "" {
		defer writeLockProfiles(*lockProfiles)()
	}
	if *traceFile != "" {
		f, err := os.Create(*traceFile)
		if err != nil {
			fmt.Fprintln(os.Stderr, err)
			return 1
		}
		defer f.Close()
		if err := trace.Start(f); err != nil {
			fmt.Fprintln(os.Stderr, err)
			return 1
		}
		defer trace.Stop()
	}

	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	kubeConfig, err := clientcmd.BuildConfigFromFlags("", *kubeconfig)
	if err != nil {
		log.Error(err, "Reading the kubeconfig")
		return 1
	}
	scheme, err := manager.NewScheme()
	if err != nil {
		log.Error(err, "Building the scheme")
		return 1
	}
	ctrlOpts, cfg, err := manager.LoadConfig(scheme, *configFile, "")
	if err != nil {
		log.Error(err, "Loading the configuration")
		return 1
	}
	calls := &callCounter{}
	m, err := manager.New(ctx, kubeConfig, ctrlOpts, cfg, manager.Options{InsecureMetrics: true, Log: log, UpstreamScheduler: *upstream, ClientWrapper: calls.wrap,
		VisibilityCertDir: *visibilityCerts, Kubeconfig: *kubeconfig})
	if err != nil {
		log.Error(err, "Setting up the manager")
		return 1
	}
	err = m.Start(ctx)
	if *callsFile != "" {
		counts := managerCounts{Requests: calls.snapshot(),
			ClientQPS: ptr.Deref(cfg.Kueue.ClientConnection.QPS, -1), ClientBurst: ptr.Deref(cfg.Kueue.ClientConnection.Burst, 0)}
		counts.Cycles, counts.CycleSeconds, counts.ClientRequests = admissionCycles()
		if werr := writeYAML(*callsFile, counts); werr != nil {
			log.Error(werr, "Writing the counts")
		}
	}
	if err != nil {
		log.Error(err, "Manager stopped with an error")
		return 1
	}
	return 0
}

// writeLockProfiles starts recording where goroutines block and wait on locks, and returns
// what writes both profiles at prefix at the end of the run.
func writeLockProfiles(prefix string) func() {
	// Every blocking event of 10µs or more, every 10th contended mutex: enough for a breakdown,
	// cheap enough not to be the breakdown.
	goruntime.SetBlockProfileRate(10_000)
	goruntime.SetMutexProfileFraction(10)
	return func() {
		for _, name := range []string{"block", "mutex"} {
			f, err := os.Create(prefix + "." + name + ".prof")
			if err != nil {
				fmt.Fprintln(os.Stderr, err)
				continue
			}
			if err := pprof.Lookup(name).WriteTo(f, 0); err != nil {
				fmt.Fprintln(os.Stderr, err)
			}
			f.Close()
		}
	}
}

// managerProcess is a manager subcommand running against one control plane.
type managerProcess struct {
	cmd     *exec.Cmd
	started time.Time
	done    chan struct{}
	log     *os.File
	health  string
}

// profiles are what the manager subcommand records of its run.
type profiles struct {
	// cpu: manager.cpu.prof; locks: manager.block.prof and manager.mutex.prof; trace:
	// manager.trace.
	cpu, locks, trace bool
}

// startManagerProcess starts this binary's manager subcommand; its output goes to dir/manager.log.
func startManagerProcess(dir, kubeconfig, configFile, health, visibilityCerts string, upstream bool, prof profiles, verbosity int) (*managerProcess, error) {
	self, err := os.Executable()
	if err != nil {
		return nil, err
	}
	args := []string{managerCommand, "-kubeconfig", kubeconfig, "-config", configFile, fmt.Sprintf("-v=%d", verbosity),
		"-counts", filepath.Join(dir, countsFileName)}
	if upstream {
		args = append(args, "-upstream-scheduler")
	}
	if visibilityCerts != "" {
		args = append(args, "-visibility-cert-dir", visibilityCerts)
	}
	if prof.cpu {
		args = append(args, "-cpuprofile", filepath.Join(dir, "manager.cpu.prof"))
	}
	if prof.locks {
		args = append(args, "-lockprofiles", filepath.Join(dir, "manager"))
	}
	if prof.trace {
		args = append(args, "-trace", filepath.Join(dir, "manager.trace"))
	}
	logFile, err := os.Create(filepath.Join(dir, "manager.log"))
	if err != nil {
		return nil, err
	}
	cmd := exec.Command(self, args...)
	cmd.Stdout, cmd.Stderr = logFile, logFile
	if err := cmd.Start(); err != nil {
		logFile.Close()
		return nil, err
	}
	p := &managerProcess{cmd: cmd, started: time.Now(), done: make(chan struct{}), log: logFile, health: health}
	go func() {
		_ = cmd.Wait()
		close(p.done)
	}()
	return p, nil
}

// waitReady polls the manager's readiness endpoint (ready once its webhook server serves).
func (p *managerProcess) waitReady(timeout time.Duration) error {
	deadline := time.Now().Add(timeout)
	url := "http://" + p.health + "/readyz"
	for time.Now().Before(deadline) {
		select {
		case <-p.done:
			return fmt.Errorf("manager exited while starting (%s); see %s", p.cmd.ProcessState, p.log.Name())
		default:
		}
		resp, err := http.Get(url)
		if err == nil {
			resp.Body.Close()
			if resp.StatusCode == http.StatusOK {
				return nil
			}
		}
		time.Sleep(200 * time.Millisecond)
	}
	return fmt.Errorf("manager not ready after %s; see %s", timeout, p.log.Name())
}

// exited reports whether the process has ended.
func (p *managerProcess) exited() bool {
	select {
	case <-p.done:
		return true
	default:
		return false
	}
}

// stop interrupts the manager, waits for it (killing it after 30 s) and returns its resource use
// in the form of upstream's runner.
func (p *managerProcess) stop() (stats.CmdStats, error) {
	defer p.log.Close()
	killed := false
	if !p.exited() {
		_ = p.cmd.Process.Signal(os.Interrupt)
		select {
		case <-p.done:
		case <-time.After(30 * time.Second):
			_ = p.cmd.Process.Kill()
			<-p.done
			killed = true
		}
	}
	st := p.cmd.ProcessState
	s := stats.CmdStats{
		WallMs: time.Since(p.started).Milliseconds(),
		UserMs: st.UserTime().Milliseconds(),
		SysMs:  st.SystemTime().Milliseconds(),
		Maxrss: -1,
	}
	if ru, ok := st.SysUsage().(*syscall.Rusage); ok {
		s.Maxrss = ru.Maxrss
	}
	var err error
	switch {
	case killed:
		err = fmt.Errorf("manager still running 30s after SIGINT, killed; see %s", p.log.Name())
	case !st.Success():
		err = fmt.Errorf("manager ended with %s; see %s", st, p.log.Name())
	}
	return s, err
}

// callCounter counts the requests the scheduler (and its preemptor) sends through its client,
// by operation and kind, via manager.Options.ClientWrapper: the same wrapping for upstream's
// scheduler and ours.
type callCounter struct {
	mu     sync.Mutex
	counts map[string]int
}

func (c *callCounter) add(op string, obj any) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.counts == nil {
		c.counts = map[string]int{}
	}
	kind := fmt.Sprintf("%T", obj)
	if i := strings.LastIndex(kind, "."); i >= 0 {
		kind = kind[i+1:]
	}
	c.counts[op+" "+kind]++
}

func (c *callCounter) snapshot() map[string]int {
	c.mu.Lock()
	defer c.mu.Unlock()
	return maps.Clone(c.counts)
}

func (c *callCounter) wrap(inner client.Client) client.Client {
	return &countingClient{Client: inner, n: c}
}

type countingClient struct {
	client.Client
	n *callCounter
}

func (c *countingClient) Get(ctx context.Context, key client.ObjectKey, obj client.Object, opts ...client.GetOption) error {
	c.n.add("get", obj)
	return c.Client.Get(ctx, key, obj, opts...)
}

func (c *countingClient) List(ctx context.Context, list client.ObjectList, opts ...client.ListOption) error {
	c.n.add("list", list)
	return c.Client.List(ctx, list, opts...)
}

func (c *countingClient) Create(ctx context.Context, obj client.Object, opts ...client.CreateOption) error {
	c.n.add("create", obj)
	return c.Client.Create(ctx, obj, opts...)
}

func (c *countingClient) Delete(ctx context.Context, obj client.Object, opts ...client.DeleteOption) error {
	c.n.add("delete", obj)
	return c.Client.Delete(ctx, obj, opts...)
}

func (c *countingClient) Update(ctx context.Context, obj client.Object, opts ...client.UpdateOption) error {
	c.n.add("update", obj)
	return c.Client.Update(ctx, obj, opts...)
}

func (c *countingClient) Patch(ctx context.Context, obj client.Object, patch client.Patch, opts ...client.PatchOption) error {
	c.n.add("patch", obj)
	return c.Client.Patch(ctx, obj, patch, opts...)
}

func (c *countingClient) Apply(ctx context.Context, obj runtime.ApplyConfiguration, opts ...client.ApplyOption) error {
	c.n.add("apply", obj)
	return c.Client.Apply(ctx, obj, opts...)
}

func (c *countingClient) Status() client.SubResourceWriter {
	return &countingWriter{SubResourceWriter: c.Client.Status(), n: c.n, sub: "status"}
}

func (c *countingClient) SubResource(sub string) client.SubResourceClient {
	return &countingSubResource{SubResourceClient: c.Client.SubResource(sub), n: c.n, sub: sub}
}

type countingWriter struct {
	client.SubResourceWriter
	n   *callCounter
	sub string
}

func (w *countingWriter) Create(ctx context.Context, obj client.Object, subResource client.Object, opts ...client.SubResourceCreateOption) error {
	w.n.add(w.sub+" create", obj)
	return w.SubResourceWriter.Create(ctx, obj, subResource, opts...)
}

func (w *countingWriter) Update(ctx context.Context, obj client.Object, opts ...client.SubResourceUpdateOption) error {
	w.n.add(w.sub+" update", obj)
	return w.SubResourceWriter.Update(ctx, obj, opts...)
}

func (w *countingWriter) Patch(ctx context.Context, obj client.Object, patch client.Patch, opts ...client.SubResourcePatchOption) error {
	w.n.add(w.sub+" patch", obj)
	return w.SubResourceWriter.Patch(ctx, obj, patch, opts...)
}

func (w *countingWriter) Apply(ctx context.Context, obj runtime.ApplyConfiguration, opts ...client.SubResourceApplyOption) error {
	w.n.add(w.sub+" apply", obj)
	return w.SubResourceWriter.Apply(ctx, obj, opts...)
}

type countingSubResource struct {
	client.SubResourceClient
	n   *callCounter
	sub string
}

func (s *countingSubResource) Get(ctx context.Context, obj client.Object, subResource client.Object, opts ...client.SubResourceGetOption) error {
	s.n.add(s.sub+" get", obj)
	return s.SubResourceClient.Get(ctx, obj, subResource, opts...)
}

func (s *countingSubResource) Create(ctx context.Context, obj client.Object, subResource client.Object, opts ...client.SubResourceCreateOption) error {
	s.n.add(s.sub+" create", obj)
	return s.SubResourceClient.Create(ctx, obj, subResource, opts...)
}

func (s *countingSubResource) Update(ctx context.Context, obj client.Object, opts ...client.SubResourceUpdateOption) error {
	s.n.add(s.sub+" update", obj)
	return s.SubResourceClient.Update(ctx, obj, opts...)
}

func (s *countingSubResource) Patch(ctx context.Context, obj client.Object, patch client.Patch, opts ...client.SubResourcePatchOption) error {
	s.n.add(s.sub+" patch", obj)
	return s.SubResourceClient.Patch(ctx, obj, patch, opts...)
}

func (s *countingSubResource) Apply(ctx context.Context, obj runtime.ApplyConfiguration, opts ...client.SubResourceApplyOption) error {
	s.n.add(s.sub+" apply", obj)
	return s.SubResourceClient.Apply(ctx, obj, opts...)
}
