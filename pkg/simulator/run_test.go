package simulator

import (
	"context"
	"fmt"
	"math"
	"strings"
	"testing"
	"time"

	"github.com/go-logr/logr"
	"github.com/google/go-cmp/cmp"
	"github.com/google/go-cmp/cmp/cmpopts"
	utilfeature "k8s.io/apiserver/pkg/util/feature"
	"k8s.io/component-base/featuregate"
	ctrl "sigs.k8s.io/controller-runtime"
)

func TestMain(m *testing.M) {
	// Upstream's workload controller logs through the global logger.
	ctrl.SetLogger(logr.Discard())
	m.Run()
}

// threeJobs are three same-priority jobs that each need the whole one-CPU queue, with
// minAdmitDuration 1m: the honesty check's scenario.
const threeJobs = `apiVersion: kueue.x-k8s.io/v1beta2
kind: ResourceFlavor
metadata: {name: default-flavor}
---
apiVersion: kueue.x-k8s.io/v1beta2
kind: ClusterQueue
metadata: {name: cq}
spec:
  resourceGroups: [{coveredResources: [cpu], flavors: [{name: default-flavor, resources: [{name: cpu, nominalQuota: 1}]}]}]
  preemption: {withinClusterQueue: LowerOrNewerEqualPriority, withinClusterQueueConfig: {minAdmitDuration: 1m}}
---
apiVersion: kueue.x-k8s.io/v1beta2
kind: WorkloadPriorityClass
metadata: {name: normal}
value: 100
---
name: three-jobs
workloads:
  - {name: a, arrival: 0s, clusterQueue: cq, priorityClass: normal, resources: {cpu: 1}, duration: 150s, checkpointed: true}
  - {name: b, arrival: 1s, clusterQueue: cq, priorityClass: normal, resources: {cpu: 1}, duration: 150s, checkpointed: true}
  - {name: c, arrival: 2s, clusterQueue: cq, priorityClass: normal, resources: {cpu: 1}, duration: 150s, checkpointed: true}
`

func mustParse(t *testing.T, text string) *Scenario {
	t.Helper()
	s, err := Parse("test.yaml", []byte(text))
	if err != nil {
		t.Fatal(err)
	}
	return s
}

func mustRun(t *testing.T, s *Scenario, mode Mode) *Result {
	t.Helper()
	r, err := Run(context.Background(), s, Options{Mode: mode})
	if err != nil {
		t.Fatal(err)
	}
	return r
}

// story renders the admissions, preemptions and completions of a run with their times.
func story(r *Result) []string {
	var out []string
	for _, e := range r.Events {
		switch e.Kind {
		case EventAdmitted:
			out = append(out, fmt.Sprintf("+%s %s admitted", FormatOffset(e.At), e.Workload))
		case EventPreempted:
			out = append(out, fmt.Sprintf("+%s %s preempted by %s (%s)", FormatOffset(e.At), e.Workload, e.By, e.Reason))
		case EventEvicted:
			out = append(out, fmt.Sprintf("+%s %s evicted (%s)", FormatOffset(e.At), e.Workload, e.Reason))
		case EventFinished:
			out = append(out, fmt.Sprintf("+%s %s finished", FormatOffset(e.At), e.Workload))
		}
	}
	return out
}

