package scheduler

import (
	"slices"
	"testing"

	"github.com/google/go-cmp/cmp"
	"github.com/prometheus/client_golang/prometheus/testutil"
	corev1 "k8s.io/api/core/v1"

	kueue "sigs.k8s.io/kueue/apis/kueue/v1beta2"
	"sigs.k8s.io/kueue/pkg/metrics"
	"sigs.k8s.io/kueue/pkg/util/roletracker"
	testingwrappers "sigs.k8s.io/kueue/pkg/util/testing/v1beta2"
	"sigs.k8s.io/kueue/pkg/workload"
)

// A head that fits no flavor, and may not preempt, waits as inadmissible until something
// changes: it is not tried again in every cycle. Its first scan may leave flavors untried (a
// pod set that fits a flavor alone stops there), so it may be tried once more from where that
// scan stopped; after that it is parked. Nothing changes between the cycles here.
func TestUnfitHeadIsParked(t *testing.T) {
	const cycles = 6
	never := kueue.ClusterQueuePreemption{WithinClusterQueue: kueue.PreemptionPolicyNever, ReclaimWithinCohort: kueue.PreemptionPolicyNever}
	// twoFlavors is a ClusterQueue with cpu quota in default (small) and in big, which a running
	// workload of 4 cpus fills.
	twoFlavors := func(name, small string) *testingwrappers.ClusterQueueWrapper {
		return testingwrappers.MakeClusterQueue(name).
			ResourceGroup(*testingwrappers.MakeFlavorQuotas(testFlavor).Resource(corev1.ResourceCPU, small).Obj(),
				*testingwrappers.MakeFlavorQuotas("big").Resource(corev1.ResourceCPU, "4").Obj()).
			Preemption(never)
	}
	inBig := func(cq string) *kueue.Workload {
		return cpuWorkload("big-user", cq, "4").SimpleReserveQuota(kueue.ClusterQueueReference(cq), "big", t0).AdmittedAt(true, t0).Obj()
	}
	// podSets is a pending workload in queue with one pod per cpu request.
	podSets := func(queue string, cpus ...string) *kueue.Workload {
		var ps []kueue.PodSet
		for i, cpu := range cpus {
			ps = append(ps, *testingwrappers.MakePodSet(kueue.PodSetReference(string(rune('a'+i))), 1).Request(corev1.ResourceCPU, cpu).Obj())
		}
		return testingwrappers.MakeWorkload("waiting", "ns").Queue(kueue.LocalQueueName(queue)).PodSets(ps...).Creation(t0).Obj()
	}

	type outcome struct {
		// Tried is the number of cycles in which the waiting workload was a head.
		Tried int
		// Inadmissible is the ClusterQueue's pending_workloads{status="inadmissible"} after them.
		Inadmissible float64
	}
	cases := map[string]struct {
		cohorts []*kueue.Cohort
		cqs     []*kueue.ClusterQueue
		running []*kueue.Workload
		waiting *kueue.Workload
		want    outcome
	}{
		"one pod set: both flavors are scanned at once, and it is parked": {
			cqs:     []*kueue.ClusterQueue{twoFlavors("one-ps", "2").Obj()},
			running: []*kueue.Workload{inBig("one-ps")},
			waiting: podSets("one-ps", "4"),
			want:    outcome{Tried: 1, Inadmissible: 1},
		},
		"two pod sets, one of which fits the small flavor alone: tried from where its scan stopped, then parked": {
			cqs:     []*kueue.ClusterQueue{twoFlavors("two-ps", "2").Obj()},
			running: []*kueue.Workload{inBig("two-ps")},
			waiting: podSets("two-ps", "1", "4"),
			want:    outcome{Tried: 2, Inadmissible: 1},
		},
		"two pod sets, neither fits the small flavor: parked at once": {
			cqs:     []*kueue.ClusterQueue{twoFlavors("two-ps-big", "2").Obj()},
			running: []*kueue.Workload{inBig("two-ps-big")},
			waiting: podSets("two-ps-big", "3", "3"),
			want:    outcome{Tried: 1, Inadmissible: 1},
		},
		"three pod sets, two of which fit the small flavor alone": {
			cqs:     []*kueue.ClusterQueue{twoFlavors("three-ps", "2").Obj()},
			running: []*kueue.Workload{inBig("three-ps")},
			waiting: podSets("three-ps", "1", "1", "4"),
			want:    outcome{Tried: 2, Inadmissible: 1},
		},
		"three flavors, the first two too small for the whole: tried until the scan has reached the last one": {
			cqs: []*kueue.ClusterQueue{testingwrappers.MakeClusterQueue("three-flavors").
				ResourceGroup(*testingwrappers.MakeFlavorQuotas(testFlavor).Resource(corev1.ResourceCPU, "1").Obj(),
					*testingwrappers.MakeFlavorQuotas("mid").Resource(corev1.ResourceCPU, "2").Obj(),
					*testingwrappers.MakeFlavorQuotas("big").Resource(corev1.ResourceCPU, "4").Obj()).
				Preemption(never).Obj()},
			running: []*kueue.Workload{inBig("three-flavors")},
			waiting: podSets("three-flavors", "1", "4"),
			// The small pod set stops at default, then at mid, then reaches the last flavor.
			want: outcome{Tried: 3, Inadmissible: 1},
		},
		"whenCanPreempt MayStopSearch: no candidates still moves on, and it is parked": {
			cqs: []*kueue.ClusterQueue{twoFlavors("may-stop", "2").
				FlavorFungibility(kueue.FlavorFungibility{WhenCanBorrow: kueue.MayStopSearch, WhenCanPreempt: kueue.MayStopSearch}).Obj()},
			running: []*kueue.Workload{inBig("may-stop")},
			waiting: podSets("may-stop", "1", "4"),
			want:    outcome{Tried: 2, Inadmissible: 1},
		},
		"whenCanBorrow TryNextFlavor: a pod set that fits the small flavor by borrowing scans on, and it is parked at once": {
			cohorts: []*kueue.Cohort{testingwrappers.MakeCohort("co").Obj()},
			cqs: []*kueue.ClusterQueue{
				twoFlavors("try-next", "0").Cohort("co").
					FlavorFungibility(kueue.FlavorFungibility{WhenCanBorrow: kueue.TryNextFlavor, WhenCanPreempt: kueue.TryNextFlavor}).Obj(),
				testingwrappers.MakeClusterQueue("try-next-lender").Cohort("co").
					ResourceGroup(*testingwrappers.MakeFlavorQuotas(testFlavor).Resource(corev1.ResourceCPU, "2").Obj(),
						*testingwrappers.MakeFlavorQuotas("big").Resource(corev1.ResourceCPU, "0").Obj()).Obj(),
			},
			running: []*kueue.Workload{inBig("try-next")},
			waiting: podSets("try-next", "1", "4"),
			want:    outcome{Tried: 1, Inadmissible: 1},
		},
		"whenCanBorrow MayStopSearch: that pod set stops at the small flavor, and it is parked after one more try": {
			cohorts: []*kueue.Cohort{testingwrappers.MakeCohort("co").Obj()},
			cqs: []*kueue.ClusterQueue{
				twoFlavors("may-stop-borrow", "0").Cohort("co").Obj(),
				testingwrappers.MakeClusterQueue("may-stop-borrow-lender").Cohort("co").
					ResourceGroup(*testingwrappers.MakeFlavorQuotas(testFlavor).Resource(corev1.ResourceCPU, "2").Obj(),
						*testingwrappers.MakeFlavorQuotas("big").Resource(corev1.ResourceCPU, "0").Obj()).Obj(),
			},
			running: []*kueue.Workload{inBig("may-stop-borrow")},
			waiting: podSets("may-stop-borrow", "1", "4"),
			want:    outcome{Tried: 2, Inadmissible: 1},
		},
		"StrictFIFO: the head is never set aside, as upstream's queue does": {
			cqs:     []*kueue.ClusterQueue{twoFlavors("strict", "2").QueueingStrategy(kueue.StrictFIFO).Obj()},
			running: []*kueue.Workload{inBig("strict")},
			waiting: podSets("strict", "1", "4"),
			want:    outcome{Tried: cycles, Inadmissible: 0},
		},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			w := newWorld(t, worldObjects{
				cohorts:       tc.cohorts,
				clusterQueues: tc.cqs,
				workloads:     append(slices.Clone(tc.running), tc.waiting),
				flavors:       []string{"mid", "big"},
			})
			s, written := w.scheduler()
			key := workload.Key(tc.waiting)
			var got outcome
			for range cycles {
				heads, _ := s.Cycle(w.ctx)
				written()
				if slices.Contains(heads, key) {
					got.Tried++
				}
			}
			if workload.HasQuotaReservation(w.workload(tc.waiting.Name)) {
				t.Fatalf("workload %s was admitted", key)
			}
			cq := tc.cqs[0].Name
			got.Inadmissible = testutil.ToFloat64(metrics.PendingWorkloads.WithLabelValues(cq, metrics.PendingStatusInadmissible, roletracker.GetRole(nil)))
			if diff := cmp.Diff(tc.want, got); diff != "" {
				t.Errorf("after %d cycles (-want +got):\n%s", cycles, diff)
			}
		})
	}
}
