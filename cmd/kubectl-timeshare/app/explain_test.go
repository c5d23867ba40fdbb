package app

import (
	"bytes"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	corev1 "k8s.io/api/core/v1"
	eventsv1 "k8s.io/api/events/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/utils/ptr"

	kueue "sigs.k8s.io/kueue/apis/kueue/v1beta2"
	visibilityapi "sigs.k8s.io/kueue/apis/visibility/v1beta2"

	"github.com/kueue-timeshare/kueue-timeshare/apis/annotations"
	"github.com/kueue-timeshare/kueue-timeshare/pkg/plugins/notice"
)

func cond(t, status, reason, message string, at time.Duration) metav1.Condition {
	return metav1.Condition{Type: t, Status: metav1.ConditionStatus(status), Reason: reason, Message: message, LastTransitionTime: *mt(at)}
}

func TestBuildExplainReport(t *testing.T) {
	const preempted = "Preempted to accommodate a workload due to time-sharing"
	noticeMsg := notice.InForceMessage(&annotations.Notice{Deadline: t0.Add(5 * time.Minute), Reason: "InClusterQueueTimeBased", Preemptor: "ns/next", PreemptorUID: "uid-next"})
	wl := func(conds ...metav1.Condition) *kueue.Workload {
		return &kueue.Workload{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "w"}, Spec: kueue.WorkloadSpec{QueueName: "lq", Priority: ptr.To[int32](5)},
			Status: kueue.WorkloadStatus{Conditions: conds}}
	}
	newEvent := eventsv1.Event{ObjectMeta: metav1.ObjectMeta{UID: "e1"}, EventTime: metav1.MicroTime{Time: t0.Add(-2 * time.Minute)}, Type: "Normal",
		Reason: "EvictedDueToInClusterQueueTimeBased", Note: preempted}
	sameAsCore := corev1.Event{ObjectMeta: metav1.ObjectMeta{UID: "e1"}, LastTimestamp: metav1.Time{Time: t0.Add(-2 * time.Minute)}, Type: "Normal",
		Reason: "EvictedDueToInClusterQueueTimeBased", Message: preempted}
	coreOnly := corev1.Event{ObjectMeta: metav1.ObjectMeta{UID: "e2"}, LastTimestamp: metav1.Time{Time: t0.Add(-time.Minute)}, Count: 3, Type: "Warning",
		Reason: "Pending", Message: "insufficient quota"}
	evictionHistory := []HistoryItem{
		{Time: mt(-2 * time.Minute), Source: "event", What: "Normal", Reason: "EvictedDueToInClusterQueueTimeBased", Message: preempted},
		{Time: mt(-time.Minute), Source: "event", What: "Warning", Reason: "Pending", Message: "insufficient quota", Count: 3},
	}

	cases := map[string]struct {
		wl   *kueue.Workload
		evs  []eventsv1.Event
		core []corev1.Event
		want *ExplainReport
	}{
		"waiting: the QuotaReserved message": {
			wl: wl(cond(kueue.WorkloadQuotaReserved, "False", "Pending", "protected by minAdmitDuration", -time.Minute)),
			want: &ExplainReport{Namespace: "ns", Name: "w", LocalQueue: "lq", Priority: 5, State: "waiting for quota",
				Wait:    &Decision{Condition: kueue.WorkloadQuotaReserved, Status: "False", Reason: "Pending", Message: "protected by minAdmitDuration", Since: mt(-time.Minute)},
				History: []HistoryItem{{Time: mt(-time.Minute), Source: "condition", What: "QuotaReserved=False", Reason: "Pending", Message: "protected by minAdmitDuration"}}},
		},
		"preempted and requeued: both the rule and the wait; an event in both APIs shows once": {
			wl: wl(cond(kueue.WorkloadQuotaReserved, "False", "Pending", "insufficient quota", -time.Minute),
				cond(kueue.WorkloadPreempted, "True", "InClusterQueueTimeBased", preempted, -2*time.Minute)),
			evs:  []eventsv1.Event{newEvent},
			core: []corev1.Event{sameAsCore, coreOnly},
			want: &ExplainReport{Namespace: "ns", Name: "w", LocalQueue: "lq", Priority: 5, State: "waiting for quota",
				Wait:           &Decision{Condition: kueue.WorkloadQuotaReserved, Status: "False", Reason: "Pending", Message: "insufficient quota", Since: mt(-time.Minute)},
				LastPreemption: &Decision{Condition: kueue.WorkloadPreempted, Status: "True", Reason: "InClusterQueueTimeBased", Message: preempted, Since: mt(-2 * time.Minute)},
				History: []HistoryItem{
					{Time: mt(-2 * time.Minute), Source: "condition", What: "Preempted=True", Reason: "InClusterQueueTimeBased", Message: preempted},
					evictionHistory[0],
					{Time: mt(-time.Minute), Source: "condition", What: "QuotaReserved=False", Reason: "Pending", Message: "insufficient quota"},
					evictionHistory[1],
				}},
		},
		"readmitted: Kueue's 'Previously:' message, the reason from the eviction event": {
			wl: func() *kueue.Workload {
				w := wl(cond(kueue.WorkloadQuotaReserved, "True", "QuotaReserved", "Quota reserved in ClusterQueue gpu", 0),
					cond(kueue.WorkloadPreempted, "False", "QuotaReserved", "Previously: "+preempted, 0))
				w.Status.Admission = &kueue.Admission{ClusterQueue: "gpu"}
				w.Status.SchedulingStats = &kueue.SchedulingStats{Evictions: []kueue.WorkloadSchedulingStatsEviction{{Reason: "InClusterQueueTimeBased", Count: 2}}}
				w.Status.RequeueState = &kueue.RequeueState{Count: ptr.To[int32](2)}
				return w
			}(),
			evs: []eventsv1.Event{newEvent},
			want: &ExplainReport{Namespace: "ns", Name: "w", ClusterQueue: "gpu", LocalQueue: "lq", Priority: 5, State: "holding quota in ClusterQueue gpu",
				LastPreemption: &Decision{Condition: kueue.WorkloadPreempted, Status: "False", Reason: "InClusterQueueTimeBased", Message: preempted, Since: mt(0)},
				History: []HistoryItem{
					evictionHistory[0],
					{Time: mt(0), Source: "condition", What: "Preempted=False", Reason: "QuotaReserved", Message: "Previously: " + preempted},
					{Time: mt(0), Source: "condition", What: "QuotaReserved=True", Reason: "QuotaReserved", Message: "Quota reserved in ClusterQueue gpu"},
				},
				Evictions: []EvictionCount{{Reason: "InClusterQueueTimeBased", Count: 2}},
				Requeues:  &RequeueState{Count: 2}},
		},
		"under notice: the notice in force, its condition, and the state saying until when": {
			wl: func() *kueue.Workload {
				w := wl(cond(kueue.WorkloadQuotaReserved, "True", "QuotaReserved", "Quota reserved in ClusterQueue gpu", -time.Hour),
					cond(notice.Condition, "True", "InClusterQueueTimeBased", noticeMsg, -time.Minute))
				w.Status.Admission = &kueue.Admission{ClusterQueue: "gpu"}
				w.Annotations = annotations.Notice{Start: t0.Add(-time.Minute), Deadline: t0.Add(5 * time.Minute), Reason: "InClusterQueueTimeBased",
					Preemptor: "ns/next", PreemptorUID: "uid-next"}.Annotations()
				return w
			}(),
			want: &ExplainReport{Namespace: "ns", Name: "w", ClusterQueue: "gpu", LocalQueue: "lq", Priority: 5,
				State: "holding quota in ClusterQueue gpu, under preemption notice until 2026-11-24T12:05:00Z",
				Details: map[string]any{"PreemptionNotice": &NoticeReport{
					Notice: &NoticeInProgress{Given: mt(-time.Minute), Deadline: mt(5 * time.Minute), Reason: "InClusterQueueTimeBased", Preemptor: "ns/next"},
					State:  &Decision{Condition: notice.Condition, Status: "True", Reason: "InClusterQueueTimeBased", Message: noticeMsg, Since: mt(-time.Minute)},
				}},
				History: []HistoryItem{
					{Time: mt(-time.Hour), Source: "condition", What: "QuotaReserved=True", Reason: "QuotaReserved", Message: "Quota reserved in ClusterQueue gpu"},
					{Time: mt(-time.Minute), Source: "condition", What: "PreemptionNotice=True", Reason: "InClusterQueueTimeBased", Message: noticeMsg},
				}},
		},
		"notice annotations without the manager's record are no notice": {
			wl: func() *kueue.Workload {
				w := wl()
				w.Annotations = map[string]string{annotations.PreemptionNotice: "{"}
				return w
			}(),
			want: &ExplainReport{Namespace: "ns", Name: "w", LocalQueue: "lq", Priority: 5, State: "waiting for quota", History: []HistoryItem{}},
		},
		"finished: nothing to explain": {
			wl: wl(cond(kueue.WorkloadFinished, "True", "Succeeded", "Job finished successfully", 0)),
			want: &ExplainReport{Namespace: "ns", Name: "w", LocalQueue: "lq", Priority: 5, State: "finished",
				History: []HistoryItem{{Time: mt(0), Source: "condition", What: "Finished=True", Reason: "Succeeded", Message: "Job finished successfully"}}},
		},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			got := BuildExplainReport(tc.wl, tc.evs, tc.core)
			if diff := cmp.Diff(tc.want, got); diff != "" {
				t.Errorf("report (-want +got):\n%s", diff)
			}
		})
	}
}

