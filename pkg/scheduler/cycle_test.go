package scheduler

import (
	"testing"

	"github.com/google/go-cmp/cmp"
	apimeta "k8s.io/apimachinery/pkg/api/meta"

	kueue "sigs.k8s.io/kueue/apis/kueue/v1beta2"
	"sigs.k8s.io/kueue/pkg/workload"
)

func TestCycle(t *testing.T) {
	type outcome struct {
		Heads    int
		Progress bool
		// Admitted and Evicted are read from the API right after Cycle returns.
		Admitted []string
		Evicted  []string
	}
	cases := map[string]struct {
		objs worldObjects
		want outcome
	}{
		"returns at once when no ClusterQueue has a head": {
			objs: worldObjects{clusterQueues: []*kueue.ClusterQueue{cpuQueue("cq", "1").Obj()}},
			want: outcome{},
		},
		"admits a head that fits and returns once the admission is written": {
			objs: worldObjects{
				clusterQueues: []*kueue.ClusterQueue{cpuQueue("cq", "2").Obj()},
				workloads:     []*kueue.Workload{cpuWorkload("a", "cq", "1").Obj()},
			},
			want: outcome{Heads: 1, Progress: true, Admitted: []string{"a"}},
		},
		"evicts victims for a head that needs preemption, which is not progress yet": {
			objs: worldObjects{
				clusterQueues: []*kueue.ClusterQueue{cpuQueue("cq", "1").Preemption(lowerPriority).Obj()},
				workloads: []*kueue.Workload{
					running(cpuWorkload("low", "cq", "1"), "cq"),
					cpuWorkload("high", "cq", "1").Priority(10).Obj(),
				},
			},
			want: outcome{Heads: 1, Admitted: []string{"low"}, Evicted: []string{"low"}},
		},
		"reports no progress for a head that neither fits nor may preempt": {
			objs: worldObjects{
				clusterQueues: []*kueue.ClusterQueue{cpuQueue("cq", "1").Obj()},
				workloads: []*kueue.Workload{
					running(cpuWorkload("running", "cq", "1"), "cq"),
					cpuWorkload("waiting", "cq", "1").Obj(),
				},
			},
			want: outcome{Heads: 1, Admitted: []string{"running"}},
		},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			w := newWorld(t, tc.objs)
			s := New(w.queues, w.cache, w.client, w.recorder, WithClock(t, w.clock), WithPreemptionExpectations(w.expectations), withTestPendingStatusWriters(t))
			var got outcome
			var heads []workload.Reference
			heads, got.Progress = s.Cycle(w.ctx)
			got.Heads = len(heads)
			var list kueue.WorkloadList
			if err := w.client.List(w.ctx, &list); err != nil {
				t.Fatal(err)
			}
			for i := range list.Items {
				wl := &list.Items[i]
				if workload.IsAdmitted(wl) {
					got.Admitted = append(got.Admitted, wl.Name)
				}
				if apimeta.IsStatusConditionTrue(wl.Status.Conditions, kueue.WorkloadEvicted) {
					got.Evicted = append(got.Evicted, wl.Name)
				}
			}
			if diff := cmp.Diff(tc.want, got); diff != "" {
				t.Errorf("Cycle (-want +got):\n%s", diff)
			}
		})
	}
}
