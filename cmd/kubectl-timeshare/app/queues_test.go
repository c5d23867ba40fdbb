package app

import (
	"bytes"
	"encoding/json"
	"io"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/utils/ptr"

	kueue "sigs.k8s.io/kueue/apis/kueue/v1beta2"
	visibilityapi "sigs.k8s.io/kueue/apis/visibility/v1beta2"

	"github.com/kueue-timeshare/kueue-timeshare/apis/annotations"
	tsconfig "github.com/kueue-timeshare/kueue-timeshare/apis/config/v1alpha1"
	"github.com/kueue-timeshare/kueue-timeshare/pkg/plugins/notice"
	"github.com/kueue-timeshare/kueue-timeshare/pkg/simulator"
)

var t0 = time.Date(2026, 11, 24, 12, 0, 0, 0, time.UTC)

func mt(d time.Duration) *metav1.Time { return &metav1.Time{Time: t0.Add(d)} }

func object(kind, name string, spec map[string]any) unstructured.Unstructured {
	u := unstructured.Unstructured{Object: map[string]any{"spec": spec}}
	u.SetGroupVersionKind(kueue.SchemeGroupVersion.WithKind(kind))
	u.SetName(name)
	return u
}

// holding is a workload admitted in cq at reserved (and admitted at the same time).
func holding(name, cq string, reserved time.Duration) kueue.Workload {
	wl := kueue.Workload{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: name, CreationTimestamp: *mt(-time.Hour)},
		Spec:   kueue.WorkloadSpec{QueueName: "lq", Priority: ptr.To[int32](0)},
		Status: kueue.WorkloadStatus{Admission: &kueue.Admission{ClusterQueue: kueue.ClusterQueueReference(cq)}}}
	for _, t := range []string{kueue.WorkloadQuotaReserved, kueue.WorkloadAdmitted} {
		wl.Status.Conditions = append(wl.Status.Conditions, metav1.Condition{Type: t, Status: metav1.ConditionTrue, Reason: t, LastTransitionTime: *mt(reserved)})
	}
	return wl
}

// waitingWL is a workload of LocalQueue lq, created at created, with the manager's message.
func waitingWL(name string, created time.Duration, message string) kueue.Workload {
	return kueue.Workload{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: name, CreationTimestamp: *mt(created)},
		Spec: kueue.WorkloadSpec{QueueName: "lq"},
		Status: kueue.WorkloadStatus{Conditions: []metav1.Condition{{Type: kueue.WorkloadQuotaReserved, Status: metav1.ConditionFalse,
			Reason: "Pending", Message: message, LastTransitionTime: *mt(created)}}}}
}