func TestRenderExplain(t *testing.T) {
	rep := &ExplainReport{Namespace: "ns", Name: "w", ClusterQueue: "gpu", LocalQueue: "lq", Priority: 5, State: "waiting for quota",
		Wait:           &Decision{Condition: kueue.WorkloadQuotaReserved, Status: "False", Reason: "Pending", Message: "insufficient quota", Since: mt(-time.Minute)},
		LastPreemption: &Decision{Condition: kueue.WorkloadPreempted, Status: "True", Reason: "InClusterQueueTimeBased", Message: "time-sharing", Since: mt(-2 * time.Minute)},
		History: []HistoryItem{
			{Time: mt(-2 * time.Minute), Source: "condition", What: "Preempted=True", Reason: "InClusterQueueTimeBased", Message: "time-sharing"},
			{Time: mt(-time.Minute), Source: "event", What: "Warning", Reason: "Pending", Message: "insufficient quota", Count: 3},
		},
		Evictions: []EvictionCount{{Reason: "InClusterQueueTimeBased", Count: 1}},
		Requeues:  &RequeueState{Count: 1, RequeueAt: mt(time.Minute)},
	}
	head := `Workload ns/w
LocalQueue:     lq
ClusterQueue:   gpu
Priority:       5
State:          waiting for quota

Why it waits (QuotaReserved=False, reason Pending, since 2026-11-24T11:59:00Z (60s ago)):
  insufficient quota
Its last preemption (Preempted=True, reason InClusterQueueTimeBased, at 2026-11-24T11:58:00Z (2m ago)):
  time-sharing

Evictions: InClusterQueueTimeBased x1
Requeues: 1, next at 2026-11-24T12:01:00Z (in 60s)

History:
`
	cases := map[string]struct {
		wide bool
		want string
	}{
		"table": {want: head + `TIME                             FROM        WHAT             REASON                    MESSAGE
2026-11-24T11:58:00Z (2m ago)    condition   Preempted=True   InClusterQueueTimeBased   time-sharing
2026-11-24T11:59:00Z (60s ago)   event       Warning          Pending                   insufficient quota
`},
		"wide": {wide: true, want: head + `TIME                             FROM        WHAT             REASON                    MESSAGE              COUNT
2026-11-24T11:58:00Z (2m ago)    condition   Preempted=True   InClusterQueueTimeBased   time-sharing         <none>
2026-11-24T11:59:00Z (60s ago)   event       Warning          Pending                   insufficient quota   3
`},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			var b bytes.Buffer
			if err := RenderExplain(&b, rep, tc.wide, t0); err != nil {
				t.Fatal(err)
			}
			if diff := cmp.Diff(strings.Split(tc.want, "\n"), strings.Split(b.String(), "\n")); diff != "" {
				t.Errorf("output (-want +got):\n%s", diff)
			}
		})
	}
}

