package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"maps"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"time"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/rest"
	"k8s.io/utils/ptr"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	crconfig "sigs.k8s.io/controller-runtime/pkg/config"
	"sigs.k8s.io/controller-runtime/pkg/envtest"
	metricsserver "sigs.k8s.io/controller-runtime/pkg/metrics/server"
	"sigs.k8s.io/yaml"

	kueue "sigs.k8s.io/kueue/apis/kueue/v1beta2"
	"sigs.k8s.io/kueue/pkg/workload"
	workloadfinish "sigs.k8s.io/kueue/pkg/workload/finish"
	"sigs.k8s.io/kueue/test/performance/scheduler/runner/controller"
	"sigs.k8s.io/kueue/test/performance/scheduler/runner/generator"
	"sigs.k8s.io/kueue/test/performance/scheduler/runner/recorder"
	"sigs.k8s.io/kueue/test/performance/scheduler/runner/stats"

	"github.com/kueue-timeshare/kueue-timeshare/pkg/controlplane"
)

// runOptions are the settings shared by every run of one invocation.
type runOptions struct {
	root       string
	scheme     *runtime.Scheme
	timeout    time.Duration
	webhooks   bool
	cpuProfile bool
	// lockProfiles and trace: the manager's block and mutex profiles and its execution trace.
	lockProfiles, trace bool
	verbosity           int
	progress            io.Writer
	// background are the load's workload classes left out of every figure (load.background).
	background []string
	// worth is how many workloads the measured quota holds at once (quotaWorth).
	worth int
	// hold: the measured part is created with its ClusterQueues held (load.hold).
	hold bool
	// untilAdmitted: the run ends when every measured workload is admitted (load.untilAdmitted).
	untilAdmitted bool
	// qps and burst, when qps is not 0, are every run's clientConnection (a negative qps turns the
	// client's rate limit off); otherwise Kueue's defaults.
	qps   float64
	burst int
	// apiProfile, when set, is how long the API server's CPU is profiled from the clock's start
	// (apiserver.cpu.prof).
	apiProfile time.Duration
	// gates are feature gates set in every run, over the variant's.
	gates map[string]bool
	// probe, when above 0, runs the visibility probe with that many pending workloads (visibility.go).
	probe int
}

// result is what one run measured.
type result struct {
	variant variant
	// round counts from 0 (see -rounds).
	round   int
	summary recorder.Summary
	// lastAdmitted and lastFinished: from the generator's start to the last admission and the last
	// finish the recorder saw.
	lastAdmitted, lastFinished time.Duration
	// recorded: from the generator's start until the recorder ended (no ClusterQueue with pending
	// or reserving workloads); generated: until the generator had created everything.
	recorded, generated time.Duration
	workloads           int
	admitted            int
	finished            int
	manager             stats.CmdStats
	// counts: the scheduler's requests and admission cycles, from the manager process.
	counts managerCounts
	// cpu: where the manager's CPU went, with -cpuprofile.
	cpu      cpuShares
	timedOut bool
	// windows: ClusterQueues whose stored spec carries minAdmitDuration, read back at the end.
	windows, clusterQueues int
	// load is the machine's mean one-minute load average during the run, sampled at its start, every
	// 30 s and at its end: the benchmark shares the machine with whatever else runs on it.
	load float64
	// apiCPU is the API server's CPU time from the clock's start until the recorder ended.
	apiCPU time.Duration
	// deepRate is the admission rate while the queues were deep, until deepUntil (see deepRate);
	// deepOK is false when it is not defined for the run.
	deepRate  float64
	deepUntil time.Duration
	deepOK    bool
	// filled is when the quota's worth of workloads had been admitted (quotaFilled); 0 if never.
	filled time.Duration
	// setupTime is how long the setup part took before the clock started.
	setupTime time.Duration
	// placed counts, on a load with a topology, the workloads whose admission carries a topology
	// assignment: proof that topology-aware scheduling placed them.
	placed int
	// visibility is what the visibility probe measured while the measured part played.
	visibility probeSamples
}

