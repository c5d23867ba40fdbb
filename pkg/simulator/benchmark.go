package simulator

import (
	"context"
	"fmt"
	"io"
	"strings"
	"time"
)

// TimeSharingCase is one run of the time-sharing benchmark: N same-priority workloads that each
// need the whole ClusterQueue and run far longer than the horizon (checkpointed, so a turn is
// never wasted), arriving a second apart on a full queue.
type TimeSharingCase struct {
	N int
	// Window is minAdmitDuration, and the priority booster's time-sharing interval.
	Window  time.Duration
	Horizon time.Duration
}

// Scenario builds the case's scenario.
func (c TimeSharingCase) Scenario() (*Scenario, error) {
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
	return Parse(fmt.Sprintf("time-sharing-%d.yaml", c.N), []byte(text))
}

// Target is the longest continuous wait the issue allows: (N-1) turns of the window, plus one
// scheduling interval.
func (c TimeSharingCase) Target() time.Duration {
	return time.Duration(c.N-1)*c.Window + DefaultSchedulingInterval
}

// TimeSharingMeasure is what one mode did in one case.
type TimeSharingMeasure struct {
	// LongestWait is the longest continuous wait of any workload, until the horizon for one that
	// never got a turn.
	LongestWait        time.Duration
	Jain               float64
	PreemptionsPerHour float64
	// NeverAdmitted counts workloads that never got a turn.
	NeverAdmitted int
}

// TimeSharingRow is one case under each mode.
type TimeSharingRow struct {
	Case     TimeSharingCase
	Measures map[Mode]TimeSharingMeasure
}

// TimeSharingModes are the modes the benchmark compares, in table order.
var TimeSharingModes = []Mode{ModeTimeshare, ModeUpstream, ModeBooster}

// RunTimeSharingBenchmark runs every case under every mode.
func RunTimeSharingBenchmark(ctx context.Context, cases []TimeSharingCase) ([]TimeSharingRow, error) {
	var rows []TimeSharingRow
	for _, c := range cases {
		sc, err := c.Scenario()
		if err != nil {
			return nil, err
		}
		row := TimeSharingRow{Case: c, Measures: map[Mode]TimeSharingMeasure{}}
		for _, m := range TimeSharingModes {
			r, err := Run(ctx, sc, Options{Mode: m})
			if err != nil {
				return nil, fmt.Errorf("N=%d, %s: %w", c.N, m.Title(), err)
			}
			q := r.ClusterQueues[0]
			ms := TimeSharingMeasure{LongestWait: q.LongestWait, Jain: q.Jain, PreemptionsPerHour: q.PreemptionsPerHour}
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

// WriteTimeSharingTable writes the benchmark's results as a Markdown table.
func WriteTimeSharingTable(out io.Writer, rows []TimeSharingRow) error {
	titles := make([]string, len(TimeSharingModes))
	for i, m := range TimeSharingModes {
		titles[i] = m.Title()
	}
	order := strings.Join(titles, " / ")
	fmt.Fprintf(out, "| N | longest continuous wait (%s) | target | within target | Jain index | preemptions per hour | never admitted |\n", order)
	fmt.Fprintln(out, "| --- | --- | --- | --- | --- | --- | --- |")
	for _, r := range rows {
		var waits, jains, rates, never []string
		for _, m := range TimeSharingModes {
			ms := r.Measures[m]
			waits = append(waits, formatOffset(ms.LongestWait))
			jains = append(jains, orDash(ms.Jain, "%.3f"))
			rates = append(rates, fmt.Sprintf("%.2f", ms.PreemptionsPerHour))
			never = append(never, fmt.Sprint(ms.NeverAdmitted))
		}
		ours := r.Measures[ModeTimeshare].LongestWait
		within := "yes"
		if ours > r.Case.Target() {
			within = fmt.Sprintf("no, by %s", formatOffset(ours-r.Case.Target()))
		}
		if _, err := fmt.Fprintf(out, "| %d | %s | %s | %s | %s | %s | %s |\n", r.Case.N, strings.Join(waits, " / "), formatOffset(r.Case.Target()),
			within, strings.Join(jains, " / "), strings.Join(rates, " / "), strings.Join(never, " / ")); err != nil {
			return err
		}
	}
	return nil
}
