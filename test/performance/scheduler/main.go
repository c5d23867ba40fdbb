// Command bench-throughput runs upstream Kueue's scheduler performance load (the generator
// configuration of test/performance/scheduler in the Kueue module, read from the module at run
// time) through kueue-timeshare's manager three times, each on a fresh envtest control plane:
//
//	(a) with upstream's admission loop (manager.Options.UpstreamScheduler),
//	(b) with ours and our feature gates off,
//	(c) with ours and a minAdmitDuration on every ClusterQueue.
//
// The load is played by upstream's runner packages, imported from the module: its generator
// creates the ClusterQueues and Workloads, its controller finishes each Workload after its runtime,
// and its recorder measures. The manager runs in a child process (this binary's "manager"
// subcommand), so that its CPU time and memory are measured apart from the runner's, as upstream's
// runner does with minimalkueue. It prints, per run, the time until every workload was admitted and
// finished, the average time to admission per workload class, ClusterQueue usage as upstream's
// checker computes it, and the ratios ours/upstream. See docs/performance.md (benchmark 1).
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

// baselineConfig is the generator configuration's path inside the Kueue module.
const baselineConfig = "test/performance/scheduler/configs/baseline/generator.yaml"

func main() {
	if len(os.Args) > 1 && os.Args[1] == managerCommand {
		os.Exit(runManagerCommand(os.Args[2:]))
	}
	os.Exit(run())
}

func run() int {
	var (
		configPath = flag.String("generator-config", "", "upstream generator configuration; default: "+baselineConfig+" in the sigs.k8s.io/kueue module this repository builds against")
		scale      = flag.Float64("scale", 1, "fraction of every workloads set's count to generate (rounded up, at least 1); 1 is the full configuration")
		only       = flag.String("variants", "upstream,off,on", "comma-separated runs, in order: upstream, off, on")
		window     = flag.Duration("min-admit-duration", time.Minute, "minAdmitDuration set on every ClusterQueue in the \"on\" run (at least 1m)")
		outDir     = flag.String("o", "", "directory for artifacts (summaries, CSVs, manager logs, profiles); default .local/bench-throughput/<time>")
		timeout    = flag.Duration("timeout", 30*time.Minute, "longest a run may record before it is reported as timed out")
		webhooks   = flag.Bool("webhooks", false, "install Kueue's and our webhook configurations (upstream's runner runs without)")
		cpuProfile = flag.Bool("cpuprofile", false, "write a CPU profile of the manager in each run (manager.cpu.prof)")
		rounds     = flag.Int("rounds", 1, "run every variant this many times, alternating their order; ratios are also given as medians over the rounds")
		verbosity  = flag.Int("manager-verbosity", -1, "manager log verbosity: -1 errors only (as minimalkueue), 0 info, N for V(N)")
	)
	flag.Parse()

	root, err := controlplane.FindRoot()
	if err != nil {
		return fail(err)
	}
	shown := *configPath
	if *configPath == "" {
		out, err := exec.Command("go", "list", "-m", "-f", "{{.Path}}@{{.Version}} {{.Dir}}", "sigs.k8s.io/kueue").Output()
		mod, dir, ok := strings.Cut(strings.TrimSpace(string(out)), " ")
		if err != nil || !ok {
			return fail(fmt.Errorf("locating the sigs.k8s.io/kueue module (pass -generator-config): %v", err))
		}
		*configPath = filepath.Join(dir, baselineConfig)
		shown = mod + "/" + baselineConfig
	}
	if *rounds < 1 {
		return fail(fmt.Errorf("-rounds must be at least 1, not %d", *rounds))
	}
	if *scale <= 0 || *scale > 1 {
		return fail(fmt.Errorf("-scale must be in (0, 1], not %g", *scale))
	}
	vs, err := variants(strings.Split(*only, ","), *window)
	if err != nil {
		return fail(err)
	}
	base, err := generator.LoadConfig(*configPath)
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
	opts := runOptions{root: root, scheme: scheme, timeout: *timeout, webhooks: *webhooks, cpuProfile: *cpuProfile, verbosity: *verbosity, progress: os.Stderr}

	var results []*result
	var classes []string
	for round := range *rounds {
		order := slices.Clone(vs)
		if round%2 == 1 {
			// Background load drifts; alternating the order keeps it from always favouring one run.
			slices.Reverse(order)
		}
		for _, v := range order {
			cfg, err := prepareConfig(base, *scale, v)
			if err != nil {
				return fail(err)
			}
			classes = workloadClasses(cfg)
			dir := filepath.Join(*outDir, v.name)
			if *rounds > 1 {
				dir = filepath.Join(*outDir, fmt.Sprintf("round-%d", round+1), v.name)
			}
			res, err := runVariant(ctx, opts, v, cfg, dir)
			if err != nil {
				return fail(fmt.Errorf("run %s: %w", v.name, err))
			}
			res.round = round
			results = append(results, res)
		}
	}

	workloads, cqs := workloadCount(mustPrepare(base, *scale))
	fmt.Printf("\ngenerator configuration %s, scale %g: %d workloads in %d ClusterQueues\n", shown, *scale, workloads, cqs)
	fmt.Printf("artifacts in %s\n\n", *outDir)
	printReport(os.Stdout, results, classes)
	return 0
}

func mustPrepare(base *generator.Config, scale float64) *generator.Config {
	cfg, err := prepareConfig(base, scale, variant{})
	if err != nil {
		panic(err)
	}
	return cfg
}

func fail(err error) int {
	fmt.Fprintln(os.Stderr, "bench-throughput:", err)
	return 1
}
