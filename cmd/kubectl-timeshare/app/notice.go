package app

import (
	"context"
	"fmt"
	"io"
	"slices"
	"time"

	apimeta "k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"

	kueue "sigs.k8s.io/kueue/apis/kueue/v1beta2"

	"github.com/kueue-timeshare/kueue-timeshare/apis/annotations"
	tsapi "github.com/kueue-timeshare/kueue-timeshare/apis/kueue/v1beta2"
	"github.com/kueue-timeshare/kueue-timeshare/pkg/features"
	"github.com/kueue-timeshare/kueue-timeshare/pkg/plugins/notice"
	"github.com/kueue-timeshare/kueue-timeshare/pkg/policy"
	"github.com/kueue-timeshare/kueue-timeshare/pkg/queuesettings"
)

// noticeView is what the plugin shows of preemption notices.
func noticeView() view {
	return view{
		holdingColumn: &holdingColumn{header: "PREEMPTION NOTICE",
			cell: func(a *AdmittedWorkload, now time.Time) string {
				n, _ := a.Details[string(features.PreemptionNotice)].(*NoticeInProgress)
				return noticeColumn(n, now)
			}},
		holdingDetail: func(wl *kueue.Workload) (string, any, bool) {
			n := noticeOf(wl)
			return string(features.PreemptionNotice), n, n != nil
		},
		explainDetail: func(wl *kueue.Workload) (string, any, bool) {
			r := NoticeReport{Notice: noticeOf(wl)}
			if c := apimeta.FindStatusCondition(wl.Status.Conditions, notice.Condition); c != nil {
				r.State = decision(c)
			}
			return string(features.PreemptionNotice), &r, r.Notice != nil || r.State != nil
		},
		holdingNote: func(r *ExplainReport) string {
			if nr, _ := r.Details[string(features.PreemptionNotice)].(*NoticeReport); nr != nil && nr.Notice != nil && nr.Notice.Deadline != nil {
				return "under preemption notice until " + nr.Notice.Deadline.UTC().Format(time.RFC3339)
			}
			return ""
		},
		waitingDetail: func(ctx context.Context, c client.Reader, wl *kueue.Workload, r *ExplainReport) {
			// Its victims under notice may be in any namespace.
			var all kueue.WorkloadList
			if err := c.List(ctx, &all); err != nil {
				noticeReportOf(r).NoticedForItUnknown = fmt.Sprintf("listing Workloads: %v", err)
			} else if ns := noticedFor(wl.UID, all.Items); len(ns) > 0 {
				noticeReportOf(r).NoticedForIt = ns
			}
		},
		explainSection: renderNotices,
		settingRows:    noticeSettings,
	}
}

// NoticeReport is what `explain workload` says of a workload's notices, under
// details.PreemptionNotice in JSON.
type NoticeReport struct {
	// Notice is the preemption notice in force on it; State its PreemptionNotice condition:
	// True while a notice runs, False saying how the last one ended.
	Notice *NoticeInProgress `json:"notice,omitempty"`
	State  *Decision         `json:"noticeState,omitempty"`
	// NoticedForIt lists the workloads under notice to make room for it, while it waits;
	// NoticedForItUnknown says why they could not be read.
	NoticedForIt        []NoticeInProgress `json:"noticedForIt,omitempty"`
	NoticedForItUnknown string             `json:"noticedForItUnknown,omitempty"`
}

// noticeReportOf is r's NoticeReport, added to r when it has none (for waitingDetails).
func noticeReportOf(r *ExplainReport) *NoticeReport {
	if nr, ok := r.Details[string(features.PreemptionNotice)].(*NoticeReport); ok {
		return nr
	}
	nr := &NoticeReport{}
	if r.Details == nil {
		r.Details = map[string]any{}
	}
	r.Details[string(features.PreemptionNotice)] = nr
	return nr
}

// NoticeInProgress is a preemption notice in force on a workload, read from its annotations: it
// keeps running until Deadline at the latest, then is evicted to make room for Preemptor.
type NoticeInProgress struct {
	// Workload is the workload under notice ("namespace/name"), set where it is not implied.
	Workload  string       `json:"workload,omitempty"`
	Given     *metav1.Time `json:"given,omitempty"`
	Deadline  *metav1.Time `json:"deadline,omitempty"`
	Reason    string       `json:"reason,omitempty"`
	Preemptor string       `json:"preemptor,omitempty"`
	// CheckpointDone is set once the workload said its work is saved: it is evicted at the
	// preemptor's next attempt instead of at the deadline.
	CheckpointDone bool `json:"checkpointDone,omitempty"`
	// Problem is set when the annotations are not a notice the manager gave; it ignores and removes them.
	Problem string `json:"problem,omitempty"`
}

// noticeOf is the notice in force on wl, or nil.
func noticeOf(wl *kueue.Workload) *NoticeInProgress {
	n, err := notice.Read(wl)
	if err != nil {
		return &NoticeInProgress{Problem: err.Error()}
	}
	if n == nil {
		return nil
	}
	return &NoticeInProgress{Given: ptrTime(metav1.NewTime(n.Start)), Deadline: ptrTime(metav1.NewTime(n.Deadline)),
		Reason: n.Reason, Preemptor: n.Preemptor, CheckpointDone: annotations.CheckpointIsDone(wl.Annotations)}
}

