package simulator

import (
	"encoding/json"
	"fmt"
	"io"
	"math"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/kueue-timeshare/kueue-timeshare/pkg/policy"
)

// WriteTable writes the per-workload table and the per-ClusterQueue summary of one or more runs
// of the same scenario. With several runs each cell shows the runs' values in order, separated by
// " / ".
func WriteTable(out io.Writer, runs ...*Result) error {
	if len(runs) == 0 {
		return nil
	}
	first := runs[0]
	titles := make([]string, len(runs))
	for i, r := range runs {
		titles[i] = r.Mode.Title()
	}
	fmt.Fprintf(out, "Scenario %s, started %s\n", first.Scenario, first.Start.UTC().Format(time.RFC3339))
	for _, r := range runs {
		fmt.Fprintf(out, "  %s: simulated %s, %d scheduling cycles\n", r.Mode.Title(), formatOffset(r.End), r.Cycles)
	}
	if len(runs) > 1 {
		fmt.Fprintf(out, "Cells show: %s\n", strings.Join(titles, " / "))
	}
	fmt.Fprintln(out)

	tw := tabwriter.NewWriter(out, 0, 0, 2, ' ', 0)
	lostUnit := strings.ToUpper(first.LostWork.Unit)
	fmt.Fprintln(tw, "WORKLOAD\tCLUSTERQUEUE\tPRIORITY\tSIZE\tARRIVAL\tDURATION\tTOTAL WAIT\tLONGEST WAIT\tADMITTED\tLOST\tLOST "+lostUnit+"\tPREEMPTIONS\tFINISHED AT\tSHARE")
	for i, w := range first.Workloads {
		row := []string{w.Name, w.ClusterQueue, fmt.Sprint(w.Priority), w.Requests, formatOffset(w.Arrival), formatOffset(w.Duration)}
		cells := [][]string{}
		for _, r := range runs {
			rw := r.workload(i, w.Name)
			if rw == nil {
				cells = append(cells, []string{"-", "-", "-", "-", "-", "-", "-", "-"})
				continue
			}
			share := r.queue(rw.ClusterQueue).CapacityShare[rw.Name]
			cells = append(cells, []string{
				formatOffset(rw.TotalWait), formatOffset(rw.LongestWait), formatOffset(rw.Admitted), formatOffset(rw.Lost),
				resourceHours(rw.LostResourceHours), preemptionCell(rw), finishedCell(rw), percent(share),
			})
		}
		row = append(row, joinColumns(cells)...)
		fmt.Fprintln(tw, strings.Join(row, "\t"))
	}
	if err := tw.Flush(); err != nil {
		return err
	}
	fmt.Fprintln(out)

	tw = tabwriter.NewWriter(out, 0, 0, 2, ' ', 0)
	fmt.Fprintln(tw, "CLUSTERQUEUE\tWORKLOADS\tFINISHED\tJAIN\tWAIT P50\tWAIT P95\tWAIT MAX\tLONGEST WAIT\tPREEMPTIONS/H\tLOST\tLOST "+lostUnit+"\tUTILISATION")
	for _, q := range first.ClusterQueues {
		cells := [][]string{}
		for _, r := range runs {
			rq := r.queue(q.Name)
			cells = append(cells, []string{
				fmt.Sprint(rq.Finished), jain(rq.Jain), formatOffset(rq.WaitP50), formatOffset(rq.WaitP95), formatOffset(rq.WaitMax),
				formatOffset(rq.LongestWait), fmt.Sprintf("%.2f", rq.PreemptionsPerHour), formatOffset(rq.Lost), resourceHours(rq.LostResourceHours),
				percent(rq.Utilisation),
			})
		}
		row := append([]string{q.Name, fmt.Sprint(q.Workloads)}, joinColumns(cells)...)
		fmt.Fprintln(tw, strings.Join(row, "\t"))
	}
	if err := tw.Flush(); err != nil {
		return err
	}
	lost := make([]string, len(runs))
	for i, r := range runs {
		lost[i] = fmt.Sprintf("%s %s (%s of run time)", resourceHours(r.LostWork.ResourceHours), r.LostWork.Unit, formatOffset(r.LostWork.Lost))
	}
	fmt.Fprintf(out, "\nWork lost at eviction (%s x time): %s\n", first.LostWork.Resource, strings.Join(lost, " / "))
	if gaveNotices(runs) {
		notices := make([]string, len(runs))
		for i, r := range runs {
			notices[i] = fmt.Sprintf("%d given, %d ended early", r.Notices.Given, r.Notices.EndedEarly)
		}
		fmt.Fprintf(out, "Preemption notices (ended early: the checkpoint was done before the deadline): %s\n", strings.Join(notices, " / "))
	}
	for _, r := range runs {
		for _, n := range r.Notes {
			fmt.Fprintf(out, "\nNote (%s): %s", r.Mode.Title(), n)
		}
	}
	if hasNotes(runs) {
		fmt.Fprintln(out)
	}
	return nil
}

