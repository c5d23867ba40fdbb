package simulator

import (
	"cmp"
	"context"
	"encoding/json"
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/go-logr/logr"
	"k8s.io/apimachinery/pkg/types"
	utilfeature "k8s.io/apiserver/pkg/util/feature"
	"k8s.io/component-base/featuregate"
	"k8s.io/utils/ptr"

	kueuefeatures "sigs.k8s.io/kueue/pkg/features"

	tsconfig "github.com/kueue-timeshare/kueue-timeshare/apis/config/v1alpha1"
	tsfeatures "github.com/kueue-timeshare/kueue-timeshare/pkg/features"
	"github.com/kueue-timeshare/kueue-timeshare/pkg/plugins"
	"github.com/kueue-timeshare/kueue-timeshare/pkg/policy"
	"github.com/kueue-timeshare/kueue-timeshare/pkg/scheduler"
	"github.com/kueue-timeshare/kueue-timeshare/pkg/timeutil"
)

// Mode says whose semantics a run has.
type Mode string

const (
	// ModeTimeshare runs kueue-timeshare as configured: the scenario's feature gates (all on by
	// default).
	ModeTimeshare Mode = "timeshare"
	// ModeUpstream turns every kueue-timeshare feature gate off: upstream Kueue's semantics, which
	// our scheduler keeps at parity. The scenario's kueue-timeshare fields are then ignored.
	ModeUpstream Mode = "upstream"
	// ModeBooster is upstream's semantics plus upstream's experimental kueue-priority-booster
	// controller: after minAdmitDuration (the scenario's largest) an admitted workload gets a
	// negative priority boost, and ClusterQueues with withinClusterQueue LowerOrNewerEqualPriority
	// use LowerPriority, as the booster requires.
	ModeBooster Mode = "booster"
	// modeWithout, followed by a feature, is kueue-timeshare as configured but with that feature's
	// gate off (ModeWithout).
	modeWithout = "timeshare-without-"
)

// ModeWithout is kueue-timeshare as configured but with f's gate off: --compare adds it when the
// scenario makes f act (its plugin's Compared), to show what f changes.
func ModeWithout(f policy.Feature) Mode { return Mode(modeWithout + string(f)) }

// without is the feature a ModeWithout turns off.
func (m Mode) without() (policy.Feature, bool) {
	f, ok := strings.CutPrefix(string(m), modeWithout)
	return policy.Feature(f), ok
}

// Title is how output names a mode.
func (m Mode) Title() string {
	if f, ok := m.without(); ok {
		return "kueue-timeshare without " + string(f)
	}
	return cmp.Or(map[Mode]string{ModeUpstream: "upstream (features off)", ModeBooster: "upstream + priority booster"}[m], "kueue-timeshare")
}

// Options tune a run.
type Options struct {
	Mode Mode
	// Log receives the scheduler's and the controllers' logs (verbosity 6 shows the victim
	// policy's decisions). Discarded when unset.
	Log logr.Logger
	// Progress, when set, is called after every step with the simulated time reached and the
	// time the simulation stops at, at the latest.
	Progress func(reached, end time.Duration)
	// observe, when set, is called at every instant once scheduling has settled (the property
	// checker reads the cluster there).
	observe func(now time.Duration, w *world)
	// preemptor, when set, wraps the loop's preemptor (tests watch each cycle's heads and
	// admissions through its hooks).
	preemptor func(w *world, p scheduler.Preemptor) scheduler.Preemptor
	// removed, when set, is a feature built out of the preemptor and the waker (its unit and
	// plugin), its gate left as the mode sets it: tests check that removing it is turning it off.
	removed policy.Feature
}

