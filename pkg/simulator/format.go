package simulator

import (
	"encoding/json"
	"fmt"
	"io"
	"math"
	"reflect"
	"slices"
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
	fmt.Fprintf(out, "Scenario %s, started %s\n", first.Scenario, first.Start.UTC().Format(time.RFC3339))
	for _, r := range runs {
		fmt.Fprintf(out, "  %s: simulated %s, %d scheduling cycles\n", r.Mode.Title(), FormatOffset(r.End), r.Cycles)
	}
	if len(runs) > 1 {
		fmt.Fprintf(out, "Cells show: %s\n", perRun(runs, func(r *Result) string { return r.Mode.Title() }))
	}
	fmt.Fprintln(out)

	tw := tabwriter.NewWriter(out, 0, 0, 2, ' ', 0)
	lostUnit := strings.ToUpper(first.LostWork.Unit)
	fmt.Fprintln(tw, "WORKLOAD\tCLUSTERQUEUE\tPRIORITY\tSIZE\tARRIVAL\tDURATION\tTOTAL WAIT\tLONGEST WAIT\tADMITTED\tLOST\tLOST "+lostUnit+"\tPREEMPTIONS\tFINISHED AT\tSHARE")
	for i, w := range first.Workloads {
		row := []string{w.Name, w.ClusterQueue, fmt.Sprint(w.Priority), w.Requests, FormatOffset(w.Arrival), FormatOffset(w.Duration)}
		cells := [][]string{}
		for _, r := range runs {
			rw := r.workload(i, w.Name)
			if rw == nil {
				cells = append(cells, []string{"-", "-", "-", "-", "-", "-", "-", "-"})
				continue
			}
			share, finished := r.queue(rw.ClusterQueue).CapacityShare[rw.Name], "no"
			if rw.Finished {
				finished = FormatOffset(rw.FinishedAt)
			}
			cells = append(cells, []string{
				FormatOffset(rw.TotalWait), FormatOffset(rw.LongestWait), FormatOffset(rw.Admitted), FormatOffset(rw.Lost),
				resourceHours(rw.LostResourceHours), fmt.Sprint(rw.PreemptionCount()), finished, orDash(share*100, "%.0f%%"),
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
				fmt.Sprint(rq.Finished), orDash(rq.Jain, "%.2f"), FormatOffset(rq.WaitP50), FormatOffset(rq.WaitP95), FormatOffset(rq.WaitMax),
				FormatOffset(rq.LongestWait), fmt.Sprintf("%.2f", rq.PreemptionsPerHour), FormatOffset(rq.Lost), resourceHours(rq.LostResourceHours),
				orDash(rq.Utilisation*100, "%.0f%%"),
			})
		}
		row := append([]string{q.Name, fmt.Sprint(q.Workloads)}, joinColumns(cells)...)
		fmt.Fprintln(tw, strings.Join(row, "\t"))
	}
	if err := tw.Flush(); err != nil {
		return err
	}
	fmt.Fprintf(out, "\nWork lost at eviction (%s x time): %s\n", first.LostWork.Resource, perRun(runs, func(r *Result) string {
		return fmt.Sprintf("%s %s (%s of run time)", resourceHours(r.LostWork.ResourceHours), r.LostWork.Unit, FormatOffset(r.LostWork.Lost))
	}))
	for _, w := range warnings() {
		if slices.ContainsFunc(runs, func(r *Result) bool { return r.Counts[w.Counter]["given"] > 0 }) {
			fmt.Fprintf(out, "%s: %s\n", w.Title, perRun(runs, func(r *Result) string {
				return fmt.Sprintf("%d given, %d ended early", r.Counts[w.Counter]["given"], r.Counts[w.Counter]["endedEarly"])
			}))
		}
	}
	noted := false
	for _, r := range runs {
		for _, n := range r.Notes {
			fmt.Fprintf(out, "\nNote (%s): %s", r.Mode.Title(), n)
			noted = true
		}
	}
	if noted {
		fmt.Fprintln(out)
	}
	return nil
}

// perRun joins one value per run with " / ".
func perRun(runs []*Result, value func(*Result) string) string {
	vals := make([]string, len(runs))
	for i, r := range runs {
		vals[i] = value(r)
	}
	return strings.Join(vals, " / ")
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
	if j := slices.IndexFunc(r.Workloads, func(w WorkloadResult) bool { return w.Name == name }); j >= 0 {
		return &r.Workloads[j]
	}
	return nil
}