func TestRunStories(t *testing.T) {
	cases := map[string]struct {
		scenario string
		mode     Mode
		want     []string
	}{
		"time-sharing: every job gets a turn, each turn at least minAdmitDuration": {
			scenario: threeJobs,
			want: []string{
				"+0s a admitted",
				// Each turn starts a millisecond after the window ends (shown rounded to the second).
				"+1m a preempted by b (InClusterQueueTimeBased)", "+1m b admitted",
				"+2m b preempted by c (InClusterQueueTimeBased)", "+2m c admitted",
				"+3m c preempted by a (InClusterQueueTimeBased)", "+3m a admitted",
				"+4m a preempted by b (InClusterQueueTimeBased)", "+4m b admitted",
				"+5m b preempted by c (InClusterQueueTimeBased)", "+5m c admitted",
				"+6m c preempted by a (InClusterQueueTimeBased)", "+6m a admitted",
				"+6m30s a finished", "+6m30s b admitted",
				"+7m b finished", "+7m c admitted",
				"+7m30s c finished",
			},
		},
		"upstream semantics: first come, first served, no preemption": {
			scenario: threeJobs,
			mode:     ModeUpstream,
			want: []string{
				"+0s a admitted",
				"+2m30s a finished", "+2m30s b admitted",
				"+5m b finished", "+5m c admitted",
				"+7m30s c finished",
			},
		},
		"a scenario can turn the feature off": {
			scenario: threeJobs + "featureGates: {TimeBasedSamePriorityPreemption: false}\n",
			want: []string{
				"+0s a admitted",
				"+2m30s a finished", "+2m30s b admitted",
				"+5m b finished", "+5m c admitted",
				"+7m30s c finished",
			},
		},
		"upstream's priority booster: two jobs take turns, the third waits (kueue#11980)": {
			scenario: threeJobs,
			mode:     ModeBooster,
			want: []string{
				"+0s a admitted",
				"+1m a preempted by b (InClusterQueue)", "+1m b admitted",
				"+2m b preempted by a (InClusterQueue)", "+2m a admitted",
				"+3m a preempted by b (InClusterQueue)", "+3m b admitted",
				"+4m b preempted by a (InClusterQueue)", "+4m a admitted",
				"+4m30s a finished", "+4m30s b admitted",
				"+5m b finished", "+5m c admitted",
				"+7m30s c finished",
			},
		},
		"without checkpoints a preempted job starts over": {
			scenario: `apiVersion: kueue.x-k8s.io/v1beta2
kind: ResourceFlavor
metadata: {name: f}
---
apiVersion: kueue.x-k8s.io/v1beta2
kind: ClusterQueue
metadata: {name: cq}
spec:
  resourceGroups: [{coveredResources: [cpu], flavors: [{name: f, resources: [{name: cpu, nominalQuota: 1}]}]}]
  preemption: {withinClusterQueue: LowerOrNewerEqualPriority, withinClusterQueueConfig: {minAdmitDuration: 1m}}
---
workloads:
  - {name: a, clusterQueue: cq, resources: {cpu: 1}, duration: 90s}
  - {name: b, arrival: 1s, clusterQueue: cq, resources: {cpu: 1}, duration: 30s}
`,
			want: []string{
				"+0s a admitted",
				"+1m a preempted by b (InClusterQueueTimeBased)", "+1m b admitted",
				"+1m30s b finished", "+1m30s a admitted",
				// 90s from its second admission: the first 60s were lost.
				"+3m a finished",
			},
		},
		"preemptMinRuntime holds back a higher priority until the victim has run that long": {
			scenario: `apiVersion: kueue.x-k8s.io/v1beta2
kind: ResourceFlavor
metadata: {name: f}
---
apiVersion: kueue.x-k8s.io/v1beta2
kind: ClusterQueue
metadata: {name: cq}
spec:
  resourceGroups: [{coveredResources: [cpu], flavors: [{name: f, resources: [{name: cpu, nominalQuota: 1}]}]}]
  preemption: {withinClusterQueue: LowerPriority, preemptMinRuntime: 10m}
---
apiVersion: kueue.x-k8s.io/v1beta2
kind: WorkloadPriorityClass
metadata: {name: low}
value: 1
---
apiVersion: kueue.x-k8s.io/v1beta2
kind: WorkloadPriorityClass
metadata: {name: high}
value: 100
---
workloads:
  - {name: low, clusterQueue: cq, priorityClass: low, resources: {cpu: 1}, duration: 1h}
  - {name: high, arrival: 2m, clusterQueue: cq, priorityClass: high, resources: {cpu: 1}, duration: 5m}
`,
			want: []string{
				"+0s low admitted",
				"+10m low preempted by high (InClusterQueue)", "+10m high admitted",
				"+15m high finished", "+15m low admitted",
				"+1h15m low finished",
			},
		},
		"reclaimMinRuntime on a Cohort holds back reclaim": {
			scenario: `apiVersion: kueue.x-k8s.io/v1beta2
kind: ResourceFlavor
metadata: {name: f}
---
apiVersion: kueue.x-k8s.io/v1beta2
kind: Cohort
metadata: {name: org}
spec:
  preemption: {reclaimMinRuntime: 30m}
---
apiVersion: kueue.x-k8s.io/v1beta2
kind: ClusterQueue
metadata: {name: owner}
spec:
  cohortName: org
  resourceGroups: [{coveredResources: [cpu], flavors: [{name: f, resources: [{name: cpu, nominalQuota: 2}]}]}]
  preemption: {reclaimWithinCohort: Any}
---
apiVersion: kueue.x-k8s.io/v1beta2
kind: ClusterQueue
metadata: {name: borrower}
spec:
  cohortName: org
  resourceGroups: [{coveredResources: [cpu], flavors: [{name: f, resources: [{name: cpu, nominalQuota: 0}]}]}]
---
workloads:
  - {name: borrowed, clusterQueue: borrower, resources: {cpu: 2}, duration: 2h}
  - {name: own, arrival: 5m, clusterQueue: owner, resources: {cpu: 2}, duration: 10m}
`,
			want: []string{
				"+0s borrowed admitted",
				"+30m borrowed preempted by own (InCohortReclamation)", "+30m own admitted",
				"+40m own finished", "+40m borrowed admitted",
				"+2h40m borrowed finished",
			},
		},
		"a priority class that tolerates preemption for ten minutes": {
			scenario: `apiVersion: kueue.x-k8s.io/v1beta2
kind: ResourceFlavor
metadata: {name: f}
---
apiVersion: kueue.x-k8s.io/v1beta2
kind: ClusterQueue
metadata: {name: cq}
spec:
  resourceGroups: [{coveredResources: [cpu], flavors: [{name: f, resources: [{name: cpu, nominalQuota: 1}]}]}]
  preemption: {withinClusterQueue: LowerPriority}
---
apiVersion: kueue.x-k8s.io/v1beta2
kind: WorkloadPriorityClass
metadata: {name: low, annotations: {preemption-toleration.scheduling.x-k8s.io/minimum-preemptable-priority: "1000", preemption-toleration.scheduling.x-k8s.io/toleration-seconds: "600"}}
value: 1
---
apiVersion: kueue.x-k8s.io/v1beta2
kind: WorkloadPriorityClass
metadata: {name: high}
value: 100
---
workloads:
  - {name: low, clusterQueue: cq, priorityClass: low, resources: {cpu: 1}, duration: 1h, checkpointed: true}
  - {name: high, arrival: 1m, clusterQueue: cq, priorityClass: high, resources: {cpu: 1}, duration: 5m}
`,
			want: []string{
				"+0s low admitted",
				"+10m low preempted by high (InClusterQueue)", "+10m high admitted",
				"+15m high finished", "+15m low admitted",
				"+1h5m low finished",
			},
		},
		"expected runtime: soft eviction for a waiting workload once reached, then a cooldown": {
			scenario: `apiVersion: kueue.x-k8s.io/v1beta2
kind: ResourceFlavor
metadata: {name: f}
---
apiVersion: kueue.x-k8s.io/v1beta2
kind: ClusterQueue
metadata: {name: cq}
spec:
  resourceGroups: [{coveredResources: [cpu], flavors: [{name: f, resources: [{name: cpu, nominalQuota: 1}]}]}]
  preemption: {withinClusterQueue: LowerPriority}
---
timeshare: {defaultRequeueDelay: 30m}
workloads:
  - name: long
    clusterQueue: cq
    resources: {cpu: 1}
    duration: 2h
    checkpointed: true
    annotations: {kueue-timeshare.io/expected-runtime: 20m}
  - {name: short, arrival: 5m, clusterQueue: cq, resources: {cpu: 1}, duration: 10m}
  - {name: later, arrival: 40m, clusterQueue: cq, resources: {cpu: 1}, duration: 10m}
`,
			want: []string{
				"+0s long admitted",
				"+20m long preempted by short (InClusterQueueExpectedRuntime)", "+20m short admitted",
				"+30m short finished", "+30m long admitted",
				// Reached its expected runtime again at 50m, but its cooldown lasts until 50m.
				"+50m long preempted by later (InClusterQueueExpectedRuntime)", "+50m later admitted",
				"+1h later finished", "+1h long admitted",
				"+2h20m long finished",
			},
		},
	}
	rotation := cases["time-sharing: every job gets a turn, each turn at least minAdmitDuration"]
	cases["time-sharing with StrictFIFO: the same turns"] = struct {
		scenario string
		mode     Mode
		want     []string
	}{
		scenario: strings.Replace(threeJobs, "  resourceGroups:", "  queueingStrategy: StrictFIFO\n  resourceGroups:", 1),
		want:     rotation.want,
	}
	cases["time-sharing with fair sharing on: the same turns"] = struct {
		scenario string
		mode     Mode
		want     []string
	}{
		scenario: threeJobs + "fairSharing: {}\n",
		want:     rotation.want,
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			r := mustRun(t, mustParse(t, tc.scenario), tc.mode)
			if diff := cmp.Diff(tc.want, story(r)); diff != "" {
				t.Errorf("story (-want +got):\n%s", diff)
			}
			if len(r.Notes) > 0 {
				t.Errorf("notes: %v", r.Notes)
			}
		})
	}
}

