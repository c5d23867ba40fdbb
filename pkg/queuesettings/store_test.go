package queuesettings

import (
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	utilfeature "k8s.io/apiserver/pkg/util/feature"
	featuregatetesting "k8s.io/component-base/featuregate/testing"

	kueue "sigs.k8s.io/kueue/apis/kueue/v1beta2"

	tsconfig "github.com/kueue-timeshare/kueue-timeshare/apis/config/v1alpha1"

	"github.com/kueue-timeshare/kueue-timeshare/pkg/features"
	"github.com/kueue-timeshare/kueue-timeshare/pkg/plugins/minruntime"
	"github.com/kueue-timeshare/kueue-timeshare/pkg/plugins/notice"
	"github.com/kueue-timeshare/kueue-timeshare/pkg/plugins/timebased"
	"github.com/kueue-timeshare/kueue-timeshare/pkg/policy"
)

func TestParse(t *testing.T) {
	cq := func(preemption map[string]any) *unstructured.Unstructured {
		u := newClusterQueue()
		u.Object["spec"] = map[string]any{"preemption": preemption}
		return u
	}
	cases := map[string]struct {
		obj         *unstructured.Unstructured
		want        timebased.Settings
		wantMin     minruntime.Settings
		wantProblem string
	}{
		"min-runtimes, unset and 0s told apart": {
			obj:     cq(map[string]any{"preemptMinRuntime": "0s", "reclaimMinRuntime": "15m"}),
			wantMin: minruntime.Settings{Preempt: policy.Set(0), Reclaim: policy.Set(15 * time.Minute)},
		},
		"min-runtimes beside a window": {
			obj:     cq(map[string]any{"withinClusterQueue": "LowerOrNewerEqualPriority", "withinClusterQueueConfig": map[string]any{"minAdmitDuration": "2h"}, "preemptMinRuntime": "3h"}),
			want:    timebased.Settings{MinAdmitDuration: 2 * time.Hour},
			wantMin: minruntime.Settings{Preempt: policy.Set(3 * time.Hour)},
		},
		"negative min-runtime ignores the whole section": {
			obj:         cq(map[string]any{"withinClusterQueue": "LowerOrNewerEqualPriority", "withinClusterQueueConfig": map[string]any{"minAdmitDuration": "2h"}, "reclaimMinRuntime": "-1m"}),
			wantProblem: "spec.preemption.reclaimMinRuntime: Invalid value: \"-1m0s\": must not be negative",
		},
		"no settings": {obj: cq(map[string]any{"withinClusterQueue": "LowerPriority"})},
		"no spec":     {obj: newClusterQueue()},
		"window": {
			obj:  cq(map[string]any{"withinClusterQueue": "LowerOrNewerEqualPriority", "withinClusterQueueConfig": map[string]any{"minAdmitDuration": "2h"}}),
			want: timebased.Settings{MinAdmitDuration: 2 * time.Hour},
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
			wantProblem: "spec.preemption.withinClusterQueueConfig: json: cannot unmarshal number into Go struct field WithinClusterQueueConfig.minAdmitDuration of type string",
		},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			strict, units, problem := parse(tc.obj)
			got, _ := units[timebased.Feature].(timebased.Settings)
			got.StrictFIFO = strict
			gotMin := minRuntimesIn0(units)
			if diff := cmp.Diff(tc.want, got); diff != "" {
				t.Errorf("settings (-want +got):\n%s", diff)
			}
			if diff := cmp.Diff(tc.wantMin, gotMin); diff != "" {
				t.Errorf("min-runtimes (-want +got):\n%s", diff)
			}
			if problem != tc.wantProblem {
				t.Errorf("problem %q, want %q", problem, tc.wantProblem)
			}
		})
	}
}

