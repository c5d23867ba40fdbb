package queuesettings

import (
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	utilfeature "k8s.io/apiserver/pkg/util/feature"
	featuregatetesting "k8s.io/component-base/featuregate/testing"

	"github.com/kueue-timeshare/kueue-timeshare/pkg/features"
	"github.com/kueue-timeshare/kueue-timeshare/pkg/scheduler/preemption/policy"
)

func TestParse(t *testing.T) {
	cq := func(preemption map[string]any) *unstructured.Unstructured {
		u := newClusterQueue()
		u.Object["spec"] = map[string]any{"preemption": preemption}
		return u
	}
	cases := map[string]struct {
		obj         *unstructured.Unstructured
		want        policy.QueueSettings
		wantProblem string
	}{
		"no settings": {obj: cq(map[string]any{"withinClusterQueue": "LowerPriority"})},
		"no spec":     {obj: newClusterQueue()},
		"window": {
			obj:  cq(map[string]any{"withinClusterQueue": "LowerOrNewerEqualPriority", "withinClusterQueueConfig": map[string]any{"minAdmitDuration": "2h"}}),
			want: policy.QueueSettings{MinAdmitDuration: 2 * time.Hour},
		},
		"incompatible policy is ignored": {
			obj:         cq(map[string]any{"withinClusterQueue": "LowerPriority", "withinClusterQueueConfig": map[string]any{"minAdmitDuration": "2h"}}),
			wantProblem: "spec.preemption.withinClusterQueueConfig: Invalid value: \"LowerPriority\": requires spec.preemption.withinClusterQueue to be LowerOrNewerEqualPriority, not LowerPriority",
		},
		"too short is ignored": {
			obj:         cq(map[string]any{"withinClusterQueue": "LowerOrNewerEqualPriority", "withinClusterQueueConfig": map[string]any{"minAdmitDuration": "1s"}}),
			wantProblem: "spec.preemption.withinClusterQueueConfig.minAdmitDuration: Invalid value: \"1s\": must be at least 1m0s",
		},
		"garbage is ignored": {
			obj:         cq(map[string]any{"withinClusterQueue": "LowerOrNewerEqualPriority", "withinClusterQueueConfig": map[string]any{"minAdmitDuration": int64(12)}}),
			wantProblem: "spec.preemption.withinClusterQueueConfig: json: cannot unmarshal number into Go struct field WithinClusterQueueConfig.preemption.withinClusterQueueConfig.minAdmitDuration of type string",
		},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			got, problem := parse(tc.obj)
			if diff := cmp.Diff(tc.want, got); diff != "" {
				t.Errorf("settings (-want +got):\n%s", diff)
			}
			if problem != tc.wantProblem {
				t.Errorf("problem %q, want %q", problem, tc.wantProblem)
			}
		})
	}
}

func TestStoreHonoursTheGate(t *testing.T) {
	s := NewStore()
	if !s.set("cq", policy.QueueSettings{MinAdmitDuration: time.Hour}) {
		t.Error("first set should report a change")
	}
	if s.set("cq", policy.QueueSettings{MinAdmitDuration: time.Hour}) {
		t.Error("setting the same value should not report a change")
	}
	if got := s.Settings("cq").MinAdmitDuration; got != time.Hour {
		t.Errorf("gate on: %s, want 1h", got)
	}
	if got := s.Settings("other").MinAdmitDuration; got != 0 {
		t.Errorf("unknown queue: %s, want 0", got)
	}
	featuregatetesting.SetFeatureGateDuringTest(t, utilfeature.DefaultFeatureGate, features.TimeBasedSamePriorityPreemption, false)
	if got := s.Settings("cq").MinAdmitDuration; got != 0 {
		t.Errorf("gate off: %s, want 0 (field ignored)", got)
	}
	if got := s.snapshot(); len(got) != 0 {
		t.Errorf("gate off: snapshot %v, want empty", got)
	}
	s.set("cq", policy.QueueSettings{})
	if _, ok := s.settings["cq"]; ok {
		t.Error("zero settings should drop the entry")
	}
}
