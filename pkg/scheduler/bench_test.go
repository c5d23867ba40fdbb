package scheduler

import (
	"context"
	"fmt"
	"sync/atomic"
	"testing"
	"time"

	"github.com/go-logr/logr"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/interceptor"
	ctrllog "sigs.k8s.io/controller-runtime/pkg/log"

	kueue "sigs.k8s.io/kueue/apis/kueue/v1beta2"
	qcache "sigs.k8s.io/kueue/pkg/cache/queue"
	schdcache "sigs.k8s.io/kueue/pkg/cache/scheduler"
	upstream "sigs.k8s.io/kueue/pkg/scheduler"
	preemptexpectations "sigs.k8s.io/kueue/pkg/scheduler/preemption/expectations"
	"sigs.k8s.io/kueue/pkg/util/expectations"
	utiltesting "sigs.k8s.io/kueue/pkg/util/testing"
	testingwrappers "sigs.k8s.io/kueue/pkg/util/testing/v1beta2"

	"github.com/kueue-timeshare/kueue-timeshare/test/util/snapgen"
)

// BenchmarkSchedulingCycle measures one scheduling cycle, upstream's admission loop against ours,
// on the snapgen.Crowded cohort tree with 1,000 or 10,000 admitted workloads and one pending
// head per ClusterQueue that fits. The cycle ends when every head's admission is written.
// Neither scheduler exposes a single cycle, so both run their loop until then.
func BenchmarkSchedulingCycle(b *testing.B) {
	for _, n := range []int{1000, 10000} {
		for _, impl := range []string{"upstream", "ours"} {
			b.Run(fmt.Sprintf("admitted=%d/%s", n, impl), func(b *testing.B) {
				b.ReportAllocs()
				for range b.N {
					b.StopTimer()
					w := newBenchWorld(b, n)
					b.StartTimer()
					w.runCycle(b, impl)
				}
			})
		}
	}
}

type benchWorld struct {
	ctx      context.Context
	client   client.Client
	cache    *schdcache.Cache
	queues   *qcache.Manager
	store    *expectations.Store
	pending  int
	admitted atomic.Int32
	done     chan struct{}
}

func newBenchWorld(b *testing.B, n int) *benchWorld {
	sc := snapgen.Crowded(n, false)
	w := &benchWorld{ctx: ctrllog.IntoContext(context.Background(), logr.Discard()), done: make(chan struct{}), store: preemptexpectations.New()}
	var wls []kueue.Workload
	for _, wl := range sc.Admitted {
		wls = append(wls, *wl)
	}
	var lqs []kueue.LocalQueue
	var heads []*kueue.Workload
	for _, cq := range sc.ClusterQueues {
		lqs = append(lqs, *testingwrappers.MakeLocalQueue("lq-"+cq.Name, "ns").ClusterQueue(cq.Name).Obj())
		// Room is made for the head by leaving one CPU of nominal quota free in every queue.
		cq.Spec.ResourceGroups[0].Flavors[0].Resources[0].NominalQuota.Add(resourceOne)
		head := testingwrappers.MakeWorkload("head-"+cq.Name, "ns").Queue(kueue.LocalQueueName("lq-"+cq.Name)).
			Request(corev1.ResourceCPU, "1").Creation(snapgen.Epoch.Add(3 * time.Hour)).Obj()
		heads = append(heads, head)
		wls = append(wls, *head)
	}
	w.pending = len(heads)
	w.client = utiltesting.NewClientBuilder().
		WithObjects(utiltesting.MakeNamespaceWrapper("ns").Obj()).
		WithLists(&kueue.WorkloadList{Items: wls}, &kueue.LocalQueueList{Items: lqs}).
		WithStatusSubresource(&kueue.Workload{}).
		WithInterceptorFuncs(interceptor.Funcs{SubResourcePatch: func(ctx context.Context, c client.Client, sub string, obj client.Object, patch client.Patch, opts ...client.SubResourcePatchOption) error {
			err := utiltesting.TreatSSAAsStrategicMerge(ctx, c, sub, obj, patch, opts...)
			if w.admitted.Add(1) == int32(w.pending) {
				close(w.done)
			}
			return err
		}}).
		Build()
	w.cache = schdcache.New(w.client)
	w.queues = qcache.NewManagerForUnitTests(w.client, w.cache, qcache.WithPreemptionExpectations(w.store))
	log := logr.Discard()
	for _, f := range sc.Flavors {
		w.cache.AddOrUpdateResourceFlavor(log, f)
	}
	for i := range lqs {
		must(b, w.queues.AddLocalQueue(w.ctx, &lqs[i]))
	}
	for _, co := range sc.Cohorts {
		must(b, w.cache.AddOrUpdateCohort(co))
		w.queues.AddOrUpdateCohort(w.ctx, co)
	}
	for _, cq := range sc.ClusterQueues {
		must(b, w.cache.AddClusterQueue(w.ctx, cq))
		must(b, w.queues.AddClusterQueue(w.ctx, cq))
	}
	for _, wl := range sc.Admitted {
		w.cache.AddOrUpdateWorkload(log, wl)
	}
	for _, h := range heads {
		must(b, w.queues.AddOrUpdateWorkload(log, h))
	}
	return w
}

func (w *benchWorld) runCycle(b *testing.B, impl string) {
	ctx, cancel := context.WithCancel(w.ctx)
	defer cancel()
	recorder := &utiltesting.EventRecorder{}
	var run func(context.Context) error
	if impl == "upstream" {
		run = upstream.New(w.queues, w.cache, w.client, recorder, upstream.WithPreemptionExpectations(w.store)).Start
	} else {
		run = New(w.queues, w.cache, w.client, recorder, WithPreemptionExpectations(w.store)).Start
	}
	go func() { _ = run(ctx) }()
	select {
	case <-w.done:
	case <-time.After(time.Minute):
		b.Fatalf("%s: %d of %d heads admitted after a minute", impl, w.admitted.Load(), w.pending)
	}
}

func must(b *testing.B, err error) {
	b.Helper()
	if err != nil {
		b.Fatal(err)
	}
}

var resourceOne = resource.MustParse("1")
