package queuesettings

import (
	"context"
	"testing"
	"time"

	"github.com/go-logr/logr"
	"github.com/google/go-cmp/cmp"
	"github.com/prometheus/client_golang/prometheus/testutil"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/runtime"
	clientgoscheme "k8s.io/client-go/kubernetes/scheme"
	testingclock "k8s.io/utils/clock/testing"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/fake"

	kueue "sigs.k8s.io/kueue/apis/kueue/v1beta2"
	kueuemetrics "sigs.k8s.io/kueue/pkg/metrics"

	"github.com/kueue-timeshare/kueue-timeshare/pkg/metrics"
)

func TestWaitGauges(t *testing.T) {
	t0 := time.Date(2026, 11, 24, 12, 0, 0, 0, time.UTC)
	now := t0.Add(3 * time.Hour)
	cond := func(typ string, status metav1.ConditionStatus, reason string, at time.Duration) metav1.Condition {
		return metav1.Condition{Type: typ, Status: status, Reason: reason, LastTransitionTime: metav1.NewTime(t0.Add(at))}
	}
	// wl is a workload of LocalQueue lq in namespace ns, created at t0+created.
	wl := func(ns, name, lq string, created time.Duration, conds ...metav1.Condition) *kueue.Workload {
		return &kueue.Workload{
			ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name, CreationTimestamp: metav1.NewTime(t0.Add(created))},
			Spec:       kueue.WorkloadSpec{QueueName: kueue.LocalQueueName(lq)},
			Status:     kueue.WorkloadStatus{Conditions: conds},
		}
	}
	cq := func(name string) *kueue.ClusterQueue {
		return &kueue.ClusterQueue{ObjectMeta: metav1.ObjectMeta{Name: name}}
	}
	lq := func(ns, name, cq string, lbls map[string]string) *kueue.LocalQueue {
		return &kueue.LocalQueue{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name, Labels: lbls},
			Spec: kueue.LocalQueueSpec{ClusterQueue: kueue.ClusterQueueReference(cq)}}
	}
	queues := []client.Object{cq("gpu"), cq("cpu"), lq("a", "team", "gpu", nil), lq("b", "team", "gpu", nil), lq("b", "batch", "cpu", nil)}
	inactive := wl("a", "inactive", "team", 0)
	inactive.Spec.Active = ptr.To(false)
	const (
		gpu   = "cluster_queue=gpu replica_role=standalone "
		cpu   = "cluster_queue=cpu replica_role=standalone "
		aTeam = "name=team namespace=a replica_role=standalone "
		bTeam = "name=team namespace=b replica_role=standalone "
		batch = "name=batch namespace=b replica_role=standalone "
	)
	type want struct{ cqLongest, cqLong, lqLongest, lqLong map[string]float64 }
	cases := map[string]struct {
		threshold time.Duration
		selector  string
		objects   []client.Object
		want      want
	}{
		"no pending workload: every queue at 0": {
			threshold: time.Hour, objects: queues,
			want: want{
				cqLongest: map[string]float64{gpu: 0, cpu: 0}, cqLong: map[string]float64{gpu: 0, cpu: 0},
				lqLongest: map[string]float64{aTeam: 0, bTeam: 0, batch: 0}, lqLong: map[string]float64{aTeam: 0, bTeam: 0, batch: 0},
			},
		},
		"waits from creation; the ClusterQueue's longest is over its LocalQueues": {
			threshold: time.Hour,
			objects: append(queues,
				wl("a", "old", "team", 0),                   // 3h
				wl("a", "recent", "team", 150*time.Minute),  // 30m
				wl("b", "middle", "team", time.Hour),        // 2h
				wl("b", "fresh", "batch", 170*time.Minute)), // 10m
			want: want{
				cqLongest: map[string]float64{gpu: 3 * 3600, cpu: 600}, cqLong: map[string]float64{gpu: 2, cpu: 0},
				lqLongest: map[string]float64{aTeam: 3 * 3600, bTeam: 2 * 3600, batch: 600}, lqLong: map[string]float64{aTeam: 1, bTeam: 1, batch: 0},
			},
		},
		"admitted, finished and inactive workloads do not wait": {
			threshold: time.Hour,
			objects: append(queues,
				wl("a", "running", "team", 0, cond(kueue.WorkloadQuotaReserved, metav1.ConditionTrue, "QuotaReserved", time.Minute)),
				wl("a", "done", "team", 0, cond(kueue.WorkloadFinished, metav1.ConditionTrue, "Succeeded", time.Minute)),
				inactive,
				wl("b", "waiting", "batch", 2*time.Hour)),
			want: want{
				cqLongest: map[string]float64{gpu: 0, cpu: 3600}, cqLong: map[string]float64{gpu: 0, cpu: 0},
				lqLongest: map[string]float64{aTeam: 0, bTeam: 0, batch: 3600}, lqLong: map[string]float64{aTeam: 0, bTeam: 0, batch: 0},
			},
		},
		"an evicted workload waits from its last eviction, a reactivated one from its reactivation": {
			threshold: 90 * time.Minute,
			objects: append(queues,
				// Preempted at 1h (Requeued turned True), admitted again, preempted again at 2h:
				// Requeued stays True from the first, Evicted is the second's.
				wl("a", "rotated", "team", 0,
					cond(kueue.WorkloadRequeued, metav1.ConditionTrue, "InClusterQueueTimeBased", time.Hour),
					cond(kueue.WorkloadEvicted, metav1.ConditionTrue, "InClusterQueueTimeBased", 2*time.Hour),
					cond(kueue.WorkloadQuotaReserved, metav1.ConditionFalse, "Pending", 2*time.Hour+time.Minute)),
				// Deactivated at 30m, reactivated at 2h30m.
				wl("b", "reactivated", "team", 0,
					cond(kueue.WorkloadEvicted, metav1.ConditionTrue, "Deactivated", 30*time.Minute),
					cond(kueue.WorkloadRequeued, metav1.ConditionTrue, "Reactivated", 150*time.Minute)),
				// In backoff since its eviction at 1h: Requeued is False until the backoff ends.
				wl("b", "backoff", "batch", 0,
					cond(kueue.WorkloadEvicted, metav1.ConditionTrue, "PodsReadyTimeout", time.Hour),
					cond(kueue.WorkloadRequeued, metav1.ConditionFalse, "PodsReadyTimeout", time.Hour))),
			want: want{
				cqLongest: map[string]float64{gpu: 3600, cpu: 2 * 3600}, cqLong: map[string]float64{gpu: 0, cpu: 1},
				lqLongest: map[string]float64{aTeam: 3600, bTeam: 1800, batch: 2 * 3600}, lqLong: map[string]float64{aTeam: 0, bTeam: 0, batch: 1},
			},
		},
		"threshold 0s: no waiting-longer series": {
			objects: append(queues, wl("a", "old", "team", 0)),
			want: want{
				cqLongest: map[string]float64{gpu: 3 * 3600, cpu: 0},
				lqLongest: map[string]float64{aTeam: 3 * 3600, bTeam: 0, batch: 0},
			},
		},
		"a missing LocalQueue queues nothing; a LocalQueue of a missing ClusterQueue has only its own series": {
			threshold: time.Hour,
			objects: []client.Object{cq("gpu"), lq("a", "orphan", "gone", nil),
				wl("a", "in-orphan", "orphan", 0), wl("a", "no-queue", "missing", 0)},
			want: want{
				cqLongest: map[string]float64{gpu: 0}, cqLong: map[string]float64{gpu: 0},
				lqLongest: map[string]float64{"name=orphan namespace=a replica_role=standalone ": 3 * 3600},
				lqLong:    map[string]float64{"name=orphan namespace=a replica_role=standalone ": 1},
			},
		},
		"the LocalQueue selector of metrics.localQueueMetrics applies": {
			threshold: time.Hour, selector: "metrics=on",
			objects: []client.Object{cq("gpu"), lq("a", "team", "gpu", map[string]string{"metrics": "on"}), lq("b", "team", "gpu", nil),
				wl("a", "x", "team", 2*time.Hour), wl("b", "y", "team", 0)},
			want: want{
				// x has waited exactly the threshold: not longer.
				cqLongest: map[string]float64{gpu: 3 * 3600}, cqLong: map[string]float64{gpu: 1},
				lqLongest: map[string]float64{aTeam: 3600}, lqLong: map[string]float64{aTeam: 0},
			},
		},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			var lqCfg *kueuemetrics.LocalQueueMetricsConfig
			if tc.selector != "" {
				sel, err := labels.Parse(tc.selector)
				if err != nil {
					t.Fatal(err)
				}
				lqCfg = &kueuemetrics.LocalQueueMetricsConfig{Enabled: true, QueueSelector: sel}
			}
			w := waitWaker(t, testingclock.NewFakeClock(now), &WaitGauges{LongWaitThreshold: tc.threshold, LocalQueueMetrics: lqCfg}, tc.objects...)
			w.Sweep(context.Background())
			t.Cleanup(func() { clearWaitGauges(w) })
			got := want{series(t, metrics.PendingLongestWait), series(t, metrics.PendingWaitingLong),
				series(t, metrics.LocalQueuePendingLongestWait), series(t, metrics.LocalQueuePendingWaitingLong)}
			if diff := cmp.Diff(tc.want, got, cmp.AllowUnexported(want{}), cmpEmptyMaps); diff != "" {
				t.Errorf("wait gauges (-want +got):\n%s", diff)
			}
		})
	}
}

