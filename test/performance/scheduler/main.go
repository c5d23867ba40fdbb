// Command bench-throughput plays a scheduler performance load through kueue-timeshare's manager,
// each run on a fresh envtest control plane, in these variants:
//
//	(a) with upstream's admission loop (manager.Options.UpstreamScheduler),
//	(b) with ours and our feature gates off,
//	(c) with ours and a minAdmitDuration on every ClusterQueue,
//	(d) with ours, our gates off and timeshare.headsPerCycle set.
//
// The loads (-load) are upstream's baseline and TAS generator configurations (read from the Kueue
// module at run time) and a deep-queue load of ours in the shape of upstream issue 14477, written
// as a configuration of upstream's generator. They are played by upstream's runner packages,
// imported from the module: its generator creates the objects, its controller finishes each
// Workload after its runtime, and its recorder measures. The manager runs in a child process (this
// binary's "manager" subcommand), so that its CPU time and memory are measured apart from the
// runner's, as upstream's runner does with minimalkueue. It prints, per run, the time until every
// workload was admitted and finished, the average time to admission per workload class, the
// admission rate while the queues are deep, ClusterQueue usage as upstream's checker computes it,
// the ratios ours/upstream and the load's capacity bound. See docs/performance.md (benchmark 1).
//
// It is a plain program, not a test: `go test ./...` never runs it. `make bench-throughput` does.
package main

import (
	"context"
	"flag"
	"fmt"
	"os"
	"os/exec"
	"os/signal"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/onsi/gomega"
	"go.uber.org/zap/zapcore"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/log/zap"

	"sigs.k8s.io/kueue/test/performance/scheduler/runner/generator"

	"github.com/kueue-timeshare/kueue-timeshare/pkg/controlplane"
	"github.com/kueue-timeshare/kueue-timeshare/pkg/manager"
)

func main() {
	if len(os.Args) > 1 && os.Args[1] == managerCommand {
		os.Exit(runManagerCommand(os.Args[2:]))
	}
	os.Exit(run())
}