func TestNoticedFor(t *testing.T) {
	noticed := func(name, preemptorUID string, deadline time.Duration, ann map[string]string) kueue.Workload {
		w := kueue.Workload{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: name, Annotations: map[string]string{}}}
		n := annotations.Notice{Start: t0, Deadline: t0.Add(deadline), Reason: "InClusterQueue", Preemptor: "ns/p", PreemptorUID: types.UID(preemptorUID)}
		for k, v := range n.Annotations() {
			w.Annotations[k] = v
		}
		w.Status.Conditions = []metav1.Condition{notice.ConditionOf(&n, 0)}
		for k, v := range ann {
			w.Annotations[k] = v
		}
		return w
	}
	wls := []kueue.Workload{
		noticed("later", "p", 10*time.Minute, nil),
		noticed("sooner", "p", 5*time.Minute, map[string]string{annotations.CheckpointDone: "true"}),
		noticed("for-another", "q", time.Minute, nil),
		{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "unreadable", Annotations: map[string]string{annotations.PreemptionNotice: "{"}}},
		{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "none"}},
	}
	want := []NoticeInProgress{
		{Workload: "ns/sooner", Given: mt(0), Deadline: mt(5 * time.Minute), Reason: "InClusterQueue", Preemptor: "ns/p", CheckpointDone: true},
		{Workload: "ns/later", Given: mt(0), Deadline: mt(10 * time.Minute), Reason: "InClusterQueue", Preemptor: "ns/p"},
	}
	if diff := cmp.Diff(want, noticedFor("p", wls)); diff != "" {
		t.Errorf("noticed for p (-want +got):\n%s", diff)
	}
	if got := noticedFor("nobody", wls); len(got) != 0 {
		t.Errorf("noticed for nobody = %v, want none", got)
	}
}

