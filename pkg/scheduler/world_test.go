package scheduler

import (
	"cmp"
	"context"
	"os"
	"strconv"
	"sync"
	"testing"

	"github.com/go-logr/logr"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"
	testingclock "k8s.io/utils/clock/testing"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/interceptor"

	kueue "sigs.k8s.io/kueue/apis/kueue/v1beta2"
	qcache "sigs.k8s.io/kueue/pkg/cache/queue"
	schdcache "sigs.k8s.io/kueue/pkg/cache/scheduler"
	"sigs.k8s.io/kueue/pkg/scheduler/preemption/expectations"
	utilexpectations "sigs.k8s.io/kueue/pkg/util/expectations"
	"sigs.k8s.io/kueue/pkg/util/routine"
	utiltesting "sigs.k8s.io/kueue/pkg/util/testing"
	testingwrappers "sigs.k8s.io/kueue/pkg/util/testing/v1beta2"
)

const testFlavor = "default"

// world is a fake API server with the scheduler's caches loaded from it.
type world struct {
	t        *testing.T
	ctx      context.Context
	log      logr.Logger
	clock    *testingclock.FakeClock
	client   client.Client
	cache    *schdcache.Cache
	queues   *qcache.Manager
	recorder *utiltesting.EventRecorder
	// expectations are shared by the queue manager and the scheduler, as in the manager.
	expectations *utilexpectations.Store
	// requeuer moves the ClusterQueues' inadmissible workloads back to their heaps when a test
	// asks it to: in the manager, upstream's requeuer does it a batch period after it is told.
	requeuer interface{ ProcessRequeues(context.Context) int }
}

type worldObjects struct {
	cohorts       []*kueue.Cohort
	clusterQueues []*kueue.ClusterQueue
	// workloads are queued when pending and accounted in the cache when they hold quota.
	workloads []*kueue.Workload
	// flavors are added to the default flavor.
	flavors     []string
	fairSharing bool
}

func newWorld(t *testing.T, objs worldObjects) *world {
	t.Helper()
	ctx, log := utiltesting.ContextWithLog(t)
	w := &world{t: t, ctx: ctx, log: log, clock: testingclock.NewFakeClock(t0), recorder: &utiltesting.EventRecorder{}}

	var lqs []kueue.LocalQueue
	for _, cq := range objs.clusterQueues {
		lqs = append(lqs, *testingwrappers.MakeLocalQueue(cq.Name, "ns").ClusterQueue(cq.Name).Obj())
	}
	var cqs []kueue.ClusterQueue
	for _, cq := range objs.clusterQueues {
		cqs = append(cqs, *cq.DeepCopy())
	}
	var wls []kueue.Workload
	for _, wl := range objs.workloads {
		wls = append(wls, *wl.DeepCopy())
	}
	w.client = utiltesting.NewClientBuilder().
		WithObjects(utiltesting.MakeNamespaceWrapper("ns").Obj()).
		WithLists(&kueue.WorkloadList{Items: wls}, &kueue.LocalQueueList{Items: lqs}, &kueue.ClusterQueueList{Items: cqs}).
		WithStatusSubresource(&kueue.Workload{}).
		WithInterceptorFuncs(interceptor.Funcs{SubResourcePatch: utiltesting.TreatSSAAsStrategicMerge}).
		Build()
	w.cache = schdcache.New(w.client, schdcache.WithFairSharing(objs.fairSharing))
	w.expectations = expectations.New()
	w.queues, w.requeuer = qcache.NewManagerForUnitTestsWithRequeuer(w.client, w.cache, qcache.WithPreemptionExpectations(w.expectations))
	for _, f := range append([]string{testFlavor}, objs.flavors...) {
		w.cache.AddOrUpdateResourceFlavor(log, testingwrappers.MakeResourceFlavor(f).Obj())
	}
	for i := range lqs {
		if err := w.queues.AddLocalQueue(ctx, &lqs[i]); err != nil {
			t.Fatal(err)
		}
	}
	for _, c := range objs.cohorts {
		if err := w.cache.AddOrUpdateCohort(c); err != nil {
			t.Fatal(err)
		}
		w.queues.AddOrUpdateCohort(ctx, c)
	}
	for _, cq := range objs.clusterQueues {
		if err := w.cache.AddClusterQueue(ctx, cq); err != nil {
			t.Fatal(err)
		}
		if err := w.queues.AddClusterQueue(ctx, cq); err != nil {
			t.Fatal(err)
		}
	}
	for _, wl := range objs.workloads {
		var err error
		if wl.Status.Admission != nil {
			if !w.cache.AddOrUpdateWorkload(log, wl.DeepCopy()) {
				t.Fatalf("workload %s not added to the cache", wl.Name)
			}
		} else {
			err = w.queues.AddOrUpdateWorkload(log, wl.DeepCopy())
		}
		if err != nil {
			t.Fatal(err)
		}
	}
	return w
}

