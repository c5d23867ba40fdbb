package scheduler

import (
	"context"
	"testing"

	"github.com/google/go-cmp/cmp"
	apimeta "k8s.io/apimachinery/pkg/api/meta"

	configapi "sigs.k8s.io/kueue/apis/config/v1beta2"
	kueue "sigs.k8s.io/kueue/apis/kueue/v1beta2"
	schdcache "sigs.k8s.io/kueue/pkg/cache/scheduler"
	"sigs.k8s.io/kueue/pkg/scheduler/flavorassigner"
	"sigs.k8s.io/kueue/pkg/scheduler/preemption"
	"sigs.k8s.io/kueue/pkg/workload"
)

// countingPreemptor delegates to upstream's preemptor and counts the calls the loop makes.
type countingPreemptor struct {
	Preemptor
	calls map[string]int
}

func (c *countingPreemptor) GetTargets(ctx context.Context, wl workload.Info, a flavorassigner.Assignment, snap *schdcache.Snapshot) []*preemption.Target {
	c.calls["GetTargets"]++
	return c.Preemptor.GetTargets(ctx, wl, a, snap)
}

func (c *countingPreemptor) IssuePreemptions(ctx context.Context, cache *schdcache.Cache, p *workload.Info, targets []*preemption.Target, cq *schdcache.ClusterQueueSnapshot) (int, int, error) {
	c.calls["IssuePreemptions"]++
	return c.Preemptor.IssuePreemptions(ctx, cache, p, targets, cq)
}

func (c *countingPreemptor) Oracle(snap *schdcache.Snapshot) PreemptionOracle {
	c.calls["Oracle"]++
	return c.Preemptor.Oracle(snap)
}

func TestWithPreemptor(t *testing.T) {
	w := newWorld(t, worldObjects{
		clusterQueues: []*kueue.ClusterQueue{cpuQueue("cq", "2").Preemption(lowerPriority).Obj()},
		workloads: []*kueue.Workload{
			running(cpuWorkload("low", "cq", "2"), "cq"),
			cpuWorkload("high", "cq", "2").Priority(10).Obj(),
		},
	})
	var got PreemptorConfig
	counting := &countingPreemptor{calls: map[string]int{}}
	fs := &configapi.FairSharing{}
	s, written := w.scheduler(WithFairSharing(fs), WithPreemptor(func(c PreemptorConfig) Preemptor {
		got = c
		counting.Preemptor = NewUpstreamPreemptor(c)
		return counting
	}))
	s.schedule(w.ctx)
	written()

	if got.Client == nil || got.Recorder != w.recorder || got.Clock != w.clock || got.FairSharing != fs || got.Expectations != w.expectations {
		t.Errorf("the factory did not get the scheduler's settings: %+v", got)
	}
	if got.AdmissionFairSharing {
		t.Error("admission fair sharing reported on without configuration")
	}
	if diff := cmp.Diff(map[string]int{"Oracle": 1, "GetTargets": 1, "IssuePreemptions": 1}, counting.calls); diff != "" {
		t.Errorf("calls (-want +got):\n%s", diff)
	}
	if !apimeta.IsStatusConditionTrue(w.workload("low").Status.Conditions, kueue.WorkloadEvicted) {
		t.Error("the victim was not evicted")
	}
}

func TestWithPreemptorNilKeepsDefault(t *testing.T) {
	w := newWorld(t, worldObjects{})
	s, _ := w.scheduler(WithPreemptor(nil))
	if _, ok := s.preemptor.(*upstreamPreemptor); !ok {
		t.Errorf("preemptor is %T, want the upstream adapter", s.preemptor)
	}
}
