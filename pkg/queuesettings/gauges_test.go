package queuesettings

import (
	"context"
	"testing"
	"time"

	"github.com/go-logr/logr"
	"github.com/google/go-cmp/cmp"
	"github.com/prometheus/client_golang/prometheus"
	dto "github.com/prometheus/client_model/go"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	clientgoscheme "k8s.io/client-go/kubernetes/scheme"
	"sigs.k8s.io/controller-runtime/pkg/client/fake"

	kueue "sigs.k8s.io/kueue/apis/kueue/v1beta2"

	"github.com/kueue-timeshare/kueue-timeshare/apis/annotations"
	"github.com/kueue-timeshare/kueue-timeshare/pkg/metrics"
	"github.com/kueue-timeshare/kueue-timeshare/pkg/plugins/minruntime"
	"github.com/kueue-timeshare/kueue-timeshare/pkg/plugins/notice"
	"github.com/kueue-timeshare/kueue-timeshare/pkg/policy"
)

// series reads a gauge vector as "label values joined by /" -> value.
func series(t *testing.T, vec *prometheus.GaugeVec) map[string]float64 {
	t.Helper()
	ch := make(chan prometheus.Metric, 16)
	vec.Collect(ch)
	close(ch)
	out := map[string]float64{}
	for m := range ch {
		var d dto.Metric
		if err := m.Write(&d); err != nil {
			t.Fatal(err)
		}
		key := ""
		for _, l := range d.GetLabel() {
			key += l.GetName() + "=" + l.GetValue() + " "
		}
		out[key] = d.GetGauge().GetValue()
	}
	return out
}

func TestWakerGauges(t *testing.T) {
	t0 := time.Date(2026, 11, 24, 12, 0, 0, 0, time.UTC)
	cond := func(typ string, at time.Time) metav1.Condition {
		return metav1.Condition{Type: typ, Status: metav1.ConditionTrue, Reason: "Test", LastTransitionTime: metav1.NewTime(at)}
	}
	holder := func(name string, reserved time.Time) *kueue.Workload {
		return &kueue.Workload{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: name},
			Status: kueue.WorkloadStatus{Conditions: []metav1.Condition{cond(kueue.WorkloadQuotaReserved, reserved), cond(kueue.WorkloadAdmitted, reserved)}}}
	}
	first, second := holder("first", t0), holder("second", t0.Add(3*time.Minute))
	noticed := func(name string, reason string, evicted bool) *kueue.Workload {
		wl := holder(name, t0)
		n := annotations.Notice{Start: t0.Add(6 * time.Minute), Deadline: t0.Add(9 * time.Minute), Reason: reason, Preemptor: "ns/p", PreemptorUID: "p-uid"}
		wl.Annotations = n.Annotations()
		wl.Status.Conditions = append(wl.Status.Conditions, notice.ConditionOf(&n, 0))
		if evicted {
			wl.Status.Conditions = append(wl.Status.Conditions, cond(kueue.WorkloadEvicted, t0.Add(9*time.Minute)))
		}
		return wl
	}
	cases := map[string]struct {
		at                            time.Duration
		holding                       []*kueue.Workload
		wantHolders, wantNext, wantPr map[string]float64
		wantNotices                   map[string]float64
	}{
		"two holders inside their windows and min-runtime": {
			at: 2 * time.Minute, holding: []*kueue.Workload{first, second},
			wantHolders: map[string]float64{"cluster_queue=cq replica_role=standalone ": 2},
			wantNext:    map[string]float64{"cluster_queue=cq replica_role=standalone ": 180},
			wantPr:      map[string]float64{"cluster_queue=cq replica_role=standalone setting=preemptMinRuntime ": 2},
		},
		"the first window passed, the cohort's min-runtime still protects the second": {
			at: 8 * time.Minute, holding: []*kueue.Workload{first, second},
			wantHolders: map[string]float64{"cluster_queue=cq replica_role=standalone ": 2},
			wantNext:    map[string]float64{"cluster_queue=cq replica_role=standalone ": 0},
			wantPr:      map[string]float64{"cluster_queue=cq replica_role=standalone setting=preemptMinRuntime ": 1},
		},
		"notices in force by reason; an evicted workload's notice is over": {
			at: 8 * time.Minute,
			holding: []*kueue.Workload{noticed("a", "InClusterQueueTimeBased", false), noticed("b", "InClusterQueueTimeBased", false),
				noticed("c", "InCohortReclamation", false), noticed("d", "InCohortReclamation", true)},
			wantHolders: map[string]float64{"cluster_queue=cq replica_role=standalone ": 3},
			wantNext:    map[string]float64{"cluster_queue=cq replica_role=standalone ": 0},
			wantPr:      map[string]float64{},
			wantNotices: map[string]float64{
				"cluster_queue=cq reason=InClusterQueueTimeBased replica_role=standalone ": 2,
				"cluster_queue=cq reason=InCohortReclamation replica_role=standalone ":     1,
			},
		},
		"nobody holds quota: no next turn, no protection, no notice": {
			at:          time.Minute,
			wantHolders: map[string]float64{"cluster_queue=cq replica_role=standalone ": 0},
			wantNext:    map[string]float64{},
			wantPr:      map[string]float64{},
		},
	}
	scheme := runtime.NewScheme()
	if err := clientgoscheme.AddToScheme(scheme); err != nil {
		t.Fatal(err)
	}
	if err := kueue.AddToScheme(scheme); err != nil {
		t.Fatal(err)
	}
	cl := fake.NewClientBuilder().WithScheme(scheme).WithObjects(
		&kueue.ClusterQueue{ObjectMeta: metav1.ObjectMeta{Name: "cq"}, Spec: kueue.ClusterQueueSpec{CohortName: "team"}},
		&kueue.Cohort{ObjectMeta: metav1.ObjectMeta{Name: "team"}, Spec: kueue.CohortSpec{ParentName: "org"}},
		&kueue.Cohort{ObjectMeta: metav1.ObjectMeta{Name: "org"}},
	).Build()
	store := NewStore()
	setWindow(store, "cq", 5*time.Minute)
	store.setCohort("org", inherited{units: minRuntimesIn(minruntime.Settings{Preempt: policy.Set(7 * time.Minute)})})
	w := &Waker{Client: cl, Store: store, Log: logr.Discard()}
	// A series left by an earlier sweep is deleted when it no longer applies.
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			w.setGauges(context.Background(), map[kueue.ClusterQueueReference][]*kueue.Workload{"cq": tc.holding}, t0.Add(tc.at))
			for what, c := range map[string]struct {
				vec  *prometheus.GaugeVec
				want map[string]float64
			}{"turn holders": {metrics.TurnHolders, tc.wantHolders}, "next turn": {metrics.NextTurnSeconds, tc.wantNext}, "protected": {metrics.ProtectedWorkloads, tc.wantPr},
				"notices in force": {metrics.UnitGauge(notice.Feature), tc.wantNotices}} {
				if c.want == nil {
					c.want = map[string]float64{}
				}
				if diff := cmp.Diff(c.want, series(t, c.vec)); diff != "" {
					t.Errorf("%s (-want +got):\n%s", what, diff)
				}
			}
		})
	}
}