// Run simulates the scenario. Runs change process-wide feature gates while they last, so they must
// not overlap.
func Run(ctx context.Context, sc *Scenario, opts Options) (*Result, error) {
	if opts.Mode == "" {
		opts.Mode = ModeTimeshare
	}
	log := opts.Log
	if log.GetSink() == nil {
		log = logr.Discard()
	}
	restore, err := setGates(sc, opts.Mode)
	if err != nil {
		return nil, err
	}
	defer restore()

	w, err := newWorld(ctx, sc, opts.Mode, log, opts.preemptor, opts.removed)
	if err != nil {
		return nil, err
	}
	specs := sc.WorkloadSpecs()
	order := make([]*job, 0, len(specs))
	for i, spec := range specs {
		j := newJob(spec, types.UID(fmt.Sprintf("wl-%05d", i+1)))
		w.jobs[j.key] = j
		order = append(order, j)
	}
	horizon, fixed := sc.horizon(specs)
	interval := sc.schedulingInterval()

	arrivals := 0
	// retries counts steps taken only to retry heads that keep failing while nothing changes.
	retries := 0
	var end time.Duration
	for {
		if err := ctx.Err(); err != nil {
			return nil, err
		}
		now := w.now()
		for _, j := range completions(order, now) {
			if err := w.finish(j); err != nil {
				return nil, err
			}
		}
		if err := w.saveCheckpoints(order); err != nil {
			return nil, err
		}
		for _, j := range order {
			if j.toggle != noToggle && j.toggleAt <= now {
				if err := w.toggleActive(j); err != nil {
					return nil, err
				}
			}
		}
		for arrivals < len(order) && order[arrivals].spec.Arrival <= now {
			if err := w.submit(order[arrivals]); err != nil {
				return nil, err
			}
			arrivals++
		}
		w.sync()
		// The manager's waker sweeps every second and at each end it sees coming; a sweep covers
		// everything since the previous one, so one at each step does the same.
		w.waker.Sweep(w.ctx)
		w.requeuer.ProcessRequeues(w.ctx)
		var boosterNext time.Duration
		if w.booster != nil {
			boosterNext = w.booster.reconcile(now)
			w.sync()
		}
		before := len(w.events)
		spinning := w.schedule()
		if w.booster != nil {
			// The booster also sees the workloads this step admitted, as its watch would.
			if again := w.booster.reconcile(now); again != 0 && (boosterNext == 0 || again < boosterNext) {
				boosterNext = again
			}
			if w.sync() {
				spinning = w.schedule() || spinning
			}
		}
		if len(w.events) > before {
			retries = 0
		}
		if opts.observe != nil {
			opts.observe(now, w)
		}
		if opts.Progress != nil {
			opts.Progress(now, horizon)
		}

		if !fixed && w.finished == len(order) {
			end = now
			break
		}
		if now >= horizon {
			end = horizon
			break
		}
		next := horizon
		if arrivals < len(order) {
			next = min(next, order[arrivals].spec.Arrival)
		}
		for _, j := range order {
			if j.toggle != noToggle {
				next = min(next, j.toggleAt)
			}
			if j.state == running {
				next = min(next, j.finishAt)
				if n := j.warning; n != nil && !n.saved && n.checkpointAt > now {
					next = min(next, n.checkpointAt)
				}
			}
		}
		// Again, for the ends of what this step admitted.
		w.waker.Sweep(w.ctx)
		if ch := w.waker.Next(); !ch.At.IsZero() {
			next = min(next, ch.Wake().Sub(w.start))
		}
		// The scheduler's loop retries such heads at once, over and over; with nothing changing in
		// the cluster the outcome is the same each time, so the simulation retries them a few
		// times, then waits for the next event.
		if spinning && retries < maxRetries {
			retry := timeutil.Add(now, interval)
			if retry < next {
				retries++
			}
			next = min(next, retry)
		}
		if boosterNext > now {
			next = min(next, boosterNext)
		}
		w.clock.SetTime(w.start.Add(next))
	}
	if unfinished := len(order) - w.finished; unfinished > 0 {
		why := "simulation.until"
		if !fixed {
			why = "the default limit (last arrival plus twice the sum of all durations)"
		}
		w.note("stopped at %s (%s) with %d of %d workloads unfinished", FormatOffset(end), why, unfinished, len(order))
	}
	return w.result(sc, opts.Mode, order, end), nil
}

