package simulator

import (
	"context"
	"fmt"
	"slices"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/kueue-timeshare/kueue-timeshare/pkg/estimate"
)

// TestEstimateDriftWithArrivals measures what the estimate does not foresee: on the same rotating
// queues as TestEstimateAccuracy, workloads arrive over three hours. Each workload's first
// estimate, made at the instant it arrives, is compared with its first admission, as the
// manager's kueue_admission_estimate_error_seconds does. A later arrival may take a turn or the
// quota first (late), or preempt a holder that frees more than it takes (early): that drift is
// reported (TestEstimateDriftOfAnArrival shows one). An estimate made once everything has arrived
// is within one scheduling interval, as without arrivals.
func TestEstimateDriftWithArrivals(t *testing.T) {
	type made struct {
		estimate.Estimate
		at time.Duration
	}
	var drifted, settled, late, early int
	var worstLate, worstEarly, worstSettled time.Duration
	cases := *estimateCases
	if raceDetector && !flagSet("estimate-cases") {
		cases = 6
	}
	for seed := *estimateSeed; seed < *estimateSeed+int64(cases); seed++ {
		m := generate(seed)
		arrivals := make([]time.Duration, len(m.WLs))
		for i := range m.WLs {
			arrivals[i] = m.WLs[i].Arrival
		}
		m = rotatingWithoutArrivals(m)
		for i := range m.WLs {
			m.WLs[i].Arrival = arrivals[i]
		}
		last := slices.Max(arrivals)
		sc, err := Parse(fmt.Sprintf("generated-%d.yaml", seed), []byte(m.YAML()))
		if err != nil {
			t.Fatalf("seed %d: %v", seed, err)
		}
		var names []string
		for _, cq := range m.CQs {
			names = append(names, cq.Name)
		}
		// first: each workload's first estimate; after: its estimate at the last arrival.
		first, after := map[string]made{}, map[string]made{}
		var start time.Time
		var estErr error
		res, err := Run(context.Background(), sc, Options{observe: func(now time.Duration, w *world) {
			if estErr != nil || !slices.Contains(arrivals, now) {
				return
			}
			start = w.start
			est, err := estimatesOf(w, names, 0)
			if err != nil {
				estErr = err
				return
			}
			for name, e := range est {
				if _, ok := first[name]; !ok {
					first[name] = made{e, now}
				}
				if now == last {
					after[name] = made{e, now}
				}
			}
		}})
		if err != nil || estErr != nil {
			t.Fatalf("seed %d: %v %v", seed, err, estErr)
		}
		// admittedAfter is the workload's first admission after the instant an estimate was made.
		admittedAfter := func(name string, at time.Duration) (time.Duration, bool) {
			for _, e := range res.Events {
				if e.Workload == name && e.Kind == EventAdmitted && e.At > at {
					return e.At, true
				}
			}
			return 0, false
		}
		errorOf := func(name string, e made) (time.Duration, bool) {
			actual, ok := admittedAfter(name, e.at)
			if !ok || e.Unknown || e.When.Sub(start) > m.Until-m.Interval {
				return 0, false
			}
			return actual - e.When.Sub(start), true
		}
		for name, e := range first {
			d, ok := errorOf(name, e)
			if !ok {
				continue
			}
			drifted++
			if testing.Verbose() && d.Abs() > m.Interval {
				t.Logf("seed %d: %s estimated at %s (%s), admitted %s later", seed, name, FormatOffset(e.When.Sub(start)), e.Reason, d)
			}
			switch {
			case d > m.Interval:
				late++
				worstLate = max(worstLate, d)
			case d < -m.Interval:
				early++
				worstEarly = max(worstEarly, -d)
			}
		}
		for name, e := range after {
			d, ok := errorOf(name, e)
			if !ok {
				continue
			}
			settled++
			worstSettled = max(worstSettled, d.Abs())
			if d.Abs() > m.Interval {
				t.Errorf("seed %d: %s estimated at %s (%s) after the last arrival, admitted at %s", seed, name, FormatOffset(e.When.Sub(start)), e.Reason, FormatOffset(e.When.Sub(start)+d))
			}
		}
	}
	t.Logf("first estimates: %d admitted, %d late beyond one interval (worst %s), %d early (worst %s); estimates after the last arrival: %d admitted, worst error %s",
		drifted, late, worstLate, early, worstEarly, settled, worstSettled)
}

// TestEstimateDriftOfAnArrival: a higher priority that arrives after a workload was estimated
// takes the quota first, so that workload is admitted later than estimated, by the arrival's run.
// The holder it preempted waits from its eviction, behind the estimated one.
func TestEstimateDriftOfAnArrival(t *testing.T) {
	const scenario = `apiVersion: kueue.x-k8s.io/v1beta2
kind: ResourceFlavor
metadata: {name: f}
---
apiVersion: kueue.x-k8s.io/v1beta2
kind: ClusterQueue
metadata: {name: cq}
spec:
  resourceGroups: [{coveredResources: [cpu], flavors: [{name: f, resources: [{name: cpu, nominalQuota: 3}]}]}]
  preemption:
    withinClusterQueue: LowerOrNewerEqualPriority
    withinClusterQueueConfig: {minAdmitDuration: 1h}
---
apiVersion: kueue.x-k8s.io/v1beta2
kind: WorkloadPriorityClass
metadata: {name: high}
value: 10
---
name: drift
simulation: {until: 8h}
workloads:
  - {name: holder, clusterQueue: cq, arrival: 0s, resources: {cpu: 3}, duration: 16h}
  - {name: waiting, clusterQueue: cq, arrival: 1m, resources: {cpu: 1}, duration: 16h}
  - {name: urgent, clusterQueue: cq, priorityClass: high, arrival: 30m, resources: {cpu: 3}, duration: 2h}
`
	sc, err := Parse("drift.yaml", []byte(scenario))
	if err != nil {
		t.Fatal(err)
	}
	var first *estimate.Estimate
	var start time.Time
	var estErr error
	res, err := Run(context.Background(), sc, Options{observe: func(now time.Duration, w *world) {
		if first != nil || estErr != nil || now != time.Minute {
			return
		}
		start = w.start
		est, err := estimatesOf(w, []string{"cq"}, 0)
		if e, ok := est["waiting"]; ok {
			first = &e
		}
		estErr = err
	}})
	if err != nil || estErr != nil || first == nil {
		t.Fatalf("run: %v, estimate: %v, waiting estimated: %v", err, estErr, first != nil)
	}
	var admitted time.Duration
	for _, e := range res.Events {
		if e.Workload == "waiting" && e.Kind == EventAdmitted {
			admitted = e.At
			break
		}
	}
	// Estimated when the holder's window ends (1h); the urgent one preempts the holder at 30m and
	// runs to 2h30m; the holder, which left the quota at 30m, waits behind the one waiting since
	// 1m, which is admitted at 2h30m.
	got := struct{ Estimated, Admitted time.Duration }{first.When.Sub(start).Round(time.Second), admitted.Round(time.Second)}
	want := struct{ Estimated, Admitted time.Duration }{time.Hour, 2*time.Hour + 30*time.Minute}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("the waiting workload's first estimate and admission (-want +got):\n%s", diff)
	}
}
