package simulator

import (
	"math"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/kueue-timeshare/kueue-timeshare/pkg/policy"
)

const maxDuration = time.Duration(math.MaxInt64)

// The default horizon sums the workloads' durations: long ones saturate it rather than wrapping
// it negative, which ended the simulation before it began.
func TestHorizonSaturates(t *testing.T) {
	cases := map[string]struct {
		specs []WorkloadSpec
		want  time.Duration
	}{
		"short": {specs: []WorkloadSpec{{Arrival: time.Minute, Duration: time.Hour}, {Duration: time.Hour}}, want: time.Minute + 4*time.Hour},
		"twice the sum past the range": {
			specs: []WorkloadSpec{{Duration: maxDuration / 3}, {Duration: maxDuration / 3}}, want: maxDuration,
		},
		"the sum past the range": {
			specs: []WorkloadSpec{{Duration: maxDuration}, {Duration: maxDuration}, {Arrival: maxDuration, Duration: time.Hour}}, want: maxDuration,
		},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			got, fixed := (&Scenario{}).horizon(tc.specs)
			if fixed {
				t.Error("fixed without simulation.until")
			}
			if diff := cmp.Diff(tc.want, got); diff != "" {
				t.Errorf("horizon (-want +got):\n%s", diff)
			}
		})
	}
}

// A notice whose deadline is far off, or a job whose run or checkpoint is long, saturates its
// instants instead of wrapping them into the past.
func TestJobInstantsSaturate(t *testing.T) {
	cases := map[string]struct {
		spec           WorkloadSpec
		now, deadline  time.Duration
		wantFinishAt   time.Duration
		wantCheckpoint time.Duration
	}{
		"short": {
			spec: WorkloadSpec{Duration: time.Hour, CheckpointDuration: time.Minute}, now: time.Hour, deadline: 2 * time.Hour,
			wantFinishAt: 2 * time.Hour, wantCheckpoint: time.Hour + time.Minute,
		},
		"deadline at the end of time": {
			spec: WorkloadSpec{Duration: time.Hour, CheckpointDuration: time.Minute}, now: time.Hour, deadline: maxDuration,
			wantFinishAt: 2 * time.Hour, wantCheckpoint: time.Hour + time.Minute,
		},
		"run and checkpoint past the range: never done": {
			spec: WorkloadSpec{Duration: maxDuration, CheckpointDuration: maxDuration}, now: time.Hour, deadline: maxDuration,
			wantFinishAt: maxDuration,
		},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			j := newJob(tc.spec, "uid")
			j.admitted(tc.now)
			if diff := cmp.Diff(tc.wantFinishAt, j.finishAt); diff != "" {
				t.Errorf("finishAt (-want +got):\n%s", diff)
			}
			j.warned(&policy.Warns{Counter: "notices"}, tc.now, tc.deadline)
			if diff := cmp.Diff(tc.wantCheckpoint, j.warning.checkpointAt); diff != "" {
				t.Errorf("checkpointAt (-want +got):\n%s", diff)
			}
		})
	}
}

// Far-future values a tenant may write on a Workload (a cooldown and a notice deadline in year
// 9999, the largest durations) neither stop the simulation nor make it step without end: it runs
// to its end in a bounded number of steps.
func TestRunFarFutureAnnotations(t *testing.T) {
	s := mustParse(t, `apiVersion: kueue.x-k8s.io/v1beta2
kind: ResourceFlavor
metadata: {name: f}
---
apiVersion: kueue.x-k8s.io/v1beta2
kind: ClusterQueue
metadata: {name: cq}
spec:
  resourceGroups: [{coveredResources: [cpu], flavors: [{name: f, resources: [{name: cpu, nominalQuota: 1}]}]}]
  preemption: {withinClusterQueue: LowerOrNewerEqualPriority}
---
simulation: {until: 2h}
workloads:
  - name: cooldown
    clusterQueue: cq
    resources: {cpu: 1}
    duration: 1h
    annotations:
      kueue-timeshare.io/expected-runtime: 1s
      kueue-timeshare.io/requeue-not-before: "9999-12-31T23:59:59Z"
  - name: longest
    arrival: 1m
    clusterQueue: cq
    resources: {cpu: 1}
    duration: 1h
    annotations:
      kueue-timeshare.io/expected-runtime: 2562047h47m16.854775807s
      kueue-timeshare.io/requeue-delay: 2562047h47m16.854775807s
`)
	steps := 0
	r, err := Run(t.Context(), s, Options{Mode: ModeTimeshare, observe: func(time.Duration, *world) { steps++ }})
	if err != nil {
		t.Fatal(err)
	}
	want := []string{"+0s cooldown admitted", "+1h cooldown finished", "+1h longest admitted", "+2h longest finished"}
	if diff := cmp.Diff(want, story(r)); diff != "" {
		t.Errorf("story (-want +got):\n%s", diff)
	}
	if steps > 20 {
		t.Errorf("the simulation took %d steps, want a handful", steps)
	}
}