// startControlPlane starts etcd and kube-apiserver with our CRDs (config/_output/crd, which carry
// the extension fields), like pkg/controlplane, with the request limits upstream's runner raises
// for this load. Webhook configurations are installed only when asked: upstream's runner runs
// minimalkueue without webhooks.
// With frontProxy (the visibility probe), kube-apiserver gets the aggregation layer's settings,
// written to dir, which the manager's visibility server reads to authenticate its callers.
func startControlPlane(root string, webhooks, frontProxy bool, dir string) (*controlplane.ControlPlane, error) {
	bin := filepath.Join(root, controlplane.BinDir)
	for _, p := range []string{filepath.Join(bin, "etcd"), filepath.Join(bin, "kube-apiserver"), filepath.Join(root, controlplane.CRDDir)} {
		if _, err := os.Stat(p); err != nil {
			return nil, fmt.Errorf("%s missing: run `make envtest manifests` first", p)
		}
	}
	env := &envtest.Environment{
		BinaryAssetsDirectory: bin,
		CRDDirectoryPaths:     []string{filepath.Join(root, controlplane.CRDDir)},
		ErrorIfCRDPathMissing: true,
		// Without paths nothing is installed, but envtest still makes the serving certificate
		// the manager's webhook server needs to start.
		WebhookInstallOptions: envtest.WebhookInstallOptions{LocalServingHost: "127.0.0.1"},
	}
	if webhooks {
		env.WebhookInstallOptions.Paths = []string{filepath.Join(root, controlplane.WebhookDir)}
	}
	env.ControlPlane.GetAPIServer().Configure().
		Append("max-requests-inflight", "5000").
		Append("max-mutating-requests-inflight", "2500")
	if frontProxy {
		if err := controlplane.ConfigureFrontProxy(env, dir); err != nil {
			return nil, err
		}
	}
	cfg, err := env.Start()
	if err != nil {
		return nil, fmt.Errorf("starting etcd and kube-apiserver: %w", err)
	}
	return &controlplane.ControlPlane{Env: env, Config: cfg, Root: root}, nil
}

