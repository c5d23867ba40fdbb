package main

import (
	"fmt"
	"io"
	"slices"
	"sort"
	"strings"
	"text/tabwriter"
	"time"

	"sigs.k8s.io/kueue/test/performance/scheduler/runner/generator"
	"sigs.k8s.io/kueue/test/performance/scheduler/runner/recorder"
)

// workloadClasses lists the workload class names of cfg in the order they first appear.
func workloadClasses(cfg *generator.Config) []string {
	var out []string
	for _, c := range cfg.Cohorts {
		for _, qs := range c.QueuesSets {
			for _, ws := range qs.WorkloadsSets {
				for _, w := range ws.Workloads {
					if !slices.Contains(out, w.ClassName) {
						out = append(out, w.ClassName)
					}
				}
			}
		}
	}
	return out
}

// usagePercent is a ClusterQueue class's average usage of its nominal quota over the time it was
// monitored, computed as upstream's checker does.
func usagePercent(s *recorder.CQGroupSummary) float64 {
	elapsed := s.LastEventTime.Sub(s.FirstEventTime).Milliseconds()
	if s.NominalQuota == 0 || elapsed == 0 {
		return 0
	}
	return float64(s.CPUUsed) * 100 / (float64(s.NominalQuota) * float64(elapsed))
}

// metric is one column of the report.
type metric struct {
	name  string
	value func(*result) float64
	// format renders a value; ratios are value/value.
	format func(float64) string
}

func seconds(v float64) string { return fmt.Sprintf("%.1f s", v) }

func count(v float64) string { return fmt.Sprintf("%.0f", v) }

// requestCounts splits the scheduler's client calls ("<verb> <kind>" or "<subresource> <verb> <kind>")
// into writes, which are API requests, and reads (get, list), which the manager's client serves
// from its informer cache.
func requestCounts(requests map[string]int) (writes, reads int) {
	for op, n := range requests {
		f := strings.Fields(op)
		verb := f[0]
		if len(f) == 3 {
			verb = f[1]
		}
		if verb == "get" || verb == "list" {
			reads += n
		} else {
			writes += n
		}
	}
	return writes, reads
}

func sumValues(m map[string]int) int {
	n := 0
	for _, v := range m {
		n += v
	}
	return n
}

