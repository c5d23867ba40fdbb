package simulator

import (
	"bytes"
	"encoding/json"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/google/go-cmp/cmp/cmpopts"
)

func TestCheckpointSplit(t *testing.T) {
	hourly := checkpointing{every: time.Hour, take: 5 * time.Minute}
	cases := map[string]struct {
		c                  checkpointing
		ran                time.Duration
		wantKept, wantLost time.Duration
	}{
		"no checkpoints lose everything":        {c: checkpointing{}, ran: 90 * time.Minute, wantLost: 90 * time.Minute},
		"continuous checkpoints lose nothing":   {c: checkpointing{continuous: true}, ran: 90 * time.Minute, wantKept: 90 * time.Minute},
		"evicted before the first checkpoint":   {c: hourly, ran: 59 * time.Minute, wantLost: 59 * time.Minute},
		"a checkpoint in progress is lost":      {c: hourly, ran: 64 * time.Minute, wantLost: 64 * time.Minute},
		"evicted as a checkpoint completes":     {c: hourly, ran: 65 * time.Minute, wantKept: 65 * time.Minute},
		"one checkpoint done, then 55m of work": {c: hourly, ran: 2 * time.Hour, wantKept: 65 * time.Minute, wantLost: 55 * time.Minute},
		"two checkpoints done":                  {c: hourly, ran: 3 * time.Hour, wantKept: 130 * time.Minute, wantLost: 50 * time.Minute},
		"checkpoints that take no time":         {c: checkpointing{every: 30 * time.Minute}, ran: 100 * time.Minute, wantKept: 90 * time.Minute, wantLost: 10 * time.Minute},
		"not run at all":                        {c: hourly},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			kept, lost := tc.c.split(tc.ran)
			if kept != tc.wantKept || lost != tc.wantLost {
				t.Errorf("split(%s) = kept %s, lost %s; want kept %s, lost %s", tc.ran, kept, lost, tc.wantKept, tc.wantLost)
			}
		})
	}
}

func TestLostWorkResource(t *testing.T) {
	cases := map[string]struct {
		resources              []string
		wantResource, wantUnit string
	}{
		"a GPU":                         {resources: []string{"cpu", "nvidia.com/gpu"}, wantResource: "nvidia.com/gpu", wantUnit: "GPU-hours"},
		"CPU only":                      {resources: []string{"cpu", "memory"}, wantResource: "cpu", wantUnit: "CPU-hours"},
		"another accelerator":           {resources: []string{"cpu", "google.com/tpu"}, wantResource: "google.com/tpu", wantUnit: "google.com/tpu-hours"},
		"a GPU before other devices":    {resources: []string{"example.com/fpga", "amd.com/gpu"}, wantResource: "amd.com/gpu", wantUnit: "GPU-hours"},
		"Kubernetes' own domain is not": {resources: []string{"cpu", "kubernetes.io/batch-cpu"}, wantResource: "cpu", wantUnit: "CPU-hours"},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			sc := &Scenario{}
			for _, r := range tc.resources {
				sc.Workloads = append(sc.Workloads, Workload{Resources: map[string]Quantity{r: {}}})
			}
			resource, unit := lostWorkResource(sc)
			if resource != tc.wantResource || unit != tc.wantUnit {
				t.Errorf("got %s in %s, want %s in %s", resource, unit, tc.wantResource, tc.wantUnit)
			}
		})
	}
}