func TestRunStatistics(t *testing.T) {
	r := mustRun(t, mustParse(t, threeJobs), ModeTimeshare)
	type summary struct {
		TotalWait, LongestWait, Admitted, FinishedAt time.Duration
		Preemptions                                  map[string]int
		Admissions                                   int
	}
	got := map[string]summary{}
	for _, w := range r.Workloads {
		got[w.Name] = summary{w.TotalWait, w.LongestWait, w.Admitted, w.FinishedAt, w.Preemptions, w.Admissions}
	}
	timeBased := map[string]int{"InClusterQueueTimeBased": 2}
	// Turns start WakePrecision (1ms) after each window ends.
	ms := time.Millisecond
	want := map[string]summary{
		// a: waits 1m+1ms..3m+3ms and 4m+4ms..6m+6ms.
		"a": {TotalWait: 4*time.Minute + 4*ms, LongestWait: 2*time.Minute + 2*ms, Admitted: 150 * time.Second,
			FinishedAt: 6*time.Minute + 30*time.Second + 4*ms, Preemptions: timeBased, Admissions: 3},
		"b": {TotalWait: 4*time.Minute + 29*time.Second + 2*ms, LongestWait: 2*time.Minute + 2*ms, Admitted: 150 * time.Second,
			FinishedAt: 7*time.Minute + 2*ms, Preemptions: timeBased, Admissions: 3},
		"c": {TotalWait: 4*time.Minute + 58*time.Second, LongestWait: 2*time.Minute + 2*ms, Admitted: 150 * time.Second,
			FinishedAt: 7*time.Minute + 30*time.Second, Preemptions: timeBased, Admissions: 3},
	}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("workloads (-want +got):\n%s", diff)
	}
	third := 1.0 / 3
	wantQueue := QueueResult{
		Name: "cq", Workloads: 3, Finished: 3,
		CapacityShare: map[string]float64{"a": third, "b": third, "c": third},
		Jain:          1,
		WaitP50:       4*time.Minute + 29*time.Second + 2*ms, WaitP95: 4*time.Minute + 58*time.Second, WaitMax: 4*time.Minute + 58*time.Second,
		LongestWait: 2*time.Minute + 2*ms,
		Preemptions: 6,
		// 6 preemptions in 7m30s.
		PreemptionsPerHour: 48,
		Utilisation:        1,
		Counts:             Counts{"notices": {"given": 0, "endedEarly": 0}},
	}
	if diff := cmp.Diff([]QueueResult{wantQueue}, r.ClusterQueues, cmpopts.EquateApprox(0, 1e-9)); diff != "" {
		t.Errorf("ClusterQueue (-want +got):\n%s", diff)
	}
}

