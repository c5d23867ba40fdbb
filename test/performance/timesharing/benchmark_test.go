package timesharing

import (
	"context"
	"flag"
	"os"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/kueue-timeshare/kueue-timeshare/pkg/simulator"
)

var (
	timeSharingBenchmark = flag.Bool("timesharing-benchmark", false, "Run the time-sharing benchmark (make bench-timesharing) and print its table.")
	timeSharingWindow    = flag.Duration("timesharing-window", time.Hour, "minAdmitDuration of the time-sharing benchmark.")
	timeSharingHorizon   = flag.Duration("timesharing-horizon", 24*time.Hour, "Simulated time of each run of the time-sharing benchmark.")
)

// TestTimeSharingBenchmark is benchmark 2 of docs/performance.md; it only runs when asked to.
func TestTimeSharingBenchmark(t *testing.T) {
	if !*timeSharingBenchmark {
		t.Skip("run with -timesharing-benchmark (make bench-timesharing)")
	}
	var cases []Case
	for n := 2; n <= 10; n++ {
		cases = append(cases, Case{N: n, Window: *timeSharingWindow, Horizon: *timeSharingHorizon})
	}
	start := time.Now()
	rows, err := Run(context.Background(), cases)
	if err != nil {
		t.Fatal(err)
	}
	if err := WriteTable(os.Stdout, rows); err != nil {
		t.Fatal(err)
	}
	t.Logf("minAdmitDuration %s, %s simulated per run, %d runs in %s", *timeSharingWindow, *timeSharingHorizon, 3*len(cases), time.Since(start).Round(time.Millisecond))
}

func TestCase(t *testing.T) {
	c := Case{N: 3, Window: time.Hour, Horizon: 8 * time.Hour}
	rows, err := Run(context.Background(), []Case{c})
	if err != nil {
		t.Fatal(err)
	}
	got := rows[0].Measures
	// Ours: every workload gets a turn; a turn lasts the window plus at most one sweep of the
	// waker (a second), so the longest wait is two such turns.
	if ms := got[simulator.ModeTimeshare]; ms.NeverAdmitted != 0 || ms.LongestWait > 2*(time.Hour+time.Second) || ms.Jain < 0.95 {
		t.Errorf("kueue-timeshare: %+v", ms)
	}
	// Upstream: the first workload keeps the queue; the others never run.
	if diff := cmp.Diff(Measure{LongestWait: 8*time.Hour - time.Second, Jain: 1.0 / 3, NeverAdmitted: 2}, got[simulator.ModeUpstream]); diff != "" {
		t.Errorf("upstream (-want +got):\n%s", diff)
	}
	// The priority booster: the first two take turns, the third never runs (kueue#11980).
	if ms := got[simulator.ModeBooster]; ms.NeverAdmitted != 1 {
		t.Errorf("priority booster: %+v", ms)
	}
	if c.Target() != 2*time.Hour+time.Second {
		t.Errorf("target %s", c.Target())
	}
}
