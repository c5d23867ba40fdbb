package policy

import (
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	k8stypes "k8s.io/apimachinery/pkg/types"

	kueue "sigs.k8s.io/kueue/apis/kueue/v1beta2"
	"sigs.k8s.io/kueue/pkg/workload"

	"github.com/kueue-timeshare/kueue-timeshare/apis/annotations"
)

func TestResolveNotice(t *testing.T) {
	cq := func(n NoticeSettings) NoticeNode {
		return NoticeNode{Kind: "ClusterQueue", Name: "team-a", Settings: n}
	}
	cohort := func(n NoticeSettings) NoticeNode { return NoticeNode{Kind: "Cohort", Name: "org", Settings: n} }
	type want struct {
		Period time.Duration
		Source string
	}
	cases := map[string]struct {
		path   []NoticeNode
		reason string
		def    time.Duration
		want   want
	}{
		"a turn gets the default when no queue sets a period": {
			reason: TimeBasedReason, def: 2 * time.Minute,
			want: want{2 * time.Minute, "defaultNoticePeriod 2m0s from the manager configuration"},
		},
		"the ClusterQueue's period comes before its Cohort's": {
			path:   []NoticeNode{cq(NoticeSettings{Period: Set(time.Minute)}), cohort(NoticeSettings{Period: Set(time.Hour)})},
			reason: ExpectedRuntimeReason, def: 5 * time.Minute,
			want: want{time.Minute, "noticePeriod 1m0s from ClusterQueue team-a"},
		},
		"an unset period is inherited from the Cohort": {
			path:   []NoticeNode{cq(NoticeSettings{}), cohort(NoticeSettings{Period: Set(10 * time.Minute)})},
			reason: TimeBasedReason,
			want:   want{10 * time.Minute, "noticePeriod 10m0s from Cohort org"},
		},
		"0s on the ClusterQueue stops the inheritance": {
			path:   []NoticeNode{cq(NoticeSettings{Period: Set(0)}), cohort(NoticeSettings{Period: Set(10 * time.Minute)})},
			reason: TimeBasedReason,
			want:   want{0, "noticePeriod 0s from ClusterQueue team-a"},
		},
		"priority preemption gets no notice unless extended": {
			path:   []NoticeNode{cq(NoticeSettings{Period: Set(time.Minute)})},
			reason: kueue.InClusterQueueReason,
		},
		"priority preemption extended on the Cohort": {
			path:   []NoticeNode{cq(NoticeSettings{Period: Set(time.Minute)}), cohort(NoticeSettings{OnPriorityPreemption: Flag{Set: true, Value: true}})},
			reason: kueue.InClusterQueueReason,
			want:   want{time.Minute, "noticePeriod 1m0s from ClusterQueue team-a"},
		},
		"false on the ClusterQueue stops the Cohort's extension": {
			path:   []NoticeNode{cq(NoticeSettings{Period: Set(time.Minute), OnReclaim: Flag{Set: true}}), cohort(NoticeSettings{OnReclaim: Flag{Set: true, Value: true}})},
			reason: kueue.InCohortReclamationReason,
		},
		"every reclaim reason follows noticeOnReclaim": {
			path:   []NoticeNode{cq(NoticeSettings{Period: Set(time.Minute), OnReclaim: Flag{Set: true, Value: true}})},
			reason: kueue.InCohortFairSharingReason,
			want:   want{time.Minute, "noticePeriod 1m0s from ClusterQueue team-a"},
		},
		"an extension alone does not extend priority preemption": {
			path:   []NoticeNode{cq(NoticeSettings{Period: Set(time.Minute), OnReclaim: Flag{Set: true, Value: true}})},
			reason: kueue.InClusterQueueReason,
		},
		"other reasons get none": {
			path:   []NoticeNode{cq(NoticeSettings{Period: Set(time.Minute), OnReclaim: Flag{Set: true, Value: true}, OnPriorityPreemption: Flag{Set: true, Value: true}})},
			reason: "WorkloadSliceReplaced",
		},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			p, src := ResolveNotice(tc.path, tc.reason, tc.def)
			if diff := cmp.Diff(tc.want, want{p, src}); diff != "" {
				t.Errorf("notice (-want +got):\n%s", diff)
			}
		})
	}
}