// TestWaitGaugesFollowTheQueues: the series of a deleted queue go at the next sweep, and a wait
// grows with the injected clock.
func TestWaitGaugesFollowTheQueues(t *testing.T) {
	t0 := time.Date(2026, 11, 24, 12, 0, 0, 0, time.UTC)
	clk := testingclock.NewFakeClock(t0)
	gone := &kueue.LocalQueue{ObjectMeta: metav1.ObjectMeta{Namespace: "a", Name: "gone"}, Spec: kueue.LocalQueueSpec{ClusterQueue: "old"}}
	w := waitWaker(t, clk, &WaitGauges{LongWaitThreshold: time.Minute},
		&kueue.ClusterQueue{ObjectMeta: metav1.ObjectMeta{Name: "old"}}, gone,
		&kueue.Workload{ObjectMeta: metav1.ObjectMeta{Namespace: "a", Name: "w", CreationTimestamp: metav1.NewTime(t0)}, Spec: kueue.WorkloadSpec{QueueName: "gone"}})
	t.Cleanup(func() { clearWaitGauges(w) })
	ctx := context.Background()
	clk.Step(2 * time.Minute)
	w.Sweep(ctx)
	if got := testutil.ToFloat64(metrics.PendingLongestWait.WithLabelValues("old", "standalone")); got != 120 {
		t.Errorf("longest wait = %v, want 120", got)
	}
	if got := testutil.ToFloat64(metrics.LocalQueuePendingWaitingLong.WithLabelValues("gone", "a", "standalone")); got != 1 {
		t.Errorf("LocalQueue waiting longer = %v, want 1", got)
	}
	if err := w.Client.Delete(ctx, gone); err != nil {
		t.Fatal(err)
	}
	if err := w.Client.Delete(ctx, &kueue.ClusterQueue{ObjectMeta: metav1.ObjectMeta{Name: "old"}}); err != nil {
		t.Fatal(err)
	}
	clk.Step(time.Second)
	w.Sweep(ctx)
	for what, n := range map[string]int{
		"longest":    testutil.CollectAndCount(metrics.PendingLongestWait),
		"longer":     testutil.CollectAndCount(metrics.PendingWaitingLong),
		"LQ longest": testutil.CollectAndCount(metrics.LocalQueuePendingLongestWait),
		"LQ longer":  testutil.CollectAndCount(metrics.LocalQueuePendingWaitingLong),
	} {
		if n != 0 {
			t.Errorf("%s: %d series left after the queues were deleted", what, n)
		}
	}
}

