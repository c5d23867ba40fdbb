package simulator

import (
	"bytes"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/kueue-timeshare/kueue-timeshare/pkg/plugins/notice"
)

// Two same-priority jobs take turns of 1h on 4 GPUs, with a 10m notice at each turn's end. a (3h)
// checkpoints every 20m (5m each) and, given notice, checkpoints at once: done 5m later, it is
// evicted then with nothing lost. c (2h) has no checkpoints: it runs to the deadline and loses its
// whole turn. By hand: a 0-1h05m (notice at 1h), c 1h05m-2h15m (notice at 2h05m), a 2h15m-3h20m,
// c 3h20m-4h30m, a 4h30m-5h20m (the 50m it has left), c 5h20m-7h20m.
// Without notice: a 0-1h, c 1h-2h, a 2h-3h, c 3h-4h, a 4h-5h, c 5h-6h, a 6h-6h30m, c 6h30m-8h30m;
// a loses the 10m after its second checkpoint of each turn, c each whole turn.
const noticeScenario = `apiVersion: kueue.x-k8s.io/v1beta2
kind: ResourceFlavor
metadata: {name: a100}
---
apiVersion: kueue.x-k8s.io/v1beta2
kind: ClusterQueue
metadata: {name: cq}
spec:
  resourceGroups: [{coveredResources: [nvidia.com/gpu], flavors: [{name: a100, resources: [{name: nvidia.com/gpu, nominalQuota: 4}]}]}]
  preemption: {withinClusterQueue: LowerOrNewerEqualPriority, withinClusterQueueConfig: {minAdmitDuration: 1h}, noticePeriod: 10m}
---
apiVersion: kueue.x-k8s.io/v1beta2
kind: WorkloadPriorityClass
metadata: {name: normal}
value: 100
---
name: notice
featureGates: {PreemptionNotice: %s}
workloads:
  - {name: a, arrival: 0s, clusterQueue: cq, priorityClass: normal, resources: {nvidia.com/gpu: 4}, duration: 3h, checkpointInterval: 20m, checkpointDuration: 5m}
  - {name: c, arrival: 1s, clusterQueue: cq, priorityClass: normal, resources: {nvidia.com/gpu: 4}, duration: 2h}
`

func TestPreemptionNotice(t *testing.T) {
	type eviction struct {
		At       time.Duration
		Workload string
		Lost     time.Duration
		Notice   string
	}
	// Wake-ups fall a millisecond after a window ends and deadlines are rounded up to the second:
	// compare to the minute.
	toMinute := cmp.Transformer("toMinute", func(d time.Duration) time.Duration { return d.Round(time.Minute) })
	early, deadline := string(notice.EndedEarly), string(notice.EvictedAtDeadline)
	withoutNotice := []eviction{
		{time.Hour, "a", 10 * time.Minute, ""}, {2 * time.Hour, "c", time.Hour, ""},
		{3 * time.Hour, "a", 10 * time.Minute, ""}, {4 * time.Hour, "c", time.Hour, ""},
		{5 * time.Hour, "a", 10 * time.Minute, ""}, {6 * time.Hour, "c", time.Hour, ""},
	}
	cases := map[string]struct {
		gate       string
		mode       Mode
		evictions  []eviction
		lost       map[string]time.Duration
		notices    map[string]int
		finishedAt map[string]time.Duration
	}{
		"a notice: a checkpoints and leaves early, c runs to the deadline": {
			gate: "true", mode: ModeTimeshare,
			evictions: []eviction{
				{65 * time.Minute, "a", 0, early}, {135 * time.Minute, "c", 70 * time.Minute, deadline},
				{200 * time.Minute, "a", 0, early}, {270 * time.Minute, "c", 70 * time.Minute, deadline},
			},
			lost:       map[string]time.Duration{"a": 0, "c": 140 * time.Minute},
			notices:    map[string]int{"given": 4, "endedEarly": 2},
			finishedAt: map[string]time.Duration{"a": 320 * time.Minute, "c": 440 * time.Minute},
		},
		"the same scenario run without notice (--compare)": {
			gate: "true", mode: ModeWithout(notice.Feature), evictions: withoutNotice,
			lost:       map[string]time.Duration{"a": 30 * time.Minute, "c": 3 * time.Hour},
			finishedAt: map[string]time.Duration{"a": 390 * time.Minute, "c": 510 * time.Minute},
		},
		"the gate off: noticePeriod does nothing": {
			gate: "false", mode: ModeTimeshare, evictions: withoutNotice,
			lost:       map[string]time.Duration{"a": 30 * time.Minute, "c": 3 * time.Hour},
			finishedAt: map[string]time.Duration{"a": 390 * time.Minute, "c": 510 * time.Minute},
		},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			r := mustRun(t, mustParse(t, strings.Replace(noticeScenario, "%s", tc.gate, 1)), tc.mode)
			var evictions []eviction
			for _, e := range r.Events {
				if e.Kind == EventPreempted || e.Kind == EventEvicted {
					evictions = append(evictions, eviction{e.At, e.Workload, e.Lost, e.Outcome})
				}
			}
			if diff := cmp.Diff(tc.evictions, evictions, toMinute); diff != "" {
				t.Errorf("evictions (-want +got):\n%s", diff)
			}
			lost, finished := map[string]time.Duration{}, map[string]time.Duration{}
			for _, w := range r.Workloads {
				lost[w.Name], finished[w.Name] = w.Lost, w.FinishedAt
			}
			if diff := cmp.Diff(tc.lost, lost, toMinute); diff != "" {
				t.Errorf("lost per workload (-want +got):\n%s", diff)
			}
			if diff := cmp.Diff(tc.finishedAt, finished, toMinute); diff != "" {
				t.Errorf("finish times (-want +got):\n%s", diff)
			}
			want := tc.notices
			if want == nil {
				want = map[string]int{"given": 0, "endedEarly": 0}
			}
			if diff := cmp.Diff(want, r.Counts["notices"]); diff != "" {
				t.Errorf("notices (-want +got):\n%s", diff)
			}
			if diff := cmp.Diff(want, r.queue("cq").Counts["notices"]); diff != "" {
				t.Errorf("ClusterQueue notices (-want +got):\n%s", diff)
			}
		})
	}
}

