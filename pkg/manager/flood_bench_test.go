package manager

import (
	"context"
	"fmt"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/go-logr/logr"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/interceptor"
	ctrllog "sigs.k8s.io/controller-runtime/pkg/log"

	kueue "sigs.k8s.io/kueue/apis/kueue/v1beta2"
	qcache "sigs.k8s.io/kueue/pkg/cache/queue"
	schdcache "sigs.k8s.io/kueue/pkg/cache/scheduler"
	preemptexpectations "sigs.k8s.io/kueue/pkg/scheduler/preemption/expectations"
	"sigs.k8s.io/kueue/pkg/util/expectations"
	utiltesting "sigs.k8s.io/kueue/pkg/util/testing"
	testingwrappers "sigs.k8s.io/kueue/pkg/util/testing/v1beta2"

	"github.com/kueue-timeshare/kueue-timeshare/pkg/plugins/timebased"
	"github.com/kueue-timeshare/kueue-timeshare/pkg/policy"
	"github.com/kueue-timeshare/kueue-timeshare/pkg/queuesettings"
	"github.com/kueue-timeshare/kueue-timeshare/pkg/scheduler"
	"github.com/kueue-timeshare/kueue-timeshare/pkg/scheduler/preemption"
)

// BenchmarkFlood: one team floods its time-sharing ClusterQueue with Jobs that can never use a
// turn, behind a workload that was rotated out, and another team's ClusterQueue in the same
// cohort admits workloads, one per cycle (as many to warm up, then as many measured: a flood costs
// its first reading once, a victim search per flooding workload kept while the flooded queue is
// unchanged); each of its admissions requeues the
// flooded queue, as the finish of one of its workloads does. It reports the untouched team's
// time per admission and the process's CPU time per run, with 0 and 10,000 flooding Jobs: the
// flood's cost to the others is the ratio of the two (docs/performance.md).
//
// The "upstream" runs use upstream's preemptor and no time-sharing: what the same flood costs
// Kueue itself (its queue manager requeues the flooded queue's 10,000 workloads at every
// admission), the floor for ours.
//
// Two requeue regimes: "each" requeues the flooded queue at every admission, at once (a stress
// form: a cycle takes a few milliseconds, so that is hundreds of requeues a second); "batched"
// requeues as Kueue's queue manager does, at most once per requeue batch period (1 s), the
// admissions in between only marking the queue, over a longer measured part.
func BenchmarkFlood(b *testing.B) {
	for _, regime := range []struct {
		name       string
		batch      time.Duration
		admissions int
	}{{"each", 0, 100}, {"batched", queuesettings.RequeueBatchPeriod(), 1000}} {
		for _, impl := range []string{"ours", "upstream"} {
			for _, flood := range []int{0, 10000} {
				b.Run(fmt.Sprintf("requeue=%s/flood=%d/%s", regime.name, flood, impl), func(b *testing.B) {
					benchmarkFlood(b, flood, impl, regime.batch, regime.admissions)
				})
			}
		}
	}
}

func benchmarkFlood(b *testing.B, flood int, impl string, batch time.Duration, admissions int) {
	var wall, cpu time.Duration
	for range b.N {
		b.StopTimer()
		w := newFloodWorld(b, flood, admissions)
		b.StartTimer()
		dw, dc := w.run(b, impl, batch)
		wall += dw
		cpu += dc
	}
	b.ReportMetric(float64(wall.Microseconds())/1000/float64(b.N*admissions), "ms/admission")
	b.ReportMetric(float64(cpu.Milliseconds())/float64(b.N), "cpu-ms/op")
}

type floodWorld struct {
	ctx      context.Context
	client   client.Client
	cache    *schdcache.Cache
	queues   *qcache.Manager
	requeuer interface{ ProcessRequeues(context.Context) int }
	store    *expectations.Store
	admitted atomic.Int32
	// measured is how many admissions of the untouched team are measured, after as many.
	measured int
	// admissions gets one value per admission of the untouched team.
	admissions chan struct{}
	// warm is closed after measured admissions of the untouched team, done after twice as many.
	warm, done chan struct{}
	flooded    *kueue.ClusterQueue
}