// Three same-priority jobs take turns of 1h on 4 GPUs. a (4 GPUs, 3h) checkpoints every 20m, each
// checkpoint taking 5m: a turn of 1h completes two checkpoints (at 25m and 50m) and loses the 10m
// after the second. c (4 GPUs, 2h) has no checkpoints and loses each whole turn. b (30m) is never
// preempted. By hand: a runs 0-1h, b 1h-1h30m, c 1h30m-2h30m, a 2h30m-3h30m, c 3h30m-4h30m, a
// 4h30m-5h30m, c 5h30m-6h30m, a 6h30m-7h (its last 30m of 3h after banking 50m three times),
// c 7h-9h. Lost: a 3 x 10m = 30m x 4 GPUs = 2 GPU-hours; c 3 x 1h x 4 GPUs = 12 GPU-hours.
const lostWork = `apiVersion: kueue.x-k8s.io/v1beta2
kind: ResourceFlavor
metadata: {name: a100}
---
apiVersion: kueue.x-k8s.io/v1beta2
kind: ClusterQueue
metadata: {name: cq}
spec:
  resourceGroups: [{coveredResources: [nvidia.com/gpu], flavors: [{name: a100, resources: [{name: nvidia.com/gpu, nominalQuota: 4}]}]}]
  preemption: {withinClusterQueue: LowerOrNewerEqualPriority, withinClusterQueueConfig: {minAdmitDuration: 1h}}
---
apiVersion: kueue.x-k8s.io/v1beta2
kind: WorkloadPriorityClass
metadata: {name: normal}
value: 100
---
name: lost-work
workloads:
  - {name: a, arrival: 0s, clusterQueue: cq, priorityClass: normal, pods: 2, resources: {nvidia.com/gpu: 2}, duration: 3h, checkpointInterval: 20m, checkpointDuration: 5m}
  - {name: b, arrival: 1s, clusterQueue: cq, priorityClass: normal, pods: 2, resources: {nvidia.com/gpu: 2}, duration: 30m}
  - {name: c, arrival: 2s, clusterQueue: cq, priorityClass: normal, resources: {nvidia.com/gpu: 4}, duration: 2h}
`

func TestLostWorkAtEachEviction(t *testing.T) {
	s := mustParse(t, lostWork)
	type lostOf struct {
		Lost  time.Duration
		Hours float64
	}
	type eviction struct {
		At       time.Duration
		Workload string
		Lost     time.Duration
		Hours    float64
	}
	// The simulated clock preempts 1ms after a window ends (the wake-up falls just after it), so
	// each eviction comes 1ms later than the hand count and loses 1ms more: compare to the second.
	toSecond := cmp.Transformer("toSecond", func(d time.Duration) time.Duration { return d.Round(time.Second) })
	hours := cmp.Options{toSecond, cmpopts.EquateApprox(0, 1e-5)}
	cases := map[Mode]struct {
		workloads  map[string]lostOf
		evictions  []eviction
		total      lostOf
		finishedAt map[string]time.Duration
	}{
		ModeTimeshare: {
			workloads: map[string]lostOf{"a": {30 * time.Minute, 2}, "b": {}, "c": {3 * time.Hour, 12}},
			evictions: []eviction{
				{time.Hour, "a", 10 * time.Minute, 4.0 / 6}, {150 * time.Minute, "c", time.Hour, 4},
				{210 * time.Minute, "a", 10 * time.Minute, 4.0 / 6}, {270 * time.Minute, "c", time.Hour, 4},
				{330 * time.Minute, "a", 10 * time.Minute, 4.0 / 6}, {390 * time.Minute, "c", time.Hour, 4},
			},
			total:      lostOf{210 * time.Minute, 14},
			finishedAt: map[string]time.Duration{"a": 7 * time.Hour, "b": 90 * time.Minute, "c": 9 * time.Hour},
		},
		// Without time-sharing nobody is preempted and nothing is lost.
		ModeUpstream: {
			workloads:  map[string]lostOf{"a": {}, "b": {}, "c": {}},
			finishedAt: map[string]time.Duration{"a": 3 * time.Hour, "b": 210 * time.Minute, "c": 330 * time.Minute},
		},
	}
	for mode, tc := range cases {
		t.Run(string(mode), func(t *testing.T) {
			r := mustRun(t, s, mode)
			if r.LostWork.Resource != "nvidia.com/gpu" || r.LostWork.Unit != "GPU-hours" {
				t.Errorf("lost work measured in %s (%s), want nvidia.com/gpu (GPU-hours)", r.LostWork.Resource, r.LostWork.Unit)
			}
			got := map[string]lostOf{}
			finished := map[string]time.Duration{}
			for _, w := range r.Workloads {
				got[w.Name] = lostOf{w.Lost, w.LostResourceHours}
				finished[w.Name] = w.FinishedAt
			}
			if diff := cmp.Diff(tc.workloads, got, hours); diff != "" {
				t.Errorf("per workload (-want +got):\n%s", diff)
			}
			if diff := cmp.Diff(tc.finishedAt, finished, toSecond); diff != "" {
				t.Errorf("finish times (-want +got):\n%s", diff)
			}
			var evictions []eviction
			for _, e := range r.Events {
				if e.Kind == EventPreempted || e.Kind == EventEvicted {
					evictions = append(evictions, eviction{e.At, e.Workload, e.Lost, e.LostResourceHours})
				}
			}
			if diff := cmp.Diff(tc.evictions, evictions, hours); diff != "" {
				t.Errorf("per eviction (-want +got):\n%s", diff)
			}
			if diff := cmp.Diff(tc.total, lostOf{r.LostWork.Lost, r.LostWork.ResourceHours}, hours); diff != "" {
				t.Errorf("total (-want +got):\n%s", diff)
			}
			if q := r.queue("cq"); !cmp.Equal(lostOf{q.Lost, q.LostResourceHours}, tc.total, hours) {
				t.Errorf("ClusterQueue lost %s, %v GPU-hours; want %s, %v", q.Lost, q.LostResourceHours, tc.total.Lost, tc.total.Hours)
			}
		})
	}
}

