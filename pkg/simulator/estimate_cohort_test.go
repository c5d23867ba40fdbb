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

// cohortTally counts the estimates of cohort scenarios by outcome.
type cohortTally struct {
	scenarios, estimates, checked, unknown, unknownAdmitted, beyond, noted, notedWrong, never int
	// notedChecked are the noted among checked (the others are beyond the horizon or never
	// admitted).
	notedChecked int
	reasons      map[string]int
	worst        time.Duration
	worstAt      string
}

// checkCohortScenario runs the cohort scenario generated from seed, with declared the share of
// workloads that declare a runtime, estimates every pending workload after the last arrival, and
// counts each estimate against the simulated admission: an error for a known estimate without a
// note that is off by more than one interval, or for one that never fits and is admitted. It
// reports false when seed makes no cohort scenario.
func checkCohortScenario(t *testing.T, seed int64, declared float64, c *cohortTally) bool {
	const handover = 0
	m := generate(seed)
	if m.CQs[0].Cohort == "" || len(m.CQs) < 2 {
		return false
	}
	m, last := inCohortWithoutArrivals(m, declared)
	est, start, admitted := estimatedRun(t, m, last, func(w *world, names []string) (map[string]estimate.Estimate, error) {
		if *cohortAlone {
			return estimatesOf(w, names, handover)
		}
		return cohortEstimatesOf(w, names, m.FairSharing, handover)
	})
	c.scenarios++
	tolerance := m.Interval + handover
	for _, name := range slices.Sorted(maps.Keys(est)) {
		e := est[name]
		c.estimates++
		if strings.Contains(e.Reason, "  ") {
			t.Errorf("seed %d: %s: its reason leaves a name out: %q", seed, name, e.Reason)
		}
		actual, ok := admitted[name]
		switch {
		case e.Unknown && neverFits.MatchString(e.Reason):
			c.never++
			if ok {
				t.Errorf("seed %d: %s estimated never to fit (%s), admitted at %s", seed, name, e.Reason, FormatOffset(actual))
			}
			continue
		case e.Unknown:
			c.unknown++
			c.reasons[namesInReason.ReplaceAllString(e.Reason, "…")]++
			if ok {
				c.unknownAdmitted++
			}
			if testing.Verbose() {
				t.Logf("seed %d: %s unknown: %s (admitted: %t at %s)", seed, name, e.Reason, ok, FormatOffset(actual))
			}
			continue
		case e.When.Sub(start) > m.Until-tolerance && e.Note != "":
			c.beyond++
			c.noted++
			if ok && e.When.Sub(start)-actual > tolerance {
				c.notedWrong++
				if testing.Verbose() {
					t.Logf("seed %d: %s estimated at %s (%s; %s), beyond the horizon, admitted at %s", seed, name, FormatOffset(e.When.Sub(start)), e.Reason, e.Note, FormatOffset(actual))
				}
			}
			continue
		case e.When.Sub(start) > m.Until-tolerance:
			c.beyond++
			if ok && e.When.Sub(start)-actual > tolerance {
				t.Errorf("seed %d: %s estimated at %s, beyond the horizon, admitted at %s", seed, name, FormatOffset(e.When.Sub(start)), FormatOffset(actual))
			}
			continue
		case !ok && e.Note != "":
			c.noted++
			c.notedWrong++
			if testing.Verbose() {
				t.Logf("seed %d: %s estimated at %s (%s; %s), never admitted", seed, name, FormatOffset(e.When.Sub(start)), e.Reason, e.Note)
			}
			continue
		case !ok:
			t.Errorf("seed %d: %s estimated at %s (%s), never admitted", seed, name, FormatOffset(e.When.Sub(start)), e.Reason)
			continue
		}
		c.checked++
		diff := (e.When.Sub(start) - actual).Abs()
		if e.Note != "" {
			c.noted++
			c.notedChecked++
			if diff > tolerance {
				c.notedWrong++
				if testing.Verbose() {
					t.Logf("seed %d: %s estimated at %s (%s; %s), admitted at %s", seed, name, FormatOffset(e.When.Sub(start)), e.Reason, e.Note, FormatOffset(actual))
				}
			}
			continue
		}
		if diff > c.worst {
			c.worst, c.worstAt = diff, fmt.Sprintf("seed %d, %s", seed, name)
		}
		if diff > tolerance {
			t.Errorf("seed %d: %s estimated at %s (%s, %d in line), admitted at %s", seed, name, FormatOffset(e.When.Sub(start)), e.Reason, e.Position, FormatOffset(actual))
		}
	}
	return true
}