// runVariant runs cfg through one variant on a fresh control plane and collects what upstream's
// recorder saw. dir receives the artifacts (summary, CSVs, manager log, stats, profile).
func runVariant(ctx context.Context, o runOptions, v variant, setup, cfg *generator.Config, dir string) (*result, error) {
	log := ctrl.LoggerFrom(ctx).WithValues("variant", v.name)
	ctx = ctrl.LoggerInto(ctx, log)
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return nil, err
	}
	progress := func(format string, args ...any) {
		fmt.Fprintf(o.progress, "[%s %s] %s\n", time.Now().Format("15:04:05"), v.name, fmt.Sprintf(format, args...))
	}

	cp, err := startControlPlane(o.root, o.webhooks, o.probe > 0, dir)
	if err != nil {
		return nil, err
	}
	defer func() {
		if err := cp.Stop(); err != nil {
			log.Error(err, "Stopping the control plane")
		}
	}()

	kubeconfig := filepath.Join(dir, "kubeconfig")
	if err := cp.WriteAdminKubeconfig(kubeconfig); err != nil {
		return nil, err
	}
	health, err := controlplane.FreeLoopbackAddress()
	if err != nil {
		return nil, err
	}
	gates := map[string]bool{}
	maps.Copy(gates, v.gates)
	maps.Copy(gates, o.gates)
	configFile := filepath.Join(dir, "kueue-config.yaml")
	settings := controlplane.ManagerSettings{MetricsAddress: "0", HealthAddress: health, FeatureGates: gates}
	settings.Extra = timeshareSection(v)
	if o.qps != 0 {
		settings.Extra += fmt.Sprintf("clientConnection:\n  qps: %g\n  burst: %d\n", o.qps, o.burst)
	}
	var visibilityCerts string
	if o.probe > 0 {
		if settings.VisibilityAddress, err = controlplane.FreeLoopbackAddress(); err != nil {
			return nil, err
		}
		visibilityCerts = cp.ServingCertDir()
	}
	text := cp.ManagerConfig(settings)
	if err := os.WriteFile(configFile, []byte(text), 0o600); err != nil {
		return nil, err
	}
	proc, err := startManagerProcess(dir, kubeconfig, configFile, health, visibilityCerts, v.upstream, profiles{cpu: o.cpuProfile, locks: o.lockProfiles, trace: o.trace}, o.verbosity)
	if err != nil {
		return nil, err
	}
	stopped := false
	defer func() {
		if !stopped {
			_, _ = proc.stop()
		}
	}()
	if err := proc.waitReady(2 * time.Minute); err != nil {
		return nil, err
	}
	progress("manager ready")

	// Upstream's runner side: its controller plays the workloads (finishes each after its
	// runtime, completes evictions) and feeds its recorder.
	rec := recorder.New(o.timeout)
	mgr, err := ctrl.NewManager(cp.Config, ctrl.Options{
		Scheme: o.scheme,
		Controller: crconfig.Controller{
			SkipNameValidation: ptr.To(true),
			GroupKindConcurrency: map[string]int{
				kueue.SchemeGroupVersion.WithKind("Workload").GroupKind().String(): 5,
			},
		},
		Metrics: metricsserver.Options{BindAddress: "0"},
	})
	if err != nil {
		return nil, err
	}
	if err := controller.NewReconciler(mgr.GetClient(), rec).SetupWithManager(mgr); err != nil {
		return nil, err
	}
	runCtx, cancel := context.WithCancel(ctx)
	defer cancel()
	mgrDone := make(chan error, 1)
	go func() { mgrDone <- mgr.Start(runCtx) }()

	// The recorder stops at the first moment after generation when no ClusterQueue reports pending
	// or reserving workloads. When generation is short (a small -scale), that can be before the
	// ClusterQueues' statuses count the last workloads, so it is told only once they do.
	genFinished, genDone := make(chan struct{}), make(chan struct{})
	recDone := make(chan error, 1)
	recCtx, stopRecorder := context.WithCancel(runCtx)
	defer stopRecorder()
	go func() { recDone <- rec.Run(recCtx, genDone) }()
	if !mgr.GetCache().WaitForCacheSync(runCtx) {
		return nil, errors.New("runner cache did not sync")
	}

	apiClient, err := client.New(cp.Config, client.Options{Scheme: o.scheme})
	if err != nil {
		return nil, err
	}
	var genClient client.Client = generatorClient{Client: apiClient, window: v.minAdmitDuration}
	res := &result{variant: v}
	res.workloads, res.clusterQueues = workloadCount(cfg)
	if setup != nil {
		setupStart := time.Now()
		if err := generator.Generate(runCtx, genClient, setup); err != nil {
			return nil, fmt.Errorf("generator, setup: %w", err)
		}
		n, _ := workloadCount(setup)
		if err := waitAdmitted(runCtx, mgr.GetClient(), n, o.timeout); err != nil {
			return nil, fmt.Errorf("setup: %w", err)
		}
		res.setupTime = time.Since(setupStart)
		progress("setup done after %s: %d workloads admitted", res.setupTime.Round(time.Millisecond), n)
	}
	var probe *visibilityProbe
	if o.probe > 0 {
		probeStart := time.Now()
		if err := generator.Generate(runCtx, generatorClient{Client: apiClient}, probeLoad(o.probe)); err != nil {
			return nil, fmt.Errorf("generator, visibility probe: %w", err)
		}
		if err := waitPending(runCtx, mgr.GetClient(), o.probe, o.timeout, func(class string) bool { return class == probeClass }); err != nil {
			return nil, fmt.Errorf("visibility probe: %w", err)
		}
		visCfg := rest.CopyConfig(cp.Config)
		visCfg.Host = "https://" + settings.VisibilityAddress
		visCfg.CAData, visCfg.CAFile = cp.ServingCA(), ""
		if probe, err = newVisibilityProbe(runCtx, mgr.GetClient(), visCfg); err != nil {
			return nil, err
		}
		progress("visibility probe: %d workloads pending in ClusterQueue %s after %s", o.probe, probe.cq, time.Since(probeStart).Round(time.Millisecond))
	}
	// With background workloads the ClusterQueues are never empty, so the recorder would not end:
	// the run ends when every measured workload has finished, or been admitted.
	measuredDone := make(chan struct{})
	if len(o.background) > 0 {
		done := measuredFinished
		if o.untilAdmitted {
			done = measuredAdmitted
		}
		go func() {
			for runCtx.Err() == nil {
				if done(runCtx, mgr.GetClient(), o.background) >= res.workloads {
					close(measuredDone)
					return
				}
				time.Sleep(200 * time.Millisecond)
			}
		}()
	}
	if o.hold {
		holdStart := time.Now()
		held := generatorClient{Client: apiClient, window: v.minAdmitDuration, hold: true}
		if err := generator.Generate(runCtx, held, cfg); err != nil {
			return nil, fmt.Errorf("generator: %w", err)
		}
		res.generated = time.Since(holdStart)
		measured := func(class string) bool { return !slices.Contains(o.background, class) }
		if err := waitPending(runCtx, mgr.GetClient(), res.workloads, o.timeout, measured); err != nil {
			return nil, err
		}
		progress("%d workloads created and pending in held ClusterQueues after %s", res.workloads, time.Since(holdStart).Round(time.Millisecond))
	}
	start := time.Now()
	apiCPUStart, apiCPUKnown := apiServerCPU()
	probeCtx, stopProbe := context.WithCancel(runCtx)
	defer stopProbe()
	probeDone := make(chan struct{})
	if probe != nil {
		go func() {
			defer close(probeDone)
			probe.run(probeCtx)
		}()
	} else {
		close(probeDone)
	}
	if o.apiProfile > 0 {
		go func() {
			if err := profileAPIServer(runCtx, cp.Config, o.apiProfile, filepath.Join(dir, "apiserver.cpu.prof")); err != nil {
				log.Error(err, "Profiling the API server")
			}
		}()
	}
	if o.hold {
		if err := release(runCtx, apiClient); err != nil {
			return nil, err
		}
	}
	genErr := make(chan error, 1)
	go func() {
		defer close(genFinished)
		if o.hold {
			genErr <- nil
			return
		}
		err := generator.Generate(runCtx, genClient, cfg)
		res.generated = time.Since(start)
		genErr <- err
	}()
	go func() {
		<-genFinished
		for runCtx.Err() == nil {
			if workloadsAccounted(runCtx, mgr.GetClient(), res.workloads) {
				close(genDone)
				return
			}
			time.Sleep(200 * time.Millisecond)
		}
	}()
	progress("generating %d workloads in %d ClusterQueues", res.workloads, res.clusterQueues)

	tick := time.NewTicker(30 * time.Second)
	defer tick.Stop()
	var runErr error
	var loads []float64
	sampleLoad := func() {
		if l, ok := loadAverage(); ok {
			loads = append(loads, l)
		}
	}
	sampleLoad()