// maxRetries bounds the steps taken only to retry heads that keep failing while nothing changes.
const maxRetries = 10

// completions lists the running jobs done by now, earliest first.
func completions(order []*job, now time.Duration) []*job {
	var out []*job
	for _, j := range order {
		if j.state == running && j.finishAt <= now {
			out = append(out, j)
		}
	}
	slices.SortStableFunc(out, func(a, b *job) int { return cmp.Compare(a.finishAt, b.finishAt) })
	return out
}

// horizon is when the simulation stops at the latest, and whether the scenario fixed it.
func (s *Scenario) horizon(specs []WorkloadSpec) (time.Duration, bool) {
	if s.Simulation.Until != nil {
		return s.Simulation.Until.Duration, true
	}
	var last, total time.Duration
	for _, w := range specs {
		last = max(last, w.Arrival)
		total = timeutil.Add(total, w.Duration)
	}
	return timeutil.Add(last, timeutil.Mul(total, 2)), false
}

func (s *Scenario) schedulingInterval() time.Duration {
	return ptr.Deref(s.Simulation.SchedulingInterval, Duration{DefaultSchedulingInterval}).Duration
}

// setGates sets the process-wide feature gates for mode and returns what restores them.
func setGates(sc *Scenario, mode Mode) (func(), error) {
	want := map[string]bool{}
	off, without := mode.without()
	ours := mode == ModeTimeshare || without
	for _, g := range ourGates() {
		want[g] = ours && sc.gateOn(g) && g != string(off)
	}
	// Kueue's gates whose default the manager changes: its default for our semantics, upstream's
	// otherwise, unless the scenario sets them (then in every mode, as upstream reads them too).
	for g, on := range tsfeatures.KueueDefaults {
		if _, set := sc.FeatureGates[g]; set || !ours {
			on = sc.gateOn(g)
		}
		want[g] = on
	}
	want[string(kueuefeatures.PriorityBoost)] = mode == ModeBooster
	prev := map[string]bool{}
	for g := range want {
		prev[g] = utilfeature.DefaultFeatureGate.Enabled(featuregate.Feature(g))
	}
	if err := utilfeature.DefaultMutableFeatureGate.SetFromMap(want); err != nil {
		return func() {}, fmt.Errorf("setting feature gates: %w", err)
	}
	return func() { _ = utilfeature.DefaultMutableFeatureGate.SetFromMap(prev) }, nil
}

// Comparisons are the modes --compare runs besides upstream's for the scenario: one without each
// feature that is on and that the scenario makes act, where its unit compares it.
func (s *Scenario) Comparisons() []Mode {
	var specs []json.RawMessage
	for _, u := range append(slices.Clone(s.ClusterQueues), s.Cohorts...) {
		spec, _ := json.Marshal(u.Object["spec"])
		specs = append(specs, spec)
	}
	var modes []Mode
	for _, u := range plugins.Units() {
		if c, ok := u.Plugin.(comparer); ok && s.gateOn(string(u.Feature)) && c.Compared(s.timeshareConfig(), specs) {
			modes = append(modes, ModeWithout(u.Feature))
		}
	}
	return modes
}

// gateOn reports whether the scenario turns gate g on, by setting it or by its default.
func (s *Scenario) gateOn(g string) bool {
	on, set := s.FeatureGates[g]
	if !set {
		on = utilfeature.DefaultMutableFeatureGate.GetAll()[featuregate.Feature(g)].Default
	}
	return on
}

// headsPerCycle is the scenario's timeshare.headsPerCycle; the comparison modes run upstream's
// loop, one head per ClusterQueue per cycle.
func headsPerCycle(mode Mode, ts *tsconfig.Configuration) int {
	if mode == ModeUpstream || mode == ModeBooster || ts.HeadsPerCycle == nil {
		return 1
	}
	return int(*ts.HeadsPerCycle)
}
