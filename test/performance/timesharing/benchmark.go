// Package timesharing is benchmark 2 of docs/performance.md: N same-priority workloads on a full
// ClusterQueue under kueue-timeshare, upstream semantics and upstream's priority booster, in the
// simulator (make bench-timesharing) and on a real control plane (make bench-timesharing-envtest).
package timesharing

import (
	"context"
	"fmt"
	"io"
	"math"
	"strings"
	"time"

	"github.com/kueue-timeshare/kueue-timeshare/pkg/simulator"
)

// Case is one run of the time-sharing benchmark: N same-priority workloads that each
// need the whole ClusterQueue and run far longer than the horizon (checkpointed, so a turn is
// never wasted), arriving a second apart on a full queue.
type Case struct {
	N int
	// Window is minAdmitDuration, and the priority booster's time-sharing interval.
	Window  time.Duration
	Horizon time.Duration
}

// Scenario builds the case's scenario.
func (c Case) Scenario() (*simulator.Scenario, error) {
	text := fmt.Sprintf(`apiVersion: kueue.x-k8s.io/v1beta2
kind: ResourceFlavor
metadata: {name: gpu}
---
apiVersion: kueue.x-k8s.io/v1beta2
kind: ClusterQueue
metadata: {name: shared}
spec:
  resourceGroups: [{coveredResources: [nvidia.com/gpu], flavors: [{name: gpu, resources: [{name: nvidia.com/gpu, nominalQuota: 1}]}]}]
  preemption: {withinClusterQueue: LowerOrNewerEqualPriority, withinClusterQueueConfig: {minAdmitDuration: %s}}
---
apiVersion: kueue.x-k8s.io/v1beta2
kind: WorkloadPriorityClass
metadata: {name: normal}
value: 100
---
name: time-sharing-%d
simulation: {until: %s}
workloads:
  - name: job
    copies: %d
    every: 1s
    clusterQueue: shared
    priorityClass: normal
    resources: {nvidia.com/gpu: 1}
    duration: %s
    checkpointed: true
`, c.Window, c.N, c.Horizon, c.N, 1000*c.Horizon)
	return simulator.Parse(fmt.Sprintf("time-sharing-%d.yaml", c.N), []byte(text))
}

// Target is the longest continuous wait the issue allows: (N-1) turns of the window, plus one
// scheduling interval.
func (c Case) Target() time.Duration {
	return time.Duration(c.N-1)*c.Window + simulator.DefaultSchedulingInterval
}

// Measure is what one mode did in one case.
type Measure struct {
	// LongestWait is the longest continuous wait of any workload, until the horizon for one that
	// never got a turn.
	LongestWait        time.Duration
	Jain               float64
	PreemptionsPerHour float64
	// NeverAdmitted counts workloads that never got a turn.
	NeverAdmitted int
}

// Row is one case under each mode.
type Row struct {
	Case     Case
	Measures map[simulator.Mode]Measure
}

// Modes are the modes the benchmark compares, in table order.
var Modes = []simulator.Mode{simulator.ModeTimeshare, simulator.ModeUpstream, simulator.ModeBooster}

// Run runs every case under every mode.
func Run(ctx context.Context, cases []Case) ([]Row, error) {
	var rows []Row
	for _, c := range cases {
		sc, err := c.Scenario()
		if err != nil {
			return nil, err
		}
		row := Row{Case: c, Measures: map[simulator.Mode]Measure{}}
		for _, m := range Modes {
			r, err := simulator.Run(ctx, sc, simulator.Options{Mode: m})
			if err != nil {
				return nil, fmt.Errorf("N=%d, %s: %w", c.N, m.Title(), err)
			}
			q := r.ClusterQueues[0]
			ms := Measure{LongestWait: q.LongestWait, Jain: q.Jain, PreemptionsPerHour: q.PreemptionsPerHour}
			for _, w := range r.Workloads {
				if w.Admissions == 0 {
					ms.NeverAdmitted++
				}
			}
			row.Measures[m] = ms
		}
		rows = append(rows, row)
	}
	return rows, nil
}

// WriteTable writes the benchmark's results as a Markdown table.
func WriteTable(out io.Writer, rows []Row) error {
	titles := make([]string, len(Modes))
	for i, m := range Modes {
		titles[i] = m.Title()
	}
	order := strings.Join(titles, " / ")
	fmt.Fprintf(out, "| N | longest continuous wait (%s) | target | within target | Jain index | preemptions per hour | never admitted |\n", order)
	fmt.Fprintln(out, "| --- | --- | --- | --- | --- | --- | --- |")
	for _, r := range rows {
		var waits, jains, rates, never []string
		for _, m := range Modes {
			ms := r.Measures[m]
			waits = append(waits, simulator.FormatOffset(ms.LongestWait))
			jains = append(jains, jain(ms.Jain))
			rates = append(rates, fmt.Sprintf("%.2f", ms.PreemptionsPerHour))
			never = append(never, fmt.Sprint(ms.NeverAdmitted))
		}
		ours := r.Measures[simulator.ModeTimeshare].LongestWait
		within := "yes"
		if ours > r.Case.Target() {
			within = fmt.Sprintf("no, by %s", simulator.FormatOffset(ours-r.Case.Target()))
		}
		if _, err := fmt.Fprintf(out, "| %d | %s | %s | %s | %s | %s | %s |\n", r.Case.N, strings.Join(waits, " / "), simulator.FormatOffset(r.Case.Target()),
			within, strings.Join(jains, " / "), strings.Join(rates, " / "), strings.Join(never, " / ")); err != nil {
			return err
		}
	}
	return nil
}

// jain writes a Jain index, or - when there was nothing to measure.
func jain(f float64) string {
	if math.IsNaN(f) {
		return "-"
	}
	return fmt.Sprintf("%.3f", f)
}