wait:
	for {
		select {
		case err := <-genErr:
			if err != nil {
				runErr = fmt.Errorf("generator: %w", err)
				break wait
			}
			progress("generation done after %s", res.generated.Round(time.Millisecond))
		case <-measuredDone:
			stopRecorder()
			if err := <-recDone; err != nil && !errors.Is(err, context.Canceled) {
				runErr = fmt.Errorf("recorder: %w", err)
			}
			break wait
		case err := <-recDone:
			if errors.Is(err, context.DeadlineExceeded) {
				res.timedOut = true
				progress("recorder timed out after %s", o.timeout)
			} else if err != nil {
				runErr = fmt.Errorf("recorder: %w", err)
			}
			break wait
		case err := <-mgrDone:
			runErr = fmt.Errorf("runner manager stopped: %w", err)
			break wait
		case <-tick.C:
			sampleLoad()
			if proc.exited() {
				runErr = fmt.Errorf("manager process exited; see %s", filepath.Join(dir, "manager.log"))
				break wait
			}
			progress("%s", queueTotals(runCtx, mgr.GetClient()))
		}
	}
	res.recorded = time.Since(start)
	stopProbe()
	<-probeDone
	if probe != nil {
		res.visibility = probe.result()
	}
	if end, ok := apiServerCPU(); ok && apiCPUKnown {
		res.apiCPU = end - apiCPUStart
	}
	if reqs, err := apiServerRequests(runCtx, cp.Config); err != nil {
		log.Error(err, "Reading the API server's request counts")
	} else if err := writeYAML(filepath.Join(dir, "apiserver-requests.yaml"), reqs); err != nil {
		return nil, err
	}
	sampleLoad()
	for _, l := range loads {
		res.load += l / float64(len(loads))
	}
	if runErr != nil {
		return nil, runErr
	}
	res.windows = countWindows(runCtx, genClient)
	if setup != nil && setup.Topology != nil {
		res.placed = countPlaced(runCtx, genClient, o.background)
	}
	cancel()
	<-mgrDone

	if res.manager, err = proc.stop(); err != nil {
		log.Error(err, "Stopping the manager")
	}
	stopped = true
	if err := writeYAML(filepath.Join(dir, "manager.stats.yaml"), res.manager); err != nil {
		return nil, err
	}
	if o.cpuProfile {
		if res.cpu, err = readCPUShares(filepath.Join(dir, "manager.cpu.prof")); err != nil {
			log.Error(err, "Reading the manager's CPU profile")
		}
	}
	if raw, err := os.ReadFile(filepath.Join(dir, countsFileName)); err == nil {
		if err := yaml.Unmarshal(raw, &res.counts); err != nil {
			return nil, err
		}
	} else {
		log.Error(err, "The manager wrote no counts")
	}
	summaryFile := filepath.Join(dir, "summary.yaml")
	if err := rec.WriteSummary(summaryFile); err != nil {
		return nil, err
	}
	if err := rec.WriteCQCsv(filepath.Join(dir, "cqStates.csv")); err != nil {
		return nil, err
	}
	if err := rec.WriteWLCsv(filepath.Join(dir, "wlStates.csv")); err != nil {
		return nil, err
	}
	raw, err := os.ReadFile(summaryFile)
	if err != nil {
		return nil, err
	}
	if err := yaml.Unmarshal(raw, &res.summary); err != nil {
		return nil, err
	}
	var admittedAt []time.Duration
	// sumAdmission, count by class: time to admission counted from the release for held loads
	// (the recorder counts from creation).
	sumAdmission, admittedOf := map[string]time.Duration{}, map[string]int{}
	for _, wl := range rec.Store.WL {
		if slices.Contains(o.background, wl.ClassName) {
			continue
		}
		if wl.LastEvent.Admitted || wl.LastEvent.Finished || wl.TimeToAdmitMs > 0 {
			res.admitted++
			at := wl.FirstEventTime.Add(time.Duration(wl.TimeToAdmitMs) * time.Millisecond).Sub(start)
			admittedAt = append(admittedAt, at)
			res.lastAdmitted = max(res.lastAdmitted, at)
			sumAdmission[wl.ClassName] += at
			admittedOf[wl.ClassName]++
		}
		if wl.LastEvent.Finished {
			res.finished++
			res.lastFinished = max(res.lastFinished, wl.FirstEventTime.Add(time.Duration(wl.TimeToFinishedMs)*time.Millisecond).Sub(start))
		}
	}
	if o.hold {
		for class, s := range res.summary.WorkloadClasses {
			if n := admittedOf[class]; n > 0 {
				s.AverageTimeToAdmissionMs = (sumAdmission[class] / time.Duration(n)).Milliseconds()
			}
		}
	}
	if !o.untilAdmitted {
		// With quota for every workload the queues are never deeper than the quota.
		res.deepRate, res.deepUntil, res.deepOK = deepRate(admittedAt, res.workloads, o.worth)
	}
	res.filled, _ = quotaFilled(admittedAt, o.worth)
	progress("done: %d/%d finished, last admission at %s, last finish at %s",
		res.finished, res.workloads, res.lastAdmitted.Round(time.Millisecond), res.lastFinished.Round(time.Millisecond))
	return res, nil
}