func TestQueueStatistics(t *testing.T) {
	wl := func(name string, capacity float64, wait time.Duration) *WorkloadResult {
		return &WorkloadResult{Name: name, CapacityTime: capacity, TotalWait: wait, LongestWait: wait}
	}
	cases := map[string]struct {
		workloads []*WorkloadResult
		wantJain  float64
		wantP50   time.Duration
		wantP95   time.Duration
	}{
		"everyone the same":         {workloads: []*WorkloadResult{wl("a", 10, time.Minute), wl("b", 10, time.Minute)}, wantJain: 1, wantP50: time.Minute, wantP95: time.Minute},
		"one of four gets it all":   {workloads: []*WorkloadResult{wl("a", 10, 0), wl("b", 0, time.Hour), wl("c", 0, time.Hour), wl("d", 0, 2*time.Hour)}, wantJain: 0.25, wantP50: time.Hour, wantP95: 2 * time.Hour},
		"nobody got anything":       {workloads: []*WorkloadResult{wl("a", 0, time.Hour)}, wantJain: math.NaN(), wantP50: time.Hour, wantP95: time.Hour},
		"no workloads in the queue": {wantJain: math.NaN()},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			q := queueResult("cq", tc.workloads, time.Hour)
			if !(q.Jain == tc.wantJain || math.IsNaN(q.Jain) && math.IsNaN(tc.wantJain)) {
				t.Errorf("Jain %v, want %v", q.Jain, tc.wantJain)
			}
			if q.WaitP50 != tc.wantP50 || q.WaitP95 != tc.wantP95 {
				t.Errorf("p50 %s p95 %s, want %s %s", q.WaitP50, q.WaitP95, tc.wantP50, tc.wantP95)
			}
		})
	}
}

