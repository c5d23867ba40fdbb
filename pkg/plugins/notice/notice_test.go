package notice

import (
	"encoding/json"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	k8stypes "k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/validation/field"
	"k8s.io/utils/ptr"

	kueue "sigs.k8s.io/kueue/apis/kueue/v1beta2"
	"sigs.k8s.io/kueue/pkg/workload"

	"github.com/kueue-timeshare/kueue-timeshare/apis/annotations"
	tsapi "github.com/kueue-timeshare/kueue-timeshare/apis/kueue/v1beta2"
	"github.com/kueue-timeshare/kueue-timeshare/pkg/plugins/timebased"
	"github.com/kueue-timeshare/kueue-timeshare/pkg/policy"
)

func TestResolveNotice(t *testing.T) {
	cq := func(n Settings) Node {
		return Node{Kind: "ClusterQueue", Name: "team-a", Settings: n}
	}
	cohort := func(n Settings) Node { return Node{Kind: "Cohort", Name: "org", Settings: n} }
	type want struct {
		Period time.Duration
		Source string
	}
	cases := map[string]struct {
		path   []Node
		reason string
		def    time.Duration
		want   want
	}{
		"a turn gets the default when no queue sets a period": {
			reason: timebased.Reason, def: 2 * time.Minute,
			want: want{2 * time.Minute, "defaultNoticePeriod 2m0s from the manager configuration"},
		},
		"the ClusterQueue's period comes before its Cohort's": {
			path:   []Node{cq(Settings{Period: policy.Set(time.Minute)}), cohort(Settings{Period: policy.Set(time.Hour)})},
			reason: tsapi.ExpectedRuntimeReason, def: 5 * time.Minute,
			want: want{time.Minute, "noticePeriod 1m0s from ClusterQueue team-a"},
		},
		"an unset period is inherited from the Cohort": {
			path:   []Node{cq(Settings{}), cohort(Settings{Period: policy.Set(10 * time.Minute)})},
			reason: timebased.Reason,
			want:   want{10 * time.Minute, "noticePeriod 10m0s from Cohort org"},
		},
		"0s on the ClusterQueue stops the inheritance": {
			path:   []Node{cq(Settings{Period: policy.Set(0)}), cohort(Settings{Period: policy.Set(10 * time.Minute)})},
			reason: timebased.Reason,
			want:   want{0, "noticePeriod 0s from ClusterQueue team-a"},
		},
		"priority preemption gets no notice unless extended": {
			path:   []Node{cq(Settings{Period: policy.Set(time.Minute)})},
			reason: kueue.InClusterQueueReason,
		},
		"priority preemption extended on the Cohort": {
			path:   []Node{cq(Settings{Period: policy.Set(time.Minute)}), cohort(Settings{OnPriorityPreemption: Flag{Set: true, Value: true}})},
			reason: kueue.InClusterQueueReason,
			want:   want{time.Minute, "noticePeriod 1m0s from ClusterQueue team-a"},
		},
		"false on the ClusterQueue stops the Cohort's extension": {
			path:   []Node{cq(Settings{Period: policy.Set(time.Minute), OnReclaim: Flag{Set: true}}), cohort(Settings{OnReclaim: Flag{Set: true, Value: true}})},
			reason: kueue.InCohortReclamationReason,
		},
		"every reclaim reason follows noticeOnReclaim": {
			path:   []Node{cq(Settings{Period: policy.Set(time.Minute), OnReclaim: Flag{Set: true, Value: true}})},
			reason: kueue.InCohortFairSharingReason,
			want:   want{time.Minute, "noticePeriod 1m0s from ClusterQueue team-a"},
		},
		"an extension alone does not extend priority preemption": {
			path:   []Node{cq(Settings{Period: policy.Set(time.Minute), OnReclaim: Flag{Set: true, Value: true}})},
			reason: kueue.InClusterQueueReason,
		},
		"other reasons get none": {
			path:   []Node{cq(Settings{Period: policy.Set(time.Minute), OnReclaim: Flag{Set: true, Value: true}, OnPriorityPreemption: Flag{Set: true, Value: true}})},
			reason: "WorkloadSliceReplaced",
		},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			p, src := Resolve(tc.path, tc.reason, tc.def)
			if diff := cmp.Diff(tc.want, want{p, src.String()}); diff != "" {
				t.Errorf("notice (-want +got):\n%s", diff)
			}
		})
	}
}

