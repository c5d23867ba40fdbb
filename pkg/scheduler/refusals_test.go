package scheduler

import (
	"context"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/prometheus/client_golang/prometheus/testutil"
	apimeta "k8s.io/apimachinery/pkg/api/meta"
	testingclock "k8s.io/utils/clock/testing"

	kueue "sigs.k8s.io/kueue/apis/kueue/v1beta2"
	schdcache "sigs.k8s.io/kueue/pkg/cache/scheduler"
	"sigs.k8s.io/kueue/pkg/metrics"
	"sigs.k8s.io/kueue/pkg/scheduler/preemption"
	"sigs.k8s.io/kueue/pkg/util/roletracker"
	"sigs.k8s.io/kueue/pkg/workload"
)

// refusal is a RetryLater as the preemptor returns it.
type refusal struct {
	at   time.Time
	held bool
}

func (r refusal) Error() string        { return "the API server refused the preemption" }
func (r refusal) RetryTime() time.Time { return r.at }
func (r refusal) Message() string      { return "The API server refused the preemption; retrying later" }
func (r refusal) HeldBack() bool       { return r.held }

// refusingPreemptor finds upstream's targets and has every eviction refused, retry in 2 s.
type refusingPreemptor struct {
	Preemptor
	clock *testingclock.FakeClock
	calls int
}

func (p *refusingPreemptor) IssuePreemptions(_ context.Context, _ *schdcache.Cache, _ *workload.Info, targets []*preemption.Target, _ *schdcache.ClusterQueueSnapshot) (int, int, error) {
	p.calls++
	return 0, len(targets), refusal{at: p.clock.Now().Add(2 * time.Second)}
}

// TestRefusedPreemptionParks: a preemptor whose preemption the API server refused is parked, not
// retried at the next cycles (each would send the refused request again); it says why it waits,
// and its queue is woken at its retry time.
func TestRefusedPreemptionParks(t *testing.T) {
	w := newWorld(t, worldObjects{
		clusterQueues: []*kueue.ClusterQueue{cpuQueue("cq", "2").Preemption(lowerPriority).Obj()},
		workloads: []*kueue.Workload{
			running(cpuWorkload("low", "cq", "2"), "cq"),
			cpuWorkload("high", "cq", "2").Priority(10).Obj(),
		},
	})
	refusing := &refusingPreemptor{clock: w.clock}
	var mu sync.Mutex
	var wakes []kueue.ClusterQueueReference
	s, written := w.scheduler(WithPreemptor(func(c PreemptorConfig) Preemptor {
		refusing.Preemptor = NewUpstreamPreemptor(c)
		return refusing
	}), WithQueueWaker(func(_ context.Context, cq kueue.ClusterQueueReference) {
		mu.Lock()
		defer mu.Unlock()
		wakes = append(wakes, cq)
	}, time.Second))
	woken := func() []kueue.ClusterQueueReference {
		mu.Lock()
		defer mu.Unlock()
		return slices.Clone(wakes)
	}
	for range 6 {
		s.Cycle(w.ctx)
		written()
	}
	if refusing.calls != 1 {
		t.Fatalf("the refused preemption was issued %d times before its retry time, want once", refusing.calls)
	}
	if got := testutil.ToFloat64(metrics.PendingWorkloads.WithLabelValues("cq", metrics.PendingStatusInadmissible, roletracker.GetRole(nil))); got != 1 {
		t.Errorf("pending_workloads{status=inadmissible} = %v, want 1 (parked)", got)
	}
	c := apimeta.FindStatusCondition(w.workload("high").Status.Conditions, kueue.WorkloadQuotaReserved)
	if c == nil || !strings.Contains(c.Message, "The API server refused the preemption; retrying later") {
		t.Errorf("the preemptor's QuotaReserved condition does not say why it waits: %+v", c)
	}
	if apimeta.IsStatusConditionTrue(w.workload("low").Status.Conditions, kueue.WorkloadEvicted) {
		t.Error("the victim was evicted although the eviction was refused")
	}

	// Its queue is woken a millisecond after the retry time, and not before.
	w.clock.Step(2 * time.Second)
	waitFor(t, func() bool { return w.clock.HasWaiters() })
	time.Sleep(20 * time.Millisecond)
	if got := woken(); len(got) != 0 {
		t.Fatalf("woken before the retry time: %v", got)
	}
	w.clock.Step(time.Millisecond)
	waitFor(t, func() bool { return len(woken()) > 0 })
	if diff := cmp.Diff([]kueue.ClusterQueueReference{"cq"}, woken()); diff != "" {
		t.Errorf("queues woken (-want +got):\n%s", diff)
	}
}