func gaveNotices(runs []*Result) bool {
	for _, r := range runs {
		if r.Notices.Given > 0 {
			return true
		}
	}
	return false
}

func hasNotes(runs []*Result) bool {
	for _, r := range runs {
		if len(r.Notes) > 0 {
			return true
		}
	}
	return false
}

// joinColumns turns one row of cells per run into one row of " / "-joined cells.
func joinColumns(perRun [][]string) []string {
	out := make([]string, len(perRun[0]))
	for c := range out {
		vals := make([]string, len(perRun))
		for r := range perRun {
			vals[r] = perRun[r][c]
		}
		out[c] = strings.Join(vals, " / ")
	}
	return out
}

func (r *Result) workload(i int, name string) *WorkloadResult {
	if i < len(r.Workloads) && r.Workloads[i].Name == name {
		return &r.Workloads[i]
	}
	for j := range r.Workloads {
		if r.Workloads[j].Name == name {
			return &r.Workloads[j]
		}
	}
	return nil
}

func (r *Result) queue(name string) QueueResult {
	for _, q := range r.ClusterQueues {
		if q.Name == name {
			return q
		}
	}
	return QueueResult{Name: name, Jain: math.NaN()}
}

func preemptionCell(w *WorkloadResult) string {
	return fmt.Sprint(w.PreemptionCount())
}

func finishedCell(w *WorkloadResult) string {
	if !w.Finished {
		return "no"
	}
	return formatOffset(w.FinishedAt)
}

func resourceHours(h float64) string {
	return fmt.Sprintf("%.2f", h)
}

func percent(f float64) string {
	if math.IsNaN(f) {
		return "-"
	}
	return fmt.Sprintf("%.0f%%", f*100)
}

func jain(f float64) string {
	if math.IsNaN(f) {
		return "-"
	}
	return fmt.Sprintf("%.2f", f)
}

// WriteTimeline writes what happened, in order, one line per event.
func WriteTimeline(out io.Writer, r *Result) error {
	fmt.Fprintf(out, "Timeline (%s)\n", r.Mode.Title())
	tw := tabwriter.NewWriter(out, 0, 0, 2, ' ', 0)
	for _, e := range r.Events {
		var what string
		switch e.Kind {
		case EventArrived:
			what = fmt.Sprintf("%s arrives", e.Workload)
		case EventAdmitted:
			what = fmt.Sprintf("%s is admitted", e.Workload)
		case EventPreempted:
			what = fmt.Sprintf("%s is preempted (%s)", e.Workload, e.Reason)
			if e.By != "" {
				what = fmt.Sprintf("%s is preempted by %s (%s)", e.Workload, e.By, e.Reason)
			}
		case EventEvicted:
			what = fmt.Sprintf("%s is evicted (%s)", e.Workload, e.Reason)
		case EventFinished:
			what = fmt.Sprintf("%s finishes", e.Workload)
		case EventNoticed:
			what = fmt.Sprintf("%s is given notice until +%s (%s)", e.Workload, formatOffset(e.Until), e.Reason)
			if e.By != "" {
				what = fmt.Sprintf("%s is given notice until +%s for %s (%s)", e.Workload, formatOffset(e.Until), e.By, e.Reason)
			}
		}
		switch e.Notice {
		case string(policy.NoticeEndedEarly):
			what += ", its checkpoint done before the deadline"
		case string(policy.NoticeEvictedAtDeadline):
			what += ", at its notice's deadline"
		}
		if e.Lost > 0 {
			what += fmt.Sprintf(", losing %s of run time (%s %s)", formatOffset(e.Lost), resourceHours(e.LostResourceHours), r.LostWork.Unit)
		}
		fmt.Fprintf(tw, "  +%s\t%s\t%s\n", formatOffset(e.At), e.ClusterQueue, what)
	}
	return tw.Flush()
}

