package preemption

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/go-logr/logr"
	corev1 "k8s.io/api/core/v1"
	clocktesting "k8s.io/utils/clock/testing"
	ctrllog "sigs.k8s.io/controller-runtime/pkg/log"

	configapi "sigs.k8s.io/kueue/apis/config/v1beta2"
	kueue "sigs.k8s.io/kueue/apis/kueue/v1beta2"
	schdcache "sigs.k8s.io/kueue/pkg/cache/scheduler"
	"sigs.k8s.io/kueue/pkg/scheduler/flavorassigner"
	upstream "sigs.k8s.io/kueue/pkg/scheduler/preemption"
	preemptexpectations "sigs.k8s.io/kueue/pkg/scheduler/preemption/expectations"
	"sigs.k8s.io/kueue/pkg/workload"

	"github.com/kueue-timeshare/kueue-timeshare/pkg/plugins/expectedruntime"
	"github.com/kueue-timeshare/kueue-timeshare/pkg/plugins/minruntime"
	"github.com/kueue-timeshare/kueue-timeshare/pkg/plugins/timebased"
	"github.com/kueue-timeshare/kueue-timeshare/pkg/plugins/toleration"
	"github.com/kueue-timeshare/kueue-timeshare/pkg/policy"
	"github.com/kueue-timeshare/kueue-timeshare/test/util/snapgen"
)

// BenchmarkGetTargets compares target selection, upstream's and ours, on the same snapshots, and
// measures ours again with every policy of this project on ("allpolicies": a minAdmitDuration,
// min-runtimes through the cohort tree, priority class tolerations, expected runtimes, notices), at 1k, 10k
// and 50k admitted workloads to show how the cost grows. `make bench-scheduler` prints the ratios.
func BenchmarkGetTargets(b *testing.B) {
	for _, mode := range []string{"classical", "fairsharing"} {
		for _, n := range []int{1000, 10000, 50000} {
			sc := snapgen.Crowded(n, mode == "fairsharing")
			ctx := ctrllog.IntoContext(context.Background(), logr.Discard())
			cache, err := sc.NewCache(ctx, logr.Discard())
			if err != nil {
				b.Fatal(err)
			}
			var fs *configapi.FairSharing
			if sc.FairSharing {
				fs = &configapi.FairSharing{}
			}
			clk := clocktesting.NewFakeClock(sc.Now)
			ordering := workload.Ordering{PodsReadyRequeuingTimestamp: configapi.EvictionTimestamp}
			info := sc.PendingInfo()
			assignment := flavorassigner.Assignment{PodSets: []flavorassigner.PodSetAssignment{{
				Name: info.TotalRequests[0].Name, Count: 1,
				Flavors: flavorassigner.ResourceAssignment{corev1.ResourceCPU: {Name: "f0", Mode: flavorassigner.Preempt}},
			}}}
			impls := map[string]func(*schdcache.Snapshot) int{
				"upstream": func(s *schdcache.Snapshot) int {
					p := upstream.New(nil, ordering, nil, fs, false, clk, nil, preemptexpectations.New(), nil)
					return len(p.GetTargets(ctx, *info, assignment, s))
				},
				"ours": func(s *schdcache.Snapshot) int {
					p := New(nil, ordering, nil, fs, false, clk, nil, preemptexpectations.New(), nil)
					return len(p.GetTargets(ctx, *info, assignment, s))
				},
				"allpolicies": func(s *schdcache.Snapshot) int {
					p := New(nil, ordering, nil, fs, false, clk, nil, preemptexpectations.New(), nil, allPolicies()...)
					return len(p.GetTargets(ctx, *info, assignment, s))
				},
			}
			for _, impl := range []string{"upstream", "ours", "allpolicies"} {
				b.Run(fmt.Sprintf("%s/admitted=%d/%s", mode, n, impl), func(b *testing.B) {
					snap, err := cache.Snapshot(ctx)
					if err != nil {
						b.Fatal(err)
					}
					if impls[impl](snap) == 0 {
						b.Fatal("scenario needs no preemption; the benchmark would measure nothing")
					}
					b.ReportAllocs()
					b.ResetTimer()
					for range b.N {
						impls[impl](snap)
					}
				})
			}
		}
	}
}

// allPolicies turns every policy on with settings that let preemption still happen: windows and
// protections shorter than the scenario's workloads have run, a toleration on a class no workload
// uses, expected runtimes read (and absent) on every candidate, and notices looked for (none given)
// through the index the manager keeps.
func allPolicies() []Option {
	return []Option{
		WithSources(benchSettings{
			window:   timebased.Settings{MinAdmitDuration: time.Minute},
			left:     minruntime.Settings{Reclaim: policy.Set(time.Minute)},
			defaults: minruntime.Defaults{Preempt: time.Minute, Reclaim: time.Minute},
		}),
		WithPendingWorkloads(func(kueue.ClusterQueueReference) []*workload.Info { return nil }),
		WithSources(fakeTolerations{&toleration.Toleration{Source: "WorkloadPriorityClass sticky"}}),
		WithSources(expectedruntime.DefaultCooldown(10 * time.Minute)),
		WithSources(noNoticeSettings{}),
		WithWorkloadIndex(syncedEmptyIndex()),
	}
}

// benchSettings are the queues' settings as the settings store gives them, and costs them (one
// path per SettingsPath, values boxed once): a window on every ClusterQueue, a reclaimMinRuntime on
// Cohort left, min-runtime defaults; no other unit's settings.
type benchSettings struct {
	window, left, defaults any
}

func (b benchSettings) QueueSettingsOf(f policy.Feature, _ kueue.ClusterQueueReference) any {
	if f == timebased.Feature {
		return b.window
	}
	return nil
}

func (benchSettings) StrictFIFO(kueue.ClusterQueueReference) bool { return false }

func (b benchSettings) SettingsPath(f policy.Feature, cq kueue.ClusterQueueReference, parents []kueue.CohortReference) ([]policy.QueueNode, any) {
	if f != minruntime.Feature {
		return nil, nil
	}
	path := make([]policy.QueueNode, 1, len(parents)+1)
	path[0] = policy.QueueNode{Kind: "ClusterQueue", Name: string(cq)}
	for _, c := range parents {
		n := policy.QueueNode{Kind: "Cohort", Name: string(c)}
		if c == "left" {
			n.Settings = b.left
		}
		path = append(path, n)
	}
	return path, b.defaults
}

// syncedEmptyIndex is the manager's notice index when no notice is in force.
func syncedEmptyIndex() *WorkloadIndex {
	x := NewWorkloadIndex()
	x.SetSynced(func() bool { return true })
	return x
}
