package estimate

import (
	"context"
	"fmt"
	"strconv"
	"testing"
	"time"

	"github.com/go-logr/logr"
	corev1 "k8s.io/api/core/v1"

	kueue "sigs.k8s.io/kueue/apis/kueue/v1beta2"
	schdcache "sigs.k8s.io/kueue/pkg/cache/scheduler"
	utiltestingapi "sigs.k8s.io/kueue/pkg/util/testing/v1beta2"
	"sigs.k8s.io/kueue/pkg/workload"

	"github.com/kueue-timeshare/kueue-timeshare/pkg/plugins"
	"github.com/kueue-timeshare/kueue-timeshare/pkg/plugins/timebased"
	"github.com/kueue-timeshare/kueue-timeshare/pkg/policy"
	"github.com/kueue-timeshare/kueue-timeshare/test/util/snapgen"
)

// BenchmarkEstimate is one ClusterQueue taking turns, 10,000 workloads holding a cpu each (full)
// and 1,000 pending, some with an expected runtime.
func BenchmarkEstimate(b *testing.B) {
	const holding, waiting = 10000, 1000
	holders := make([]wl, holding)
	for i := range holders {
		holders[i] = wl{name: fmt.Sprintf("h%d", i), cpu: 1, since: time.Duration(i%3600) * time.Second}
		if i%10 == 0 {
			holders[i].expected = 2 * time.Hour
		}
	}
	pending := make([]wl, waiting)
	for i := range pending {
		pending[i] = wl{name: fmt.Sprintf("p%d", i), cpu: 1 + int64(i%3)}
	}
	q, hs, ws := inputs(queueCase{capacity: holding, window: time.Hour, preemptMin: 10 * time.Minute, handover: time.Second}, holders, pending)
	b.ReportAllocs()
	for b.Loop() {
		out := Compute(q, hs, ws, t0)
		if out[waiting-1].Unknown {
			b.Fatalf("last one unknown: %s", out[waiting-1].Reason)
		}
	}
}

// BenchmarkEstimateCohort is the walk of a cohort of 20 ClusterQueues of per CPUs each, half of
// them taking turns of an hour, with per workloads holding a CPU each in each (one ClusterQueue
// borrowing a fifth of its neighbour's) and per pending of 1 to 3 CPUs, a tenth of each with an
// expected runtime: a snapshot's read (FromCohort) and the walk (ComputeCohort). per=500 is
// 10,000 holding and 10,000 pending.
func BenchmarkEstimateCohort(b *testing.B) {
	for _, per := range []int{50, 100, 500} {
		b.Run(fmt.Sprintf("queues=20/per=%d", per), func(b *testing.B) { benchmarkEstimateCohort(b, 20, per) })
	}
}

func benchmarkEstimateCohort(b *testing.B, queues, per int) {
	var wls []cohortWl
	for q := range queues {
		cq := fmt.Sprintf("cq%02d", q)
		holding := per
		switch q {
		case 0:
			holding += per / 5
		case 1:
			holding -= per / 5
		}
		for i := range holding {
			w := cohortWl{name: fmt.Sprintf("h%02d-%d", q, i), cq: cq, cpu: 1, admitted: time.Duration(1+i%3600) * time.Second}
			if i%10 == 0 {
				w.expected = 2 * time.Hour
			}
			wls = append(wls, w)
		}
		for i := range per {
			w := cohortWl{name: fmt.Sprintf("p%02d-%d", q, i), cq: cq, cpu: 1 + i%3}
			if i%10 == 0 {
				w.expected = time.Hour
			}
			wls = append(wls, w)
		}
	}
	sc := &snapgen.Scenario{Flavors: []*kueue.ResourceFlavor{utiltestingapi.MakeResourceFlavor("f").Obj()},
		Cohorts: []*kueue.Cohort{utiltestingapi.MakeCohort("co").Obj()}}
	for q := range queues {
		sc.ClusterQueues = append(sc.ClusterQueues, utiltestingapi.MakeClusterQueue(fmt.Sprintf("cq%02d", q)).Cohort("co").
			ResourceGroup(*utiltestingapi.MakeFlavorQuotas("f").Resource(corev1.ResourceCPU, strconv.Itoa(per)).Obj()).
			Preemption(kueue.ClusterQueuePreemption{WithinClusterQueue: kueue.PreemptionPolicyLowerOrNewerEqualPriority, ReclaimWithinCohort: kueue.PreemptionPolicyAny}).Obj())
	}
	pending := map[kueue.ClusterQueueReference][]*workload.Info{}
	for i, w := range wls {
		if w.admitted > 0 {
			sc.Admitted = append(sc.Admitted, w.obj(i))
			continue
		}
		info := workload.NewInfo(w.obj(i))
		info.ClusterQueue = kueue.ClusterQueueReference(w.cq)
		pending[info.ClusterQueue] = append(pending[info.ClusterQueue], info)
	}
	snap, err := sc.Snapshot(context.Background(), logr.Discard())
	if err != nil {
		b.Fatal(err)
	}
	pol := policy.New(policy.Options{}, plugins.With(plugins.Units().Features()...))
	config := func(cq *schdcache.ClusterQueueSnapshot) Config {
		settings := timebased.Settings{}
		if cq.Name[len(cq.Name)-1]%2 == 0 {
			settings.MinAdmitDuration = time.Hour
		}
		c := Config{Log: logr.Discard(), Policy: pol, Handover: time.Second, Resolved: *timebased.Resolved(settings),
			Wake: policy.WakeSettings{Units: plugins.Units(), Queue: map[policy.Feature]any{timebased.Feature: settings}}}
		if settings.TakesTurns() {
			c.TurnTime = func(wl *kueue.Workload) time.Time { return wl.CreationTimestamp.Time }
		}
		return c
	}
	b.ReportAllocs()
	unknown := 0
	for b.Loop() {
		tree, members := FromCohort(snap, snap.ClusterQueue("cq00"), func(cq kueue.ClusterQueueReference) []*workload.Info { return pending[cq] }, config)
		out := ComputeCohort(CohortOptions{Tree: tree}, members, t0)
		if len(out) != queues {
			b.Fatalf("%d ClusterQueues walked, want %d", len(out), queues)
		}
		unknown = 0
		for _, ests := range out {
			for _, e := range ests {
				if e.Unknown {
					unknown++
				}
			}
		}
	}
	// What the walk answered is part of its cost: a walk that gives up early is cheap.
	b.ReportMetric(float64(unknown), "unknown")
}