func TestNoticeExtended(t *testing.T) {
	cq := func(n Settings) Node {
		return Node{Kind: "ClusterQueue", Name: "team-a", Settings: n}
	}
	cohort := func(n Settings) Node { return Node{Kind: "Cohort", Name: "org", Settings: n} }
	on, off := Flag{Set: true, Value: true}, Flag{Set: true}
	type want struct {
		On     bool
		Source string
	}
	cases := map[string]struct {
		path   []Node
		reason string
		want   want
	}{
		"a turn always": {reason: timebased.Reason, want: want{true, "a turn always gets the notice"}},
		"an expected-runtime turn always": {
			path: []Node{cq(Settings{OnPriorityPreemption: off})}, reason: tsapi.ExpectedRuntimeReason,
			want: want{true, "a turn always gets the notice"},
		},
		"priority preemption with nothing set": {
			path: []Node{cq(Settings{}), cohort(Settings{})}, reason: kueue.InClusterQueueReason,
			want: want{false, ""},
		},
		"priority preemption extended by the Cohort": {
			path: []Node{cq(Settings{}), cohort(Settings{OnPriorityPreemption: on})}, reason: kueue.InClusterQueueReason,
			want: want{true, "noticeOnPriorityPreemption true from Cohort org"},
		},
		"reclaim turned off on the ClusterQueue under an extending Cohort": {
			path: []Node{cq(Settings{OnReclaim: off}), cohort(Settings{OnReclaim: on})}, reason: kueue.InCohortReclaimWhileBorrowingReason,
			want: want{false, "noticeOnReclaim false from ClusterQueue team-a"},
		},
		"reclaim does not follow the priority flag": {
			path: []Node{cq(Settings{OnPriorityPreemption: on})}, reason: kueue.InCohortReclamationReason,
			want: want{false, ""},
		},
		"another reason": {
			path: []Node{cq(Settings{OnPriorityPreemption: on, OnReclaim: on})}, reason: "WorkloadSliceReplaced",
			want: want{false, "no notice for a preemption for WorkloadSliceReplaced"},
		},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			on, src := Extended(tc.path, tc.reason)
			if diff := cmp.Diff(tc.want, want{on, src.String()}); diff != "" {
				t.Errorf("extended (-want +got):\n%s", diff)
			}
		})
	}
}

func TestNoticeDue(t *testing.T) {
	now := time.Date(2026, 11, 25, 10, 0, 0, 0, time.UTC)
	n := &annotations.Notice{Deadline: now.Add(time.Minute)}
	cases := map[string]struct {
		ann         map[string]string
		now         time.Time
		wantDue     bool
		wantOutcome Outcome
	}{
		"before the deadline":        {now: now},
		"at the deadline":            {now: now.Add(time.Minute), wantDue: true, wantOutcome: EvictedAtDeadline},
		"checkpoint done":            {now: now, ann: map[string]string{annotations.CheckpointDone: "true"}, wantDue: true, wantOutcome: EndedEarly},
		"checkpoint not done, false": {now: now, ann: map[string]string{annotations.CheckpointDone: "false"}},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			wl := &kueue.Workload{ObjectMeta: metav1.ObjectMeta{Annotations: tc.ann}}
			due, outcome := Due(n, wl, tc.now)
			if due != tc.wantDue || outcome != tc.wantOutcome {
				t.Errorf("Due = %v, %q; want %v, %q", due, outcome, tc.wantDue, tc.wantOutcome)
			}
		})
	}
}