// waitAdmitted waits until n workloads are admitted (read from the runner's cache).
func waitAdmitted(ctx context.Context, c client.Reader, n int, timeout time.Duration) error {
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	for {
		var wls kueue.WorkloadList
		if err := c.List(ctx, &wls); err == nil {
			admitted := 0
			for i := range wls.Items {
				if workload.IsAdmitted(&wls.Items[i]) {
					admitted++
				}
			}
			if admitted >= n {
				return nil
			}
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("waiting for %d workloads to be admitted: %w", n, ctx.Err())
		case <-time.After(200 * time.Millisecond):
		}
	}
}

// waitPending waits until the ClusterQueues whose class counted accepts report n pending
// workloads (read from the runner's cache): the manager has queued them all.
func waitPending(ctx context.Context, c client.Reader, n int, timeout time.Duration, counted func(class string) bool) error {
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	for {
		var cqs kueue.ClusterQueueList
		if err := c.List(ctx, &cqs); err == nil {
			pending := 0
			for _, cq := range cqs.Items {
				if counted(cq.Labels[generator.ClassLabel]) {
					pending += int(cq.Status.PendingWorkloads)
				}
			}
			if pending >= n {
				return nil
			}
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("waiting for %d pending workloads: %w", n, ctx.Err())
		case <-time.After(200 * time.Millisecond):
		}
	}
}

// release lets every held ClusterQueue admit.
func release(ctx context.Context, c client.Client) error {
	var cqs kueue.ClusterQueueList
	if err := c.List(ctx, &cqs); err != nil {
		return err
	}
	for i := range cqs.Items {
		cq := &cqs.Items[i]
		if ptr.Deref(cq.Spec.StopPolicy, kueue.None) != kueue.Hold {
			continue
		}
		// A merge patch of the one field: an update of the typed object would drop the fields it
		// does not know (minAdmitDuration).
		patch := client.RawPatch(types.MergePatchType, []byte(`{"spec":{"stopPolicy":"None"}}`))
		if err := c.Patch(ctx, cq, patch); err != nil {
			return fmt.Errorf("releasing ClusterQueue %s: %w", cq.Name, err)
		}
	}
	return nil
}