func waitFor(t *testing.T, done func() bool) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for !done() {
		if time.Now().After(deadline) {
			t.Fatal("not done in 10 s")
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// TestQueueWakes: one wake-up per queue, the earliest asked for, fired once, a millisecond after
// its time.
func TestQueueWakes(t *testing.T) {
	t0 := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	type ask struct {
		cq string
		in time.Duration
	}
	type woken struct {
		cq string
		at time.Duration
	}
	cases := map[string]struct {
		asks []ask
		want []woken
	}{
		"a later wake-up for the same queue waits for the earlier one": {
			asks: []ask{{"a", 2 * time.Second}, {"a", 5 * time.Second}},
			want: []woken{{"a", 2*time.Second + time.Millisecond}},
		},
		"an earlier one is set as well": {
			asks: []ask{{"a", 5 * time.Second}, {"a", 2 * time.Second}},
			want: []woken{{"a", 2*time.Second + time.Millisecond}, {"a", 5*time.Second + time.Millisecond}},
		},
		"queues are apart": {
			asks: []ask{{"a", 3 * time.Second}, {"b", time.Second}, {"b", time.Second}},
			want: []woken{{"b", time.Second + time.Millisecond}, {"a", 3*time.Second + time.Millisecond}},
		},
		"a time in the past wakes at once": {
			asks: []ask{{"a", -time.Hour}},
			want: []woken{{"a", time.Millisecond}},
		},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			clk := testingclock.NewFakeClock(t0)
			var mu sync.Mutex
			var got []woken
			var elapsed time.Duration
			// The fake clock runs AfterFunc's function while it holds its lock: no clk.Now here.
			qw := newQueueWakes(clk, func(_ context.Context, cq kueue.ClusterQueueReference) {
				mu.Lock()
				defer mu.Unlock()
				got = append(got, woken{string(cq), elapsed})
			})
			for _, a := range tc.asks {
				qw.at(context.Background(), kueue.ClusterQueueReference(a.cq), t0.Add(a.in))
			}
			for range 6000 {
				mu.Lock()
				elapsed += time.Millisecond
				mu.Unlock()
				clk.Step(time.Millisecond)
			}
			mu.Lock()
			defer mu.Unlock()
			if diff := cmp.Diff(tc.want, got, cmp.AllowUnexported(woken{})); diff != "" {
				t.Errorf("wake-ups (-want +got):\n%s", diff)
			}
		})
	}
}

var _ RetryLater = refusal{}

// refusingOnce refuses the first eviction (retry in 2 s), as an API server error would, and
// issues the later ones.
type refusingOnce struct {
	Preemptor
	clock *testingclock.FakeClock
	calls int
}

func (p *refusingOnce) IssuePreemptions(ctx context.Context, c *schdcache.Cache, preemptor *workload.Info, targets []*preemption.Target, snap *schdcache.ClusterQueueSnapshot) (int, int, error) {
	p.calls++
	if p.calls == 1 {
		return 0, len(targets), refusal{at: p.clock.Now().Add(2 * time.Second)}
	}
	return p.Preemptor.IssuePreemptions(ctx, c, preemptor, targets, snap)
}

// TestRefusedPreemptionRetriedWithDefaultWaker is the shape of upstream's "Should retry on failed
// preemptions" with the loop built as upstream's tests build theirs, without WithQueueWaker: the
// parked preemptor is tried again once its retry time has passed, and the victim is evicted.
func TestRefusedPreemptionRetriedWithDefaultWaker(t *testing.T) {
	w := newWorld(t, worldObjects{
		clusterQueues: []*kueue.ClusterQueue{cpuQueue("cq", "2").Preemption(lowerPriority).Obj()},
		workloads: []*kueue.Workload{
			running(cpuWorkload("low", "cq", "2"), "cq"),
			cpuWorkload("high", "cq", "2").Priority(10).Obj(),
		},
	})
	refusing := &refusingOnce{clock: w.clock}
	s, written := w.scheduler(WithPreemptor(func(c PreemptorConfig) Preemptor {
		refusing.Preemptor = NewUpstreamPreemptor(c)
		return refusing
	}))
	// What setting the world up asked the requeuer is done first: from the refusal on, only a
	// wake-up moves the parked preemptor back.
	w.requeuer.ProcessRequeues(w.ctx)
	s.Cycle(w.ctx)
	written()
	for range 3 {
		w.requeuer.ProcessRequeues(w.ctx)
		s.Cycle(w.ctx)
		written()
	}
	if refusing.calls != 1 || apimeta.IsStatusConditionTrue(w.workload("low").Status.Conditions, kueue.WorkloadEvicted) {
		t.Fatalf("after the refusal: %d preemptions issued, victim evicted: %v; want 1, false", refusing.calls,
			apimeta.IsStatusConditionTrue(w.workload("low").Status.Conditions, kueue.WorkloadEvicted))
	}
	waitFor(t, func() bool { return w.clock.HasWaiters() })
	w.clock.Step(2*time.Second + time.Millisecond)
	waitFor(t, func() bool {
		w.requeuer.ProcessRequeues(w.ctx)
		s.Cycle(w.ctx)
		written()
		return apimeta.IsStatusConditionTrue(w.workload("low").Status.Conditions, kueue.WorkloadEvicted)
	})
	if refusing.calls != 2 {
		t.Errorf("preemptions issued: %d, want 2 (the refused one, then its retry)", refusing.calls)
	}
}
