package manager

import (
	"sort"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/prometheus/client_golang/prometheus"
	dto "github.com/prometheus/client_model/go"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	toolscache "k8s.io/client-go/tools/cache"
	"k8s.io/utils/ptr"

	kueue "sigs.k8s.io/kueue/apis/kueue/v1beta2"
	"sigs.k8s.io/kueue/pkg/workload"

	"github.com/kueue-timeshare/kueue-timeshare/pkg/estimate"
	tsmetrics "github.com/kueue-timeshare/kueue-timeshare/pkg/metrics"
)

// errorSample is one series of the error histogram (Label: direction) or of the counter of
// admissions without an estimate (Label: estimate; Count: its value).
type errorSample struct {
	CQ, Label string
	Count     uint64
	Sum       float64
}

func errorSamples(t *testing.T) []errorSample {
	t.Helper()
	var out []errorSample
	for _, c := range []prometheus.Collector{tsmetrics.EstimateError, tsmetrics.AdmissionsWithoutEstimate} {
		ch := make(chan prometheus.Metric, 16)
		c.Collect(ch)
		close(ch)
		for m := range ch {
			var d dto.Metric
			if err := m.Write(&d); err != nil {
				t.Fatal(err)
			}
			s := errorSample{CQ: d.GetLabel()[0].GetValue(), Label: d.GetLabel()[1].GetValue()}
			if h := d.GetHistogram(); h != nil {
				s.Count, s.Sum = h.GetSampleCount(), h.GetSampleSum()
			} else {
				s.Count = uint64(d.GetCounter().GetValue())
			}
			out = append(out, s)
		}
	}
	sort.Slice(out, func(i, j int) bool { return out[i].CQ+out[i].Label < out[j].CQ+out[j].Label })
	return out
}