var cmpEmptyMaps = cmp.FilterValues(func(a, b map[string]float64) bool { return len(a) == 0 && len(b) == 0 }, cmp.Ignore())

func waitWaker(t *testing.T, clk *testingclock.FakeClock, waits *WaitGauges, objs ...client.Object) *Waker {
	t.Helper()
	scheme := runtime.NewScheme()
	if err := clientgoscheme.AddToScheme(scheme); err != nil {
		t.Fatal(err)
	}
	if err := kueue.AddToScheme(scheme); err != nil {
		t.Fatal(err)
	}
	cl := fake.NewClientBuilder().WithScheme(scheme).
		WithIndex(&kueue.Workload{}, HoldingQuotaKey, indexHoldingQuota).
		WithIndex(&kueue.Workload{}, PendingKey, indexPending).
		WithObjects(objs...).Build()
	return &Waker{Clock: clk, Client: cl, Store: NewStore(), Waits: waits, Log: logr.Discard()}
}

// clearWaitGauges deletes every wait series, so that each case starts from none.
func clearWaitGauges(w *Waker) {
	metrics.PendingLongestWait.Reset()
	metrics.PendingWaitingLong.Reset()
	metrics.LocalQueuePendingLongestWait.Reset()
	metrics.LocalQueuePendingWaitingLong.Reset()
	w.waits = waitSeries{}
}