func TestRenderExplainNotices(t *testing.T) {
	base := ExplainReport{Namespace: "ns", Name: "w", LocalQueue: "lq", History: []HistoryItem{}}
	cases := map[string]struct {
		report func(r *ExplainReport)
		want   string
	}{
		"a victim under notice, its checkpoint not done": {
			report: func(r *ExplainReport) {
				r.State = "holding quota in ClusterQueue gpu, under preemption notice until 2026-11-24T12:05:00Z"
				noticeReportOf(r).Notice = &NoticeInProgress{Given: mt(-time.Minute), Deadline: mt(5 * time.Minute), Reason: "InClusterQueueTimeBased", Preemptor: "ns/next"}
				noticeReportOf(r).State = &Decision{Condition: notice.Condition, Status: "True", Reason: "InClusterQueueTimeBased", Message: "To be evicted", Since: mt(-time.Minute)}
			},
			want: `
Under preemption notice (given 2026-11-24T11:59:00Z (60s ago), reason InClusterQueueTimeBased):
  evicted at 2026-11-24T12:05:00Z (in 5m) at the latest, to make room for ns/next; checkpoint not yet done (set the annotation kueue-timeshare.io/checkpoint-done=true on its job once its work is saved)

History:
`,
		},
		"a victim whose checkpoint is done": {
			report: func(r *ExplainReport) {
				noticeReportOf(r).Notice = &NoticeInProgress{Given: mt(-time.Minute), Deadline: mt(5 * time.Minute), Reason: "InClusterQueue", Preemptor: "ns/next", CheckpointDone: true}
			},
			want: "to make room for ns/next; checkpoint done: it is evicted at the preemptor's next attempt\n",
		},
		"how the last notice ended": {
			report: func(r *ExplainReport) {
				noticeReportOf(r).State = &Decision{Condition: notice.Condition, Status: "False", Reason: "EndedEarly", Message: "Evicted before its deadline", Since: mt(-2 * time.Minute)}
			},
			want: `
Its last preemption notice (PreemptionNotice=False, reason EndedEarly, at 2026-11-24T11:58:00Z (2m ago)):
  Evicted before its deadline

History:
`,
		},
		"a preemptor waiting on its victims' notices": {
			report: func(r *ExplainReport) {
				r.State = "waiting for quota"
				r.Wait = &Decision{Condition: kueue.WorkloadQuotaReserved, Status: "False", Reason: "Pending", Message: "waiting for the preemption notice of 2 workload(s)", Since: mt(0)}
				noticeReportOf(r).NoticedForIt = []NoticeInProgress{
					{Workload: "ns/a", Deadline: mt(5 * time.Minute), Reason: "InClusterQueueTimeBased", CheckpointDone: true},
					{Workload: "other/b", Deadline: mt(5 * time.Minute), Reason: "InClusterQueueTimeBased"},
				}
			},
			want: `  waiting for the preemption notice of 2 workload(s)
Workloads under notice to make room for it:
  WORKLOAD   DEADLINE                       REASON                    CHECKPOINT
  ns/a       2026-11-24T12:05:00Z (in 5m)   InClusterQueueTimeBased   done
  other/b    2026-11-24T12:05:00Z (in 5m)   InClusterQueueTimeBased   not done
`,
		},
		"its victims not readable": {
			report: func(r *ExplainReport) {
				r.Wait = &Decision{Condition: kueue.WorkloadQuotaReserved, Status: "False", Reason: "Pending", Message: "insufficient quota", Since: mt(0)}
				noticeReportOf(r).NoticedForItUnknown = "listing Workloads: forbidden"
			},
			want: "  insufficient quota\nWorkloads under notice for it: not known (listing Workloads: forbidden)\n",
		},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			r := base
			tc.report(&r)
			var b bytes.Buffer
			if err := RenderExplain(&b, &r, false, t0); err != nil {
				t.Fatal(err)
			}
			if !strings.Contains(b.String(), tc.want) {
				t.Errorf("output lacks\n%s\nin:\n%s", tc.want, b.String())
			}
			if strings.Contains(b.String(), "No wait, preemption or notice to explain.") {
				t.Errorf("output says there is nothing to explain:\n%s", b.String())
			}
		})
	}
}

