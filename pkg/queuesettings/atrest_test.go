package queuesettings

import (
	"context"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/go-logr/logr"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	k8sruntime "k8s.io/apimachinery/pkg/runtime"
	clientgoscheme "k8s.io/client-go/kubernetes/scheme"
	"k8s.io/utils/clock"
	clocktesting "k8s.io/utils/clock/testing"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/fake"
	"sigs.k8s.io/controller-runtime/pkg/client/interceptor"

	kueue "sigs.k8s.io/kueue/apis/kueue/v1beta2"

	"github.com/kueue-timeshare/kueue-timeshare/apis/annotations"
	"github.com/kueue-timeshare/kueue-timeshare/pkg/timeutil"
)

const farFuture = "9999-12-31T23:59:59Z"

// farFutureWorkloads hold quota in "cq" since admitted, with every tenant-written instant a
// tenant reported burning a core with: a cooldown and a notice deadline in year 9999.
func farFutureWorkloads(admitted time.Time) []client.Object {
	holding := func(name string, ann map[string]string) *kueue.Workload {
		at := metav1.NewTime(admitted)
		return &kueue.Workload{
			ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: name, Annotations: ann},
			Status: kueue.WorkloadStatus{
				Admission: &kueue.Admission{ClusterQueue: "cq"},
				Conditions: []metav1.Condition{
					{Type: kueue.WorkloadQuotaReserved, Status: metav1.ConditionTrue, Reason: "QuotaReserved", LastTransitionTime: at},
					{Type: kueue.WorkloadAdmitted, Status: metav1.ConditionTrue, Reason: "Admitted", LastTransitionTime: at},
				},
			},
		}
	}
	return []client.Object{
		holding("cooldown", map[string]string{
			annotations.ExpectedRuntime:  "1s",
			annotations.RequeueNotBefore: farFuture,
		}),
		holding("notice", map[string]string{
			annotations.PreemptionNotice:   `{"start":"2026-01-01T00:00:00Z","reason":"InClusterQueueTimeBased","preemptor":"ns/p","preemptorUID":"u"}`,
			annotations.PreemptionDeadline: farFuture,
		}),
	}
}

// atRestWaker is a Waker over farFutureWorkloads that counts its sweeps (each lists the workloads
// holding quota).
func atRestWaker(t *testing.T, clk clock.WithTicker, sweeps *atomic.Int64) *Waker {
	t.Helper()
	scheme := k8sruntime.NewScheme()
	if err := clientgoscheme.AddToScheme(scheme); err != nil {
		t.Fatal(err)
	}
	if err := kueue.AddToScheme(scheme); err != nil {
		t.Fatal(err)
	}
	cl := fake.NewClientBuilder().WithScheme(scheme).
		WithObjects(farFutureWorkloads(clk.Now().Add(-time.Minute))...).
		WithIndex(&kueue.Workload{}, HoldingQuotaKey, indexHoldingQuota).
		WithInterceptorFuncs(interceptor.Funcs{List: func(ctx context.Context, c client.WithWatch, list client.ObjectList, opts ...client.ListOption) error {
			if _, ok := list.(*kueue.WorkloadList); ok {
				sweeps.Add(1)
			}
			return c.List(ctx, list, opts...)
		}}).Build()
	return &Waker{Clock: clk, Client: cl, Store: NewStore(), Log: logr.Discard(),
		Lead: RequeueBatchPeriod() - LeadMargin}
}

// resettingClock is a fake clock that reports every wait its timers are reset to.
type resettingClock struct {
	*clocktesting.FakeClock
	resets chan time.Duration
}

func (c resettingClock) NewTimer(d time.Duration) clock.Timer {
	return resettingTimer{Timer: c.FakeClock.NewTimer(d), resets: c.resets}
}

type resettingTimer struct {
	clock.Timer
	resets chan time.Duration
}

func (t resettingTimer) Reset(d time.Duration) bool {
	active := t.Timer.Reset(d)
	t.resets <- d
	return active
}

// TestWakerAtRestWithFarFutureValues: workloads whose cooldown and notice end in year 9999 arm the
// Waker's exact timer for the far future. Before its wait saturated, Sub gave the largest
// Duration, the precision added to it wrapped negative, and the timer fired at once, for ever.
func TestWakerAtRestWithFarFutureValues(t *testing.T) {
	start := time.Date(2026, 11, 24, 12, 0, 0, 0, time.UTC)
	clk := resettingClock{FakeClock: clocktesting.NewFakeClock(start), resets: make(chan time.Duration, 1)}
	var sweeps atomic.Int64
	w := atRestWaker(t, clk, &sweeps)
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error)
	go func() { done <- w.Start(ctx) }()
	defer func() {
		cancel()
		if err := <-done; err != nil {
			t.Error(err)
		}
	}()
	// The first sweep, at Start, armed the timer for the earliest end: the notice deadline, less
	// the Lead, plus the precision.
	d := <-clk.resets
	if d <= 0 {
		t.Fatalf("the exact timer was armed to fire in %s: at once", d)
	}
	deadline, err := time.Parse(time.RFC3339, farFuture)
	if err != nil {
		t.Fatal(err)
	}
	// A timer waits at most the largest Duration (about 292 years): the sweep then re-arms it.
	earliest := deadline.Add(-w.Lead)
	if limit := start.Add(timeutil.Forever); limit.Before(earliest) {
		earliest = limit
	}
	if fires := start.Add(d); fires.Before(earliest) {
		t.Errorf("the exact timer fires at %s, before %s", fires, earliest)
	}
	// A tick still sweeps, and re-arms the timer the same way.
	clk.Step(SweepPeriod)
	if d := <-clk.resets; d <= 0 {
		t.Errorf("after a tick the exact timer was armed to fire in %s: at once", d)
	}
	if got := sweeps.Load(); got != 2 {
		t.Errorf("sweeps = %d, want 2: at Start and at the tick", got)
	}
}

// TestWakerCPUAtRest runs the Waker on the real clock for a few seconds over far-future values:
// it sweeps once at Start and once per SweepPeriod, not in a loop. The CPU time it took is logged.
func TestWakerCPUAtRest(t *testing.T) {
	if testing.Short() {
		t.Skip("runs for 3s of real time")
	}
	const run = 3 * time.Second
	var sweeps atomic.Int64
	w := atRestWaker(t, clock.RealClock{}, &sweeps)
	ctx, cancel := context.WithTimeout(context.Background(), run)
	defer cancel()
	before := cpuTime(t)
	if err := w.Start(ctx); err != nil {
		t.Fatal(err)
	}
	used := cpuTime(t) - before
	got := sweeps.Load()
	t.Logf("%d sweeps and %s of process CPU time in %s with year-9999 values", got, used, run)
	// 1 at Start and 3 periodic ones; one more for a tick that lands as the context ends.
	if maxSweeps := int64(1 + run/SweepPeriod + 1); got > maxSweeps {
		t.Errorf("sweeps in %s = %d, want at most %d", run, got, maxSweeps)
	}
}

func cpuTime(t *testing.T) time.Duration {
	t.Helper()
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		t.Fatal(err)
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}