func metrics(results []*result, classes []string) []metric {
	ms := []metric{
		{"all admitted", func(r *result) float64 { return r.lastAdmitted.Seconds() }, seconds},
		{"all finished", func(r *result) float64 { return r.lastFinished.Seconds() }, seconds},
	}
	for _, c := range classes {
		ms = append(ms, metric{"avg admission " + c, func(r *result) float64 {
			if s := r.summary.WorkloadClasses[c]; s != nil {
				return (time.Duration(s.AverageTimeToAdmissionMs) * time.Millisecond).Seconds()
			}
			return 0
		}, seconds})
	}
	ms = append(ms, metric{admissionRateMetric, admissionRate, func(v float64) string { return fmt.Sprintf("%.1f/s", v) }})
	ms = append(ms, metric{quotaFilledMetric, func(r *result) float64 { return r.filled.Seconds() }, seconds})
	ms = append(ms, metric{deepRateMetric, func(r *result) float64 { return r.deepRate }, func(v float64) string {
		if v == 0 {
			return "-"
		}
		return fmt.Sprintf("%.1f/s", v)
	}})
	var cqClasses []string
	for _, r := range results {
		for c := range r.summary.ClusterQueueClasses {
			if !slices.Contains(cqClasses, c) {
				cqClasses = append(cqClasses, c)
			}
		}
	}
	sort.Strings(cqClasses)
	for _, c := range cqClasses {
		ms = append(ms, metric{"usage " + c, func(r *result) float64 {
			if s := r.summary.ClusterQueueClasses[c]; s != nil {
				return usagePercent(s)
			}
			return 0
		}, func(v float64) string { return fmt.Sprintf("%.1f%%", v) }})
	}
	ms = append(ms,
		metric{"evictions", func(r *result) float64 {
			n := 0
			for _, s := range r.summary.WorkloadClasses {
				n += int(s.TotalEvictions)
			}
			return float64(n)
		}, count},
		metric{"admission cycles", func(r *result) float64 {
			n := 0
			for _, c := range r.counts.Cycles {
				n += c
			}
			return float64(n)
		}, count},
		metric{"time in cycles", func(r *result) float64 { return r.counts.CycleSeconds }, seconds},
		metric{meanCycleMetric, meanCycle, func(v float64) string { return fmt.Sprintf("%.1f ms", v) }},
		metric{"scheduler writes", func(r *result) float64 { w, _ := requestCounts(r.counts.Requests); return float64(w) }, count},
		metric{"scheduler cache reads", func(r *result) float64 { _, rd := requestCounts(r.counts.Requests); return float64(rd) }, count},
		metric{"manager API requests", func(r *result) float64 { return float64(sumValues(r.counts.ClientRequests)) }, count},
		metric{"of them POST (events)", func(r *result) float64 { return float64(r.counts.ClientRequests["POST"]) }, count},
	)
	if slices.ContainsFunc(results, func(r *result) bool { return r.cpu.Total > 0 }) {
		ms = append(ms,
			metric{"scheduler CPU", func(r *result) float64 { return r.cpu.Scheduler.Seconds() }, seconds},
			metric{"waker CPU", func(r *result) float64 { return r.cpu.Waker.Seconds() }, seconds},
		)
	}
	if slices.ContainsFunc(results, func(r *result) bool { return len(r.visibility.ClusterQueue) > 0 }) {
		ms = append(ms,
			metric{visibilityCQMetric + " p50", probePercentile(false, 0.5), millis},
			metric{visibilityCQMetric + " p99", probePercentile(false, 0.99), millis},
			metric{visibilityLQMetric + " p50", probePercentile(true, 0.5), millis},
			metric{visibilityLQMetric + " p99", probePercentile(true, 0.99), millis},
		)
	}
	ms = append(ms,
		metric{"API server CPU", func(r *result) float64 { return r.apiCPU.Seconds() }, seconds},
		metric{apiCoresMetric, apiCores, func(v float64) string { return fmt.Sprintf("%.2f", v) }},
		metric{"manager CPU", func(r *result) float64 { return float64(r.manager.UserMs+r.manager.SysMs) / 1000 }, seconds},
		metric{"manager max RSS", func(r *result) float64 { return float64(r.manager.Maxrss) / 1024 }, func(v float64) string { return fmt.Sprintf("%.0f MB", v) }},
	)
	return ms
}

func millis(v float64) string { return fmt.Sprintf("%.1f ms", v) }

// probePercentile is the p-th percentile of the visibility probe's reads of the LocalQueue's
// endpoint (or the ClusterQueue's), in milliseconds.
func probePercentile(localQueue bool, p float64) func(*result) float64 {
	return func(r *result) float64 {
		samples := r.visibility.ClusterQueue
		if localQueue {
			samples = r.visibility.LocalQueue
		}
		return float64(percentile(samples, p)) / float64(time.Millisecond)
	}
}

// meanCycle is the mean admission cycle in milliseconds; 0 without cycles.
func meanCycle(r *result) float64 {
	n := sumValues(r.counts.Cycles)
	if n == 0 {
		return 0
	}
	return r.counts.CycleSeconds * 1000 / float64(n)
}

// apiCores is the API server's CPU time over the measured wall time: the cores it kept busy on
// average (on two cores, near 2 it is the bound).
func apiCores(r *result) float64 {
	if r.recorded <= 0 {
		return 0
	}
	return r.apiCPU.Seconds() / r.recorded.Seconds()
}

// admissionRate is the measured admissions over the time until the last of them.
func admissionRate(r *result) float64 {
	if r.lastAdmitted <= 0 {
		return 0
	}
	return float64(r.admitted) / r.lastAdmitted.Seconds()
}

