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
	schdcache "sigs.k8s.io/kueue/pkg/cache/scheduler"
	"sigs.k8s.io/kueue/pkg/workload"

	"github.com/kueue-timeshare/kueue-timeshare/pkg/cohorttree"
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

// estimating is what the manager gives the walks of a world's ClusterQueues: the preemptor's
// policy and the units that are on, which resolve what they read about a queue as the preemptor
// does (policy.Unit.Resolve), with their sources.
type estimating struct {
	w        *world
	snap     *schdcache.Snapshot
	pol      *policy.Policy
	units    policy.Table
	sources  policy.Sources
	handover time.Duration
}

func newEstimating(w *world, handover time.Duration) (*estimating, error) {
	snap, err := w.cache.Snapshot(w.ctx)
	if err != nil {
		return nil, err
	}
	e := &estimating{w: w, snap: snap, sources: append(policy.Sources{w.settings}, w.sources...), handover: handover}
	var on []policy.Feature
	for _, u := range plugins.Units() {
		if queuesettings.FeatureEnabled(u.Feature) {
			on = append(on, u.Feature)
			e.units = append(e.units, u)
		}
	}
	e.pol = policy.New(policy.Options{}, plugins.With(on...))
	return e, nil
}

// resolve is what the units resolve about victims' workloads against a preemptor of preemptor.
func (e *estimating) resolve(preemptor, victims *schdcache.ClusterQueueSnapshot) policy.QueueFacts {
	scope := policy.SameClusterQueue
	if preemptor != victims {
		scope = policy.OtherClusterQueue
	}
	var q policy.QueueFacts
	e.units.Resolve(policy.Judging{Sources: e.sources, Log: logr.Discard(), Scope: scope, Preemptor: preemptor, Victims: victims,
		PreemptorParents: cohorttree.Parents(preemptor)}, &q)
	return q
}

// config is cq's estimate.Config, as the manager gives it.
func (e *estimating) config(cq *schdcache.ClusterQueueSnapshot) estimate.Config {
	resolved := e.resolve(cq, cq)
	c := estimate.Config{
		Log: logr.Discard(), Policy: e.pol, StrictFIFO: e.w.settings.StrictFIFO(cq.Name), Resolved: resolved,
		Wake:     policy.WakeSettings{Queue: e.w.settings.UnitSettingsOf(cq.Name), Lengths: e.w.settings.Lengths(), Enabled: queuesettings.FeatureEnabled},
		Sources:  e.w.sources,
		Handover: e.handover,
		Against:  func(victims *schdcache.ClusterQueueSnapshot) policy.QueueFacts { return e.resolve(cq, victims) },
	}
	c.Preemptor, _ = e.w.sched.ActivePreemptor(cq.Name)
	if timebased.InQueue(&resolved).TakesTurns() {
		// As the manager gives it: a workload rotated out waits since its eviction.
		c.TurnTime = func(wl *kueue.Workload) time.Time { return preemption.TurnTime(wl, workload.Ordering{}) }
	}
	return c
}

// pending is cq's pending workloads in the order the visibility API shows them.
func (e *estimating) pending(cq kueue.ClusterQueueReference) []*workload.Info {
	infos := e.w.queues.PendingWorkloadsInfo(cq)
	if s := e.snap.ClusterQueue(cq); s != nil {
		if resolved := e.resolve(s, s); timebased.InQueue(&resolved).TakesTurns() {
			infos = preemption.TurnOrder(logr.Discard(), infos, workload.Ordering{})
		}
	}
	return infos
}

// byName keys estimates by workload name (without the namespace).
func byName(out map[string]estimate.Estimate, ests []estimate.Estimate) {
	for _, e := range ests {
		out[e.Workload[strings.Index(e.Workload, "/")+1:]] = e
	}
}

// estimatesOf computes, from the world as it is, the estimates of every ClusterQueue's pending
// workloads, each ClusterQueue walked alone, by workload name.
func estimatesOf(w *world, names []string, handover time.Duration) (map[string]estimate.Estimate, error) {
	e, err := newEstimating(w, handover)
	if err != nil {
		return nil, err
	}
	out := map[string]estimate.Estimate{}
	for _, name := range names {
		cq := e.snap.ClusterQueue(kueue.ClusterQueueReference(name))
		q, holders, waiting := estimate.FromSnapshot(cq, e.pending(cq.Name), e.config(cq))
		byName(out, estimate.Compute(q, holders, waiting, w.clock.Now()))
	}
	return out, nil
}

// estimatedRun runs m once, estimates with estimates at the first instant from `from` on, and
// returns those estimates, the run's start, and each workload's first admission after them.
func estimatedRun(t *testing.T, m *genModel, from time.Duration,
	estimates func(w *world, names []string) (map[string]estimate.Estimate, error)) (map[string]estimate.Estimate, time.Time, map[string]time.Duration) {
	t.Helper()
	sc, err := Parse(fmt.Sprintf("generated-%d.yaml", m.Seed), []byte(m.YAML()))
	if err != nil {
		t.Fatalf("seed %d: %v", m.Seed, err)
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
		if est == nil && estErr == nil && now >= from {
			start, seen = w.start, len(w.events)
			est, estErr = estimates(w, names)
		}
	}})
	if err != nil || estErr != nil {
		t.Fatalf("seed %d: %v %v", m.Seed, err, estErr)
	}
	admitted := map[string]time.Duration{}
	for _, e := range res.Events[seen:] {
		if _, ok := admitted[e.Workload]; !ok && e.Kind == EventAdmitted {
			admitted[e.Workload] = e.At
		}
	}
	return est, start, admitted
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
		est, start, admitted := estimatedRun(t, m, 0, func(w *world, names []string) (map[string]estimate.Estimate, error) {
			return estimatesOf(w, names, handover)
		})
		scenarios++
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