// The JSON form uses seconds for every duration.
type jsonRuns struct {
	Runs []jsonResult `json:"runs"`
}

type jsonResult struct {
	Scenario      string         `json:"scenario"`
	Mode          Mode           `json:"mode"`
	Start         time.Time      `json:"start"`
	EndSeconds    float64        `json:"endSeconds"`
	Cycles        int            `json:"schedulingCycles"`
	Workloads     []jsonWorkload `json:"workloads"`
	ClusterQueues []jsonQueue    `json:"clusterQueues"`
	Events        []jsonEvent    `json:"events"`
	Notes         []string       `json:"notes"`
	LostWork      jsonLostWork   `json:"lostWork"`
	Notices       jsonNotices    `json:"notices"`
}

type jsonNotices struct {
	Given      int `json:"given"`
	EndedEarly int `json:"endedEarly"`
}

type jsonLostWork struct {
	Resource      string  `json:"resource"`
	Unit          string  `json:"unit"`
	Seconds       float64 `json:"seconds"`
	ResourceHours float64 `json:"resourceHours"`
}

type jsonWorkload struct {
	Name               string         `json:"name"`
	Namespace          string         `json:"namespace"`
	ClusterQueue       string         `json:"clusterQueue"`
	Priority           int32          `json:"priority"`
	Requests           string         `json:"requests"`
	ArrivalSeconds     float64        `json:"arrivalSeconds"`
	DurationSeconds    float64        `json:"durationSeconds"`
	TotalWaitSeconds   float64        `json:"totalWaitSeconds"`
	LongestWaitSeconds float64        `json:"longestWaitSeconds"`
	AdmittedSeconds    float64        `json:"admittedSeconds"`
	LostSeconds        float64        `json:"lostSeconds"`
	LostResourceHours  float64        `json:"lostResourceHours"`
	Admissions         int            `json:"admissions"`
	Notices            jsonNotices    `json:"notices"`
	Preemptions        map[string]int `json:"preemptions"`
	Finished           bool           `json:"finished"`
	FinishedAtSeconds  *float64       `json:"finishedAtSeconds"`
	Share              float64        `json:"share"`
	CapacitySeconds    float64        `json:"capacitySeconds"`
	Intervals          []jsonInterval `json:"intervals"`
}

type jsonInterval struct {
	FromSeconds float64 `json:"fromSeconds"`
	ToSeconds   float64 `json:"toSeconds"`
	Admitted    bool    `json:"admitted"`
}

type jsonQueue struct {
	Name               string             `json:"name"`
	Workloads          int                `json:"workloads"`
	Finished           int                `json:"finished"`
	CapacityShare      map[string]float64 `json:"capacityShare"`
	Jain               *float64           `json:"jainIndex"`
	WaitP50Seconds     float64            `json:"waitP50Seconds"`
	WaitP95Seconds     float64            `json:"waitP95Seconds"`
	WaitMaxSeconds     float64            `json:"waitMaxSeconds"`
	LongestWaitSeconds float64            `json:"longestWaitSeconds"`
	Preemptions        int                `json:"preemptions"`
	PreemptionsPerHour float64            `json:"preemptionsPerHour"`
	LostSeconds        float64            `json:"lostSeconds"`
	LostResourceHours  float64            `json:"lostResourceHours"`
	Notices            jsonNotices        `json:"notices"`
	Utilisation        float64            `json:"utilisation"`
}

type jsonEvent struct {
	AtSeconds    float64   `json:"atSeconds"`
	Kind         EventKind `json:"kind"`
	Workload     string    `json:"workload"`
	ClusterQueue string    `json:"clusterQueue"`
	Reason       string    `json:"reason,omitempty"`
	By           string    `json:"by,omitempty"`
	// Set on evictions only, zero included.
	LostSeconds       *float64 `json:"lostSeconds,omitempty"`
	LostResourceHours *float64 `json:"lostResourceHours,omitempty"`
	// A notice's deadline; on an eviction that ended a notice, how it ended.
	UntilSeconds *float64 `json:"untilSeconds,omitempty"`
	Notice       string   `json:"notice,omitempty"`
}