func TestFirstEstimates(t *testing.T) {
	start := time.Date(2026, 1, 1, 12, 0, 0, 0, time.UTC)
	at := func(d time.Duration) time.Time { return start.Add(d) }
	// pendingWl is w waiting since its creation at start, or since an eviction at evicted.
	pendingWl := func(evicted time.Duration) *kueue.Workload {
		wl := &kueue.Workload{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "w", UID: "uid-w", CreationTimestamp: metav1.NewTime(start)}}
		if evicted > 0 {
			wl.Status.Conditions = []metav1.Condition{{Type: kueue.WorkloadEvicted, Status: metav1.ConditionTrue, LastTransitionTime: metav1.NewTime(at(evicted))}}
		}
		return wl
	}
	admitted := func(old *kueue.Workload, when time.Duration) *kueue.Workload {
		wl := old.DeepCopy()
		wl.Status.Admission = &kueue.Admission{ClusterQueue: "cq"}
		wl.Status.Conditions = append(wl.Status.Conditions, metav1.Condition{Type: kueue.WorkloadQuotaReserved, Status: metav1.ConditionTrue, LastTransitionTime: metav1.NewTime(at(when))})
		return wl
	}
	est := func(d time.Duration) estimate.Estimate { return estimate.Estimate{Workload: "ns/w", When: at(d)} }
	unknown := estimate.Estimate{Workload: "ns/w", Unknown: true}
	// event is, in order: an estimate offered for the workload as it was (wl), or an update
	// from wl to next, or wl's deletion.
	type event struct {
		wl     *kueue.Workload
		offer  *estimate.Estimate
		next   *kueue.Workload
		delete bool
	}
	cases := map[string]struct {
		stopped  bool
		events   []event
		want     []errorSample
		wantKept int
	}{
		"admitted after its estimate: late by the difference": {
			events: []event{
				{wl: pendingWl(0), offer: ptr.To(est(time.Minute))},
				{wl: pendingWl(0), next: admitted(pendingWl(0), time.Minute+3*time.Second)},
			},
			want: []errorSample{{CQ: "cq", Label: "late", Count: 1, Sum: 3}},
		},
		"admitted before its estimate: early": {
			events: []event{
				{wl: pendingWl(0), offer: ptr.To(est(time.Hour))},
				{wl: pendingWl(0), next: admitted(pendingWl(0), 30*time.Minute)},
			},
			want: []errorSample{{CQ: "cq", Label: "early", Count: 1, Sum: 1800}},
		},
		"the first estimate of the wait counts, not a later one": {
			events: []event{
				{wl: pendingWl(0), offer: ptr.To(est(time.Minute))},
				{wl: pendingWl(0), offer: ptr.To(est(2 * time.Minute))},
				{wl: pendingWl(0), next: admitted(pendingWl(0), 2*time.Minute)},
			},
			want: []errorSample{{CQ: "cq", Label: "late", Count: 1, Sum: 60}},
		},
		"an unknown first estimate is counted, not measured": {
			events: []event{
				{wl: pendingWl(0), offer: &unknown},
				{wl: pendingWl(0), offer: ptr.To(est(time.Minute))},
				{wl: pendingWl(0), next: admitted(pendingWl(0), time.Minute)},
			},
			want: []errorSample{{CQ: "cq", Label: "unknown", Count: 1}},
		},
		"an admission without an estimate is counted": {
			events: []event{{wl: pendingWl(0), next: admitted(pendingWl(0), time.Second)}},
			want:   []errorSample{{CQ: "cq", Label: "none", Count: 1}},
		},
		"an estimate of an earlier wait does not count for this one": {
			events: []event{
				{wl: pendingWl(0), offer: ptr.To(est(time.Minute))},
				{wl: pendingWl(10 * time.Minute), next: admitted(pendingWl(10*time.Minute), 11*time.Minute)},
			},
			want: []errorSample{{CQ: "cq", Label: "none", Count: 1}},
		},
		"a new wait's estimate replaces one of an earlier wait": {
			events: []event{
				{wl: pendingWl(0), offer: ptr.To(est(time.Minute))},
				{wl: pendingWl(10 * time.Minute), offer: ptr.To(est(12 * time.Minute))},
				{wl: pendingWl(10 * time.Minute), next: admitted(pendingWl(10*time.Minute), 11*time.Minute)},
			},
			want: []errorSample{{CQ: "cq", Label: "early", Count: 1, Sum: 60}},
		},
		"an estimate is forgotten at the admission": {
			events: []event{
				{wl: pendingWl(0), offer: ptr.To(est(time.Minute))},
				{wl: pendingWl(0), next: admitted(pendingWl(0), time.Minute)},
				{wl: admitted(pendingWl(0), time.Minute), next: admitted(pendingWl(0), time.Minute)},
			},
			want: []errorSample{{CQ: "cq", Label: "late", Count: 1}},
		},
		"an estimate is forgotten when the workload is deleted": {
			events:   []event{{wl: pendingWl(0), offer: ptr.To(est(time.Minute))}, {wl: pendingWl(0), delete: true}},
			wantKept: 0,
		},
		"an estimate is forgotten when the workload is deactivated": {
			events: []event{
				{wl: pendingWl(0), offer: ptr.To(est(time.Minute))},
				{wl: pendingWl(0), next: func() *kueue.Workload { w := pendingWl(0); w.Spec.Active = ptr.To(false); return w }()},
			},
			wantKept: 0,
		},
		"a pending workload's estimate is kept": {
			events:   []event{{wl: pendingWl(0), offer: ptr.To(est(time.Minute))}, {wl: pendingWl(0), next: pendingWl(0)}},
			wantKept: 1,
		},
		"a replica that does not schedule keeps and reports nothing": {
			stopped: true,
			events: []event{
				{wl: pendingWl(0), offer: ptr.To(est(time.Minute))},
				{wl: pendingWl(0), next: admitted(pendingWl(0), time.Minute)},
			},
		},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			tsmetrics.EstimateError.Reset()
			tsmetrics.AdmissionsWithoutEstimate.Reset()
			f := &firstEstimates{role: func() string { return "standalone" }}
			if !tc.stopped {
				f.start()
			}
			h := f.handler().(toolscache.ResourceEventHandlerFuncs)
			for _, e := range tc.events {
				switch {
				case e.offer != nil:
					f.offer([]*workload.Info{{Obj: e.wl}}, map[string]estimate.Estimate{"ns/w": *e.offer, "ns/other": est(0)})
				case e.delete:
					h.OnDelete(toolscache.DeletedFinalStateUnknown{Obj: e.wl})
				default:
					h.OnUpdate(e.wl, e.next)
				}
			}
			if diff := cmp.Diff(tc.want, errorSamples(t)); diff != "" {
				t.Errorf("samples (-want +got):\n%s", diff)
			}
			if got := f.size(); got != tc.wantKept {
				t.Errorf("kept %d first estimates, want %d", got, tc.wantKept)
			}
		})
	}
}