func TestEstimateOf(t *testing.T) {
	item := func(ns, name string, ann map[string]string) visibilityapi.PendingWorkload {
		return visibilityapi.PendingWorkload{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name, Annotations: ann}, LocalQueueName: "lq"}
	}
	soon := map[string]string{annotations.EstimatedAdmission: "2026-11-24T12:30:00Z", annotations.AdmissionEstimate: "expected around 12:30, 2nd in turn order; turns are 1m"}
	never := map[string]string{annotations.EstimatedAdmission: annotations.EstimateUnknown, annotations.AdmissionEstimate: "held by ns/h, which declares no runtime and has no window"}
	cases := map[string]struct {
		items                 []visibilityapi.PendingWorkload
		wantETA, wantEstimate string
	}{
		"listed with an estimate": {
			items:   []visibilityapi.PendingWorkload{item("ns", "first", nil), item("ns", "w", soon)},
			wantETA: "2026-11-24T12:30:00Z", wantEstimate: "expected around 12:30, 2nd in turn order; turns are 1m",
		},
		"unknown, with the reason": {
			items:   []visibilityapi.PendingWorkload{item("ns", "w", never)},
			wantETA: "unknown", wantEstimate: "held by ns/h, which declares no runtime and has no window",
		},
		"listed without an estimate": {items: []visibilityapi.PendingWorkload{item("ns", "w", nil)}},
		"not listed: another workload's estimate is not its own": {
			items: []visibilityapi.PendingWorkload{item("ns", "other", soon), item("elsewhere", "w", soon)},
		},
		"nothing pending": {},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			eta, estimate := estimateOf(tc.items, "ns", "w")
			if diff := cmp.Diff([2]string{tc.wantETA, tc.wantEstimate}, [2]string{eta, estimate}); diff != "" {
				t.Errorf("eta, estimate (-want +got):\n%s", diff)
			}
		})
	}
}

func TestRenderExplainEstimate(t *testing.T) {
	wait := &Decision{Condition: kueue.WorkloadQuotaReserved, Status: "False", Reason: "Pending", Message: "insufficient quota", Since: mt(-time.Minute)}
	cases := map[string]struct {
		wait          *Decision
		eta, estimate string
		want          string
	}{
		"a time: the manager's sentence, then the time": {
			wait: wait, eta: "2026-11-24T12:30:00Z", estimate: "expected around 12:30, 2nd in turn order; turns are 1m",
			want: `  insufficient quota
Expected admission: expected around 12:30, 2nd in turn order; turns are 1m
  at 2026-11-24T12:30:00Z (in 30m)

History:
`,
		},
		"unknown: the reason": {
			wait: wait, eta: "unknown", estimate: "held by ns/h, which declares no runtime and has no window",
			want: "  insufficient quota\nExpected admission: unknown: held by ns/h, which declares no runtime and has no window\n\nHistory:\n",
		},
		"a time without a sentence": {
			eta:  "2026-11-24T12:30:00Z",
			want: "waiting for quota\n\nExpected admission: 2026-11-24T12:30:00Z (in 30m)\n\nHistory:\n",
		},
		"no estimate: no line": {
			wait: wait,
			want: "  insufficient quota\n\nHistory:\n",
		},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			r := &ExplainReport{Namespace: "ns", Name: "w", LocalQueue: "lq", State: "waiting for quota", Wait: tc.wait, ETA: tc.eta, Estimate: tc.estimate, History: []HistoryItem{}}
			var b bytes.Buffer
			if err := RenderExplain(&b, r, false, t0); err != nil {
				t.Fatal(err)
			}
			if !strings.Contains(b.String(), tc.want) {
				t.Errorf("output lacks\n%s\nin:\n%s", tc.want, b.String())
			}
			if strings.Contains(b.String(), "No wait, preemption or notice to explain.") {
				t.Errorf("output says there is nothing to explain:\n%s", b.String())
			}
		})
	}
}
