package simulator

import (
	"fmt"
	"math"
	"slices"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"

	utilresource "sigs.k8s.io/kueue/pkg/util/resource"
)

// Result is what one run of a scenario did.
type Result struct {
	Scenario string
	Mode     Mode
	// Start is the wall-clock time the simulation started at; End is how much simulated time it
	// covered.
	Start time.Time
	End   time.Duration
	// Cycles counts scheduling cycles run.
	Cycles        int `json:"schedulingCycles"`
	Workloads     []WorkloadResult
	ClusterQueues []QueueResult
	// Events lists what happened, in order.
	Events []Event
	// Notes are warnings about the run, such as workloads left unfinished.
	Notes []string
	// LostWork is the run time evictions threw away, over every workload.
	LostWork LostWork
	// Counts are the warnings before eviction given, over every workload; in JSON, each counter
	// beside the other fields.
	Counts Counts `json:",inline"`
}

// LostWork measures work lost at evictions in one resource times time: the scenario's
// accelerator (an extended resource, one whose name says gpu first) when its workloads request
// one, else cpu. A workload that does not request that resource loses none of it.
type LostWork struct {
	// Resource is the resource measured, for example nvidia.com/gpu.
	Resource string
	// Unit names resource-hours of it: GPU-hours, CPU-hours, or <resource>-hours.
	Unit string
	// Lost is the run time lost; ResourceHours weighs it by the resource each workload holds.
	Lost          time.Duration `json:"seconds"`
	ResourceHours float64
}

// WorkloadResult is one workload's fate.
type WorkloadResult struct {
	Name         string
	Namespace    string
	ClusterQueue string
	Priority     int32
	Requests     string
	Arrival      time.Duration
	Duration     time.Duration
	// TotalWait is the time spent pending after arrival; LongestWait the longest stretch of it.
	TotalWait   time.Duration
	LongestWait time.Duration
	// Admitted is the time spent holding quota; Admissions how many times it was admitted.
	Admitted   time.Duration
	Admissions int
	// Lost is the run time evictions threw away: the time since the last completed checkpoint at
	// each eviction (all the time since the admission for a workload without checkpoints).
	Lost time.Duration
	// LostResourceHours is Lost in Result.LostWork's unit.
	LostResourceHours float64
	Counts            Counts `json:",inline"`
	// Preemptions counts evictions by reason (InClusterQueueTimeBased, InCohortReclamation, ...).
	Preemptions map[string]int
	Finished    bool
	FinishedAt  time.Duration
	// Share is its dominant share of its ClusterQueue's capacity while admitted (see
	// docs/simulator.md); CapacityTime is Share times Admitted, in seconds.
	Share        float64
	CapacityTime float64 `json:"capacitySeconds"`
	Intervals    []Interval
}

// PreemptionCount is the total number of times the workload was preempted or evicted.
func (w WorkloadResult) PreemptionCount() int {
	n := 0
	for _, c := range w.Preemptions {
		n += c
	}
	return n
}

// QueueResult sums up one ClusterQueue.
type QueueResult struct {
	Name      string
	Workloads int
	Finished  int
	// CapacityShare is each workload's part of the capacity-time the ClusterQueue's workloads
	// used, by workload name.
	CapacityShare map[string]float64
	// Jain is Jain's fairness index over the workloads' capacity-time: 1 when all got the same,
	// 1/n when one got everything. NaN when none got any.
	Jain float64 `json:"jainIndex"`
	// Waits are over the workloads' total waits; LongestWait is the longest continuous one.
	WaitP50     time.Duration
	WaitP95     time.Duration
	WaitMax     time.Duration
	LongestWait time.Duration
	Preemptions int
	// Lost is the run time evictions threw away, summed over the workloads; LostResourceHours
	// is the same in Result.LostWork's unit.
	Lost              time.Duration
	LostResourceHours float64
	Counts            Counts `json:",inline"`
	// PreemptionsPerHour is Preemptions over the simulated time.
	PreemptionsPerHour float64
	// Utilisation is the capacity-time used over the simulated time: the average fraction of
	// the nominal quota in use (above 1 when borrowing).
	Utilisation float64
}

// EventKind names what happened to a workload.
type EventKind string

const (
	EventArrived   EventKind = "arrived"
	EventAdmitted  EventKind = "admitted"
	EventPreempted EventKind = "preempted"
	EventEvicted   EventKind = "evicted"
	EventFinished  EventKind = "finished"
	// EventDeactivated and EventReactivated are its owner's changes of spec.active.
	EventDeactivated EventKind = "deactivated"
	EventReactivated EventKind = "reactivated"
	// A warning before eviction given is of the kind its unit names (policy.Warns.Event).
)

// Event is one thing that happened to a workload.
type Event struct {
	At           time.Duration
	Kind         EventKind
	Workload     string
	ClusterQueue string
	// Reason is the preemption or eviction reason.
	Reason string
	// By names the preemptor, when known.
	By string
	// Lost is the run time an eviction threw away; LostResourceHours is the same in
	// Result.LostWork's unit.
	Lost              time.Duration
	LostResourceHours float64
	// Until is a warning's deadline.
	Until time.Duration
	// Outcome, on an eviction that ended a warning, says how (policy.Warns: Early or Late).
	Outcome string
}