func TestBuildQueuesReport(t *testing.T) {
	cluster := Cluster{
		ClusterQueues: []unstructured.Unstructured{
			object("ClusterQueue", "gpu", map[string]any{"cohortName": "team", "preemption": map[string]any{
				"withinClusterQueue":         "LowerOrNewerEqualPriority",
				"withinClusterQueueConfig":   map[string]any{"minAdmitDuration": "1h"},
				"reclaimMinRuntime":          "0s",
				"noticeOnPriorityPreemption": true,
			}}),
		},
		Cohorts: []unstructured.Unstructured{
			object("Cohort", "team", map[string]any{"parentName": "org", "preemption": map[string]any{"noticePeriod": "10m"}}),
			object("Cohort", "org", map[string]any{"preemption": map[string]any{"preemptMinRuntime": "30m"}}),
		},
		Workloads: []kueue.Workload{
			holding("old", "gpu", -50*time.Minute),
			func() kueue.Workload {
				wl := holding("new", "gpu", -10*time.Minute)
				n := annotations.Notice{Start: t0.Add(-time.Minute), Deadline: t0.Add(9 * time.Minute), Reason: "InClusterQueueTimeBased",
					Preemptor: "ns/second", PreemptorUID: "uid-second"}
				wl.Annotations = n.Annotations()
				wl.Status.Conditions = append(wl.Status.Conditions, notice.ConditionOf(&n, 0))
				return wl
			}(),
			waitingWL("second", -20*time.Minute, "waiting for a time-sharing turn"),
			waitingWL("first", -40*time.Minute, "insufficient quota"),
			func() kueue.Workload {
				wl := waitingWL("deactivated", -30*time.Minute, "deactivated by the user")
				wl.Spec.Active = ptr.To(false)
				return wl
			}(),
		},
		LocalQueues: []kueue.LocalQueue{{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "lq"}, Spec: kueue.LocalQueueSpec{ClusterQueue: "gpu"}}},
	}
	admitted := []AdmittedWorkload{
		{Namespace: "ns", Name: "old", LocalQueue: "lq", QuotaReserved: mt(-50 * time.Minute), Admitted: mt(-50 * time.Minute),
			Protections: []Protection{{Kind: "preempt", Until: mt(-20 * time.Minute), Source: "preemptMinRuntime 30m0s from Cohort org"}},
			TurnEnds:    mt(10 * time.Minute), TurnSetting: "minAdmitDuration 1h0m0s", RunningCounted: "Admitted"},
		{Namespace: "ns", Name: "new", LocalQueue: "lq", QuotaReserved: mt(-10 * time.Minute), Admitted: mt(-10 * time.Minute),
			Protections: []Protection{{Kind: "preempt", Until: mt(20 * time.Minute), Active: true, Source: "preemptMinRuntime 30m0s from Cohort org"}},
			TurnEnds:    mt(50 * time.Minute), TurnSetting: "minAdmitDuration 1h0m0s", RunningCounted: "Admitted",
			Details: map[string]any{"PreemptionNotice": &NoticeInProgress{Given: mt(-time.Minute), Deadline: mt(9 * time.Minute), Reason: "InClusterQueueTimeBased", Preemptor: "ns/second"}}},
	}
	noticeRows := []SettingReport{
		{Name: "noticePeriod", Value: "10m0s", Source: "Cohort team"},
		{Name: "noticeOnPriorityPreemption", Value: "true", Source: "ClusterQueue gpu"},
		{Name: "noticeOnReclaim", Value: "false", Source: "not set on ClusterQueue gpu or a Cohort above it"},
	}
	fromVisibility := func(string) ([]PendingWorkload, string) {
		return []PendingWorkload{{Position: 0, Namespace: "ns", Name: "second", LocalQueue: "lq"}, {Position: 1, Namespace: "ns", Name: "first", LocalQueue: "lq"}}, ""
	}
	notServed := func(string) ([]PendingWorkload, string) {
		return nil, "the server could not find the requested resource"
	}
	withDefaults := ManagerSettings{Known: true, Config: tsconfig.Configuration{}}
	tsconfig.SetDefaults(&withDefaults.Config)
	withDefaults.Config.DefaultPreemptMinRuntime.Duration = 5 * time.Minute

	cases := map[string]struct {
		manager ManagerSettings
		pending PendingFunc
		want    *QueuesReport
	}{
		"order from the visibility API, defaults not known": {
			pending: fromVisibility,
			want: &QueuesReport{Manager: "timeshare defaults not known (no --manager-config); runtimeClock assumed Admitted",
				ClusterQueues: []ClusterQueueReport{{Name: "gpu", Cohort: "team",
					Settings: append([]SettingReport{
						{Name: "minAdmitDuration", Value: "1h0m0s", Source: "ClusterQueue gpu"},
						{Name: "preemptMinRuntime", Value: "30m0s", Source: "Cohort org"},
						{Name: "reclaimMinRuntime", Value: "0s", Source: "ClusterQueue gpu"},
					}, noticeRows...),
					Admitted: admitted,
					Pending: []PendingWorkload{
						{Position: 0, Namespace: "ns", Name: "second", LocalQueue: "lq", Created: mt(-20 * time.Minute), Reason: "Pending", Message: "waiting for a time-sharing turn"},
						{Position: 1, Namespace: "ns", Name: "first", LocalQueue: "lq", Created: mt(-40 * time.Minute), Reason: "Pending", Message: "insufficient quota"},
					},
					PendingOrder: orderVisibility}}},
		},
		"creation order when the visibility API is not served": {
			pending: notServed,
			manager: withDefaults,
			want: &QueuesReport{Manager: "from --manager-config: defaultPreemptMinRuntime 5m0s, defaultReclaimMinRuntime 0s, reclaimResolveMethod LCA, runtimeClock Admitted",
				ClusterQueues: []ClusterQueueReport{{Name: "gpu", Cohort: "team",
					Settings: append([]SettingReport{
						{Name: "minAdmitDuration", Value: "1h0m0s", Source: "ClusterQueue gpu"},
						{Name: "preemptMinRuntime", Value: "30m0s", Source: "Cohort org"},
						{Name: "reclaimMinRuntime", Value: "0s", Source: "ClusterQueue gpu"},
					}, noticeRows...),
					Admitted: admitted,
					Pending: []PendingWorkload{
						{Position: 0, Namespace: "ns", Name: "first", LocalQueue: "lq", Created: mt(-40 * time.Minute), Reason: "Pending", Message: "insufficient quota"},
						{Position: 1, Namespace: "ns", Name: "second", LocalQueue: "lq", Created: mt(-20 * time.Minute), Reason: "Pending", Message: "waiting for a time-sharing turn"},
					},
					PendingOrder: "creation order, not necessarily the scheduler's: the visibility API could not be read (the server could not find the requested resource)"}}},
		},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			got := BuildQueuesReport(cluster, "", tc.manager, tc.pending, t0)
			if diff := cmp.Diff(tc.want, got); diff != "" {
				t.Errorf("report (-want +got):\n%s", diff)
			}
		})
	}
}