func TestStoreHonoursTheGate(t *testing.T) {
	s := NewStore()
	if !setWindow(s, "cq", time.Hour) {
		t.Error("first set should report a change")
	}
	if setWindow(s, "cq", time.Hour) {
		t.Error("setting the same value should not report a change")
	}
	if got := timebased.SettingsOf(s, "cq").MinAdmitDuration; got != time.Hour {
		t.Errorf("gate on: %s, want 1h", got)
	}
	if got := timebased.SettingsOf(s, "other").MinAdmitDuration; got != 0 {
		t.Errorf("unknown queue: %s, want 0", got)
	}
	if !s.Configured(timebased.Feature) || len(s.QueuesSetting(timebased.Feature)) != 1 || len(s.UnitSettingsOf("cq")) != 1 {
		t.Errorf("gate on: configured %v, queues %v, settings %v; want the one window", s.Configured(timebased.Feature),
			s.QueuesSetting(timebased.Feature), s.UnitSettingsOf("cq"))
	}
	featuregatetesting.SetFeatureGateDuringTest(t, utilfeature.DefaultFeatureGate, features.TimeBasedSamePriorityPreemption, false)
	if got := timebased.SettingsOf(s, "cq").MinAdmitDuration; got != 0 {
		t.Errorf("gate off: %s, want 0 (field ignored)", got)
	}
	if s.Configured(timebased.Feature) || len(s.QueuesSetting(timebased.Feature)) != 0 || len(s.UnitSettingsOf("cq")) != 0 {
		t.Errorf("gate off: configured %v, queues %v, settings %v; want none", s.Configured(timebased.Feature),
			s.QueuesSetting(timebased.Feature), s.UnitSettingsOf("cq"))
	}
	setWindow(s, "cq", 0)
	if _, ok := s.unitSettings[unitKey{timebased.Feature, "ClusterQueue", "cq"}]; ok {
		t.Error("zero settings should drop the entry")
	}
}

// setWindow sets cq's minAdmitDuration as the controller would, and reports whether it changed.
func setWindow(s *Store, cq kueue.ClusterQueueReference, d time.Duration) bool {
	var read map[policy.Feature]any
	if d > 0 {
		read = map[policy.Feature]any{timebased.Feature: timebased.Settings{MinAdmitDuration: d}}
	}
	return s.setClusterQueueUnits(cq, read)
}

func TestParseCohort(t *testing.T) {
	cohort := func(spec map[string]any) *unstructured.Unstructured {
		u := newCohort()
		u.Object["spec"] = spec
		return u
	}
	cases := map[string]struct {
		obj         *unstructured.Unstructured
		want        minruntime.Settings
		wantProblem string
	}{
		"none":   {obj: cohort(map[string]any{"parentName": "root"})},
		"both":   {obj: cohort(map[string]any{"preemption": map[string]any{"preemptMinRuntime": "5m", "reclaimMinRuntime": "10m"}}), want: minruntime.Settings{Preempt: policy.Set(5 * time.Minute), Reclaim: policy.Set(10 * time.Minute)}},
		"zero":   {obj: cohort(map[string]any{"preemption": map[string]any{"reclaimMinRuntime": "0s"}}), want: minruntime.Settings{Reclaim: policy.Set(0)}},
		"bad":    {obj: cohort(map[string]any{"preemption": map[string]any{"reclaimMinRuntime": "soon"}}), wantProblem: "spec.preemption.reclaimMinRuntime: time: invalid duration \"soon\""},
		"signed": {obj: cohort(map[string]any{"preemption": map[string]any{"preemptMinRuntime": "-5m"}}), wantProblem: "spec.preemption.preemptMinRuntime: Invalid value: \"-5m0s\": must not be negative"},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			got, problem := parseCohort(tc.obj)
			if diff := cmp.Diff(tc.want, minRuntimesIn0(got.units)); diff != "" {
				t.Errorf("min-runtimes (-want +got):\n%s", diff)
			}
			if problem != tc.wantProblem {
				t.Errorf("problem %q, want %q", problem, tc.wantProblem)
			}
		})
	}
}

func TestLengths(t *testing.T) {
	s := NewStore()
	s.Configure(&tsconfig.Configuration{DefaultPreemptMinRuntime: &metav1.Duration{Duration: 5 * time.Minute}})
	s.setClusterQueueUnits("a", minRuntimesIn(minruntime.Settings{Preempt: policy.Set(5 * time.Minute), Reclaim: policy.Set(0)}))
	s.setCohort("team", inherited{units: minRuntimesIn(minruntime.Settings{Reclaim: policy.Set(time.Hour)})})
	if diff := cmp.Diff([]time.Duration{5 * time.Minute, time.Hour}, s.Lengths()); diff != "" {
		t.Errorf("values (-want +got):\n%s", diff)
	}
	if s.setCohort("team", inherited{units: minRuntimesIn(minruntime.Settings{Reclaim: policy.Set(time.Hour)})}) {
		t.Error("setting the same value should not report a change")
	}
	if !s.setCohort("team", inherited{}) {
		t.Error("clearing should report a change")
	}
	if _, ok := s.unitSettings[unitKey{minruntime.Feature, "Cohort", "team"}]; ok {
		t.Error("cleared settings should drop the entry")
	}
}

