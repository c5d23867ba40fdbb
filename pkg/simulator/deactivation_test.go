package simulator

import (
	"context"
	"fmt"
	"math/rand"
	"strings"
	"testing"
	"time"
)

// A tenant may deactivate its workload (spec.active false) and reactivate it, as often as it
// likes. In a time-sharing ClusterQueue that must buy it nothing: a workload that left the quota
// for any reason waits from then, at the back of the line. The property, over generated
// scenarios where some owners deactivate their workload a while after each admission: while a
// same-priority workload of the ClusterQueue waits (its owner plays no such game) through a span
// of two windows, no workload holds the quota for more than one window of that span (and the
// scheduling slack). Every other invariant of the rotation checker is checked on them too.
func TestDeactivationProperties(t *testing.T) {
	cases, seed := generatedScenarios(t, "deactivation property checker", 30, 8)
	failed, deactivations := 0, 0
	for i := range cases {
		s := seed + int64(i)
		yaml, window := generateDeactivation(s)
		problems, n, err := checkDeactivation(yaml, window)
		deactivations += n
		if err != nil {
			t.Fatalf("seed %d: %v\n%s", s, err, yaml)
		}
		if len(problems) > 0 {
			failed++
			t.Errorf("seed %d: %d violations, first: %s\n%s", s, len(problems), problems[0], yaml)
			if failed >= 3 {
				t.Fatal("stopping after 3 failing scenarios")
			}
		}
	}
	t.Logf("%d deactivations played", deactivations)
	if deactivations < cases {
		t.Errorf("%d deactivations over %d scenarios: too few to test anything", deactivations, cases)
	}
}

// The checker finds the hole it exists for: a holder back at the head of the line after each
// deactivation, as upstream's queue order (by creation) put it before turns counted from the
// eviction (with that order, TestDeactivationProperties fails on its first scenarios).
func TestDeactivationCheckerFindsAHolderThatNeverWaits(t *testing.T) {
	const window = time.Minute
	// Three one-CPU workloads in a one-CPU queue; "greedy" is admitted again and again while
	// "starved" waits: as if greedy never left the head of the line.
	events := []Event{
		{At: 0, Kind: EventArrived, Workload: "greedy", ClusterQueue: "turns"},
		{At: 0, Kind: EventAdmitted, Workload: "greedy", ClusterQueue: "turns"},
		{At: time.Second, Kind: EventArrived, Workload: "starved", ClusterQueue: "turns"},
		{At: 50 * time.Second, Kind: EventEvicted, Workload: "greedy", ClusterQueue: "turns"},
		{At: 55 * time.Second, Kind: EventAdmitted, Workload: "greedy", ClusterQueue: "turns"},
		{At: 105 * time.Second, Kind: EventEvicted, Workload: "greedy", ClusterQueue: "turns"},
		{At: 110 * time.Second, Kind: EventAdmitted, Workload: "greedy", ClusterQueue: "turns"},
	}
	problems := holdsWhileOthersWait(events, map[string]int32{"greedy": 0, "starved": 0}, map[string]bool{"greedy": true}, window, 3*time.Minute)
	if len(problems) == 0 {
		t.Fatal("no violation found for a holder that took three turns in a row while another waited")
	}
}

// generatedScenarios is how many generated scenarios a property test runs (fewer under the race
// detector, where each costs five to ten times as much) and from which seed, logged.
func generatedScenarios(t *testing.T, what string, cases, underRace int) (int, int64) {
	t.Helper()
	if raceDetector {
		cases = underRace
	}
	seed := *scenarioSeed
	if seed == 0 {
		seed = time.Now().UnixNano() % 1_000_000_000
	}
	t.Logf("%s: %d scenarios from seed %d", what, cases, seed)
	return cases, seed
}

// checkDeactivation runs a generated scenario and returns the invariants it broke and how many
// times an owner deactivated a workload.
func checkDeactivation(yaml string, window time.Duration) (problems []string, deactivations int, err error) {
	sc, err := Parse("deactivation.yaml", []byte(yaml))
	if err != nil {
		return nil, 0, fmt.Errorf("generated scenario is invalid: %w", err)
	}
	c := newChecker(sc)
	res, err := Run(context.Background(), sc, Options{Mode: ModeTimeshare, observe: c.observe})
	if err != nil {
		return nil, 0, err
	}
	for _, n := range res.Notes {
		if strings.Contains(n, "did not settle") || strings.Contains(n, "workload controller") {
			c.failf("simulation: %s", n)
		}
	}
	c.verify(res)
	priority := map[string]int32{}
	players := map[string]bool{}
	for _, s := range sc.WorkloadSpecs() {
		priority[s.Name] = s.Priority
		players[s.Name] = s.DeactivateAfter > 0
	}
	for _, e := range res.Events {
		if e.Kind == EventDeactivated {
			deactivations++
		}
	}
	until := sc.Simulation.Until.Duration
	return append(c.problems, holdsWhileOthersWait(res.Events, priority, players, window, until)...), deactivations, nil
}