func TestBuildQueuesReportSettings(t *testing.T) {
	known := ManagerSettings{Known: true}
	tsconfig.SetDefaults(&known.Config)
	known.Config.DefaultReclaimMinRuntime.Duration = 2 * time.Minute
	known.Config.ReclaimResolveMethod = tsconfig.ReclaimResolveQueue
	// flagsUnset are the notice extension rows when no queue sets them.
	flagsUnset := func(cq string) []SettingReport {
		return []SettingReport{
			{Name: "noticeOnPriorityPreemption", Value: "false", Source: "not set on ClusterQueue " + cq + " or a Cohort above it"},
			{Name: "noticeOnReclaim", Value: "false", Source: "not set on ClusterQueue " + cq + " or a Cohort above it"},
		}
	}
	cases := map[string]struct {
		cq      unstructured.Unstructured
		cohorts []unstructured.Unstructured
		manager ManagerSettings
		want    []SettingReport
		problem string
	}{
		"nothing set, defaults not known": {
			cq: object("ClusterQueue", "plain", map[string]any{}),
			want: append([]SettingReport{
				{Name: "minAdmitDuration", Source: "not set on ClusterQueue plain: no turns (upstream's same-priority rules)"},
				{Name: "preemptMinRuntime", Source: unknownDefault},
				{Name: "reclaimMinRuntime", Source: unknownDefault},
				{Name: "noticePeriod", Source: unknownDefault},
			}, flagsUnset("plain")...),
		},
		"nothing set, defaults from the manager configuration, Queue method": {
			cq:      object("ClusterQueue", "plain", map[string]any{"cohortName": "c"}),
			manager: known,
			want: append([]SettingReport{
				{Name: "minAdmitDuration", Source: "not set on ClusterQueue plain: no turns (upstream's same-priority rules)"},
				{Name: "preemptMinRuntime", Value: "0s", Source: "manager default"},
				{Name: "reclaimMinRuntime", Value: "2m0s", Source: "manager default"},
				{Name: "noticePeriod", Value: "0s", Source: "manager default: no notice"},
			}, flagsUnset("plain")...),
		},
		"the manager's default notice, extended to priority preemption by a Cohort": {
			cq:      object("ClusterQueue", "plain", map[string]any{"cohortName": "c"}),
			cohorts: []unstructured.Unstructured{object("Cohort", "c", map[string]any{"preemption": map[string]any{"noticeOnPriorityPreemption": true}})},
			manager: func() ManagerSettings {
				m := known
				m.Config.DefaultNoticePeriod = &metav1.Duration{Duration: 3 * time.Minute}
				return m
			}(),
			want: []SettingReport{
				{Name: "minAdmitDuration", Source: "not set on ClusterQueue plain: no turns (upstream's same-priority rules)"},
				{Name: "preemptMinRuntime", Value: "0s", Source: "manager default"},
				{Name: "reclaimMinRuntime", Value: "2m0s", Source: "manager default"},
				{Name: "noticePeriod", Value: "3m0s", Source: "manager default"},
				{Name: "noticeOnPriorityPreemption", Value: "true", Source: "Cohort c"},
				{Name: "noticeOnReclaim", Value: "false", Source: "not set on ClusterQueue plain or a Cohort above it"},
			},
		},
		"a Cohort's setting stops at 0s on the ClusterQueue": {
			cq: object("ClusterQueue", "q", map[string]any{"cohortName": "c", "preemption": map[string]any{"preemptMinRuntime": "0s", "noticeOnReclaim": false}}),
			cohorts: []unstructured.Unstructured{object("Cohort", "c", map[string]any{"preemption": map[string]any{"preemptMinRuntime": "1h", "reclaimMinRuntime": "3m",
				"noticePeriod": "5m", "noticeOnReclaim": true}})},
			manager: known,
			want: []SettingReport{
				{Name: "minAdmitDuration", Source: "not set on ClusterQueue q: no turns (upstream's same-priority rules)"},
				{Name: "preemptMinRuntime", Value: "0s", Source: "ClusterQueue q"},
				{Name: "reclaimMinRuntime", Value: "3m0s", Source: "Cohort c"},
				{Name: "noticePeriod", Value: "5m0s", Source: "Cohort c"},
				{Name: "noticeOnPriorityPreemption", Value: "false", Source: "not set on ClusterQueue q or a Cohort above it"},
				{Name: "noticeOnReclaim", Value: "false", Source: "ClusterQueue q"},
			},
		},
		"feature gates turned off in the manager configuration": {
			cq: object("ClusterQueue", "gated", map[string]any{"preemption": map[string]any{"withinClusterQueue": "LowerOrNewerEqualPriority",
				"withinClusterQueueConfig": map[string]any{"minAdmitDuration": "1h"}, "preemptMinRuntime": "10m", "noticePeriod": "5m"}}),
			manager: func() ManagerSettings {
				m := known
				m.FeatureGates = map[string]bool{"TimeBasedSamePriorityPreemption": false, "MinRuntimeProtection": false, "PreemptionNotice": false}
				return m
			}(),
			want: []SettingReport{
				{Name: "minAdmitDuration", Source: "ClusterQueue gated sets 1h0m0s, ignored: feature gate TimeBasedSamePriorityPreemption is off in --manager-config"},
				{Name: "preemptMinRuntime", Source: "ignored: feature gate MinRuntimeProtection is off in --manager-config"},
				{Name: "reclaimMinRuntime", Source: "ignored: feature gate MinRuntimeProtection is off in --manager-config"},
				{Name: "noticePeriod", Source: "ignored: feature gate PreemptionNotice is off in --manager-config"},
				{Name: "noticeOnPriorityPreemption", Source: "ignored: feature gate PreemptionNotice is off in --manager-config"},
				{Name: "noticeOnReclaim", Source: "ignored: feature gate PreemptionNotice is off in --manager-config"},
			},
		},
		"settings the manager ignores are said to be ignored": {
			cq: object("ClusterQueue", "bad", map[string]any{"preemption": map[string]any{
				"withinClusterQueue": "Never", "withinClusterQueueConfig": map[string]any{"minAdmitDuration": "1h"}}}),
			want: append([]SettingReport{
				{Name: "minAdmitDuration", Source: "not set on ClusterQueue bad: no turns (upstream's same-priority rules)"},
				{Name: "preemptMinRuntime", Source: unknownDefault},
				{Name: "reclaimMinRuntime", Source: unknownDefault},
				{Name: "noticePeriod", Source: unknownDefault},
			}, flagsUnset("bad")...),
			problem: "the manager ignores this ClusterQueue's kueue-timeshare settings: spec.preemption.withinClusterQueueConfig: Invalid value: \"Never\": requires spec.preemption.withinClusterQueue to be LowerOrNewerEqualPriority, not Never",
		},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			got := BuildQueuesReport(Cluster{ClusterQueues: []unstructured.Unstructured{tc.cq}, Cohorts: tc.cohorts}, "", tc.manager,
				func(string) ([]PendingWorkload, string) { return nil, "" }, t0)
			if diff := cmp.Diff(tc.want, got.ClusterQueues[0].Settings); diff != "" {
				t.Errorf("settings (-want +got):\n%s", diff)
			}
			if diff := cmp.Diff(tc.problem, got.ClusterQueues[0].Problem); diff != "" {
				t.Errorf("problem (-want +got):\n%s", diff)
			}
		})
	}
}

