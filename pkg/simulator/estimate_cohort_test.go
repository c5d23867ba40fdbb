package simulator

import (
	"flag"
	"fmt"
	"maps"
	"math/rand"
	"regexp"
	"slices"
	"strings"
	"testing"
	"time"

	kueue "sigs.k8s.io/kueue/apis/kueue/v1beta2"

	"github.com/kueue-timeshare/kueue-timeshare/pkg/estimate"
)

var (
	cohortCases    = flag.Int("estimate-cohort-cases", 40, "generated cohort scenarios TestEstimateAccuracyInCohorts runs")
	cohortSeed     = flag.Int64("estimate-cohort-seed", 7000, "first seed TestEstimateAccuracyInCohorts tries")
	cohortDeclared = flag.Float64("estimate-cohort-declared", 0, "share of the workloads without an expected runtime that TestEstimateAccuracyInCohorts gives one (their generated duration)")
	cohortAlone    = flag.Bool("estimate-cohort-alone", false, "TestEstimateAccuracyInCohorts estimates each ClusterQueue alone, as before the cohort walk, for comparison")
)

// inCohortWithoutArrivals keeps a generated scenario's cohort as it is (borrowing and lending
// limits, reclaim policies and min-runtimes, fair sharing on or off, windows in some
// ClusterQueues) and its arrivals, each a second apart from the others (the scheduler breaks ties
// between equal queue times of different ClusterQueues in no fixed order); one with an expected
// runtime keeps that promise from each admission, the others run past the horizon; declared is
// the share of the others that declare their generated duration. It returns the last arrival,
// after which nothing arrives.
func inCohortWithoutArrivals(m *genModel, declared float64) (*genModel, time.Duration) {
	var last time.Duration
	rng := rand.New(rand.NewSource(m.Seed))
	for i := range m.WLs {
		if m.WLs[i].Expected == 0 && rng.Float64() < declared {
			m.WLs[i].Expected = m.WLs[i].Duration
		}
		m.WLs[i].Arrival += time.Duration(i) * time.Second
		m.WLs[i].Checkpointed = false
		m.WLs[i].Duration = 2 * m.Until
		if m.WLs[i].Expected > 0 {
			m.WLs[i].Duration = m.WLs[i].Expected
		}
		last = max(last, m.WLs[i].Arrival)
	}
	return m, last
}

// cohortEstimatesOf computes, from the world as it is, the estimates of every pending workload,
// walking each cohort tree once (estimate.FromCohort), by workload name.
func cohortEstimatesOf(w *world, names []string, fairSharing bool, handover time.Duration) (map[string]estimate.Estimate, error) {
	e, err := newEstimating(w, handover)
	if err != nil {
		return nil, err
	}
	out := map[string]estimate.Estimate{}
	walked := map[kueue.ClusterQueueReference]bool{}
	for _, name := range names {
		cq := e.snap.ClusterQueue(kueue.ClusterQueueReference(name))
		if cq == nil || walked[cq.Name] {
			continue
		}
		tree, members := estimate.FromCohort(e.snap, cq, e.pending, e.config)
		for _, m := range tree.ClusterQueues() {
			walked[m] = true
		}
		for _, ests := range estimate.ComputeCohort(estimate.CohortOptions{Tree: tree, FairSharing: fairSharing}, members, w.clock.Now()) {
			byName(out, ests)
		}
	}
	return out, nil
}

// namesInReason are the workload and queue names a reason carries, so that reasons can be
// counted by kind.
var namesInReason = regexp.MustCompile(`\b[a-z0-9-]+/[a-z0-9-]+\b|\b(cq|w)[0-9]+\b|cohort [a-z0-9-]+`)

// neverFits are the reasons that say a workload will never be admitted: an answer, not an unknown.
var neverFits = regexp.MustCompile(`^(behind \S+ in turn order \()?does not fit in ClusterQueue \S+ even with every workload gone`)