func TestNoticeExtended(t *testing.T) {
	cq := func(n NoticeSettings) NoticeNode {
		return NoticeNode{Kind: "ClusterQueue", Name: "team-a", Settings: n}
	}
	cohort := func(n NoticeSettings) NoticeNode { return NoticeNode{Kind: "Cohort", Name: "org", Settings: n} }
	on, off := Flag{Set: true, Value: true}, Flag{Set: true}
	type want struct {
		On     bool
		Source string
	}
	cases := map[string]struct {
		path   []NoticeNode
		reason string
		want   want
	}{
		"a turn always": {reason: TimeBasedReason, want: want{true, "a turn always gets the notice"}},
		"an expected-runtime turn always": {
			path: []NoticeNode{cq(NoticeSettings{OnPriorityPreemption: off})}, reason: ExpectedRuntimeReason,
			want: want{true, "a turn always gets the notice"},
		},
		"priority preemption with nothing set": {
			path: []NoticeNode{cq(NoticeSettings{}), cohort(NoticeSettings{})}, reason: kueue.InClusterQueueReason,
			want: want{false, ""},
		},
		"priority preemption extended by the Cohort": {
			path: []NoticeNode{cq(NoticeSettings{}), cohort(NoticeSettings{OnPriorityPreemption: on})}, reason: kueue.InClusterQueueReason,
			want: want{true, "noticeOnPriorityPreemption true from Cohort org"},
		},
		"reclaim turned off on the ClusterQueue under an extending Cohort": {
			path: []NoticeNode{cq(NoticeSettings{OnReclaim: off}), cohort(NoticeSettings{OnReclaim: on})}, reason: kueue.InCohortReclaimWhileBorrowingReason,
			want: want{false, "noticeOnReclaim false from ClusterQueue team-a"},
		},
		"reclaim does not follow the priority flag": {
			path: []NoticeNode{cq(NoticeSettings{OnPriorityPreemption: on})}, reason: kueue.InCohortReclamationReason,
			want: want{false, ""},
		},
		"another reason": {
			path: []NoticeNode{cq(NoticeSettings{OnPriorityPreemption: on, OnReclaim: on})}, reason: "WorkloadSliceReplaced",
			want: want{false, "no notice for a preemption for WorkloadSliceReplaced"},
		},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			on, src := NoticeExtended(tc.path, tc.reason)
			if diff := cmp.Diff(tc.want, want{on, src}); diff != "" {
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
		wantOutcome NoticeOutcome
	}{
		"before the deadline":        {now: now},
		"at the deadline":            {now: now.Add(time.Minute), wantDue: true, wantOutcome: NoticeEvictedAtDeadline},
		"checkpoint done":            {now: now, ann: map[string]string{annotations.CheckpointDone: "true"}, wantDue: true, wantOutcome: NoticeEndedEarly},
		"checkpoint not done, false": {now: now, ann: map[string]string{annotations.CheckpointDone: "false"}},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			wl := &kueue.Workload{ObjectMeta: metav1.ObjectMeta{Annotations: tc.ann}}
			due, outcome := NoticeDue(n, wl, tc.now)
			if due != tc.wantDue || outcome != tc.wantOutcome {
				t.Errorf("NoticeDue = %v, %q; want %v, %q", due, outcome, tc.wantDue, tc.wantOutcome)
			}
		})
	}
}

func TestUnderNoticeForAnotherPreemptor(t *testing.T) {
	now := time.Date(2026, 11, 25, 10, 0, 0, 0, time.UTC)
	pending := func(uid string) *Pending {
		return &Pending{Obj: &kueue.Workload{ObjectMeta: metav1.ObjectMeta{UID: k8stypes.UID("preemptor-" + uid)}}, Priority: 100}
	}
	eligible := Decision{Eligible: true, Rule: RuleLowerPriority, Message: "priority 1 is lower than the preemptor's 100"}
	notice := &annotations.Notice{Deadline: now.Add(time.Minute), Preemptor: "ns/a", PreemptorUID: "preemptor-a", Reason: TimeBasedReason}
	cases := map[string]struct {
		notice    *annotations.Notice
		evicted   bool
		preemptor *Pending
		want      Decision
	}{
		"no notice: eligible": {preemptor: pending("b"), want: eligible},
		"another preemptor's notice: protected": {notice: notice, preemptor: pending("b"),
			want: Decision{Rule: RuleUnderNotice, Message: "under notice of preemption for ns/a until 2026-11-25T10:01:00Z"}},
		"its own preemptor's notice: eligible":   {notice: notice, preemptor: pending("a"), want: eligible},
		"evicted already: nothing left to guard": {notice: notice, evicted: true, preemptor: pending("b"), want: eligible},
	}
	p := New(Options{}, WithFeatures(FeatureNotice))
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			c := &Candidate{Info: &workload.Info{Obj: &kueue.Workload{}}, Priority: 1, Notice: tc.notice, Evicted: tc.evicted, AdmittedAt: now.Add(-time.Hour)}
			got := p.Explain(&Input{Preemptor: tc.preemptor, Candidate: c, Scope: SameClusterQueue, Policy: kueue.PreemptionPolicyLowerPriority, Now: now})
			if diff := cmp.Diff(tc.want, got); diff != "" {
				t.Errorf("decision (-want +got):\n%s", diff)
			}
		})
	}
}