func TestRenderQueues(t *testing.T) {
	rep := &QueuesReport{Manager: "timeshare defaults not known (no --manager-config); runtimeClock assumed Admitted",
		ClusterQueues: []ClusterQueueReport{{Name: "gpu", Cohort: "team",
			Settings: []SettingReport{
				{Name: "minAdmitDuration", Value: "1h0m0s", Source: "ClusterQueue gpu"},
				{Name: "preemptMinRuntime", Value: "30m0s", Source: "Cohort org"},
				{Name: "reclaimMinRuntime", Source: unknownDefault},
				{Name: "noticePeriod", Value: "5m0s", Source: "Cohort team"},
			},
			Admitted: []AdmittedWorkload{{Namespace: "ns", Name: "new", LocalQueue: "lq", QuotaReserved: mt(-10 * time.Minute), Admitted: mt(-10 * time.Minute),
				Protections: []Protection{{Kind: "preempt", Until: mt(20 * time.Minute), Active: true, Source: "preemptMinRuntime 30m0s from Cohort org"}},
				TurnEnds:    mt(50 * time.Minute), RunningCounted: "Admitted", Features: map[string]FeatureCell{"ExpectedRuntimeRequeue": {Value: "25m0s", From: mt(15 * time.Minute)}}},
				{Namespace: "ns", Name: "victim", LocalQueue: "lq", QuotaReserved: mt(-65 * time.Minute), Admitted: mt(-65 * time.Minute),
					TurnEnds: mt(-5 * time.Minute), RunningCounted: "Admitted",
					Details: map[string]any{"PreemptionNotice": &NoticeInProgress{Given: mt(-time.Minute), Deadline: mt(4 * time.Minute), Reason: "InClusterQueueTimeBased", Preemptor: "ns/first", CheckpointDone: true}}}},
			Pending:      []PendingWorkload{{Position: 0, Namespace: "ns", Name: "first", LocalQueue: "lq", Created: mt(-40 * time.Minute), Reason: "Pending", Message: "insufficient quota"}},
			PendingOrder: orderVisibility,
		}, {Name: "empty", Settings: []SettingReport{}, Admitted: []AdmittedWorkload{}, Pending: []PendingWorkload{}, PendingOrder: orderVisibility,
			Problem: "the manager ignores this ClusterQueue's kueue-timeshare settings: bad"}}}
	cases := map[string]struct {
		wide bool
		want string
	}{
		"table": {want: `Manager settings: timeshare defaults not known (no --manager-config); runtimeClock assumed Admitted

ClusterQueue gpu (Cohort team)
SETTING             VALUE    SOURCE
minAdmitDuration    1h0m0s   ClusterQueue gpu
preemptMinRuntime   30m0s    Cohort org
reclaimMinRuntime   <none>   manager default, not known here (pass --manager-config)
noticePeriod        5m0s     Cohort team

HOLDING QUOTA   PRIORITY   SINCE                            PROTECTED UNTIL                 PROTECTED BY                              TURN ENDS                       PREEMPTION NOTICE
ns/new          0          2026-11-24T11:50:00Z (10m ago)   2026-11-24T12:20:00Z (in 20m)   preemptMinRuntime 30m0s from Cohort org   2026-11-24T12:50:00Z (in 50m)   <none>
ns/victim       0          2026-11-24T10:55:00Z (65m ago)   <none>                          <none>                                    2026-11-24T11:55:00Z (5m ago)   until 2026-11-24T12:04:00Z (in 4m) for ns/first (InClusterQueueTimeBased), checkpoint done

Pending in the scheduler's order, from the visibility API:
POSITION   WORKLOAD   PRIORITY   WAITING BECAUSE (the manager's words)
0          ns/first   0          insufficient quota

ClusterQueue empty
Warning: the manager ignores this ClusterQueue's kueue-timeshare settings: bad
SETTING   VALUE   SOURCE

No workloads hold quota.

Pending in the scheduler's order, from the visibility API:
No pending workloads.
`},
		"wide": {wide: true, want: `Manager settings: timeshare defaults not known (no --manager-config); runtimeClock assumed Admitted

ClusterQueue gpu (Cohort team)
SETTING             VALUE    SOURCE
minAdmitDuration    1h0m0s   ClusterQueue gpu
preemptMinRuntime   30m0s    Cohort org
reclaimMinRuntime   <none>   manager default, not known here (pass --manager-config)
noticePeriod        5m0s     Cohort team

HOLDING QUOTA   PRIORITY   SINCE                            PROTECTED UNTIL                 PROTECTED BY                              TURN ENDS                       PREEMPTION NOTICE                                                                            LOCAL QUEUE   ADMITTED                         RUNNING COUNTED FROM   EXPECTED RUNTIME ENDS                                    STATE
ns/new          0          2026-11-24T11:50:00Z (10m ago)   2026-11-24T12:20:00Z (in 20m)   preemptMinRuntime 30m0s from Cohort org   2026-11-24T12:50:00Z (in 50m)   <none>                                                                                       lq            2026-11-24T11:50:00Z (10m ago)   Admitted               2026-11-24T12:15:00Z (in 15m) (expected-runtime 25m0s)   holding
ns/victim       0          2026-11-24T10:55:00Z (65m ago)   <none>                          <none>                                    2026-11-24T11:55:00Z (5m ago)   until 2026-11-24T12:04:00Z (in 4m) for ns/first (InClusterQueueTimeBased), checkpoint done   lq            2026-11-24T10:55:00Z (65m ago)   Admitted               <none>                                                   holding

Pending in the scheduler's order, from the visibility API:
POSITION   WORKLOAD   PRIORITY   LOCAL QUEUE   CREATED                          REASON    WAITING BECAUSE (the manager's words)
0          ns/first   0          lq            2026-11-24T11:20:00Z (40m ago)   Pending   insufficient quota

ClusterQueue empty
Warning: the manager ignores this ClusterQueue's kueue-timeshare settings: bad
SETTING   VALUE   SOURCE

No workloads hold quota.

Pending in the scheduler's order, from the visibility API:
No pending workloads.
`},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			var b bytes.Buffer
			if err := RenderQueues(&b, rep, tc.wide, t0); err != nil {
				t.Fatal(err)
			}
			if diff := cmp.Diff(strings.Split(tc.want, "\n"), strings.Split(b.String(), "\n")); diff != "" {
				t.Errorf("output (-want +got):\n%s", diff)
			}
		})
	}
}