func (r *Result) queue(name string) QueueResult {
	if i := slices.IndexFunc(r.ClusterQueues, func(q QueueResult) bool { return q.Name == name }); i >= 0 {
		return r.ClusterQueues[i]
	}
	return QueueResult{Name: name, Jain: math.NaN()}
}

func resourceHours(h float64) string {
	return fmt.Sprintf("%.2f", h)
}

// orDash formats f, or writes - for NaN (nothing to measure).
func orDash(f float64, format string) string {
	if math.IsNaN(f) {
		return "-"
	}
	return fmt.Sprintf(format, f)
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
		case EventDeactivated:
			what = fmt.Sprintf("%s is deactivated by its owner", e.Workload)
		case EventReactivated:
			what = fmt.Sprintf("%s is reactivated by its owner", e.Workload)
		default:
			if u := warningOf(string(e.Kind)); u != nil {
				what = e.Workload + " " + u.Says(FormatOffset(e.Until), e.By, e.Reason)
			}
		}
		what += outcomeWords(e.Outcome)
		if e.Lost > 0 {
			what += fmt.Sprintf(", losing %s of run time (%s %s)", FormatOffset(e.Lost), resourceHours(e.LostResourceHours), r.LostWork.Unit)
		}
		fmt.Fprintf(tw, "  +%s\t%s\t%s\n", FormatOffset(e.At), e.ClusterQueue, what)
	}
	return tw.Flush()
}

// outcomeWords tell how an eviction ended a warning (policy.Ending), after a comma; "" for none.
func outcomeWords(outcome string) string {
	for _, w := range warnings() {
		if outcome != "" {
			for _, e := range []policy.Ending{w.Early, w.Late} {
				if e.Outcome == outcome {
					return ", " + e.Words
				}
			}
		}
	}
	return ""
}

// WriteJSON writes the runs as {"runs": [...]}: every field of Result, in lowerCamelCase (or
// as its json tag says), durations in seconds with "Seconds" after their name, NaN as null.
func WriteJSON(out io.Writer, runs ...*Result) error {
	enc := json.NewEncoder(out)
	enc.SetIndent("", "  ")
	return enc.Encode(map[string]any{"runs": jsonValue(reflect.ValueOf(runs))})
}

func jsonValue(v reflect.Value) any {
	switch t := v.Type(); {
	case t == reflect.TypeFor[time.Duration]():
		return time.Duration(v.Int()).Seconds()
	case t == reflect.TypeFor[time.Time]():
		return v.Interface().(time.Time).UTC()
	case v.Kind() == reflect.Float64 && math.IsNaN(v.Float()):
		return nil
	case v.Kind() == reflect.Pointer:
		return jsonValue(v.Elem())
	case v.Kind() == reflect.Slice:
		out := make([]any, v.Len())
		for i := range out {
			out[i] = jsonValue(v.Index(i))
		}
		return out
	case v.Kind() == reflect.Struct:
		m := map[string]any{}
		for i := range t.NumField() {
			name := t.Field(i).Tag.Get("json")
			if c, ok := v.Field(i).Interface().(Counts); ok && name == ",inline" {
				for counter, counts := range c {
					m[counter] = counts
				}
				continue
			}
			if name == "" {
				name = strings.ToLower(t.Field(i).Name[:1]) + t.Field(i).Name[1:]
				if t.Field(i).Type == reflect.TypeFor[time.Duration]() {
					name += "Seconds"
				}
			}
			m[name] = jsonValue(v.Field(i))
		}
		// Fields that only mean something in some cases are left out (null for finishedAt).
		switch x := v.Interface().(type) {
		case WorkloadResult:
			if !x.Finished {
				m["finishedAtSeconds"] = nil
			}
		case Event:
			if x.Kind != EventPreempted && x.Kind != EventEvicted {
				delete(m, "lostSeconds")
				delete(m, "lostResourceHours")
			}
			if x.Until == 0 {
				delete(m, "untilSeconds")
			}
			for _, k := range []string{"reason", "by", "outcome"} {
				if m[k] == "" {
					delete(m, k)
				}
			}
		}
		return m
	}
	return v.Interface()
}
