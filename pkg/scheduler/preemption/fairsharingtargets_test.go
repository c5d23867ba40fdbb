package preemption

import (
	"context"
	"testing"
	"time"

	"github.com/go-logr/logr"
	"github.com/google/go-cmp/cmp"
	"github.com/google/go-cmp/cmp/cmpopts"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"
	clocktesting "k8s.io/utils/clock/testing"
	ctrllog "sigs.k8s.io/controller-runtime/pkg/log"

	configapi "sigs.k8s.io/kueue/apis/config/v1beta2"
	kueue "sigs.k8s.io/kueue/apis/kueue/v1beta2"
	preemptexpectations "sigs.k8s.io/kueue/pkg/scheduler/preemption/expectations"
	utiltestingapi "sigs.k8s.io/kueue/pkg/util/testing/v1beta2"
	"sigs.k8s.io/kueue/pkg/workload"

	"github.com/kueue-timeshare/kueue-timeshare/test/util/snapgen"
)

// A two-CPU ClusterQueue with minAdmitDuration holds one one-CPU workload; the other ClusterQueue
// of its cohort uses all the rest and borrows one CPU. A two-CPU workload waits in the first. Both
// queues would borrow one CPU with their workload admitted, so fair sharing lets the pending one
// take the two-CPU borrower only once the one-CPU workload of its own queue is gone.
func turnAndReclaimScenario(ownPriority int32) *snapgen.Scenario {
	sc := &snapgen.Scenario{Now: snapgen.Epoch.Add(4 * time.Hour), FairSharing: true}
	sc.Flavors = []*kueue.ResourceFlavor{utiltestingapi.MakeResourceFlavor("f0").Obj()}
	sc.ClusterQueues = []*kueue.ClusterQueue{
		utiltestingapi.MakeClusterQueue("cq0").Cohort("co").
			ResourceGroup(*utiltestingapi.MakeFlavorQuotas("f0").Resource(corev1.ResourceCPU, "2").Obj()).
			Preemption(kueue.ClusterQueuePreemption{
				WithinClusterQueue:  kueue.PreemptionPolicyLowerOrNewerEqualPriority,
				ReclaimWithinCohort: kueue.PreemptionPolicyAny,
			}).Obj(),
		utiltestingapi.MakeClusterQueue("cq1").Cohort("co").
			ResourceGroup(*utiltestingapi.MakeFlavorQuotas("f0").Resource(corev1.ResourceCPU, "6", "2").Obj()).Obj(),
	}
	admitted := func(name, cq, cpus string, prio int32, reservedAgo time.Duration) *kueue.Workload {
		psa := utiltestingapi.MakePodSetAssignment(kueue.DefaultPodSetName).Count(1).Flavor(corev1.ResourceCPU, "f0").ResourceUsage(corev1.ResourceCPU, cpus)
		return utiltestingapi.MakeWorkload(name, "ns").UID(types.UID("uid-"+name)).Priority(prio).Request(corev1.ResourceCPU, cpus).
			Creation(snapgen.Epoch).
			ReserveQuotaAt(utiltestingapi.MakeAdmission(kueue.ClusterQueueReference(cq)).PodSets(psa.Obj()).Obj(), sc.Now.Add(-reservedAgo)).Obj()
	}
	sc.Admitted = []*kueue.Workload{
		admitted("own", "cq0", "1", ownPriority, 2*time.Hour),
		admitted("big", "cq1", "5", 10, 3*time.Hour),
		admitted("borrower", "cq1", "2", 10, time.Hour),
	}
	sc.Pending = utiltestingapi.MakeWorkload("pending", "ns").UID("uid-pending").Priority(10).
		Request(corev1.ResourceCPU, "2").Creation(snapgen.Epoch.Add(time.Hour)).Obj()
	sc.PendingCQ = "cq0"
	return sc
}

// Targets that only justify a reclaim under fair sharing together are preempted together: a
// turn's victim whose removal made another ClusterQueue's borrower fair game is not put back by the
// minimisation, or the preemptor would borrow as much as the borrower did, lose the next cycle's
// order to it on the tie and evict it again, every cycle.
func TestFairSharingKeepsTurnVictims(t *testing.T) {
	cases := map[string]struct {
		ownPriority int32
		window      time.Duration
		want        []string
	}{
		"the turn's victim and the borrower, together": {
			ownPriority: 10, window: 30 * time.Minute,
			want: []string{"borrower: InCohortFairSharing", "own: InClusterQueueTimeBased"},
		},
		"own workload still in its window: neither": {
			ownPriority: 10, window: 3 * time.Hour,
		},
		"no window: the own workload is not a candidate, and the shares alone allow nothing": {
			ownPriority: 10,
		},
		"a lower priority in its own queue: upstream's minimisation puts it back": {
			ownPriority: 1, window: 30 * time.Minute,
			want: []string{"borrower: InCohortFairSharing"},
		},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			ctx := ctrllog.IntoContext(context.Background(), logr.Discard())
			sc := turnAndReclaimScenario(tc.ownPriority)
			snap := snapshotOf(t, ctx, sc)
			p := New(nil, workload.Ordering{PodsReadyRequeuingTimestamp: configapi.EvictionTimestamp}, nil, &configapi.FairSharing{}, false,
				clocktesting.NewFakeClock(sc.Now), nil, preemptexpectations.New(), nil, timeSharingOptions(tc.window, nil)...)
			info := sc.PendingInfo()
			var got []string
			for _, tg := range p.GetTargets(ctx, *info, cpuPreemptAssignment(info), snap) {
				got = append(got, tg.WorkloadInfo.Obj.Name+": "+tg.Reason)
			}
			if diff := cmp.Diff(tc.want, got, cmpopts.SortSlices(func(a, b string) bool { return a < b })); diff != "" {
				t.Errorf("targets (-want +got):\n%s", diff)
			}
		})
	}
}