func TestPrintFormats(t *testing.T) {
	rep := &QueuesReport{Manager: "m", ClusterQueues: []ClusterQueueReport{{Name: "gpu", Settings: []SettingReport{{Name: "minAdmitDuration", Value: "1h0m0s", Source: "ClusterQueue gpu"}},
		Admitted: []AdmittedWorkload{{Namespace: "ns", Name: "a", QuotaReserved: mt(0), TurnEnds: mt(time.Hour)}}, Pending: []PendingWorkload{}, PendingOrder: orderVisibility}}}
	cases := map[string]struct {
		output  string
		empty   bool
		want    string
		wantErr string
	}{
		"json": {output: "json", want: `{
  "manager": "m",
  "clusterQueues": [
    {
      "name": "gpu",
      "settings": [
        {
          "name": "minAdmitDuration",
          "value": "1h0m0s",
          "source": "ClusterQueue gpu"
        }
      ],
      "admitted": [
        {
          "namespace": "ns",
          "name": "a",
          "priority": 0,
          "quotaReserved": "2026-11-24T12:00:00Z",
          "turnEnds": "2026-11-24T13:00:00Z"
        }
      ],
      "pending": [],
      "pendingOrder": "the scheduler's order, from the visibility API"
    }
  ]
}
`},
		"yaml": {output: "yaml", want: `clusterQueues:
- admitted:
  - name: a
    namespace: ns
    priority: 0
    quotaReserved: "2026-11-24T12:00:00Z"
    turnEnds: "2026-11-24T13:00:00Z"
  name: gpu
  pending: []
  pendingOrder: the scheduler's order, from the visibility API
  settings:
  - name: minAdmitDuration
    source: ClusterQueue gpu
    value: 1h0m0s
manager: m
`},
		"no ClusterQueues":       {output: "", empty: true, want: "Manager settings: m\nNo ClusterQueues.\n"},
		"no ClusterQueues, JSON": {output: "json", empty: true, want: "{\n  \"manager\": \"m\",\n  \"clusterQueues\": []\n}\n"},
		"unknown":                {output: "xml", wantErr: `unable to match a printer suitable for the output format "xml", allowed formats are: json, yaml, wide`},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			f := &flags{output: tc.output}
			err := f.checkOutput()
			if diff := cmp.Diff(tc.wantErr, errString(err)); diff != "" {
				t.Fatalf("error (-want +got):\n%s", diff)
			}
			if err != nil {
				return
			}
			r := rep
			if tc.empty {
				r = BuildQueuesReport(Cluster{}, "", ManagerSettings{}, nil, t0)
				r.Manager = "m"
			}
			var b bytes.Buffer
			if err := f.print(&b, r, func(w io.Writer, wide bool) error { return RenderQueues(w, r, wide, t0) }); err != nil {
				t.Fatal(err)
			}
			if diff := cmp.Diff(tc.want, b.String()); diff != "" {
				t.Errorf("output (-want +got):\n%s", diff)
			}
			if tc.output == "json" && !tc.empty {
				var back QueuesReport
				if err := json.Unmarshal(b.Bytes(), &back); err != nil {
					t.Fatal(err)
				}
				if diff := cmp.Diff(rep, &back); diff != "" {
					t.Errorf("JSON does not read back (-want +got):\n%s", diff)
				}
			}
		})
	}
}