func newFloodWorld(b *testing.B, flood, admissions int) *floodWorld {
	now := time.Now()
	w := &floodWorld{ctx: ctrllog.IntoContext(context.Background(), logr.Discard()), store: preemptexpectations.New(), measured: admissions,
		admissions: make(chan struct{}, 2*admissions), warm: make(chan struct{}), done: make(chan struct{})}
	flavor := testingwrappers.MakeResourceFlavor("f0").Obj()
	// The flooded queue: three CPUs, one held for ever by a higher-priority workload, two by a
	// same-priority one inside its window, and it does not borrow. The rotated-out workload needs
	// those two; the flood's Jobs need all three, so none of them can ever use a turn.
	w.flooded = testingwrappers.MakeClusterQueue("team-a").Cohort("shared").
		ResourceGroup(*testingwrappers.MakeFlavorQuotas("f0").Resource(corev1.ResourceCPU, "3", "0").Obj()).
		Preemption(kueue.ClusterQueuePreemption{WithinClusterQueue: kueue.PreemptionPolicyLowerOrNewerEqualPriority}).Obj()
	untouched := testingwrappers.MakeClusterQueue("team-b").Cohort("shared").
		ResourceGroup(*testingwrappers.MakeFlavorQuotas("f0").Resource(corev1.ResourceCPU, fmt.Sprint(2*admissions)).Obj()).Obj()
	lqs := []kueue.LocalQueue{
		*testingwrappers.MakeLocalQueue("lq", "team-a").ClusterQueue("team-a").Obj(),
		*testingwrappers.MakeLocalQueue("lq", "team-b").ClusterQueue("team-b").Obj(),
	}
	admittedIn := func(name string, prio int32, cpus string, reserved time.Time) *kueue.Workload {
		psa := testingwrappers.MakePodSetAssignment(kueue.DefaultPodSetName).Count(1).Flavor(corev1.ResourceCPU, "f0").ResourceUsage(corev1.ResourceCPU, cpus)
		return testingwrappers.MakeWorkload(name, "team-a").UID(types.UID(name)).Queue("lq").Priority(prio).
			Request(corev1.ResourceCPU, cpus).Creation(now.Add(-2*time.Hour)).
			ReserveQuotaAt(testingwrappers.MakeAdmission("team-a").PodSets(psa.Obj()).Obj(), reserved).Obj()
	}
	admitted := []*kueue.Workload{
		admittedIn("high", 100, "1", now.Add(-10*time.Minute)),
		admittedIn("turn", 10, "2", now.Add(-10*time.Minute)),
	}
	rotated := testingwrappers.MakeWorkload("rotated", "team-a").UID("rotated").Queue("lq").Priority(10).
		Request(corev1.ResourceCPU, "2").Creation(now.Add(-3 * time.Hour)).
		Condition(metav1.Condition{Type: kueue.WorkloadPreempted, Status: metav1.ConditionTrue, Reason: timebased.Reason,
			LastTransitionTime: metav1.NewTime(now.Add(-10 * time.Minute))}).Obj()
	pending := []*kueue.Workload{rotated}
	for i := range flood {
		pending = append(pending, testingwrappers.MakeWorkload(fmt.Sprintf("flood-%d", i), "team-a").UID(types.UID(fmt.Sprintf("flood-%d", i))).
			Queue("lq").Priority(10).Request(corev1.ResourceCPU, "3").Creation(now.Add(-time.Hour).Add(time.Duration(i)*time.Millisecond)).Obj())
	}
	for i := range 2 * admissions {
		pending = append(pending, testingwrappers.MakeWorkload(fmt.Sprintf("b-%d", i), "team-b").UID(types.UID(fmt.Sprintf("b-%d", i))).
			Queue("lq").Request(corev1.ResourceCPU, "1").Creation(now.Add(-time.Hour).Add(time.Duration(i)*time.Millisecond)).Obj())
	}
	var items []kueue.Workload
	for _, wl := range append(admitted, pending...) {
		items = append(items, *wl)
	}
	w.client = utiltesting.NewClientBuilder().
		WithObjects(utiltesting.MakeNamespaceWrapper("team-a").Obj(), utiltesting.MakeNamespaceWrapper("team-b").Obj(), w.flooded, untouched).
		WithLists(&kueue.WorkloadList{Items: items}, &kueue.LocalQueueList{Items: lqs}).
		WithStatusSubresource(&kueue.Workload{}).
		WithInterceptorFuncs(interceptor.Funcs{SubResourcePatch: func(ctx context.Context, c client.Client, sub string, obj client.Object, patch client.Patch, opts ...client.SubResourcePatchOption) error {
			err := utiltesting.TreatSSAAsStrategicMerge(ctx, c, sub, obj, patch, opts...)
			if wl, ok := obj.(*kueue.Workload); ok && wl.Namespace == "team-b" && wl.Status.Admission != nil {
				w.admissions <- struct{}{}
				switch int(w.admitted.Add(1)) {
				case w.measured:
					close(w.warm)
				case 2 * w.measured:
					close(w.done)
				}
			}
			return err
		}}).
		Build()
	w.cache = schdcache.New(w.client)
	w.queues, w.requeuer = qcache.NewManagerForUnitTestsWithRequeuer(w.client, w.cache, qcache.WithPreemptionExpectations(w.store))
	log := logr.Discard()
	w.cache.AddOrUpdateResourceFlavor(log, flavor)
	for i := range lqs {
		must(b, w.queues.AddLocalQueue(w.ctx, &lqs[i]))
	}
	for _, cq := range []*kueue.ClusterQueue{w.flooded, untouched} {
		must(b, w.cache.AddClusterQueue(w.ctx, cq))
		must(b, w.queues.AddClusterQueue(w.ctx, cq))
	}
	for _, wl := range admitted {
		w.cache.AddOrUpdateWorkload(log, wl)
	}
	for _, wl := range pending {
		must(b, w.queues.AddOrUpdateWorkload(log, wl))
	}
	return w
}