// The comparison shows lost work side by side for each mode, in the table, the timeline and JSON.
func TestLostWorkReported(t *testing.T) {
	s := mustParse(t, lostWork)
	ours, upstream := mustRun(t, s, ModeTimeshare), mustRun(t, s, ModeUpstream)
	var table bytes.Buffer
	if err := WriteTable(&table, ours, upstream); err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{
		"LOST GPU-HOURS",
		"30m / 0s  2.00 / 0.00",
		"3h / 0s   12.00 / 0.00",
		"Work lost at eviction (nvidia.com/gpu x time): 14.00 GPU-hours (3h30m of run time) / 0.00 GPU-hours (0s of run time)",
	} {
		if !strings.Contains(table.String(), want) {
			t.Errorf("table lacks %q:\n%s", want, table.String())
		}
	}
	var timeline bytes.Buffer
	if err := WriteTimeline(&timeline, ours); err != nil {
		t.Fatal(err)
	}
	if want := "+2h30m  cq  c is preempted by a (InClusterQueueTimeBased), losing 1h of run time (4.00 GPU-hours)"; !strings.Contains(timeline.String(), want) {
		t.Errorf("timeline lacks %q:\n%s", want, timeline.String())
	}
	var out bytes.Buffer
	if err := WriteJSON(&out, ours, upstream); err != nil {
		t.Fatal(err)
	}
	type lostWork struct {
		Resource, Unit         string
		Seconds, ResourceHours float64
	}
	var doc struct {
		Runs []struct {
			LostWork  lostWork
			Workloads []struct {
				Name                           string
				LostSeconds, LostResourceHours float64
			}
			Events []struct {
				Kind                           EventKind
				LostSeconds, LostResourceHours *float64
			}
		}
	}
	if err := json.Unmarshal(out.Bytes(), &doc); err != nil {
		t.Fatal(err)
	}
	wantTotals := []lostWork{
		{Resource: "nvidia.com/gpu", Unit: "GPU-hours", Seconds: 12600, ResourceHours: 14},
		{Resource: "nvidia.com/gpu", Unit: "GPU-hours"},
	}
	var gotTotals []lostWork
	for _, r := range doc.Runs {
		gotTotals = append(gotTotals, r.LostWork)
	}
	// To the 1ms each eviction comes late (see TestLostWorkAtEachEviction).
	approx := cmpopts.EquateApprox(0, 0.01)
	if diff := cmp.Diff(wantTotals, gotTotals, approx); diff != "" {
		t.Errorf("JSON totals (-want +got):\n%s", diff)
	}
	if w := doc.Runs[0].Workloads[2]; w.Name != "c" || !cmp.Equal([]float64{w.LostSeconds, w.LostResourceHours}, []float64{10800, 12}, approx) {
		t.Errorf("JSON workload %s lost %vs, %v GPU-hours; want c, 10800s, 12", w.Name, w.LostSeconds, w.LostResourceHours)
	}
	for _, e := range doc.Runs[0].Events {
		evicted := e.Kind == EventPreempted || e.Kind == EventEvicted
		if evicted != (e.LostSeconds != nil && e.LostResourceHours != nil) {
			t.Errorf("JSON event %+v: lost work is given for evictions, and only for them", e)
		}
	}
}
