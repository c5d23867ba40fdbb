package simulator

import (
	"context"
	"flag"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/go-logr/logr"

	kueue "sigs.k8s.io/kueue/apis/kueue/v1beta2"
	"sigs.k8s.io/kueue/pkg/workload"

	"github.com/kueue-timeshare/kueue-timeshare/pkg/estimate"
	"github.com/kueue-timeshare/kueue-timeshare/pkg/plugins"
	"github.com/kueue-timeshare/kueue-timeshare/pkg/plugins/timebased"
	"github.com/kueue-timeshare/kueue-timeshare/pkg/policy"
	"github.com/kueue-timeshare/kueue-timeshare/pkg/queuesettings"
	"github.com/kueue-timeshare/kueue-timeshare/pkg/scheduler/preemption"
)

var (
	estimateCases = flag.Int("estimate-cases", 40, "generated scenarios TestEstimateAccuracy runs")
	estimateSeed  = flag.Int64("estimate-seed", 5100, "first seed of TestEstimateAccuracy")
)

// rotatingWithoutArrivals turns a generated scenario into rotating queues with everything known
// at the start: every workload arrives at once, every ClusterQueue takes turns and stands alone. A
// workload with an expected runtime keeps that promise, from each admission (no checkpoints); the
// others run past the horizon.
func rotatingWithoutArrivals(m *genModel) *genModel {
	m.Cohorts, m.FairSharing, m.DefaultReclaim, m.ResolveQueue = nil, false, 0, false
	for i := range m.CQs {
		cq := &m.CQs[i]
		cq.Cohort, cq.Reclaim, cq.HasReclaimMin = "", "", false
		cq.Within = "LowerOrNewerEqualPriority"
		if cq.Window == 0 {
			cq.Window = 30 * time.Minute
		}
		for j := range cq.Quota {
			cq.Quota[j].HasBorrow, cq.Quota[j].HasLend = false, false
		}
	}
	for i := range m.WLs {
		m.WLs[i].Arrival, m.WLs[i].Checkpointed = 0, false
		m.WLs[i].Duration = 2 * m.Until
		if m.WLs[i].Expected > 0 {
			m.WLs[i].Duration = m.WLs[i].Expected
		}
	}
	return m
}

// estimatesOf computes, from the world as it is, the estimates of every ClusterQueue's pending
// workloads, by workload name.
func estimatesOf(w *world, sc *Scenario, names []string, handover time.Duration) (map[string]estimate.Estimate, error) {
	snap, err := w.cache.Snapshot(w.ctx)
	if err != nil {
		return nil, err
	}
	var on []policy.Feature
	for _, f := range plugins.Units().Features() {
		if queuesettings.FeatureEnabled(f) {
			on = append(on, f)
		}
	}
	pol := policy.New(policy.Options{}, plugins.With(on...))
	// The units resolve what they read about a queue as the preemptor does (policy.Unit.Resolve).
	var units policy.Table
	for _, u := range plugins.Units() {
		if queuesettings.FeatureEnabled(u.Feature) {
			units = append(units, u)
		}
	}
	sources := append(policy.Sources{w.settings}, w.sources...)
	out := map[string]estimate.Estimate{}
	for _, name := range names {
		cq := kueue.ClusterQueueReference(name)
		pending := w.queues.PendingWorkloadsInfo(cq)
		var resolved policy.QueueFacts
		units.Resolve(policy.Judging{Sources: sources, Log: logr.Discard(), Scope: policy.SameClusterQueue,
			Preemptor: snap.ClusterQueue(cq), Victims: snap.ClusterQueue(cq)}, &resolved)
		c := estimate.Config{
			Log: logr.Discard(), Policy: pol, StrictFIFO: w.settings.StrictFIFO(cq), Resolved: resolved,
			Wake:     policy.WakeSettings{Queue: w.settings.UnitSettingsOf(cq), Lengths: w.settings.Lengths(), Enabled: queuesettings.FeatureEnabled},
			Sources:  w.sources,
			Handover: handover,
		}
		if timebased.InQueue(&resolved).TakesTurns() {
			pending = preemption.TurnOrder(logr.Discard(), pending, workload.Ordering{})
			// As the manager gives it: a workload rotated out waits since its eviction.
			c.TurnTime = func(wl *kueue.Workload) time.Time { return preemption.TurnTime(wl, workload.Ordering{}) }
		}
		q, holders, waiting := estimate.FromSnapshot(snap.ClusterQueue(cq), pending, c)
		for _, e := range estimate.Compute(q, holders, waiting, w.clock.Now()) {
			out[e.Workload[strings.Index(e.Workload, "/")+1:]] = e
		}
	}
	return out, nil
}