// deepRateMetric names the admission rate while the queues are deep (deepRate), quotaFilledMetric
// the time until the quota's worth was admitted (quotaFilled).
const (
	deepRateMetric      = "admissions/s while deep"
	quotaFilledMetric   = "quota filled"
	admissionRateMetric = "admissions/s"
	meanCycleMetric     = "mean cycle"
	apiCoresMetric      = "API server cores"
	visibilityCQMetric  = "visibility ClusterQueue"
	visibilityLQMetric  = "visibility LocalQueue"
)

// summaryMetric reports whether printSummary shows the figure of metrics named name.
func summaryMetric(name string) bool {
	return name == "all admitted" || name == "all finished" || strings.HasPrefix(name, "avg admission ") ||
		name == deepRateMetric || name == quotaFilledMetric || name == admissionRateMetric || name == meanCycleMetric ||
		name == apiCoresMetric || name == "manager CPU" || name == "manager max RSS" ||
		strings.HasPrefix(name, visibilityCQMetric) || strings.HasPrefix(name, visibilityLQMetric)
}

// printSummary writes the main figures one per row: each variant's median over the rounds, the
// load's capacity bound beside the figures it bounds, and each variant's median ratio to upstream.
// rateBound, when not 0, is the bound of the admission rate while deep (deepRateBound).
func printSummary(w io.Writer, results []*result, classes []string, bound time.Duration, rateBound float64) {
	var names []string
	byName := map[string][]*result{}
	for _, r := range results {
		if _, seen := byName[r.variant.name]; !seen {
			names = append(names, r.variant.name)
		}
		byName[r.variant.name] = append(byName[r.variant.name], r)
	}
	// upstreamOf[round] is that round's upstream run.
	upstreamOf := map[int]*result{}
	for _, r := range results {
		if r.variant.upstream {
			upstreamOf[r.round] = r
		}
	}
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', tabwriter.AlignRight)
	header := []string{"median over rounds"}
	for _, n := range names {
		header = append(header, n)
	}
	header = append(header, "capacity bound")
	for _, n := range names {
		if len(upstreamOf) > 0 && n != "upstream" {
			header = append(header, n+"/upstream")
		}
	}
	fmt.Fprintln(tw, strings.Join(header, "\t")+"\t")
	for _, m := range metrics(results, classes) {
		if !summaryMetric(m.name) {
			continue
		}
		row := []string{m.name}
		for _, n := range names {
			var vals []float64
			for _, r := range byName[n] {
				vals = append(vals, m.value(r))
			}
			row = append(row, m.format(median(vals)))
		}
		switch {
		case (m.name == "all admitted" || m.name == "all finished") && bound > 0:
			row = append(row, seconds(bound.Seconds()))
		case m.name == deepRateMetric && rateBound > 0:
			row = append(row, m.format(rateBound))
		default:
			row = append(row, "")
		}
		for _, n := range names {
			if len(upstreamOf) == 0 || n == "upstream" {
				continue
			}
			var ratios []float64
			for _, r := range byName[n] {
				if up := upstreamOf[r.round]; up != nil && m.value(up) != 0 {
					ratios = append(ratios, m.value(r)/m.value(up))
				}
			}
			if len(ratios) == 0 {
				row = append(row, "-")
			} else {
				row = append(row, fmt.Sprintf("%.2fx", median(ratios)))
			}
		}
		fmt.Fprintln(tw, strings.Join(row, "\t")+"\t")
	}
	_ = tw.Flush()
}