func TestLoadManagerSettings(t *testing.T) {
	dir := t.TempDir()
	write := func(name, text string) string {
		p := filepath.Join(dir, name)
		if err := os.WriteFile(p, []byte(text), 0o600); err != nil {
			t.Fatal(err)
		}
		return p
	}
	full := write("full.yaml", "apiVersion: config.kueue.x-k8s.io/v1beta2\nkind: Configuration\nfeatureGates:\n  MinRuntimeProtection: false\ntimeshare:\n  defaultPreemptMinRuntime: 10m\n  reclaimResolveMethod: Queue\n")
	badGates := write("gates.yaml", "featureGates: [MinRuntimeProtection]\n")
	none := write("none.yaml", "apiVersion: config.kueue.x-k8s.io/v1beta2\nkind: Configuration\n")
	unknown := write("unknown.yaml", "timeshare:\n  defaultPremptMinRuntime: 10m\n")
	negative := write("negative.yaml", "timeshare:\n  defaultReclaimMinRuntime: -1m\n")
	fair := write("fair.yaml", "fairSharing:\n  preemptionStrategies: [LessThanInitialShare]\n")
	fairDefault := write("fair-default.yaml", "fairSharing: {}\n")
	defaults := tsconfig.Configuration{}
	tsconfig.SetDefaults(&defaults)
	withFull := defaults
	withFull.DefaultPreemptMinRuntime = &metav1.Duration{Duration: 10 * time.Minute}
	withFull.ReclaimResolveMethod = tsconfig.ReclaimResolveQueue
	cases := map[string]struct {
		path    string
		want    ManagerSettings
		wantErr string
	}{
		"no flag":                  {},
		"a timeshare section":      {path: full, want: ManagerSettings{Known: true, Config: withFull, FeatureGates: map[string]bool{"MinRuntimeProtection": false}}},
		"featureGates not a map":   {path: badGates, wantErr: "--manager-config " + badGates + ": featureGates: json: cannot unmarshal array into Go value of type map[string]bool"},
		"no section: the defaults": {path: none, want: ManagerSettings{Known: true, Config: defaults}},
		"fair sharing with its strategies": {path: fair, want: ManagerSettings{Known: true, Config: defaults,
			FairSharing: &simulator.FairSharing{PreemptionStrategies: []string{"LessThanInitialShare"}}}},
		"fair sharing with Kueue's strategies": {path: fairDefault, want: ManagerSettings{Known: true, Config: defaults, FairSharing: &simulator.FairSharing{}}},
		"an unknown field is named":            {path: unknown, wantErr: "--manager-config " + unknown + `: timeshare: unknown field "defaultPremptMinRuntime"`},
		"a negative value is named":            {path: negative, wantErr: "--manager-config " + negative + `: timeshare.defaultReclaimMinRuntime: Invalid value: "-1m0s": must not be negative`},
		"a missing file":                       {path: filepath.Join(dir, "missing.yaml"), wantErr: "--manager-config: open " + filepath.Join(dir, "missing.yaml") + ": no such file or directory"},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			got, err := LoadManagerSettings(tc.path)
			if diff := cmp.Diff(tc.wantErr, errString(err)); diff != "" {
				t.Fatalf("error (-want +got):\n%s", diff)
			}
			if diff := cmp.Diff(tc.want, got); diff != "" {
				t.Errorf("settings (-want +got):\n%s", diff)
			}
		})
	}
}

func errString(err error) string {
	if err == nil {
		return ""
	}
	return err.Error()
}

