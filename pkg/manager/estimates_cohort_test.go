package manager

import (
	"context"
	"strconv"
	"testing"
	"time"

	"github.com/go-logr/logr"
	"github.com/google/go-cmp/cmp"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"

	kueue "sigs.k8s.io/kueue/apis/kueue/v1beta2"
	schdcache "sigs.k8s.io/kueue/pkg/cache/scheduler"
	utiltestingapi "sigs.k8s.io/kueue/pkg/util/testing/v1beta2"
	"sigs.k8s.io/kueue/pkg/workload"

	"github.com/kueue-timeshare/kueue-timeshare/pkg/estimate"
	"github.com/kueue-timeshare/kueue-timeshare/pkg/policy"
	"github.com/kueue-timeshare/kueue-timeshare/test/util/snapgen"
)

// TestCohortWalks checks that the members of a cohort share one walk per snapshot and listed
// workloads, walk again when either changes, and get no walk beyond the bound on pending.
func TestCohortWalks(t *testing.T) {
	sc := &snapgen.Scenario{Flavors: []*kueue.ResourceFlavor{utiltestingapi.MakeResourceFlavor("f").Obj()},
		Cohorts: []*kueue.Cohort{utiltestingapi.MakeCohort("co").Obj()}}
	for _, name := range []string{"a", "b"} {
		sc.ClusterQueues = append(sc.ClusterQueues, utiltestingapi.MakeClusterQueue(name).Cohort("co").
			ResourceGroup(*utiltestingapi.MakeFlavorQuotas("f").Resource(corev1.ResourceCPU, "2").Obj()).Obj())
	}
	ctx := context.Background()
	cache, err := sc.NewCache(ctx, logr.Discard())
	if err != nil {
		t.Fatal(err)
	}
	snapshot := func() *schdcache.Snapshot {
		s, err := cache.Snapshot(ctx)
		if err != nil {
			t.Fatal(err)
		}
		return s
	}
	pendingIn := func(cq string, n int) []*workload.Info {
		var out []*workload.Info
		for i := range n {
			name := cq + strconv.Itoa(i)
			info := workload.NewInfo(utiltestingapi.MakeWorkload(name, "ns").UID(types.UID(name)).Request(corev1.ResourceCPU, "3").Obj())
			info.ClusterQueue = kueue.ClusterQueueReference(cq)
			out = append(out, info)
		}
		return out
	}
	listed := map[kueue.ClusterQueueReference][]*workload.Info{"a": pendingIn("a", 1), "b": pendingIn("b", 1)}
	walks := 0
	config := func(*schdcache.ClusterQueueSnapshot) estimate.Config {
		walks++
		return estimate.Config{Log: logr.Discard(), Policy: policy.New(policy.Options{})}
	}
	var c cohortWalks
	walk := func(snap *schdcache.Snapshot, cq kueue.ClusterQueueReference, most int) map[string]estimate.Estimate {
		return c.walk(snap, snap.ClusterQueue(cq), listed[cq], func(m kueue.ClusterQueueReference) []*workload.Info { return listed[m] },
			config, false, time.Now(), most)
	}
	snap := snapshot()
	got := walk(snap, "a", 10)
	// 3 CPUs fit by borrowing one of b's: a walk of the cohort, not of a alone.
	if e := got["ns/a0"]; e.Unknown || e.Note == "" {
		t.Errorf("a0's estimate is %+v, want a known time with a note on borrowing", e)
	}
	if walks != 2 {
		t.Fatalf("the first read built %d members' configurations, want 2 (one walk)", walks)
	}
	if _, ok := walk(snap, "b", 10)["ns/b0"]; !ok || walks != 2 {
		t.Errorf("b's read on the same snapshot walked again (%d configurations) or missed b0", walks)
	}
	listed["b"] = pendingIn("b", 2)
	walk(snap, "a", 10)
	if walks != 4 {
		t.Errorf("after b's listed workloads changed, %d configurations built, want a walk more (4)", walks)
	}
	walk(snapshot(), "a", 10)
	if walks != 6 {
		t.Errorf("on a new snapshot, %d configurations built, want a walk more (6)", walks)
	}
	if got := walk(snapshot(), "a", 2); got != nil {
		t.Errorf("with 3 pending and a bound of 2, got a walk: %v", got)
	}
}

func TestListMemo(t *testing.T) {
	s1, s2 := &schdcache.Snapshot{}, &schdcache.Snapshot{}
	cases := map[string]struct {
		reads []struct {
			snap *schdcache.Snapshot
			cq   kueue.ClusterQueueReference
		}
		wantListed []kueue.ClusterQueueReference
	}{
		"each ClusterQueue is listed once for a snapshot": {
			reads: []struct {
				snap *schdcache.Snapshot
				cq   kueue.ClusterQueueReference
			}{{s1, "a"}, {s1, "b"}, {s1, "a"}, {s1, "b"}, {s1, "a"}},
			wantListed: []kueue.ClusterQueueReference{"a", "b"},
		},
		"a new snapshot lists again": {
			reads: []struct {
				snap *schdcache.Snapshot
				cq   kueue.ClusterQueueReference
			}{{s1, "a"}, {s2, "a"}, {s2, "a"}, {s1, "a"}},
			wantListed: []kueue.ClusterQueueReference{"a", "a", "a"},
		},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			var m listMemo
			var listed []kueue.ClusterQueueReference
			for _, r := range tc.reads {
				got := m.get(r.snap, r.cq, func(cq kueue.ClusterQueueReference) []*workload.Info {
					listed = append(listed, cq)
					return []*workload.Info{{ClusterQueue: cq}}
				})
				if len(got) != 1 || got[0].ClusterQueue != r.cq {
					t.Errorf("get(%s) = %v, want the list of %s", r.cq, got, r.cq)
				}
			}
			if diff := cmp.Diff(tc.wantListed, listed); diff != "" {
				t.Errorf("listed (-want +got):\n%s", diff)
			}
		})
	}
}
