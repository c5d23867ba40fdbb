package quotatree

import (
	"context"
	"math/rand/v2"
	"testing"

	"github.com/go-logr/logr"
	corev1 "k8s.io/api/core/v1"

	kueue "sigs.k8s.io/kueue/apis/kueue/v1beta2"
	"sigs.k8s.io/kueue/pkg/resources"
	"sigs.k8s.io/kueue/pkg/scheduler/preemption/classical"
	"sigs.k8s.io/kueue/pkg/workload"

	"github.com/kueue-timeshare/kueue-timeshare/test/util/snapgen"
)

// TestParityWithUpstream holds the copy to upstream's own arithmetic: on generated cohort trees
// (quotas, borrowing and lending limits, Cohorts with quota of their own, admitted workloads),
// every ClusterQueue's Available, PotentialAvailable, borrowing level and dominant resource share
// agree with the snapshot's, before and after each of a random sequence of usage added and
// removed on both, and Restore gives back what Save kept.
func TestParityWithUpstream(t *testing.T) {
	const seeds = 300
	checked := 0
	heights := map[int]int{}
	for seed := uint64(0); seed < seeds; seed++ {
		sc := snapgen.Generate(seed, snapgen.Small)
		snap, err := sc.Snapshot(context.Background(), logr.Discard())
		if err != nil {
			t.Fatal(err)
		}
		var frs []resources.FlavorResource
		for _, f := range sc.Flavors {
			for _, r := range []string{"cpu", "memory"} {
				frs = append(frs, resources.FlavorResource{Flavor: kueue.ResourceFlavorReference(f.Name), Resource: corev1.ResourceName(r)})
			}
		}
		walked := map[kueue.ClusterQueueReference]bool{}
		for _, cq := range sc.ClusterQueues {
			name := kueue.ClusterQueueReference(cq.Name)
			cqs := snap.ClusterQueue(name)
			if cqs == nil || walked[name] {
				continue
			}
			tree := FromSnapshot(cqs)
			for _, m := range tree.ClusterQueues() {
				walked[m] = true
			}
			compare := func(step string) {
				t.Helper()
				for _, m := range tree.ClusterQueues() {
					ms := snap.ClusterQueue(m)
					for _, fr := range frs {
						checked++
						if got, want := tree.Available(m, fr), ms.Available(fr).Int64(); got != want {
							t.Fatalf("seed %d, %s: Available(%s, %v) = %d, upstream's %d", seed, step, m, fr, got, want)
						}
						if got, want := tree.PotentialAvailable(m, fr), ms.PotentialAvailable(fr).Int64(); got != want {
							t.Fatalf("seed %d, %s: PotentialAvailable(%s, %v) = %d, upstream's %d", seed, step, m, fr, got, want)
						}
						if got, want := tree.Borrowing(m, fr), ms.Borrowing(fr); got != want {
							t.Fatalf("seed %d, %s: Borrowing(%s, %v) = %t, upstream's %t", seed, step, m, fr, got, want)
						}
						for _, v := range []int64{1, 1500, 6000} {
							want, _ := classical.FindHeightOfLowestSubtreeThatFits(ms, fr, resources.NewAmount(v))
							if got := tree.FindHeightOfLowestSubtreeThatFits(m, fr, v); got != want {
								t.Fatalf("seed %d, %s: FindHeightOfLowestSubtreeThatFits(%s, %v, %d) = %d, upstream's %d", seed, step, m, fr, v, got, want)
							}
							heights[want]++
						}
					}
					checked++
					if got, want := tree.Share(m), ms.DominantResourceShare(); got.PreciseWeightedShare() != want.PreciseWeightedShare() || got.IsZero() != want.IsZero() {
						t.Fatalf("seed %d, %s: Share(%s) = %v, upstream's %v", seed, step, m, got.PreciseWeightedShare(), want.PreciseWeightedShare())
					}
				}
			}
			compare("as copied")
			saved := tree.Save()
			rng := rand.New(rand.NewPCG(seed, 7))
			members := tree.ClusterQueues()
			type op struct {
				cq  kueue.ClusterQueueReference
				fr  resources.FlavorResource
				val int64
			}
			var added []op
			for i := range 20 {
				if len(added) > 0 && rng.IntN(3) == 0 {
					o := added[len(added)-1]
					added = added[:len(added)-1]
					tree.Remove(o.cq, o.fr, o.val)
					snap.ClusterQueue(o.cq).RemoveUsage(workload.Usage{Quota: resources.FlavorResourceQuantities{o.fr: resources.NewAmount(o.val)}})
					compare("after a removal")
					continue
				}
				o := op{members[rng.IntN(len(members))], frs[rng.IntN(len(frs))], int64(1 + rng.IntN(4000))}
				added = append(added, o)
				tree.Add(o.cq, o.fr, o.val)
				snap.ClusterQueue(o.cq).AddUsage(workload.Usage{Quota: resources.FlavorResourceQuantities{o.fr: resources.NewAmount(o.val)}})
				compare("after an addition " + string(rune('a'+i)))
			}
			for i := len(added) - 1; i >= 0; i-- {
				o := added[i]
				snap.ClusterQueue(o.cq).RemoveUsage(workload.Usage{Quota: resources.FlavorResourceQuantities{o.fr: resources.NewAmount(o.val)}})
			}
			tree.Restore(saved)
			compare("restored")
		}
	}
	if checked == 0 {
		t.Fatal("nothing compared")
	}
	// The borrowing levels compared include staying within nominal and each of the first two
	// heights up a tree.
	for h := range 3 {
		if heights[h] == 0 {
			t.Errorf("no borrowing level %d compared: %v", h, heights)
		}
	}
	t.Logf("%d comparisons over %d seeds, borrowing levels %v", checked, seeds, heights)
}
