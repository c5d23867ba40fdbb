package scheduler

import (
	"testing"

	"github.com/google/go-cmp/cmp"
	corev1 "k8s.io/api/core/v1"
	apimeta "k8s.io/apimachinery/pkg/api/meta"

	kueue "sigs.k8s.io/kueue/apis/kueue/v1beta2"
	testingwrappers "sigs.k8s.io/kueue/pkg/util/testing/v1beta2"
	"sigs.k8s.io/kueue/pkg/workload"
)

// Two StrictFIFO ClusterQueues of a cohort, each with the flavors default and f1. The first one's
// head needs six CPUs of default, which only a borrower it may not reclaim from keeps it out of,
// so it holds that quota every cycle. The second one's head fits in default by borrowing until
// then, and loses it to that hold each cycle; in f1 it fits only if f1 has room. A scan resumed at
// f1 that finds nothing there must give the same outcome as a full scan: otherwise the head's
// pending message alternates, and is written, every cycle.
func TestResumedFlavorScan(t *testing.T) {
	queue := func(name, defaultQuota, f1Quota string, p kueue.ClusterQueuePreemption) *kueue.ClusterQueue {
		return testingwrappers.MakeClusterQueue(name).Cohort("co").QueueingStrategy(kueue.StrictFIFO).
			ResourceGroup(*testingwrappers.MakeFlavorQuotas(testFlavor).Resource(corev1.ResourceCPU, defaultQuota).Obj(),
				*testingwrappers.MakeFlavorQuotas("f1").Resource(corev1.ResourceCPU, f1Quota).Obj()).
			Preemption(p).Obj()
	}
	holder := kueue.ClusterQueuePreemption{WithinClusterQueue: kueue.PreemptionPolicyLowerOrNewerEqualPriority, ReclaimWithinCohort: kueue.PreemptionPolicyLowerPriority}
	other := kueue.ClusterQueuePreemption{WithinClusterQueue: kueue.PreemptionPolicyLowerOrNewerEqualPriority, ReclaimWithinCohort: kueue.PreemptionPolicyNever}
	runningIn := func(name, cq, cpu, flavor string) *kueue.Workload {
		return cpuWorkload(name, cq, cpu).SimpleReserveQuota(kueue.ClusterQueueReference(cq), flavor, t0).AdmittedAt(true, t0).Obj()
	}
	base := []*kueue.Workload{
		runningIn("big", "cq0", "5", "f1"),
		runningIn("borrower", "cq1", "3", testFlavor),
		cpuWorkload("holder", "cq0", "6").Obj(),
		cpuWorkload("head", "cq1", "2").Creation(t0.Add(1)).Obj(),
	}
	const (
		lost     = "Workload no longer fits after processing another workload"
		admitted = "admitted"
	)
	cases := map[string]struct {
		workloads []*kueue.Workload
		// want is, for each of three cycles, the head's QuotaReserved message, or admitted.
		want []string
	}{
		"f1 has no room either: the same outcome every cycle": {
			workloads: append([]*kueue.Workload{runningIn("f1-user", "cq1", "3", "f1")}, base...),
			want:      []string{lost, lost, lost},
		},
		"f1 has room: the resumed scan takes it in the next cycle": {
			workloads: base,
			want:      []string{lost, admitted, admitted},
		},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			w := newWorld(t, worldObjects{
				clusterQueues: []*kueue.ClusterQueue{queue("cq0", "6", "6", holder), queue("cq1", "2", "3", other)},
				workloads:     tc.workloads,
				flavors:       []string{"f1"},
			})
			s, written := w.scheduler()
			var got []string
			for range tc.want {
				s.schedule(w.ctx)
				written()
				wl := w.workload("head")
				if workload.HasQuotaReservation(wl) {
					got = append(got, admitted)
					continue
				}
				msg := ""
				if c := apimeta.FindStatusCondition(wl.Status.Conditions, kueue.WorkloadQuotaReserved); c != nil {
					msg = c.Message
				}
				got = append(got, msg)
			}
			if diff := cmp.Diff(tc.want, got); diff != "" {
				t.Errorf("head's outcome per cycle (-want +got):\n%s", diff)
			}
		})
	}
}