// scheduler returns a Scheduler and a function that waits for its admission and pending-status
// writes. With TIMESHARE_TEST_PENDING_STATUS_WRITERS set, its pending-status writers run.
func (w *world) scheduler(opts ...Option) (*Scheduler, func()) {
	opts = append([]Option{WithClock(w.t, w.clock), WithPreemptionExpectations(w.expectations), withTestPendingStatusWriters(w.t)}, opts...)
	s := New(w.queues, w.cache, w.client, w.recorder, opts...)
	var wg sync.WaitGroup
	s.admissionRoutineWrapper = routine.NewWrapper(func() { wg.Add(1) }, wg.Done)
	ctx, cancel := context.WithCancel(w.ctx)
	w.t.Cleanup(cancel)
	s.pendingStatus.start(ctx)
	return s, func() {
		wg.Wait()
		s.pendingStatus.flush(w.ctx)
	}
}

// withTestPendingStatusWriters runs the package's tests with the pending-status writers the
// environment asks for (0, inline, without).
func withTestPendingStatusWriters(t *testing.T) Option {
	n, err := strconv.Atoi(cmp.Or(os.Getenv("TIMESHARE_TEST_PENDING_STATUS_WRITERS"), "0"))
	if err != nil {
		t.Fatalf("TIMESHARE_TEST_PENDING_STATUS_WRITERS: %v", err)
	}
	return WithPendingStatusWriters(n)
}

func (w *world) workload(name string) *kueue.Workload {
	w.t.Helper()
	var wl kueue.Workload
	if err := w.client.Get(w.ctx, types.NamespacedName{Namespace: "ns", Name: name}, &wl); err != nil {
		w.t.Fatal(err)
	}
	return &wl
}

// snapshot is a snapshot of the world's cache.
func (w *world) snapshot() *schdcache.Snapshot {
	w.t.Helper()
	s, err := w.cache.Snapshot(w.ctx)
	if err != nil {
		w.t.Fatal(err)
	}
	return s
}

// cpuQueue is a ClusterQueue with cpu quota in the default flavor: nominal, then optionally
// the borrowing limit.
func cpuQueue(name string, quota ...string) *testingwrappers.ClusterQueueWrapper {
	return testingwrappers.MakeClusterQueue(name).
		ResourceGroup(*testingwrappers.MakeFlavorQuotas(testFlavor).Resource(corev1.ResourceCPU, quota...).Obj())
}

// cpuWorkload is a pending workload with one pod asking for cpu, queued in queue.
func cpuWorkload(name, queue, cpu string) *testingwrappers.WorkloadWrapper {
	return testingwrappers.MakeWorkload(name, "ns").Queue(kueue.LocalQueueName(queue)).Request(corev1.ResourceCPU, cpu).Creation(t0)
}

// running makes wl hold quota in cq, admitted.
func running(wl *testingwrappers.WorkloadWrapper, cq string) *kueue.Workload {
	return wl.SimpleReserveQuota(kueue.ClusterQueueReference(cq), testFlavor, t0).AdmittedAt(true, t0).Obj()
}