// run runs the loop until the untouched team's workloads are admitted, and returns the wall and
// CPU time of the measured half. batch is the requeue batch period; 0: requeue at each admission.
func (w *floodWorld) run(b *testing.B, impl string, batch time.Duration) (wall, cpu time.Duration) {
	ctx, cancel := context.WithCancel(w.ctx)
	defer cancel()
	var wg sync.WaitGroup
	defer wg.Wait()
	defer cancel()
	wg.Go(func() {
		for {
			select {
			case <-ctx.Done():
				return
			case <-w.admissions:
				must(b, w.queues.UpdateClusterQueue(ctx, w.flooded, true))
				if batch == 0 {
					w.requeuer.ProcessRequeues(ctx)
				}
			}
		}
	})
	if batch > 0 {
		wg.Go(func() {
			t := time.NewTicker(batch)
			defer t.Stop()
			for {
				select {
				case <-ctx.Done():
					return
				case <-t.C:
					w.requeuer.ProcessRequeues(ctx)
				}
			}
		})
	}
	settings := func(cq kueue.ClusterQueueReference) timebased.Settings {
		if cq == "team-a" {
			return timebased.Settings{MinAdmitDuration: time.Hour}
		}
		return timebased.Settings{}
	}
	factory := func(c scheduler.PreemptorConfig) scheduler.Preemptor {
		return timesharePreemptor{preemption.New(c.Client, c.Ordering, c.Recorder, c.FairSharing, c.AdmissionFairSharing,
			c.Clock, c.RoleTracker, c.Expectations, c.CustomLabels,
			preemption.WithPendingWorkloads(w.queues.PendingWorkloadsInfo), preemption.WithSources(floodSettings(settings)))}
	}
	opts := []scheduler.Option{scheduler.WithPreemptionExpectations(w.store)}
	if impl == "ours" {
		opts = append(opts, scheduler.WithPreemptor(factory))
	}
	s := scheduler.New(w.queues, w.cache, w.client, &utiltesting.EventRecorder{}, opts...)
	must(b, s.Start(ctx))
	wait := func(ch chan struct{}) {
		select {
		case <-ch:
		case <-time.After(time.Minute):
			var list kueue.WorkloadList
			must(b, w.client.List(ctx, &list, client.InNamespace("team-b")))
			for _, wl := range list.Items {
				if wl.Status.Admission == nil {
					b.Logf("%s: %+v", wl.Name, wl.Status.Conditions)
				}
			}
			b.Fatalf("%d of %d admitted after a minute", w.admitted.Load(), 2*w.measured)
		}
	}
	wait(w.warm)
	start, before := time.Now(), processCPU()
	wait(w.done)
	return time.Since(start), processCPU() - before
}

// processCPU is the process's user and system CPU time so far.
func processCPU() time.Duration {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		return 0
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

func must(b *testing.B, err error) {
	b.Helper()
	if err != nil {
		b.Fatal(err)
	}
}

// floodSettings are the ClusterQueues' time-sharing settings by a function, as the settings store
// gives them (a timebased.Source).
type floodSettings func(kueue.ClusterQueueReference) timebased.Settings

func (f floodSettings) QueueSettingsOf(feat policy.Feature, cq kueue.ClusterQueueReference) any {
	if s := f(cq); feat == timebased.Feature && s.MinAdmitDuration > 0 {
		return s
	}
	return nil
}

func (f floodSettings) StrictFIFO(cq kueue.ClusterQueueReference) bool { return f(cq).StrictFIFO }