type span struct{ from, to time.Duration }

// holdsWhileOthersWait checks, in one ClusterQueue, that while a workload whose owner does not
// deactivate it waits through two windows, no other workload of its priority holds the quota
// for more than a window of them (and a few seconds of scheduling).
func holdsWhileOthersWait(events []Event, priority map[string]int32, players map[string]bool, window, until time.Duration) []string {
	const slack = 5 * time.Second
	holds := map[string][]span{}
	waits := map[string][]span{}
	open := map[string]*span{}
	openWait := map[string]*span{}
	for _, e := range events {
		switch e.Kind {
		case EventArrived:
			openWait[e.Workload] = &span{from: e.At}
		case EventAdmitted:
			open[e.Workload] = &span{from: e.At}
			if w := openWait[e.Workload]; w != nil {
				w.to = e.At
				waits[e.Workload] = append(waits[e.Workload], *w)
				delete(openWait, e.Workload)
			}
		case EventPreempted, EventEvicted, EventFinished:
			if h := open[e.Workload]; h != nil {
				h.to = e.At
				holds[e.Workload] = append(holds[e.Workload], *h)
				delete(open, e.Workload)
			}
			if e.Kind != EventFinished {
				openWait[e.Workload] = &span{from: e.At}
			}
		}
	}
	for name, h := range open {
		h.to = until
		holds[name] = append(holds[name], *h)
	}
	for name, w := range openWait {
		w.to = until
		waits[name] = append(waits[name], *w)
	}
	var problems []string
	for waiter, ws := range waits {
		if players[waiter] {
			continue
		}
		for _, w := range ws {
			if w.to-w.from < 2*window {
				continue
			}
			for holder, hs := range holds {
				if holder == waiter || priority[holder] != priority[waiter] {
					continue
				}
				starts := []time.Duration{w.from}
				for _, h := range hs {
					starts = append(starts, h.from, h.to-2*window)
				}
				for _, s := range starts {
					if s < w.from || s+2*window > w.to {
						continue
					}
					if held := overlap(hs, span{s, s + 2*window}); held > window+slack {
						problems = append(problems, fmt.Sprintf("%s held the quota %s of the %s from +%s while %s waited (+%s to +%s)",
							holder, held, 2*window, FormatOffset(s), waiter, FormatOffset(w.from), FormatOffset(w.to)))
						break
					}
				}
			}
		}
	}
	return problems
}

func overlap(hs []span, in span) time.Duration {
	var d time.Duration
	for _, h := range hs {
		if from, to := max(h.from, in.from), min(h.to, in.to); to > from {
			d += to - from
		}
	}
	return d
}

// generateDeactivation draws one time-sharing ClusterQueue of one to three CPUs and three to six
// one-CPU workloads of one priority that run for hours, one or two of whose owners deactivate
// them a while after each admission and reactivate them a little later. It returns the scenario
// and its window.
func generateDeactivation(seed int64) (string, time.Duration) {
	rng := rand.New(rand.NewSource(seed))
	window := []time.Duration{time.Minute, 2 * time.Minute, 5 * time.Minute}[rng.Intn(3)]
	cpus := 1 + rng.Intn(3)
	n := cpus + 2 + rng.Intn(3)
	players := 1 + rng.Intn(2)
	strategy := []string{"BestEffortFIFO", "StrictFIFO"}[rng.Intn(2)]
	var b strings.Builder
	fmt.Fprintf(&b, `apiVersion: kueue.x-k8s.io/v1beta2
kind: ResourceFlavor
metadata: {name: f0}
---
apiVersion: kueue.x-k8s.io/v1beta2
kind: ClusterQueue
metadata: {name: turns}
spec:
  queueingStrategy: %s
  resourceGroups: [{coveredResources: [cpu], flavors: [{name: f0, resources: [{name: cpu, nominalQuota: %d}]}]}]
  preemption: {withinClusterQueue: LowerOrNewerEqualPriority, withinClusterQueueConfig: {minAdmitDuration: %s}}
---
name: deactivation-%d
simulation:
  until: %s
workloads:
`, strategy, cpus, window, seed, 12*window)
	for i := range n {
		fmt.Fprintf(&b, "  - name: w%d\n    clusterQueue: turns\n    arrival: %s\n    resources: {cpu: 1}\n    duration: 24h\n",
			i, time.Duration(rng.Intn(120))*time.Second)
		if i < players {
			after := time.Duration(5+rng.Intn(int(window/time.Second)-5)) * time.Second
			off := time.Duration(1+rng.Intn(30)) * time.Second
			fmt.Fprintf(&b, "    deactivate: {afterAdmission: %s, for: %s}\n", after, off)
		}
	}
	return b.String(), window
}