// The worked example of docs/min-runtime.md: with LCA a victim's reclaimMinRuntime depends on the
// reclaimer, so each reclaimer's value is shown.
func TestReclaimAgainstEachReclaimer(t *testing.T) {
	cq := func(name, cohort string, preemption map[string]any) unstructured.Unstructured {
		spec := map[string]any{"cohortName": cohort}
		if preemption != nil {
			spec["preemption"] = preemption
		}
		return object("ClusterQueue", name, spec)
	}
	reclaim := func(d string) map[string]any { return map[string]any{"reclaimMinRuntime": d} }
	cluster := Cluster{
		ClusterQueues: []unstructured.Unstructured{cq("leaf1", "C", reclaim("0s")), cq("leaf2", "C", reclaim("180s")), cq("leaf3", "D", nil)},
		Cohorts: []unstructured.Unstructured{object("Cohort", "A", map[string]any{}),
			object("Cohort", "B", map[string]any{"parentName": "A", "preemption": reclaim("600s")}),
			object("Cohort", "C", map[string]any{"parentName": "B"}),
			object("Cohort", "D", map[string]any{"parentName": "B", "preemption": reclaim("60s")})},
	}
	withMethod := func(m tsconfig.ReclaimResolveMethod) ManagerSettings {
		s := ManagerSettings{Known: true}
		tsconfig.SetDefaults(&s.Config)
		s.Config.ReclaimResolveMethod = m
		return s
	}
	cases := map[string]struct {
		victim  string
		manager ManagerSettings
		want    []SettingReport
	}{
		"LCA, leaf1: its own 0s against its sibling, Cohort B's against the other subtree": {
			victim: "leaf1", manager: withMethod(tsconfig.ReclaimResolveLCA),
			want: []SettingReport{
				{Name: "reclaimMinRuntime", Value: "0s", Source: "ClusterQueue leaf1", Against: []string{"leaf2"}},
				{Name: "reclaimMinRuntime", Value: "10m0s", Source: "Cohort B", Against: []string{"leaf3"}},
			},
		},
		"LCA, leaf3: Cohort D's against both": {
			victim: "leaf3", manager: withMethod(tsconfig.ReclaimResolveLCA),
			want: []SettingReport{{Name: "reclaimMinRuntime", Value: "1m0s", Source: "Cohort D", Against: []string{"leaf1", "leaf2"}}},
		},
		"Queue, leaf1: its own value against everyone": {
			victim: "leaf1", manager: withMethod(tsconfig.ReclaimResolveQueue),
			want: []SettingReport{{Name: "reclaimMinRuntime", Value: "0s", Source: "ClusterQueue leaf1", Against: []string{"leaf2", "leaf3"}}},
		},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			got := BuildQueuesReport(cluster, tc.victim, tc.manager, func(string) ([]PendingWorkload, string) { return nil, "" }, t0)
			if len(got.ClusterQueues) != 1 || got.ClusterQueues[0].Name != tc.victim {
				t.Fatalf("want only ClusterQueue %s, got %+v", tc.victim, got.ClusterQueues)
			}
			var reclaims []SettingReport
			for _, s := range got.ClusterQueues[0].Settings {
				if s.Name == "reclaimMinRuntime" {
					reclaims = append(reclaims, s)
				}
			}
			if diff := cmp.Diff(tc.want, reclaims); diff != "" {
				t.Errorf("reclaim settings (-want +got):\n%s", diff)
			}
		})
	}
}

// A running workload shows its priority class's toleration with the other protections, and when
// its expected runtime makes it preemptible by its equals.
func TestAdmittedTolerationAndExpectedRuntime(t *testing.T) {
	withClass := func(wl kueue.Workload, class string) kueue.Workload {
		wl.Spec.PriorityClassRef = &kueue.PriorityClassRef{Kind: kueue.WorkloadPriorityClassKind, Name: class}
		return wl
	}
	withAnnotations := func(wl kueue.Workload, ann map[string]string) kueue.Workload {
		wl.Annotations = ann
		return wl
	}
	class := func(name string, ann map[string]string) kueue.WorkloadPriorityClass {
		return kueue.WorkloadPriorityClass{ObjectMeta: metav1.ObjectMeta{Name: name, Annotations: ann}, Value: 100}
	}
	cluster := Cluster{
		ClusterQueues: []unstructured.Unstructured{object("ClusterQueue", "gpu", map[string]any{"preemption": map[string]any{"withinClusterQueue": "LowerPriority"}})},
		WorkloadPriorityClasses: []kueue.WorkloadPriorityClass{
			class("tolerant", map[string]string{
				"preemption-toleration.scheduling.x-k8s.io/minimum-preemptable-priority": "10000",
				"preemption-toleration.scheduling.x-k8s.io/toleration-seconds":           "1800",
			}),
			class("stubborn", map[string]string{
				"preemption-toleration.scheduling.x-k8s.io/minimum-preemptable-priority": "10000",
				"preemption-toleration.scheduling.x-k8s.io/toleration-seconds":           "-1",
			}),
		},
		Workloads: []kueue.Workload{
			withClass(holding("a-tolerant", "gpu", -10*time.Minute), "tolerant"),
			withClass(holding("b-stubborn", "gpu", -10*time.Minute), "stubborn"),
			withAnnotations(holding("c-sweep", "gpu", -10*time.Minute), map[string]string{"kueue-timeshare.io/expected-runtime": "25m"}),
			withAnnotations(holding("d-typo", "gpu", -10*time.Minute), map[string]string{"kueue-timeshare.io/expected-runtime": "soon"}),
		},
	}
	none := func(string) ([]PendingWorkload, string) { return nil, "" }
	got := BuildQueuesReport(cluster, "", ManagerSettings{}, none, t0).ClusterQueues[0].Admitted
	byName := map[string]AdmittedWorkload{}
	for _, a := range got {
		byName[a.Name] = a
	}
	want := map[string]struct {
		protections   []Protection
		features      map[string]FeatureCell
		protectedCols [2]string
	}{
		"a-tolerant": {
			protections: []Protection{{Kind: "toleration", Until: mt(20 * time.Minute), Active: true,
				Source: "the preemption toleration of WorkloadPriorityClass tolerant (preemptors below priority 10000)"}},
			protectedCols: [2]string{"2026-11-24T12:20:00Z (in 20m)", "the preemption toleration of WorkloadPriorityClass tolerant (preemptors below priority 10000)"},
		},
		"b-stubborn": {
			protections: []Protection{{Kind: "toleration", Forever: true, Active: true,
				Source: "the preemption toleration of WorkloadPriorityClass stubborn (preemptors below priority 10000)"}},
			protectedCols: [2]string{"for as long as it runs", "the preemption toleration of WorkloadPriorityClass stubborn (preemptors below priority 10000)"},
		},
		"c-sweep": {features: map[string]FeatureCell{"ExpectedRuntimeRequeue": {Value: "25m0s", From: mt(15 * time.Minute)}}, protectedCols: [2]string{"<none>", "<none>"}},
		"d-typo": {features: map[string]FeatureCell{"ExpectedRuntimeRequeue": {Value: `annotation kueue-timeshare.io/expected-runtime: "soon" is not a duration`}},
			protectedCols: [2]string{"<none>", "<none>"}},
	}
	for name, w := range want {
		t.Run(name, func(t *testing.T) {
			a := byName[name]
			if diff := cmp.Diff(w.protections, a.Protections); diff != "" {
				t.Errorf("protections (-want +got):\n%s", diff)
			}
			if diff := cmp.Diff(w.features, a.Features); diff != "" {
				t.Errorf("features (-want +got):\n%s", diff)
			}
			until, by := protectionColumns(a.Protections, t0)
			if diff := cmp.Diff(w.protectedCols, [2]string{until, by}); diff != "" {
				t.Errorf("PROTECTED UNTIL, PROTECTED BY (-want +got):\n%s", diff)
			}
		})
	}
}

