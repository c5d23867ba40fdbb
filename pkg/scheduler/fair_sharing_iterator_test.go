package scheduler

import (
	"context"
	"testing"

	"github.com/google/go-cmp/cmp"
	"k8s.io/component-base/featuregate"
	ctrl "sigs.k8s.io/controller-runtime"

	kueue "sigs.k8s.io/kueue/apis/kueue/v1beta2"
	"sigs.k8s.io/kueue/pkg/features"
	"sigs.k8s.io/kueue/pkg/resources"
	"sigs.k8s.io/kueue/pkg/scheduler/flavorassigner"
	testingwrappers "sigs.k8s.io/kueue/pkg/util/testing/v1beta2"
	"sigs.k8s.io/kueue/pkg/workload"
)

// TestFairSharingOrder checks the knockout over a two-level tree:
//
//	root ── child ── a (nominal 2), b (nominal 2)
//	     └─ c (nominal 2)
func TestFairSharingOrder(t *testing.T) {
	type head struct {
		name, cq  string
		cpu       int64
		priority  int32
		preemptor bool
	}
	cases := map[string]struct {
		gates   map[featuregate.Feature]bool
		running map[string]string // workload name to ClusterQueue, 1 cpu each
		heads   []head
		want    []string
	}{
		"the lowest share with the head admitted goes first, at every level": {
			// a borrows already; c will borrow with its head.
			running: map[string]string{"a1": "a", "a2": "a", "a3": "a", "c1": "c", "c2": "c"},
			heads: []head{
				{name: "a-next", cq: "a", cpu: 1},
				{name: "b-next", cq: "b", cpu: 1},
				{name: "c-next", cq: "c", cpu: 1},
			},
			want: []string{"b-next", "a-next", "c-next"},
		},
		"equal shares: the higher priority": {
			heads: []head{
				{name: "c-low", cq: "c", cpu: 1, priority: 1},
				{name: "a-high", cq: "a", cpu: 1, priority: 5},
			},
			want: []string{"a-high", "c-low"},
		},
		"equal shares, PrioritySortingWithinCohort off: first child wins the tie": {
			gates: map[featuregate.Feature]bool{features.PrioritySortingWithinCohort: false},
			heads: []head{
				{name: "c-high", cq: "c", cpu: 1, priority: 5},
				{name: "a-low", cq: "a", cpu: 1, priority: 1},
			},
			// Child cohorts' winners are compared before the cohort's own ClusterQueues.
			want: []string{"a-low", "c-high"},
		},
		"an active preemptor first with PrioritizePreemptorWorkloads": {
			gates:   map[featuregate.Feature]bool{features.PrioritizePreemptorWorkloads: true},
			running: map[string]string{"a1": "a", "a2": "a", "a3": "a"},
			heads: []head{
				{name: "b-next", cq: "b", cpu: 1},
				{name: "a-preemptor", cq: "a", cpu: 1, preemptor: true},
			},
			want: []string{"a-preemptor", "b-next"},
		},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			features.SetFeatureGatesDuringTest(t, tc.gates)
			objs := worldObjects{
				fairSharing: true,
				cohorts: []*kueue.Cohort{
					testingwrappers.MakeCohort("root").Obj(),
					testingwrappers.MakeCohort("child").Parent("root").Obj(),
				},
				clusterQueues: []*kueue.ClusterQueue{
					cpuQueue("a", "2").Cohort("child").Obj(),
					cpuQueue("b", "2").Cohort("child").Obj(),
					cpuQueue("c", "2").Cohort("root").Obj(),
				},
			}
			for wl, cq := range tc.running {
				objs.workloads = append(objs.workloads, running(cpuWorkload(wl, cq, "1"), cq))
			}
			w := newWorld(t, objs)
			snap := w.snapshot()
			var entries []entry
			for _, h := range tc.heads {
				wl := cpuWorkload(h.name, h.cq, "1").Priority(h.priority).Obj()
				e := entry{clusterQueueSnapshot: snap.ClusterQueue(kueue.ClusterQueueReference(h.cq))}
				e.Info = workload.Info{Obj: wl, ClusterQueue: kueue.ClusterQueueReference(h.cq)}
				e.IsPreemptor = h.preemptor
				e.assignment = flavorassigner.Assignment{Usage: workload.Usage{Quota: resources.FlavorResourceQuantities{
					{Flavor: testFlavor, Resource: "cpu"}: resources.NewAmount(h.cpu * 1000),
				}}}
				entries = append(entries, e)
			}
			it := makeFairSharingIterator(ctrl.LoggerInto(context.Background(), w.log), entries, workload.Ordering{})
			var got []string
			for it.hasNext() {
				got = append(got, it.pop().Obj.Name)
			}
			if diff := cmp.Diff(tc.want, got); diff != "" {
				t.Errorf("order (-want +got):\n%s", diff)
			}
		})
	}
}