func TestRunIsDeterministic(t *testing.T) {
	s := mustParse(t, threeJobs)
	first := story(mustRun(t, s, ModeTimeshare))
	second := story(mustRun(t, s, ModeTimeshare))
	if diff := cmp.Diff(first, second); diff != "" {
		t.Errorf("two runs differ (-first +second):\n%s", diff)
	}
}

func TestRunStopsAtUntil(t *testing.T) {
	r := mustRun(t, mustParse(t, threeJobs+"simulation: {until: 1m}\n"), ModeUpstream)
	if r.End != time.Minute {
		t.Errorf("end %s, want 1m", r.End)
	}
	want := []string{"stopped at 1m (simulation.until) with 3 of 3 workloads unfinished"}
	if diff := cmp.Diff(want, r.Notes); diff != "" {
		t.Errorf("notes (-want +got):\n%s", diff)
	}
	if got := r.Workloads[0].Admitted; got != time.Minute {
		t.Errorf("a held its quota for %s, want the whole minute", got)
	}
}

func TestRunRestoresFeatureGates(t *testing.T) {
	s := mustParse(t, threeJobs+"featureGates: {MinRuntimeProtection: false}\n")
	before := gateValues()
	mustRun(t, s, ModeBooster)
	mustRun(t, s, ModeTimeshare)
	if diff := cmp.Diff(before, gateValues()); diff != "" {
		t.Errorf("feature gates changed by runs (-before +after):\n%s", diff)
	}
}

func gateValues() map[string]bool {
	out := map[string]bool{}
	for _, g := range append(ourGates(), "PriorityBoost") {
		out[g] = utilfeature.DefaultFeatureGate.Enabled(featuregate.Feature(g))
	}
	return out
}