func TestPendingETA(t *testing.T) {
	items := []visibilityapi.PendingWorkload{
		{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "soon", Annotations: map[string]string{
			annotations.EstimatedAdmission: "2026-11-24T12:30:00Z", annotations.AdmissionEstimate: "expected around 12:30, 1st in turn order"}},
			PositionInClusterQueue: 0, LocalQueueName: "lq"},
		{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "never", Annotations: map[string]string{
			annotations.EstimatedAdmission: annotations.EstimateUnknown, annotations.AdmissionEstimate: "held by ns/h, which declares no runtime and has no window"}},
			PositionInClusterQueue: 1, LocalQueueName: "lq"},
		{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "none"}, PositionInClusterQueue: 2, LocalQueueName: "lq"},
	}
	pending := pendingFromVisibility(items)
	wantPending := []PendingWorkload{
		{Position: 0, Namespace: "ns", Name: "soon", LocalQueue: "lq", ETA: "2026-11-24T12:30:00Z", Estimate: "expected around 12:30, 1st in turn order"},
		{Position: 1, Namespace: "ns", Name: "never", LocalQueue: "lq", ETA: "unknown", Estimate: "held by ns/h, which declares no runtime and has no window"},
		{Position: 2, Namespace: "ns", Name: "none", LocalQueue: "lq"},
	}
	if diff := cmp.Diff(wantPending, pending); diff != "" {
		t.Fatalf("pending (-want +got):\n%s", diff)
	}
	rep := &QueuesReport{Manager: "m", ClusterQueues: []ClusterQueueReport{{Name: "gpu", Settings: []SettingReport{}, Admitted: []AdmittedWorkload{},
		Pending: pending, PendingOrder: orderVisibility}}}
	cases := map[string]struct {
		wide bool
		want string
	}{
		"table": {want: `POSITION   WORKLOAD   PRIORITY   ETA                                                                   WAITING BECAUSE (the manager's words)
0          ns/soon    0          2026-11-24T12:30:00Z (in 30m)                                         <none>
1          ns/never   0          unknown (held by ns/h, which declares no runtime and has no window)   <none>
2          ns/none    0          <none>                                                                <none>`},
		"wide": {wide: true, want: `POSITION   WORKLOAD   PRIORITY   ETA                                                                   LOCAL QUEUE   CREATED   REASON   WAITING BECAUSE (the manager's words)
0          ns/soon    0          2026-11-24T12:30:00Z (in 30m)                                         lq            <none>    <none>   <none>
1          ns/never   0          unknown (held by ns/h, which declares no runtime and has no window)   lq            <none>    <none>   <none>
2          ns/none    0          <none>                                                                lq            <none>    <none>   <none>`},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			var b bytes.Buffer
			if err := RenderQueues(&b, rep, tc.wide, t0); err != nil {
				t.Fatal(err)
			}
			out := b.String()
			table := strings.TrimSpace(out[strings.Index(out, "POSITION"):])
			if diff := cmp.Diff(strings.Split(tc.want, "\n"), strings.Split(table, "\n")); diff != "" {
				t.Errorf("pending table (-want +got):\n%s", diff)
			}
		})
	}
}