// TestEstimateAccuracyInCohorts checks the cohort estimates against the simulator: for generated
// scenarios in a cohort, every estimate made after the last arrival is within one
// scheduling interval plus the handover of the actual admission, or says why it is unknown. It
// reports the share that is unknown and each reason's count.
func TestEstimateAccuracyInCohorts(t *testing.T) {
	c := &cohortTally{reasons: map[string]int{}}
	cases := *cohortCases
	if raceDetector && !flagSet("estimate-cohort-cases") {
		cases = 6
	}
	for seed := *cohortSeed; c.scenarios < cases; seed++ {
		checkCohortScenario(t, seed, *cohortDeclared, c)
	}
	t.Logf("%d cohort scenarios, %d estimates: %d known (%d without a note, worst error %s at %s; %d with a note, %d of them beyond one interval), %d unknown (%.1f%%; %d of them admitted during the run), %d beyond the horizon",
		c.scenarios, c.estimates, c.checked, c.checked-c.notedChecked, c.worst, c.worstAt, c.noted, c.notedWrong, c.unknown, 100*float64(c.unknown)/float64(max(c.estimates, 1)), c.unknownAdmitted, c.beyond)
	t.Logf("%d never fit (their ClusterQueue's most, or behind such a head under StrictFIFO), none admitted", c.never)
	for _, r := range slices.SortedFunc(maps.Keys(c.reasons), func(a, b string) int { return c.reasons[b] - c.reasons[a] }) {
		t.Logf("  unknown %4d: %s", c.reasons[r], r)
	}
}

// TestEstimateInCohortsOnceWrong runs the generated cohort scenarios whose approximate estimates
// were once off by more than one interval, with nine in ten workloads declaring a runtime or the
// generator's share, and fails if one is again.
func TestEstimateInCohortsOnceWrong(t *testing.T) {
	for seed, was := range map[int64]string{
		7588:  "a head's victims were chosen after the heads before it in the cycle kept room back",
		7375:  "a walk that moved quota between ClusterQueues chose a later flavor",
		9194:  "a workload that never fits did not take its queue's cycle after a preemption's eviction",
		9484:  "workloads of one scheduling equivalence class took a cycle each, and one that never fits none",
		9659:  "a ClusterQueue's active preemptor did not go first nor keep its room back",
		11004: "a ClusterQueue's active preemptor was not its queue's head",
		11290: "a preemptor's borrowing was judged with every holder it may take gone, not the victims it chooses",
		7415:  "with a preemptor's borrowing judged on its victims, heads that both borrow were not ordered by how far up the cohort tree they borrow",
		9160:  "a head chose its victims after the cycle's earlier preemptions, not on the quota as the cycle started",
		9246:  "a queue offered a second head in the cycle its first head did not fit",
		9434:  "the workload a head stepped aside for lost its standing as its queue's active preemptor",
		11536: "a workload that never fits was its queue's first head by turn order, not queue order",
		11389: "whose turn it was was judged on the quota after the cycle's heads kept room back",
		7048:  "a workload tried after its queue's failed head had its turn judged on the cycle's start, not the next's",
		11093: "a head parked for the cycle gave up its turn to the next workload in line",
		11414: "holders that end in one second left together, not at the instants the walk admitted them",
		13491: "a head that kept its room back once an instant did not keep it again after an eviction requeued the cohort",
		13476: "the scheduler passed over for a turn a workload that could now borrow, and left parked a head that stepped aside for one that could not use the turn",
		15419: "a head nominated not to fit was admitted in its cycle in the quota an earlier head's preemption freed",
		15510: "a workload back in line after a turn's eviction preempted, as newer, holders queued before it",
		19135: "quota a cycle's preemption freed, hidden from a head nominated not to fit, did not count as freed once the cycle ended",
		19071: "a ClusterQueue whose preemptor was admitted in a cycle it had no other head in kept that preemptor's quota out of every later nomination",
		21260: "a head held its queue for a borrower the cycle had admitted after the scheduler nominated it",
	} {
		checkOnceWrong(t, seed, 0.9, was)
	}
	// With the generator's share declaring.
	for seed, was := range map[int64]string{
		7243: "a workload that never fits took its queue's cycle in the one that admitted the queue's preemptor, and ahead of one before it in the queue's order",
	} {
		checkOnceWrong(t, seed, 0, was)
	}
}

func checkOnceWrong(t *testing.T, seed int64, declared float64, was string) {
	t.Helper()
	c := &cohortTally{reasons: map[string]int{}}
	if !checkCohortScenario(t, seed, declared, c) {
		t.Fatalf("seed %d makes no cohort scenario", seed)
	}
	if c.notedWrong > 0 {
		t.Errorf("seed %d: %d of %d approximate estimates off by more than one interval (it was: %s)", seed, c.notedWrong, c.noted, was)
	}
}