func TestUnderNoticeForAnotherPreemptor(t *testing.T) {
	now := time.Date(2026, 11, 25, 10, 0, 0, 0, time.UTC)
	pending := func(uid string) *policy.Pending {
		return &policy.Pending{Obj: &kueue.Workload{ObjectMeta: metav1.ObjectMeta{UID: k8stypes.UID("preemptor-" + uid)}}, Priority: 100}
	}
	eligible := policy.Decision{Eligible: true, Rule: policy.RuleLowerPriority, Message: "priority 1 is lower than the preemptor's 100"}
	given := &annotations.Notice{Deadline: now.Add(time.Minute), Preemptor: "ns/a", PreemptorUID: "preemptor-a", Reason: timebased.Reason}
	cases := map[string]struct {
		notice    *annotations.Notice
		evicted   bool
		preemptor *policy.Pending
		want      policy.Decision
	}{
		"no notice: eligible": {preemptor: pending("b"), want: eligible},
		"another preemptor's notice: protected": {notice: given, preemptor: pending("b"),
			want: policy.Decision{Rule: Rule, Message: "under notice of preemption for ns/a until 2026-11-25T10:01:00Z"}},
		"its own preemptor's notice: eligible":   {notice: given, preemptor: pending("a"), want: eligible},
		"evicted already: nothing left to guard": {notice: given, evicted: true, preemptor: pending("b"), want: eligible},
	}
	p := policy.New(policy.Options{}, policy.Table{Unit()}.With(Feature))
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			c := &policy.Candidate{Info: &workload.Info{Obj: &kueue.Workload{}}, Priority: 1, Evicted: tc.evicted, AdmittedAt: now.Add(-time.Hour)}
			if tc.notice != nil {
				fact.Set(c, tc.notice)
			}
			got := p.Explain(&policy.Input{Preemptor: tc.preemptor, Candidate: c, Scope: policy.SameClusterQueue, Policy: kueue.PreemptionPolicyLowerPriority, Now: now})
			if diff := cmp.Diff(tc.want, got); diff != "" {
				t.Errorf("decision (-want +got):\n%s", diff)
			}
		})
	}
}