// A readmitted workload carries none of its last notice's annotations, and the comparison shows
// the notices beside the run without them.
func TestPreemptionNoticeReported(t *testing.T) {
	s := mustParse(t, strings.Replace(noticeScenario, "%s", "true", 1))
	var leftover []string
	with, err := Run(t.Context(), s, Options{observe: func(_ time.Duration, w *world) {
		for k, wl := range w.seen {
			if w.jobs[k] != nil && w.jobs[k].state == running && w.jobs[k].warning == nil {
				for a := range wl.Annotations {
					if strings.HasPrefix(a, "kueue-timeshare.io/") && a != "kueue-timeshare.io/expected-runtime" {
						leftover = append(leftover, k.Name+" "+a)
					}
				}
			}
		}
	}})
	if err != nil {
		t.Fatal(err)
	}
	if len(leftover) > 0 {
		t.Errorf("running workloads with no notice carry notice annotations: %v", leftover)
	}
	without := mustRun(t, s, ModeWithout(notice.Feature))
	var table bytes.Buffer
	if err := WriteTable(&table, with, without); err != nil {
		t.Fatal(err)
	}
	want := "Preemption notices (ended early: the checkpoint was done before the deadline): 4 given, 2 ended early / 0 given, 0 ended early"
	if !strings.Contains(table.String(), want) {
		t.Errorf("table lacks %q:\n%s", want, table.String())
	}
}

func TestComparisons(t *testing.T) {
	const queues = `apiVersion: kueue.x-k8s.io/v1beta2
kind: ResourceFlavor
metadata: {name: f}
---
apiVersion: kueue.x-k8s.io/v1beta2
kind: Cohort
metadata: {name: org%s}
---
apiVersion: kueue.x-k8s.io/v1beta2
kind: ClusterQueue
metadata: {name: cq}
spec:
  cohortName: org
  resourceGroups: [{coveredResources: [cpu], flavors: [{name: f, resources: [{name: cpu, nominalQuota: 1}]}]}]
  preemption: {withinClusterQueue: LowerPriority%s}
---
workloads: [{name: a, clusterQueue: cq, resources: {cpu: 1}, duration: 1m}]
`
	without := []Mode{ModeWithout(notice.Feature)}
	cases := map[string]struct {
		head, cohort, cq string
		want             []Mode
	}{
		"no notice set": {},
		"a ClusterQueue's period, the gate's default": {cq: ", noticePeriod: 5m", want: without},
		"a Cohort's period":                           {cohort: "}\nspec: {preemption: {noticePeriod: 5m}", want: without},
		"the manager's default period":                {head: "timeshare: {defaultNoticePeriod: 5m}\n", want: without},
		"a period with the gate off":                  {head: "featureGates: {PreemptionNotice: false}\n", cq: ", noticePeriod: 5m"},
		"0s periods":                                  {head: "timeshare: {defaultNoticePeriod: 0s}\n", cq: ", noticePeriod: 0s"},
		"an extension without a period":               {cq: ", noticeOnPriorityPreemption: true"},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			s := mustParse(t, fmt.Sprintf(queues, tc.cohort, tc.cq)+tc.head)
			if diff := cmp.Diff(tc.want, s.Comparisons()); diff != "" {
				t.Errorf("Comparisons() (-want +got):\n%s", diff)
			}
		})
	}
}