// TestRunOddScenarios runs valid scenarios at the edges: the simulator must finish them and say
// what happened, never fail or hang.
func TestRunOddScenarios(t *testing.T) {
	cases := map[string]struct {
		scenario  string
		wantNotes []string
		wantStory []string
	}{
		"a workload larger than its queue never runs": {
			scenario: `apiVersion: kueue.x-k8s.io/v1beta2
kind: ResourceFlavor
metadata: {name: f}
---
apiVersion: kueue.x-k8s.io/v1beta2
kind: ClusterQueue
metadata: {name: cq}
spec:
  queueingStrategy: StrictFIFO
  resourceGroups: [{coveredResources: [cpu], flavors: [{name: f, resources: [{name: cpu, nominalQuota: 1}]}]}]
---
simulation: {until: 1000h}
workloads:
  - {name: huge, clusterQueue: cq, resources: {cpu: 2}, duration: 1h}
  - {name: small, arrival: 1m, clusterQueue: cq, resources: {cpu: 1}, duration: 1h}
`,
			// StrictFIFO: the head that never fits blocks the queue.
			wantNotes: []string{"stopped at 41d16h (simulation.until) with 2 of 2 workloads unfinished"},
		},
		"two flavors: the second is used when the first is full": {
			scenario: `apiVersion: kueue.x-k8s.io/v1beta2
kind: ResourceFlavor
metadata: {name: on-demand}
---
apiVersion: kueue.x-k8s.io/v1beta2
kind: ResourceFlavor
metadata: {name: spot}
---
apiVersion: kueue.x-k8s.io/v1beta2
kind: ClusterQueue
metadata: {name: cq}
spec:
  resourceGroups: [{coveredResources: [cpu], flavors: [{name: on-demand, resources: [{name: cpu, nominalQuota: 1}]}, {name: spot, resources: [{name: cpu, nominalQuota: 1}]}]}]
---
workloads:
  - {name: a, clusterQueue: cq, resources: {cpu: 1}, duration: 1h}
  - {name: b, clusterQueue: cq, resources: {cpu: 1}, duration: 1h}
`,
			wantStory: []string{"+0s a admitted", "+0s b admitted", "+1h a finished", "+1h b finished"},
		},
		"lending limits and a Cohort's own quota": {
			scenario: `apiVersion: kueue.x-k8s.io/v1beta2
kind: ResourceFlavor
metadata: {name: f}
---
apiVersion: kueue.x-k8s.io/v1beta2
kind: Cohort
metadata: {name: root}
spec:
  resourceGroups: [{coveredResources: [cpu], flavors: [{name: f, resources: [{name: cpu, nominalQuota: 1}]}]}]
---
apiVersion: kueue.x-k8s.io/v1beta2
kind: Cohort
metadata: {name: team}
spec:
  parentName: root
---
apiVersion: kueue.x-k8s.io/v1beta2
kind: ClusterQueue
metadata: {name: lender}
spec:
  cohortName: team
  resourceGroups: [{coveredResources: [cpu], flavors: [{name: f, resources: [{name: cpu, nominalQuota: 2, lendingLimit: 1}]}]}]
---
apiVersion: kueue.x-k8s.io/v1beta2
kind: ClusterQueue
metadata: {name: borrower}
spec:
  cohortName: root
  resourceGroups: [{coveredResources: [cpu], flavors: [{name: f, resources: [{name: cpu, nominalQuota: 0}]}]}]
---
workloads:
  - {name: big, clusterQueue: borrower, resources: {cpu: 2}, duration: 1h}
  - {name: too-big, clusterQueue: borrower, resources: {cpu: 3}, duration: 1h}
`,
			// The borrower reaches the root's cpu and the lender's lendable one, not more.
			wantStory: []string{"+0s big admitted", "+1h big finished"},
			wantNotes: []string{"stopped at 4h (the default limit (last arrival plus twice the sum of all durations)) with 1 of 2 workloads unfinished"},
		},
		"Kubernetes PriorityClasses": {
			scenario: `apiVersion: kueue.x-k8s.io/v1beta2
kind: ResourceFlavor
metadata: {name: f}
---
apiVersion: kueue.x-k8s.io/v1beta2
kind: ClusterQueue
metadata: {name: cq}
spec:
  resourceGroups: [{coveredResources: [cpu], flavors: [{name: f, resources: [{name: cpu, nominalQuota: 1}]}]}]
  preemption: {withinClusterQueue: LowerPriority}
---
apiVersion: scheduling.k8s.io/v1
kind: PriorityClass
metadata: {name: low}
value: 1
---
apiVersion: scheduling.k8s.io/v1
kind: PriorityClass
metadata: {name: high}
value: 2
---
workloads:
  - {name: low, clusterQueue: cq, priorityClass: low, resources: {cpu: 1}, duration: 1h}
  - {name: high, arrival: 1m, clusterQueue: cq, priorityClass: high, resources: {cpu: 1}, duration: 1m}
`,
			wantStory: []string{"+0s low admitted", "+1m low preempted by high (InClusterQueue)", "+1m high admitted", "+2m high finished", "+2m low admitted", "+1h2m low finished"},
		},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			r := mustRun(t, mustParse(t, tc.scenario), ModeTimeshare)
			if diff := cmp.Diff(tc.wantNotes, r.Notes, cmpopts.EquateEmpty()); diff != "" {
				t.Errorf("notes (-want +got):\n%s", diff)
			}
			if diff := cmp.Diff(tc.wantStory, story(r), cmpopts.EquateEmpty()); diff != "" {
				t.Errorf("story (-want +got):\n%s", diff)
			}
		})
	}
}