func TestReadNotice(t *testing.T) {
	start := time.Date(2026, 3, 1, 10, 0, 0, 0, time.UTC)
	given := annotations.Notice{Start: start, Deadline: start.Add(5 * time.Minute), Reason: timebased.Reason, Preemptor: "team-a/next", PreemptorUID: "next-uid"}
	change := func(f func(*annotations.Notice)) annotations.Notice {
		n := given
		f(&n)
		return n
	}
	// wl carries the annotations ann and the conditions conds.
	wl := func(ann annotations.Notice, conds ...metav1.Condition) *kueue.Workload {
		return &kueue.Workload{ObjectMeta: metav1.ObjectMeta{Annotations: ann.Annotations()}, Status: kueue.WorkloadStatus{Conditions: conds}}
	}
	record := func(n annotations.Notice) metav1.Condition { return ConditionOf(&n, 1) }
	ended := record(given)
	ended.Status, ended.Reason = metav1.ConditionFalse, string(Withdrawn)
	edited := record(given)
	edited.Message = "To be evicted some day"
	cases := map[string]struct {
		wl      *kueue.Workload
		want    *annotations.Notice
		wantErr string
	}{
		"no notice": {wl: &kueue.Workload{}},
		"the record, with its copy in the annotations": {
			wl: wl(given, record(given)), want: &given,
		},
		"the record alone: the annotations are only a copy": {
			wl: &kueue.Workload{Status: kueue.WorkloadStatus{Conditions: []metav1.Condition{record(given)}}}, want: &given,
		},
		"annotations without a record (forged): no notice": {
			wl: wl(given),
		},
		"annotations for 2099 over the record: the record's deadline": {
			wl: wl(change(func(n *annotations.Notice) { n.Deadline = time.Date(2099, 1, 1, 0, 0, 0, 0, time.UTC) }), record(given)), want: &given,
		},
		"annotations naming another team's preemptor over the record: the record's preemptor": {
			wl: wl(change(func(n *annotations.Notice) { n.Preemptor, n.PreemptorUID = "team-b/theirs", "their-uid" }), record(given)), want: &given,
		},
		"the record of an ended notice: no notice": {
			wl: wl(given, ended),
		},
		"a record that gives no notice": {
			wl: wl(given, edited), wantErr: "the message does not give a notice",
		},
		"a record of a reason that never gets a notice": {
			wl:      wl(given, record(change(func(n *annotations.Notice) { n.Reason = "Bought" }))),
			wantErr: `reason "Bought" is not a preemption reason that gets a notice`,
		},
		"a record with a deadline in 2099": {
			wl:      wl(given, record(change(func(n *annotations.Notice) { n.Deadline = time.Date(2099, 1, 1, 0, 0, 0, 0, time.UTC) }))),
			wantErr: "the deadline is not within 1h0m0s of the notice's start",
		},
		"the longest notice, rounded up to the second": {
			wl:   wl(given, record(change(func(n *annotations.Notice) { n.Deadline = start.Add(time.Hour + time.Second) }))),
			want: ptr.To(change(func(n *annotations.Notice) { n.Deadline = start.Add(time.Hour + time.Second) })),
		},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			got, err := Read(tc.wl)
			gotErr := ""
			if err != nil {
				gotErr = err.Error()
			}
			if tc.wantErr == "" && gotErr != "" || tc.wantErr != "" && !strings.Contains(gotErr, tc.wantErr) {
				t.Fatalf("error %q, want one containing %q", gotErr, tc.wantErr)
			}
			if diff := cmp.Diff(tc.want, got); diff != "" {
				t.Errorf("Read (-want +got):\n%s", diff)
			}
		})
	}
}

func TestNoticeCopied(t *testing.T) {
	start := time.Date(2026, 3, 1, 10, 0, 0, 0, time.UTC)
	n := &annotations.Notice{Start: start, Deadline: start.Add(5 * time.Minute), Reason: timebased.Reason, Preemptor: "a/b", PreemptorUID: "u"}
	moved := *n
	moved.Deadline = moved.Deadline.Add(time.Hour)
	cases := map[string]struct {
		ann    map[string]string
		notice *annotations.Notice
		want   bool
	}{
		"no notice, no annotations":        {want: true},
		"no notice, a deadline left":       {ann: map[string]string{annotations.PreemptionDeadline: "x"}},
		"the copy":                         {ann: n.Annotations(), notice: n, want: true},
		"not copied yet":                   {notice: n},
		"the copy with its deadline moved": {ann: moved.Annotations(), notice: n},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			if got := Copied(&kueue.Workload{ObjectMeta: metav1.ObjectMeta{Annotations: tc.ann}}, tc.notice); got != tc.want {
				t.Errorf("Copied = %t, want %t", got, tc.want)
			}
		})
	}
}

func TestNoticeInForceMessage(t *testing.T) {
	start := time.Date(2026, 3, 1, 10, 0, 0, 0, time.UTC)
	n := &annotations.Notice{Start: start, Deadline: start.Add(5 * time.Minute), Reason: timebased.Reason, Preemptor: "ns/pre", PreemptorUID: "u"}
	want := "To be evicted at 2026-03-01T10:05:00Z to make room for workload ns/pre (uid u) due to InClusterQueueTimeBased; set the annotation " +
		"kueue-timeshare.io/checkpoint-done=true on its job or Workload once its work is saved to be evicted sooner"
	if got := InForceMessage(n); got != want {
		t.Errorf("InForceMessage = %q, want %q", got, want)
	}
}