// measuredFinished counts the finished workloads outside the background classes (from the
// runner's cache).
func measuredFinished(ctx context.Context, c client.Reader, background []string) int {
	return countMeasured(ctx, c, background, workloadfinish.IsFinished)
}

// measuredAdmitted counts the admitted workloads outside the background classes (from the
// runner's cache).
func measuredAdmitted(ctx context.Context, c client.Reader, background []string) int {
	return countMeasured(ctx, c, background, workload.IsAdmitted)
}

// countMeasured counts the workloads outside the background classes for which is holds.
func countMeasured(ctx context.Context, c client.Reader, background []string, is func(*kueue.Workload) bool) int {
	var wls kueue.WorkloadList
	if err := c.List(ctx, &wls); err != nil {
		return 0
	}
	n := 0
	for i := range wls.Items {
		wl := &wls.Items[i]
		if !slices.Contains(background, wl.Labels[generator.ClassLabel]) && is(wl) {
			n++
		}
	}
	return n
}

// queueTotals sums the ClusterQueues' status counters, from the runner's cache.
func queueTotals(ctx context.Context, c client.Reader) string {
	var cqs kueue.ClusterQueueList
	if err := c.List(ctx, &cqs); err != nil {
		return "ClusterQueues unreadable: " + err.Error()
	}
	var pending, reserving, admitted int32
	for _, cq := range cqs.Items {
		pending += cq.Status.PendingWorkloads
		reserving += cq.Status.ReservingWorkloads
		admitted += cq.Status.AdmittedWorkloads
	}
	return fmt.Sprintf("%d ClusterQueues: %d pending, %d reserving, %d admitted", len(cqs.Items), pending, reserving, admitted)
}

// workloadsAccounted: some ClusterQueue reports pending or reserving workloads, or every
// generated workload has finished (read from the runner's cache).
func workloadsAccounted(ctx context.Context, c client.Reader, total int) bool {
	var cqs kueue.ClusterQueueList
	if err := c.List(ctx, &cqs); err != nil {
		return false
	}
	for _, cq := range cqs.Items {
		if cq.Status.PendingWorkloads > 0 || cq.Status.ReservingWorkloads > 0 {
			return true
		}
	}
	var wls kueue.WorkloadList
	if err := c.List(ctx, &wls); err != nil {
		return false
	}
	finished := 0
	for i := range wls.Items {
		if workloadfinish.IsFinished(&wls.Items[i]) {
			finished++
		}
	}
	return finished >= total
}

// countPlaced counts the workloads outside the background classes whose admission has a
// topology assignment.
func countPlaced(ctx context.Context, c client.Reader, background []string) int {
	var wls kueue.WorkloadList
	if err := c.List(ctx, &wls); err != nil {
		return -1
	}
	n := 0
	for _, wl := range wls.Items {
		if slices.Contains(background, wl.Labels[generator.ClassLabel]) {
			continue
		}
		if a := wl.Status.Admission; a != nil && slices.ContainsFunc(a.PodSetAssignments, func(p kueue.PodSetAssignment) bool { return p.TopologyAssignment != nil }) {
			n++
		}
	}
	return n
}

// countWindows reads the ClusterQueues back as stored and counts those with a minAdmitDuration:
// proof that the field reached the API and was not pruned.
func countWindows(ctx context.Context, c client.Reader) int {
	list := &unstructured.UnstructuredList{}
	list.SetGroupVersionKind(kueue.SchemeGroupVersion.WithKind("ClusterQueueList"))
	if err := c.List(ctx, list); err != nil {
		return -1
	}
	n := 0
	for _, cq := range list.Items {
		if _, found, _ := unstructured.NestedString(cq.Object, "spec", "preemption", "withinClusterQueueConfig", "minAdmitDuration"); found {
			n++
		}
	}
	return n
}

func writeYAML(path string, v any) error {
	raw, err := yaml.Marshal(v)
	if err != nil {
		return err
	}
	return os.WriteFile(path, raw, 0o644)
}

// loadAverage reads the one-minute load average (Linux); false where there is none.
func loadAverage() (float64, bool) {
	raw, err := os.ReadFile("/proc/loadavg")
	if err != nil {
		return 0, false
	}
	f := strings.Fields(string(raw))
	if len(f) == 0 {
		return 0, false
	}
	l, err := strconv.ParseFloat(f[0], 64)
	return l, err == nil
}