// minRuntimesOf is what the min-runtime unit read off one queue of s's tree.
func minRuntimesOf(s *Store, kind, name string) minruntime.Settings {
	s.mu.RLock()
	defer s.mu.RUnlock()
	m, _ := s.unitSettings[unitKey{minruntime.Feature, kind, name}].(minruntime.Settings)
	return m
}

// minRuntimesIn are min-runtimes m as the units' settings of one queue.
func minRuntimesIn(m minruntime.Settings) map[policy.Feature]any {
	return map[policy.Feature]any{minruntime.Feature: m}
}

// minRuntimesIn0 are the min-runtimes in units' settings.
func minRuntimesIn0(units map[policy.Feature]any) minruntime.Settings {
	m, _ := units[minruntime.Feature].(minruntime.Settings)
	return m
}

// The store keeps what a unit reads off each queue of the tree and gives it back along a path,
// with the unit's default from the manager's configuration; a queue that sets nothing gives nil.
func TestSettingsPath(t *testing.T) {
	object := func(kind, name string, preemption map[string]any) *unstructured.Unstructured {
		u := &unstructured.Unstructured{Object: map[string]any{"spec": map[string]any{}}}
		u.SetKind(kind)
		u.SetName(name)
		if preemption != nil {
			u.Object["spec"] = map[string]any{"preemption": preemption}
		}
		return u
	}
	cases := map[string]struct {
		cq, cohort map[string]any
		config     *tsconfig.Configuration
		wantPath   []policy.QueueNode
		wantDef    any
	}{
		"nothing set anywhere": {
			config: &tsconfig.Configuration{},
			wantPath: []policy.QueueNode{{Kind: "ClusterQueue", Name: "a"}, {Kind: "Cohort", Name: "team"},
				{Kind: "Cohort", Name: "org"}},
		},
		"each queue's own settings, and the manager's default": {
			cq:     map[string]any{"noticePeriod": "5m"},
			cohort: map[string]any{"noticeOnReclaim": true},
			config: &tsconfig.Configuration{DefaultNoticePeriod: &metav1.Duration{Duration: time.Minute}},
			wantPath: []policy.QueueNode{
				{Kind: "ClusterQueue", Name: "a", Settings: notice.Settings{Period: policy.Set(5 * time.Minute)}},
				{Kind: "Cohort", Name: "team", Settings: notice.Settings{OnReclaim: notice.Flag{Set: true, Value: true}}},
				{Kind: "Cohort", Name: "org"},
			},
			wantDef: time.Minute,
		},
		"a zero period is set": {
			cq:       map[string]any{"noticePeriod": "0s"},
			config:   &tsconfig.Configuration{},
			wantPath: []policy.QueueNode{{Kind: "ClusterQueue", Name: "a", Settings: notice.Settings{Period: policy.Set(0)}}, {Kind: "Cohort", Name: "team"}, {Kind: "Cohort", Name: "org"}},
		},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			s := NewStore()
			s.Configure(tc.config)
			// What the queues set before is replaced, not merged.
			for _, set := range []map[string]any{{"noticePeriod": "1h", "noticeOnPriorityPreemption": true}, tc.cq} {
				if err := s.SetClusterQueue(object("ClusterQueue", "a", set)); err != nil {
					t.Fatal(err)
				}
			}
			for _, set := range []map[string]any{{"noticePeriod": "1h"}, tc.cohort} {
				if err := s.SetCohort(object("Cohort", "team", set)); err != nil {
					t.Fatal(err)
				}
			}
			path, def := s.SettingsPath(notice.Feature, "a", []kueue.CohortReference{"team", "org"})
			if diff := cmp.Diff(tc.wantPath, path); diff != "" {
				t.Errorf("path (-want +got):\n%s", diff)
			}
			if diff := cmp.Diff(tc.wantDef, def); diff != "" {
				t.Errorf("default (-want +got):\n%s", diff)
			}
		})
	}
}
