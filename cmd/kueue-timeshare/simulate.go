package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"os/signal"
	"strings"
	"time"

	"github.com/go-logr/logr"
	"go.uber.org/zap/zapcore"
	"k8s.io/klog/v2"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/log/zap"

	"github.com/kueue-timeshare/kueue-timeshare/pkg/policy"
	"github.com/kueue-timeshare/kueue-timeshare/pkg/simulator"
)

const simulateUsage = `Usage: kueue-timeshare simulate -f scenario.yaml [flags]

Runs a scenario (queues, priority classes and workloads with arrival times and true durations)
on a simulated clock through kueue-timeshare's scheduler, preemptor and victim policy, and
reports waits, preemptions, fairness and utilisation. See docs/simulator.md.

Flags:
`

// simulateOptions are the simulate subcommand's flags.
type simulateOptions struct {
	file      string
	compare   bool
	booster   bool
	output    string
	svg       string
	timeline  bool
	verbosity int
	progress  bool
}

// runSimulate is the simulate subcommand; it returns the exit code.
func runSimulate(args []string, stdout, stderr io.Writer) int {
	var o simulateOptions
	fs := flag.NewFlagSet("simulate", flag.ContinueOnError)
	fs.SetOutput(stderr)
	fs.Usage = func() {
		fmt.Fprint(stderr, simulateUsage)
		fs.PrintDefaults()
	}
	fs.StringVar(&o.file, "f", "", "The scenario file (YAML). Required.")
	fs.BoolVar(&o.compare, "compare", false, "Also run the scenario with every kueue-timeshare feature off (upstream Kueue's semantics) and show both; a scenario that makes one of "+comparedFeatures()+" act is also run with that gate off.")
	fs.BoolVar(&o.booster, "booster", false, "Also run it with upstream's kueue-priority-booster (negative priority boost after the largest minAdmitDuration).")
	fs.StringVar(&o.output, "output", "table", "Output format: table or json.")
	fs.StringVar(&o.svg, "svg", "", "Write a Gantt chart of who held quota when to this SVG file.")
	fs.BoolVar(&o.timeline, "timeline", false, "Print every admission, preemption and completion in order (table output).")
	fs.IntVar(&o.verbosity, "v", -1, "Log the scheduler's decisions to stderr at this verbosity (6 shows the victim policy's rules). Off when negative.")
	fs.BoolVar(&o.progress, "progress", true, "Show a progress bar on stderr when it is a terminal.")
	if err := fs.Parse(args); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			return 0
		}
		return 2
	}
	if fs.NArg() > 0 {
		fmt.Fprintf(stderr, "kueue-timeshare simulate: unexpected argument %q\n", fs.Arg(0))
		fs.Usage()
		return 2
	}
	if o.file == "" {
		fmt.Fprintln(stderr, "kueue-timeshare simulate: -f scenario.yaml is required")
		fs.Usage()
		return 2
	}
	if o.output != "table" && o.output != "json" {
		fmt.Fprintf(stderr, "kueue-timeshare simulate: --output %q: use table or json\n", o.output)
		return 2
	}

	log := logr.Discard()
	if o.verbosity >= 0 {
		log = zap.New(zap.WriteTo(stderr), zap.Level(zapcore.Level(-o.verbosity)), zap.UseDevMode(false))
	}
	// Upstream's controllers log through the global loggers.
	ctrl.SetLogger(log)
	klog.SetLogger(log)

	sc, err := simulator.Load(o.file)
	if err != nil {
		fmt.Fprintln(stderr, err)
		return 1
	}
	modes := []simulator.Mode{simulator.ModeTimeshare}
	if o.compare {
		modes = append(append(modes, sc.Comparisons()...), simulator.ModeUpstream)
	}
	if o.booster {
		modes = append(modes, simulator.ModeBooster)
	}

	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt)
	defer stop()
	var runs []*simulator.Result
	for _, m := range modes {
		opts := simulator.Options{Mode: m, Log: log}
		var bar *progressBar
		if o.progress && isTerminal(stderr) {
			bar = &progressBar{out: stderr, label: m.Title()}
			opts.Progress = bar.update
		}
		r, err := simulator.Run(ctx, sc, opts)
		bar.done()
		if err != nil {
			fmt.Fprintf(stderr, "kueue-timeshare simulate: %s: %v\n", m.Title(), err)
			return 1
		}
		runs = append(runs, r)
	}

	if o.svg != "" {
		if err := writeSVGFile(o.svg, runs); err != nil {
			fmt.Fprintf(stderr, "kueue-timeshare simulate: --svg: %v\n", err)
			return 1
		}
	}
	if o.output == "json" {
		err = simulator.WriteJSON(stdout, runs...)
	} else {
		err = simulator.WriteTable(stdout, runs...)
		for _, r := range runs {
			if err == nil && o.timeline {
				fmt.Fprintln(stdout)
				err = simulator.WriteTimeline(stdout, r)
			}
		}
	}
	if err != nil {
		fmt.Fprintf(stderr, "kueue-timeshare simulate: %v\n", err)
		return 1
	}
	return 0
}

func writeSVGFile(path string, runs []*simulator.Result) error {
	f, err := os.Create(path)
	if err != nil {
		return err
	}
	if err := simulator.WriteSVG(f, runs...); err != nil {
		f.Close()
		return err
	}
	return f.Close()
}

// isTerminal reports whether w is a character device (a terminal), not a file or a pipe.
func isTerminal(w io.Writer) bool {
	f, ok := w.(*os.File)
	if !ok {
		return false
	}
	fi, err := f.Stat()
	return err == nil && fi.Mode()&os.ModeCharDevice != 0
}

// progressBar draws the simulated time reached on one line, at most ten times a second.
type progressBar struct {
	out   io.Writer
	label string
	last  time.Time
	drawn bool
}

func (p *progressBar) update(reached, end time.Duration) {
	if time.Since(p.last) < 100*time.Millisecond || end <= 0 {
		return
	}
	p.last = time.Now()
	const width = 30
	frac := min(float64(reached)/float64(end), 1)
	filled := int(frac * width)
	fmt.Fprintf(p.out, "\r%s [%s%s] %3.0f%% of %s simulated", p.label, strings.Repeat("#", filled), strings.Repeat(".", width-filled), frac*100, end)
	p.drawn = true
}

func (p *progressBar) done() {
	if p != nil && p.drawn {
		fmt.Fprint(p.out, "\r\033[K")
	}
}

// comparedFeatures names the features --compare may also turn off one at a time.
func comparedFeatures() string {
	var out []string
	for _, u := range policy.Units() {
		if u.Compared != nil {
			out = append(out, string(u.Feature))
		}
	}
	return strings.Join(out, ", ")
}