// printReport writes one row per run and, for each round that has an upstream run, one row of
// ratios ours/upstream per other run of that round; with several rounds, the median ratio too.
func printReport(w io.Writer, results []*result, classes []string) {
	ms := metrics(results, classes)
	rounds := 0
	for _, r := range results {
		rounds = max(rounds, r.round+1)
	}
	label := func(s string, round int) string {
		if rounds > 1 {
			return fmt.Sprintf("%s, round %d", s, round+1)
		}
		return s
	}
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', tabwriter.AlignRight)
	header := []string{"run", "finished"}
	for _, m := range ms {
		header = append(header, m.name)
	}
	fmt.Fprintln(tw, strings.Join(header, "\t")+"\t")
	for _, r := range results {
		row := []string{label(r.variant.title, r.round), fmt.Sprintf("%d/%d", r.finished, r.workloads)}
		for _, m := range ms {
			row = append(row, m.format(m.value(r)))
		}
		fmt.Fprintln(tw, strings.Join(row, "\t")+"\t")
	}
	// ratios[variant name][metric] over the rounds, in the order variants first appear.
	ratios := map[string][][]float64{}
	var names []string
	for round := range rounds {
		var upstream *result
		for _, r := range results {
			if r.round == round && r.variant.upstream {
				upstream = r
			}
		}
		if upstream == nil {
			continue
		}
		for _, r := range results {
			if r.round != round || r == upstream {
				continue
			}
			if _, seen := ratios[r.variant.name]; !seen {
				names = append(names, r.variant.name)
				ratios[r.variant.name] = make([][]float64, len(ms))
			}
			row := []string{label(r.variant.name+"/upstream", round), ""}
			for i, m := range ms {
				ours, up := m.value(r), m.value(upstream)
				row = append(row, ratio(ours, up))
				if up != 0 {
					ratios[r.variant.name][i] = append(ratios[r.variant.name][i], ours/up)
				}
			}
			fmt.Fprintln(tw, strings.Join(row, "\t")+"\t")
		}
	}
	if rounds > 1 {
		for _, name := range names {
			row := []string{name + "/upstream, median", ""}
			for i := range ms {
				if vals := ratios[name][i]; len(vals) > 0 {
					row = append(row, fmt.Sprintf("%.2fx", median(vals)))
				} else {
					row = append(row, "-")
				}
			}
			fmt.Fprintln(tw, strings.Join(row, "\t")+"\t")
		}
	}
	_ = tw.Flush()

	fmt.Fprintln(w)
	for _, r := range results {
		fmt.Fprintf(w, "%s: generation %s, recorder ended at %s, manager wall %s, mean load average %.1f, client QPS %g burst %d",
			label(r.variant.title, r.round), r.generated.Round(time.Millisecond), r.recorded.Round(time.Millisecond),
			(time.Duration(r.manager.WallMs) * time.Millisecond).Round(time.Millisecond), r.load, r.counts.ClientQPS, r.counts.ClientBurst)
		if r.setupTime > 0 {
			fmt.Fprintf(w, ", setup before the clock %s", r.setupTime.Round(time.Millisecond))
		}
		if r.placed != 0 {
			fmt.Fprintf(w, ", %d/%d workloads placed by topology", r.placed, r.workloads)
		}
		if v := r.visibility; len(v.ClusterQueue)+len(v.LocalQueue) > 0 {
			fmt.Fprintf(w, ", visibility probe: %d reads, %d failed, answers listed at least %d pending workloads", len(v.ClusterQueue)+len(v.LocalQueue), v.Errors, v.FewestListed)
		}
		if r.deepOK {
			fmt.Fprintf(w, ", queues deep until %s", r.deepUntil.Round(time.Millisecond))
		}
		if r.variant.minAdmitDuration > 0 {
			fmt.Fprintf(w, ", withinClusterQueue LowerOrNewerEqualPriority, %d/%d ClusterQueues store minAdmitDuration", r.windows, r.clusterQueues)
		}
		if r.timedOut {
			fmt.Fprint(w, ", TIMED OUT: figures cover only what was recorded")
		}
		if dropped := r.summary.DroppedWLEvents; dropped > 0 {
			fmt.Fprintf(w, ", %d workload events dropped by the recorder", dropped)
		}
		fmt.Fprintln(w)
	}
	fmt.Fprintln(w, "ratios are ours/upstream from this invocation; below 1.00 is faster for times, above 1.00 is better for usage and rates")
}

func median(vals []float64) float64 {
	s := slices.Clone(vals)
	slices.Sort(s)
	if n := len(s); n%2 == 1 {
		return s[n/2]
	}
	return (s[len(s)/2-1] + s[len(s)/2]) / 2
}

func ratio(ours, upstream float64) string {
	if upstream == 0 {
		if ours == 0 {
			return "-"
		}
		return "n/a"
	}
	return fmt.Sprintf("%.2fx", ours/upstream)
}