// While its gate is off, the notice unit has the webhooks refuse notice settings that would
// change anything, except those the stored object already has.
func TestNoticeRefusedWhileOff(t *testing.T) {
	spec := func(preemption string) json.RawMessage { return json.RawMessage(`{"preemption":{` + preemption + `}}`) }
	cases := map[string]struct {
		on        bool
		spec, old json.RawMessage
		want      []string
	}{
		"gate on":                  {on: true, spec: spec(`"noticePeriod":"5m","noticeOnReclaim":true`)},
		"a period":                 {spec: spec(`"noticePeriod":"5m"`), want: []string{"spec.preemption.noticePeriod"}},
		"no notice asked for":      {spec: spec(`"noticePeriod":"0s","noticeOnReclaim":false`)},
		"both extensions":          {spec: spec(`"noticeOnPriorityPreemption":true,"noticeOnReclaim":true`), want: []string{"spec.preemption.noticeOnPriorityPreemption", "spec.preemption.noticeOnReclaim"}},
		"kept from the stored one": {spec: spec(`"noticePeriod":"5m"`), old: spec(`"noticePeriod":"5m"`)},
		"changed from the stored":  {spec: spec(`"noticePeriod":"6m"`), old: spec(`"noticePeriod":"5m"`), want: []string{"spec.preemption.noticePeriod"}},
		"no preemption at all":     {spec: json.RawMessage(`{}`)},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			on := func(policy.Feature) bool { return tc.on }
			var got []string
			for _, e := range (policy.Table{Unit()}).RefusedWhileOff(field.NewPath("spec", "preemption"), tc.spec, tc.old, on) {
				got = append(got, e.Field)
			}
			if diff := cmp.Diff(tc.want, got); diff != "" {
				t.Errorf("refused (-want +got):\n%s", diff)
			}
		})
	}
}

// The notice unit's warning is what a job reads off its Workload: a notice newly copied onto its
// annotations, once.
func TestNoticeWarns(t *testing.T) {
	t0 := time.Date(2026, 1, 1, 12, 0, 0, 0, time.UTC)
	n := &annotations.Notice{Start: t0, Deadline: t0.Add(10 * time.Minute), Reason: kueue.InClusterQueueReason, Preemptor: "ns/p", PreemptorUID: "p-uid"}
	noticed := &kueue.Workload{
		ObjectMeta: metav1.ObjectMeta{Annotations: n.Annotations()},
		Status:     kueue.WorkloadStatus{Conditions: []metav1.Condition{ConditionOf(n, 1)}},
	}
	forged := &kueue.Workload{ObjectMeta: metav1.ObjectMeta{Annotations: n.Annotations()}}
	cases := map[string]struct {
		old, wl *kueue.Workload
		want    *policy.Warning
		wantErr bool
	}{
		"no notice":                    {wl: &kueue.Workload{}},
		"a new workload under one":     {wl: noticed, want: &policy.Warning{Until: n.Deadline, By: "p-uid", Reason: kueue.InClusterQueueReason}},
		"newly given":                  {old: &kueue.Workload{}, wl: noticed, want: &policy.Warning{Until: n.Deadline, By: "p-uid", Reason: kueue.InClusterQueueReason}},
		"already seen":                 {old: noticed, wl: noticed},
		"annotations without a record": {old: &kueue.Workload{}, wl: forged, wantErr: true},
	}
	warns := Plugin{}.Warns()
	if warns.Event != "noticed" || warns.Answer != annotations.CheckpointDone {
		t.Fatalf("the notice unit warns with event noticed, answered by %s; got %+v", annotations.CheckpointDone, warns)
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			got, err := warns.Given(tc.old, tc.wl)
			if (err != nil) != tc.wantErr {
				t.Fatalf("error %v, want one: %v", err, tc.wantErr)
			}
			if diff := cmp.Diff(tc.want, got); diff != "" {
				t.Errorf("Given (-want +got):\n%s", diff)
			}
		})
	}
}