// TestEstimateAccuracyInCohorts checks the cohort estimates against the simulator: for generated
// scenarios in a cohort, every estimate made after the last arrival is within one
// scheduling interval plus the handover of the actual admission, or says why it is unknown. It
// reports the share that is unknown and each reason's count.
func TestEstimateAccuracyInCohorts(t *testing.T) {
	const handover = 0
	var scenarios, estimates, checked, unknown, unknownAdmitted, beyond, noted, notedWrong, never int
	reasons := map[string]int{}
	var worst time.Duration
	worstAt := ""
	cases := *cohortCases
	if raceDetector && !flagSet("estimate-cohort-cases") {
		cases = 6
	}
	for seed := *cohortSeed; scenarios < cases; seed++ {
		m := generate(seed)
		if m.CQs[0].Cohort == "" || len(m.CQs) < 2 {
			continue
		}
		m, last := inCohortWithoutArrivals(m, *cohortDeclared)
		est, start, admitted := estimatedRun(t, m, last, func(w *world, names []string) (map[string]estimate.Estimate, error) {
			if *cohortAlone {
				return estimatesOf(w, names, handover)
			}
			return cohortEstimatesOf(w, names, m.FairSharing, handover)
		})
		scenarios++
		tolerance := m.Interval + handover
		for _, name := range slices.Sorted(maps.Keys(est)) {
			e := est[name]
			estimates++
			if strings.Contains(e.Reason, "  ") {
				t.Errorf("seed %d: %s: its reason leaves a name out: %q", seed, name, e.Reason)
			}
			actual, ok := admitted[name]
			switch {
			case e.Unknown && neverFits.MatchString(e.Reason):
				never++
				if ok {
					t.Errorf("seed %d: %s estimated never to fit (%s), admitted at %s", seed, name, e.Reason, FormatOffset(actual))
				}
				continue
			case e.Unknown:
				unknown++
				reasons[namesInReason.ReplaceAllString(e.Reason, "…")]++
				if ok {
					unknownAdmitted++
				}
				if testing.Verbose() {
					t.Logf("seed %d: %s unknown: %s (admitted: %t at %s)", seed, name, e.Reason, ok, FormatOffset(actual))
				}
				continue
			case e.When.Sub(start) > m.Until-tolerance && e.Note != "":
				beyond++
				noted++
				if ok && e.When.Sub(start)-actual > tolerance {
					notedWrong++
					if testing.Verbose() {
						t.Logf("seed %d: %s estimated at %s (%s; %s), beyond the horizon, admitted at %s", seed, name, FormatOffset(e.When.Sub(start)), e.Reason, e.Note, FormatOffset(actual))
					}
				}
				continue
			case e.When.Sub(start) > m.Until-tolerance:
				beyond++
				if ok && e.When.Sub(start)-actual > tolerance {
					t.Errorf("seed %d: %s estimated at %s, beyond the horizon, admitted at %s", seed, name, FormatOffset(e.When.Sub(start)), FormatOffset(actual))
				}
				continue
			case !ok && e.Note != "":
				noted++
				notedWrong++
				if testing.Verbose() {
					t.Logf("seed %d: %s estimated at %s (%s; %s), never admitted", seed, name, FormatOffset(e.When.Sub(start)), e.Reason, e.Note)
				}
				continue
			case !ok:
				t.Errorf("seed %d: %s estimated at %s (%s), never admitted", seed, name, FormatOffset(e.When.Sub(start)), e.Reason)
				continue
			}
			checked++
			diff := (e.When.Sub(start) - actual).Abs()
			if e.Note != "" {
				noted++
				if diff > tolerance {
					notedWrong++
					if testing.Verbose() {
						t.Logf("seed %d: %s estimated at %s (%s; %s), admitted at %s", seed, name, FormatOffset(e.When.Sub(start)), e.Reason, e.Note, FormatOffset(actual))
					}
				}
				continue
			}
			if diff > worst {
				worst, worstAt = diff, fmt.Sprintf("seed %d, %s", seed, name)
			}
			if diff > tolerance {
				t.Errorf("seed %d: %s estimated at %s (%s, %d in line), admitted at %s", seed, name, FormatOffset(e.When.Sub(start)), e.Reason, e.Position, FormatOffset(actual))
			}
		}
	}
	t.Logf("%d cohort scenarios, %d estimates: %d known (%d without a note, worst error %s at %s; %d with a note, %d of them beyond one interval), %d unknown (%.1f%%; %d of them admitted during the run), %d beyond the horizon",
		scenarios, estimates, checked, checked-noted, worst, worstAt, noted, notedWrong, unknown, 100*float64(unknown)/float64(max(estimates, 1)), unknownAdmitted, beyond)
	t.Logf("%d never fit (their ClusterQueue's most, or behind such a head under StrictFIFO), none admitted", never)
	for _, r := range slices.SortedFunc(maps.Keys(reasons), func(a, b string) int { return reasons[b] - reasons[a] }) {
		t.Logf("  unknown %4d: %s", reasons[r], r)
	}
}