// noticedFor lists the workloads under notice for the workload preemptor, earliest deadline first.
func noticedFor(preemptor types.UID, wls []kueue.Workload) []NoticeInProgress {
	var out []NoticeInProgress
	for i := range wls {
		wl := &wls[i]
		n, err := notice.Read(wl)
		if err != nil || n == nil || n.PreemptorUID != preemptor {
			continue
		}
		v := *noticeOf(wl)
		v.Workload = wl.Namespace + "/" + wl.Name
		out = append(out, v)
	}
	slices.SortFunc(out, func(a, b NoticeInProgress) int { return cmpTimes(a.Deadline, b.Deadline, a.Workload, b.Workload) })
	return out
}

// noticeSettings are the rows of the notice settings in force for cq's workloads, resolved by the
// policy from cq up its cohorts (parents) with the manager's default period.
func noticeSettings(store *queuesettings.Store, cq kueue.ClusterQueueReference, parents []kueue.CohortReference, m ManagerSettings) []SettingReport {
	path, def := notice.Path(store.SettingsPath(notice.Feature, cq, parents))
	// Each extension is read as the policy reads it for a preemption of that kind.
	extensions := []struct{ name, reason string }{
		{"noticeOnPriorityPreemption", kueue.InClusterQueueReason},
		{"noticeOnReclaim", kueue.InCohortReclamationReason},
	}
	if m.gateOff(string(features.PreemptionNotice)) {
		ignored := "ignored: " + gateOffNote(features.PreemptionNotice)
		out := []SettingReport{{Name: "noticePeriod", Source: ignored}}
		for _, e := range extensions {
			out = append(out, SettingReport{Name: e.name, Source: ignored})
		}
		return out
	}
	period, src := notice.Resolve(path, tsapi.TimeBasedReason, def)
	ps := SettingReport{Name: "noticePeriod", Value: period.String(), Source: src.Where()}
	if src.Default() {
		ps.Source = "manager default"
		if !m.Known {
			ps.Value, ps.Source = "", unknownDefault
		}
	}
	if period == 0 && ps.Value != "" {
		ps.Source += ": no notice"
	}
	out := []SettingReport{ps}
	for _, e := range extensions {
		on, src := notice.Extended(path, e.reason)
		s := SettingReport{Name: e.name, Value: fmt.Sprint(on), Source: src.Where()}
		if src == (policy.Source{}) {
			s.Source = fmt.Sprintf("not set on %s %s or a Cohort above it", path[0].Kind, path[0].Name)
		}
		out = append(out, s)
	}
	return out
}

// noticeColumn is a notice in force in one table cell.
func noticeColumn(n *NoticeInProgress, now time.Time) string {
	switch {
	case n == nil:
		return "<none>"
	case n.Problem != "":
		return "unreadable, ignored by the manager: " + n.Problem
	}
	s := fmt.Sprintf("until %s for %s (%s)", when(n.Deadline, now), n.Preemptor, n.Reason)
	if n.CheckpointDone {
		s += ", checkpoint done"
	}
	return s
}

// renderNotices writes the notice in force on the workload, or how its last one ended, and the
// workloads under notice for it; explained reports whether it had a notice to explain.
func renderNotices(w io.Writer, r *ExplainReport, now time.Time) (explained bool, err error) {
	nr, _ := r.Details[string(features.PreemptionNotice)].(*NoticeReport)
	if nr == nil {
		return false, nil
	}
	explained = nr.State != nil || nr.Notice != nil
	if n := nr.Notice; n != nil {
		if n.Problem != "" {
			fmt.Fprintf(w, "Its preemption notice annotations are unreadable, and ignored by the manager: %s\n", n.Problem)
		} else {
			checkpoint := "not yet done (set the annotation " + annotations.CheckpointDone + "=true on its job once its work is saved)"
			if n.CheckpointDone {
				checkpoint = "done: it is evicted at the preemptor's next attempt"
			}
			fmt.Fprintf(w, "Under preemption notice (given %s, reason %s):\n  evicted at %s at the latest, to make room for %s; checkpoint %s\n",
				when(n.Given, now), n.Reason, when(n.Deadline, now), n.Preemptor, checkpoint)
		}
	} else if d := nr.State; d != nil && d.Status == string(metav1.ConditionFalse) {
		fmt.Fprintf(w, "Its last preemption notice (%s=%s, reason %s, at %s):\n  %s\n", d.Condition, d.Status, d.Reason, when(d.Since, now), d.Message)
	}
	if nr.NoticedForItUnknown != "" {
		fmt.Fprintf(w, "Workloads under notice for it: not known (%s)\n", nr.NoticedForItUnknown)
	}
	if len(nr.NoticedForIt) == 0 {
		return explained, nil
	}
	fmt.Fprintln(w, "Workloads under notice to make room for it:")
	t := newTable(w)
	fmt.Fprintln(t, "  WORKLOAD\tDEADLINE\tREASON\tCHECKPOINT")
	for _, n := range nr.NoticedForIt {
		checkpoint := "not done"
		if n.CheckpointDone {
			checkpoint = "done"
		}
		fmt.Fprintf(t, "  %s\t%s\t%s\t%s\n", n.Workload, when(n.Deadline, now), n.Reason, checkpoint)
	}
	return explained, t.Flush()
}