// TestEstimateAccuracy checks the "done when": for generated rotating queues without new
// arrivals, every estimate made at the start is within one scheduling interval plus the handover
// of the actual admission.
func TestEstimateAccuracy(t *testing.T) {
	const handover = 0
	var scenarios, checked, unknown, beyond int
	var worst time.Duration
	worstAt := ""
	cases := *estimateCases
	if raceDetector && !flagSet("estimate-cases") {
		cases = 6
	}
	for seed := *estimateSeed; seed < *estimateSeed+int64(cases); seed++ {
		m := rotatingWithoutArrivals(generate(seed))
		sc, err := Parse(fmt.Sprintf("generated-%d.yaml", seed), []byte(m.YAML()))
		if err != nil {
			t.Fatalf("seed %d: %v", seed, err)
		}
		var names []string
		for _, cq := range m.CQs {
			names = append(names, cq.Name)
		}
		var est map[string]estimate.Estimate
		var start time.Time
		var seen int
		var estErr error
		res, err := Run(context.Background(), sc, Options{observe: func(now time.Duration, w *world) {
			if est == nil && estErr == nil {
				start, seen = w.start, len(w.events)
				est, estErr = estimatesOf(w, sc, names, handover)
			}
		}})
		if err != nil || estErr != nil {
			t.Fatalf("seed %d: %v %v", seed, err, estErr)
		}
		scenarios++
		admitted := map[string]time.Duration{}
		for _, e := range res.Events[seen:] {
			if _, ok := admitted[e.Workload]; !ok && e.Kind == EventAdmitted {
				admitted[e.Workload] = e.At
			}
		}
		tolerance := m.Interval + handover
		for name, e := range est {
			actual, ok := admitted[name]
			switch {
			case e.Unknown:
				unknown++
				if testing.Verbose() {
					t.Logf("seed %d: %s unknown: %s", seed, name, e.Reason)
				}
				if ok {
					t.Errorf("seed %d: %s estimated unknown (%s), admitted at %s", seed, name, e.Reason, FormatOffset(actual))
				}
				continue
			case e.When.Sub(start) > m.Until-tolerance:
				beyond++
				if ok && e.When.Sub(start)-actual > tolerance {
					t.Errorf("seed %d: %s estimated at %s, beyond the horizon, admitted at %s", seed, name, FormatOffset(e.When.Sub(start)), FormatOffset(actual))
				}
				continue
			case !ok:
				t.Errorf("seed %d: %s estimated at %s (%s), never admitted", seed, name, FormatOffset(e.When.Sub(start)), e.Reason)
				continue
			}
			checked++
			diff := (e.When.Sub(start) - actual).Abs()
			if diff > worst {
				worst, worstAt = diff, fmt.Sprintf("seed %d, %s", seed, name)
			}
			if diff > tolerance {
				t.Errorf("seed %d: %s estimated at %s (%s, %d in line), admitted at %s", seed, name, FormatOffset(e.When.Sub(start)), e.Reason, e.Position, FormatOffset(actual))
			}
		}
	}
	t.Logf("%d scenarios: %d estimates checked, %d unknown, %d beyond the horizon; worst error %s (%s)", scenarios, checked, unknown, beyond, worst, worstAt)
}