func run() int {
	var (
		loadName   = flag.String("load", "baseline", "what to play: baseline (upstream's "+baselineConfig+"), tas (upstream's "+tasConfig+"), deep (a deep-queue load after upstream issue 14477), slowcycle (deep queues beside a large topology-aware snapshot, where the cycle is the bound); the configurations are read from the sigs.k8s.io/kueue module this repository builds against")
		configPath = flag.String("generator-config", "", "another upstream generator configuration for -load baseline or tas")
		scale      = flag.Float64("scale", 1, "fraction of every workloads set's count to generate (rounded up, at least 1), and of the deep load's quotas; 1 is the full configuration")
		only       = flag.String("variants", "upstream,off,on", "comma-separated runs, in order: upstream, off, on, heads, heads0 (heads with timeshare.pendingStatusWriters 0), est0 (off with timeshare.admissionEstimates.refreshInterval 0s), heads=N (off with timeshare.headsPerCycle N; several may be given)")
		writers    = flag.Int("writers", -1, "timeshare.pendingStatusWriters of our runs that do not set it; -1 keeps the configuration's default")
		heads      = flag.Int("heads", 32, "timeshare.headsPerCycle of the \"heads\" run")
		window     = flag.Duration("min-admit-duration", time.Minute, "minAdmitDuration set on every ClusterQueue in the \"on\" run (at least 1m)")
		outDir     = flag.String("o", "", "directory for artifacts (summaries, CSVs, manager logs, profiles); default .local/bench-throughput/<time>")
		timeout    = flag.Duration("timeout", 30*time.Minute, "longest a run may record before it is reported as timed out")
		webhooks   = flag.Bool("webhooks", false, "install Kueue's and our webhook configurations (upstream's runner runs without)")
		cpuProfile = flag.Bool("cpuprofile", false, "write a CPU profile of the manager in each run (manager.cpu.prof)")
		lockProfs  = flag.Bool("lockprofiles", false, "write block and mutex profiles of the manager in each run (manager.block.prof, manager.mutex.prof)")
		traceRun   = flag.Bool("trace", false, "write an execution trace of the manager in each run (manager.trace; large)")
		rounds     = flag.Int("rounds", 1, "run every variant this many times, alternating their order; ratios are also given as medians over the rounds")
		qps        = flag.Float64("qps", 0, "the manager's client QPS in every run (clientConnection.qps; negative: no client rate limit); 0 keeps Kueue's default")
		burst      = flag.Int("burst", 0, "the manager's client burst in every run, with -qps")
		apiProfile = flag.Duration("apiserver-cpuprofile", 0, "profile the API server's CPU for this long from the clock's start in each run (apiserver.cpu.prof); 0: no profile")
		gateList   = flag.String("gates", "", "feature gates set in every run over the variant's, as Name=true,Name=false (for example TopologyAwareScheduling=false)")
		probe      = flag.Int("visibility-probe", 0, "beside the load, a ClusterQueue with this many pending workloads whose visibility API endpoints (ClusterQueue and LocalQueue) are read every second while the load plays; 0: none")
		verbosity  = flag.Int("manager-verbosity", -1, "manager log verbosity: -1 errors only (as minimalkueue), 0 info, N for V(N)")
	)
	flag.Parse()

	root, err := controlplane.FindRoot()
	if err != nil {
		return fail(err)
	}
	var mod, dir string
	if _, upstreams := upstreamConfigs[*loadName]; upstreams && *configPath == "" {
		out, err := exec.Command("go", "list", "-m", "-f", "{{.Path}}@{{.Version}} {{.Dir}}", "sigs.k8s.io/kueue").Output()
		var ok bool
		mod, dir, ok = strings.Cut(strings.TrimSpace(string(out)), " ")
		if err != nil || !ok {
			return fail(fmt.Errorf("locating the sigs.k8s.io/kueue module (pass -generator-config): %v", err))
		}
	}
	if *rounds < 1 {
		return fail(fmt.Errorf("-rounds must be at least 1, not %d", *rounds))
	}
	if *scale <= 0 || *scale > 1 {
		return fail(fmt.Errorf("-scale must be in (0, 1], not %g", *scale))
	}
	if *heads < 1 {
		return fail(fmt.Errorf("-heads must be at least 1, not %d", *heads))
	}
	vs, err := variants(strings.Split(*only, ","), *window, *heads)
	if err != nil {
		return fail(err)
	}
	if *writers >= 0 {
		withWriters(vs, *writers)
	}
	ld, err := buildLoad(*loadName, *configPath, dir, mod, *scale)
	if err != nil {
		return fail(err)
	}
	bound, err := capacityBound(ld.cfg)
	if err != nil {
		return fail(err)
	}
	if ld.untilAdmitted {
		// The run ends at the last admission; no finish bounds it.
		bound = 0
	}
	worth, err := quotaWorth(ld.cfg)
	if err != nil {
		return fail(err)
	}
	if *outDir == "" {
		*outDir = filepath.Join(root, ".local", "bench-throughput", time.Now().Format("20060102-150405"))
	}
	if err := os.MkdirAll(*outDir, 0o755); err != nil {
		return fail(err)
	}
	logFile, err := os.Create(filepath.Join(*outDir, "runner.log"))
	if err != nil {
		return fail(err)
	}
	defer logFile.Close()
	log := zap.New(zap.WriteTo(logFile), zap.Level(zapcore.InfoLevel))
	ctrl.SetLogger(log)
	// Upstream's generator uses Gomega helpers for topology configurations; outside a test a
	// failed assertion must end the run, not panic in a goroutine.
	gomega.RegisterFailHandler(func(message string, _ ...int) {
		log.Error(nil, message)
		fmt.Fprintln(os.Stderr, "bench-throughput: generator assertion failed:", message)
		os.Exit(1)
	})
	scheme, err := manager.NewScheme()
	if err != nil {
		return fail(err)
	}

	ctx, stop := signal.NotifyContext(ctrl.LoggerInto(context.Background(), log), os.Interrupt, syscall.SIGTERM)
	defer stop()
	opts := runOptions{root: root, scheme: scheme, timeout: *timeout, webhooks: *webhooks, cpuProfile: *cpuProfile, lockProfiles: *lockProfs, trace: *traceRun, verbosity: *verbosity, progress: os.Stderr,
		background: ld.background, worth: worth, hold: ld.hold, untilAdmitted: ld.untilAdmitted, qps: *qps, burst: *burst, apiProfile: *apiProfile}
	if opts.gates, err = parseGates(*gateList); err != nil {
		return fail(err)
	}
	if *probe < 0 {
		return fail(fmt.Errorf("-visibility-probe must not be negative, not %d", *probe))
	}
	if *probe > 0 {
		opts.probe = *probe
		opts.background = append(slices.Clone(opts.background), probeClass)
	}

	var results []*result
	var classes []string
	for round := range *rounds {
		order := slices.Clone(vs)
		if round%2 == 1 {
			// Background load drifts; alternating the order keeps it from always favouring one run.
			slices.Reverse(order)
		}
		for _, v := range order {
			cfg, err := prepareConfig(ld.cfg, 1, v)
			if err != nil {
				return fail(err)
			}
			var setup *generator.Config
			if ld.setup != nil {
				if setup, err = prepareConfig(ld.setup, 1, v); err != nil {
					return fail(err)
				}
			}
			classes = workloadClasses(cfg)
			dir := filepath.Join(*outDir, v.name)
			if *rounds > 1 {
				dir = filepath.Join(*outDir, fmt.Sprintf("round-%d", round+1), v.name)
			}
			res, err := runVariant(ctx, opts, v, setup, cfg, dir)
			if err != nil {
				return fail(fmt.Errorf("run %s: %w", v.name, err))
			}
			res.round = round
			results = append(results, res)
		}
	}

	workloads, cqs := workloadCount(ld.cfg)
	fmt.Printf("\nload %s: %s, scale %g: %d workloads in %d ClusterQueues measured", ld.name, ld.shown, *scale, workloads, cqs)
	if ld.setup != nil {
		if w, q := workloadCount(ld.setup); w > 0 {
			fmt.Printf("; created and admitted before the clock: %d workloads in %d ClusterQueues", w, q)
		}
		if ld.setup.Topology != nil {
			fmt.Printf("; created before the clock: topology %s and its nodes", ld.setup.Topology.Name)
		}
	}
	if bound > 0 {
		fmt.Printf("\ncapacity bound (work over quota, largest cohort) %s;", bound.Round(100*time.Millisecond))
	} else {
		fmt.Printf("\nthe run ends when every measured workload is admitted;")
	}
	fmt.Printf(" the quota holds %d workloads at once", worth)
	var rateBound float64
	if runtime, ok := uniformRuntime(ld.cfg); ok {
		if r, ok := deepRateBound(workloads, worth, runtime); ok {
			rateBound = r
			fmt.Printf("; admissions/s while deep at most %.1f (every %s the quota's worth)", r, runtime)
		}
	}
	fmt.Println()
	fmt.Printf("artifacts in %s\n\n", *outDir)
	printReport(os.Stdout, results, classes)
	fmt.Println()
	printSummary(os.Stdout, results, classes, bound, rateBound)
	return 0
}

func fail(err error) int {
	fmt.Fprintln(os.Stderr, "bench-throughput:", err)
	return 1
}

// parseGates reads -gates: Name=true or Name=false, comma-separated.
func parseGates(list string) (map[string]bool, error) {
	gates := map[string]bool{}
	for item := range strings.SplitSeq(list, ",") {
		if item = strings.TrimSpace(item); item == "" {
			continue
		}
		name, value, ok := strings.Cut(item, "=")
		on, err := strconv.ParseBool(value)
		if !ok || name == "" || err != nil {
			return nil, fmt.Errorf("-gates: %q is not Name=true or Name=false", item)
		}
		gates[name] = on
	}
	return gates, nil
}