// WriteJSON writes the runs as {"runs": [...]}, with durations in seconds.
func WriteJSON(out io.Writer, runs ...*Result) error {
	doc := jsonRuns{Runs: make([]jsonResult, 0, len(runs))}
	for _, r := range runs {
		jr := jsonResult{Scenario: r.Scenario, Mode: r.Mode, Start: r.Start.UTC(), EndSeconds: r.End.Seconds(), Cycles: r.Cycles,
			Workloads: []jsonWorkload{}, ClusterQueues: []jsonQueue{}, Events: []jsonEvent{}, Notes: append([]string{}, r.Notes...),
			LostWork: jsonLostWork{Resource: r.LostWork.Resource, Unit: r.LostWork.Unit, Seconds: r.LostWork.Lost.Seconds(), ResourceHours: r.LostWork.ResourceHours},
			Notices:  jsonNotices(r.Notices)}
		for _, w := range r.Workloads {
			jw := jsonWorkload{
				Name: w.Name, Namespace: w.Namespace, ClusterQueue: w.ClusterQueue, Priority: w.Priority, Requests: w.Requests,
				ArrivalSeconds: w.Arrival.Seconds(), DurationSeconds: w.Duration.Seconds(),
				TotalWaitSeconds: w.TotalWait.Seconds(), LongestWaitSeconds: w.LongestWait.Seconds(), AdmittedSeconds: w.Admitted.Seconds(), LostSeconds: w.Lost.Seconds(),
				LostResourceHours: w.LostResourceHours,
				Admissions:        w.Admissions, Notices: jsonNotices(w.Notices), Preemptions: w.Preemptions, Finished: w.Finished,
				Share: w.Share, CapacitySeconds: w.CapacityTime, Intervals: []jsonInterval{},
			}
			if w.Finished {
				at := w.FinishedAt.Seconds()
				jw.FinishedAtSeconds = &at
			}
			for _, iv := range w.Intervals {
				jw.Intervals = append(jw.Intervals, jsonInterval{FromSeconds: iv.From.Seconds(), ToSeconds: iv.To.Seconds(), Admitted: iv.Running})
			}
			jr.Workloads = append(jr.Workloads, jw)
		}
		for _, q := range r.ClusterQueues {
			jq := jsonQueue{
				Name: q.Name, Workloads: q.Workloads, Finished: q.Finished, CapacityShare: q.CapacityShare,
				WaitP50Seconds: q.WaitP50.Seconds(), WaitP95Seconds: q.WaitP95.Seconds(), WaitMaxSeconds: q.WaitMax.Seconds(),
				LongestWaitSeconds: q.LongestWait.Seconds(), Preemptions: q.Preemptions, PreemptionsPerHour: q.PreemptionsPerHour, LostSeconds: q.Lost.Seconds(),
				LostResourceHours: q.LostResourceHours, Notices: jsonNotices(q.Notices), Utilisation: q.Utilisation,
			}
			if !math.IsNaN(q.Jain) {
				j := q.Jain
				jq.Jain = &j
			}
			jr.ClusterQueues = append(jr.ClusterQueues, jq)
		}
		for _, e := range r.Events {
			je := jsonEvent{AtSeconds: e.At.Seconds(), Kind: e.Kind, Workload: e.Workload, ClusterQueue: e.ClusterQueue, Reason: e.Reason, By: e.By, Notice: e.Notice}
			if e.Kind == EventNoticed {
				until := e.Until.Seconds()
				je.UntilSeconds = &until
			}
			if e.Kind == EventPreempted || e.Kind == EventEvicted {
				lost, hours := e.Lost.Seconds(), e.LostResourceHours
				je.LostSeconds, je.LostResourceHours = &lost, &hours
			}
			jr.Events = append(jr.Events, je)
		}
		doc.Runs = append(doc.Runs, jr)
	}
	enc := json.NewEncoder(out)
	enc.SetIndent("", "  ")
	return enc.Encode(doc)
}

// Sequence is what happened to whom, in order, without times: admissions, preemptions (with the
// reason and the preemptor) and completions. Two runs that made the same decisions have the same
// sequence.
func (r *Result) Sequence() []string {
	var out []string
	for _, e := range r.Events {
		switch e.Kind {
		case EventAdmitted:
			out = append(out, fmt.Sprintf("%s admitted", e.Workload))
		case EventPreempted, EventEvicted:
			out = append(out, fmt.Sprintf("%s %s (%s)", e.Workload, e.Kind, e.Reason))
		case EventFinished:
			out = append(out, fmt.Sprintf("%s finished", e.Workload))
		}
	}
	return out
}