func (w *world) result(sc *Scenario, mode Mode, order []*job, end time.Duration) *Result {
	r := &Result{Scenario: sc.Name, Mode: mode, Start: w.start, End: end, Cycles: w.cycles, Events: w.events, Notes: w.notes, Counts: newCounts()}
	r.LostWork.Resource, r.LostWork.Unit = lostWorkResource(sc)
	byQueue := map[string][]*WorkloadResult{}
	for _, j := range order {
		if j.state == notArrived {
			continue
		}
		j.close(end)
		wr := j.res
		wr.Name, wr.Namespace, wr.ClusterQueue, wr.Priority = j.spec.Name, j.spec.Namespace, j.spec.ClusterQueue, j.spec.Priority
		wr.Requests, wr.Arrival, wr.Duration = describeRequests(j.spec.Requests, j.spec.Pods), j.spec.Arrival, j.spec.Duration
		wr.Share = resourceShare(sc, j.spec)
		wr.CapacityTime = wr.Share * wr.Admitted.Seconds()
		wr.LostResourceHours = heldOf(j.spec, r.LostWork.Resource) * wr.Lost.Hours()
		r.LostWork.Lost += wr.Lost
		r.LostWork.ResourceHours += wr.LostResourceHours
		r.Counts.add(wr.Counts)
		r.Workloads = append(r.Workloads, wr)
	}
	for i := range r.Workloads {
		wr := &r.Workloads[i]
		byQueue[wr.ClusterQueue] = append(byQueue[wr.ClusterQueue], wr)
	}
	for _, cq := range sc.ClusterQueues {
		r.ClusterQueues = append(r.ClusterQueues, queueResult(cq.GetName(), byQueue[cq.GetName()], end))
	}
	return r
}

func queueResult(name string, wls []*WorkloadResult, span time.Duration) QueueResult {
	q := QueueResult{Name: name, Workloads: len(wls), CapacityShare: map[string]float64{}, Jain: math.NaN(), Counts: newCounts()}
	var sum, sumSq float64
	waits := make([]time.Duration, 0, len(wls))
	for _, w := range wls {
		if w.Finished {
			q.Finished++
		}
		sum += w.CapacityTime
		sumSq += w.CapacityTime * w.CapacityTime
		waits = append(waits, w.TotalWait)
		q.LongestWait = max(q.LongestWait, w.LongestWait)
		q.Preemptions += w.PreemptionCount()
		q.Lost += w.Lost
		q.LostResourceHours += w.LostResourceHours
		q.Counts.add(w.Counts)
	}
	for _, w := range wls {
		if sum > 0 {
			q.CapacityShare[w.Name] = w.CapacityTime / sum
		}
	}
	if sumSq > 0 {
		q.Jain = sum * sum / (float64(len(wls)) * sumSq)
	}
	slices.Sort(waits)
	q.WaitP50, q.WaitP95, q.WaitMax = percentile(waits, 50), percentile(waits, 95), percentile(waits, 100)
	if span > 0 {
		q.PreemptionsPerHour = float64(q.Preemptions) / span.Hours()
		q.Utilisation = sum / span.Seconds()
	}
	return q
}

// lostWorkResource picks the resource lost work is measured in (see LostWork) and names its unit.
func lostWorkResource(sc *Scenario) (resource, unit string) {
	gpu := func(name string) bool { return strings.Contains(strings.ToLower(name), "gpu") }
	for _, w := range sc.Workloads {
		for name := range w.Resources {
			// The first by name, of those that say gpu if any.
			if utilresource.IsExtendedResourceName(corev1.ResourceName(name)) &&
				(resource == "" || gpu(name) && !gpu(resource) || gpu(name) == gpu(resource) && name < resource) {
				resource = name
			}
		}
	}
	switch {
	case resource == "":
		return string(corev1.ResourceCPU), "CPU-hours"
	case gpu(resource):
		return resource, "GPU-hours"
	}
	return resource, resource + "-hours"
}

// heldOf is how much of resource a workload's pods hold together.
func heldOf(spec WorkloadSpec, resource string) float64 {
	q := spec.Requests[corev1.ResourceName(resource)]
	return q.AsApproximateFloat64() * float64(spec.Pods)
}

// percentile is the nearest-rank percentile of sorted values.
func percentile(sorted []time.Duration, p int) time.Duration {
	if len(sorted) == 0 {
		return 0
	}
	rank := int(math.Ceil(float64(p) / 100 * float64(len(sorted))))
	return sorted[max(rank, 1)-1]
}

// FormatOffset renders a simulated time as a duration from the start, rounded to the second
// unless shorter.
func FormatOffset(d time.Duration) string {
	if d >= time.Second || d <= -time.Second {
		d = d.Round(time.Second)
	}
	return shortDuration(d)
}

// shortDuration renders d in days and FormatDuration's form: 1d2h5m, 4h, 2m5s, 0s.
func shortDuration(d time.Duration) string {
	const day = 24 * time.Hour
	switch {
	case d == math.MinInt64:
		// Its negation overflows: a zero time's offset saturates here.
		return "-" + shortDuration(math.MaxInt64)
	case d < 0:
		return "-" + shortDuration(-d)
	case d < day:
		return FormatDuration(d)
	case d%day == 0:
		return fmt.Sprintf("%dd", d/day)
	}
	return fmt.Sprintf("%dd%s", d/day, FormatDuration(d%day))
}
