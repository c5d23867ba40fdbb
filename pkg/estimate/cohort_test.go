package estimate

import (
	"context"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/go-logr/logr"
	"github.com/google/go-cmp/cmp"
	"github.com/google/go-cmp/cmp/cmpopts"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/utils/ptr"

	kueue "sigs.k8s.io/kueue/apis/kueue/v1beta2"
	schdcache "sigs.k8s.io/kueue/pkg/cache/scheduler"
	"sigs.k8s.io/kueue/pkg/features"
	utiltestingapi "sigs.k8s.io/kueue/pkg/util/testing/v1beta2"
	"sigs.k8s.io/kueue/pkg/workload"

	"github.com/kueue-timeshare/kueue-timeshare/apis/annotations"
	"github.com/kueue-timeshare/kueue-timeshare/pkg/plugins"
	"github.com/kueue-timeshare/kueue-timeshare/pkg/plugins/minruntime"
	"github.com/kueue-timeshare/kueue-timeshare/pkg/plugins/timebased"
	"github.com/kueue-timeshare/kueue-timeshare/pkg/policy"
	"github.com/kueue-timeshare/kueue-timeshare/test/util/snapgen"
)

// cohortWl is a workload of a cohort test: a holder when admitted is set (that long before t0).
type cohortWl struct {
	name, cq string
	cpu      int
	prio     int32
	admitted time.Duration
	expected time.Duration
	// requeueAt, when set, is when a pending workload's requeue backoff ends, after t0.
	requeueAt time.Duration
}

func (c cohortWl) obj(i int) *kueue.Workload {
	w := utiltestingapi.MakeWorkload(c.name, "ns").UID(types.UID("uid-"+c.name)).Queue(kueue.LocalQueueName("lq-"+c.cq)).
		Priority(c.prio).Creation(t0.Add(-3*time.Hour+time.Duration(i)*time.Second)).Request(corev1.ResourceCPU, strconv.Itoa(c.cpu))
	if c.expected > 0 {
		w.Annotation(annotations.ExpectedRuntime, c.expected.String())
	}
	if c.requeueAt > 0 {
		w.RequeueState(ptr.To[int32](1), ptr.To(metav1.NewTime(t0.Add(c.requeueAt))))
	}
	if c.admitted > 0 {
		psa := utiltestingapi.MakePodSetAssignment(kueue.DefaultPodSetName).Count(1).Flavor(corev1.ResourceCPU, "f").ResourceUsage(corev1.ResourceCPU, strconv.Itoa(c.cpu))
		w.ReserveQuotaAt(utiltestingapi.MakeAdmission(kueue.ClusterQueueReference(c.cq)).PodSets(psa.Obj()).Obj(), t0.Add(-c.admitted)).AdmittedAt(true, t0.Add(-c.admitted))
	}
	return w.Obj()
}

// lenderAndBorrower is a cohort of a lender (4 CPUs) and a borrower (2 CPUs), of flavor f; with
// second, the borrower has 1 CPU of flavor g after f.
func lenderAndBorrower(reclaim kueue.PreemptionPolicy, second bool, wls []cohortWl) *snapgen.Scenario {
	sc := &snapgen.Scenario{Flavors: []*kueue.ResourceFlavor{utiltestingapi.MakeResourceFlavor("f").Obj(), utiltestingapi.MakeResourceFlavor("g").Obj()},
		Cohorts: []*kueue.Cohort{utiltestingapi.MakeCohort("co").Obj()}}
	for name, nominal := range map[string]string{"lender": "4", "borrower": "2"} {
		flavors := []kueue.FlavorQuotas{*utiltestingapi.MakeFlavorQuotas("f").Resource(corev1.ResourceCPU, nominal).Obj()}
		if second && name == "borrower" {
			flavors = append(flavors, *utiltestingapi.MakeFlavorQuotas("g").Resource(corev1.ResourceCPU, "1").Obj())
		}
		sc.ClusterQueues = append(sc.ClusterQueues, utiltestingapi.MakeClusterQueue(name).Cohort("co").
			ResourceGroup(flavors...).
			Preemption(kueue.ClusterQueuePreemption{WithinClusterQueue: kueue.PreemptionPolicyLowerPriority, ReclaimWithinCohort: reclaim}).Obj())
	}
	for i, w := range wls {
		if w.admitted > 0 {
			sc.Admitted = append(sc.Admitted, w.obj(i))
		}
	}
	return sc
}

func TestComputeCohort(t *testing.T) {
	const reclaimMin = 30 * time.Minute
	approximate := "approximate: ClusterQueues of cohort co borrow from each other"
	contested := "approximate: other ClusterQueues of cohort co wait for the same quota"
	flavorsUnknown := "cohort co has ClusterQueues with more than one flavor of a resource, whose assignment the estimate does not foresee once quota moves between them (ClusterQueues of cohort co borrow from each other)"
	// When b1 leaves, 5 CPUs are free: b2 would borrow 1 of the 6, a2 2.
	sharedHeads := []cohortWl{
		{name: "a0", cq: "lender", cpu: 1, admitted: time.Hour},
		{name: "b1", cq: "borrower", cpu: 4, admitted: 10 * time.Minute, expected: 40 * time.Minute},
		{name: "b2", cq: "borrower", cpu: 3, expected: time.Hour},
		{name: "a2", cq: "lender", cpu: 5, prio: 5},
	}
	cases := map[string]struct {
		reclaim     kueue.PreemptionPolicy
		fairSharing bool
		// second gives the borrower a second flavor; strict makes both queues StrictFIFO (as the
		// settings store reads them: Config.StrictFIFO).
		second, strict bool
		// preemptor names the lender's active preemptor (Config.Preemptor).
		preemptor string
		// window makes the lender take turns (LowerOrNewerEqualPriority within, minAdmitDuration
		// window).
		window time.Duration
		// budget, when set, replaces walkBudget.
		budget int
		wls    []cohortWl
		want   []Estimate
	}{
		"a walk past its bound of work answers the workloads still waiting unknown, naming the bound": {
			reclaim: kueue.PreemptionPolicyAny, budget: 1,
			wls: []cohortWl{
				{name: "a1", cq: "lender", cpu: 4, admitted: 10 * time.Minute, expected: 40 * time.Minute},
				{name: "a2", cq: "lender", cpu: 4},
				{name: "b2", cq: "borrower", cpu: 1},
			},
			want: []Estimate{
				{Workload: "ns/b2", Position: 1, When: t0, Reason: "fits now", Note: contested},
				{Workload: "ns/a2", Position: 1, Unknown: true, Reason: "the walk of cohort co stopped at its bound of work"},
			},
		},
		"a ClusterQueue borrows what the lender leaves idle, and says the estimate is approximate": {
			reclaim: kueue.PreemptionPolicyAny,
			wls: []cohortWl{
				{name: "b1", cq: "borrower", cpu: 2, admitted: 10 * time.Minute},
				{name: "b2", cq: "borrower", cpu: 3},
			},
			want: []Estimate{{Workload: "ns/b2", Position: 1, When: t0, Reason: "fits now", Note: approximate}},
		},
		"the lender reclaims what it lent once the borrower's reclaimMinRuntime ends": {
			reclaim: kueue.PreemptionPolicyAny,
			wls: []cohortWl{
				{name: "a1", cq: "lender", cpu: 1, admitted: time.Hour},
				{name: "b1", cq: "borrower", cpu: 2, admitted: time.Hour},
				{name: "b2", cq: "borrower", cpu: 3, admitted: 10 * time.Minute},
				{name: "a2", cq: "lender", cpu: 3},
			},
			want: []Estimate{{Workload: "ns/a2", Position: 1, When: at(20*time.Minute + time.Second), Reason: "when ns/b2 leaves", Note: approximate}},
		},
		"reclaimWithinCohort Never: the lender waits for the borrower's promised end": {
			reclaim: kueue.PreemptionPolicyNever,
			wls: []cohortWl{
				{name: "a1", cq: "lender", cpu: 1, admitted: time.Hour},
				{name: "b1", cq: "borrower", cpu: 2, admitted: time.Hour},
				{name: "b2", cq: "borrower", cpu: 3, admitted: 10 * time.Minute, expected: time.Hour},
				{name: "a2", cq: "lender", cpu: 3},
			},
			want: []Estimate{{Workload: "ns/a2", Position: 1, When: at(50 * time.Minute), Reason: "when ns/b2 leaves", Note: approximate}},
		},
		"reclaimWithinCohort LowerPriority does not take a borrower of the same priority": {
			reclaim: kueue.PreemptionPolicyLowerPriority,
			wls: []cohortWl{
				{name: "b1", cq: "borrower", cpu: 5, admitted: 10 * time.Minute},
				{name: "a2", cq: "lender", cpu: 3},
			},
			want: []Estimate{{Workload: "ns/a2", Position: 1, Unknown: true,
				Reason: "waits for quota that other ClusterQueues of cohort co hold with no declared runtime, and may not reclaim it"}},
		},
		"a lower-priority borrower is reclaimed under LowerPriority": {
			reclaim: kueue.PreemptionPolicyLowerPriority,
			wls: []cohortWl{
				{name: "b1", cq: "borrower", cpu: 5, prio: -1, admitted: time.Hour},
				{name: "a2", cq: "lender", cpu: 3},
			},
			want: []Estimate{{Workload: "ns/a2", Position: 1, When: at(time.Second), Reason: "when ns/b1 leaves", Note: approximate}},
		},
		"no borrowing and no one else waiting: the walk is the ClusterQueue's own, with no note": {
			reclaim: kueue.PreemptionPolicyAny,
			wls: []cohortWl{
				{name: "a1", cq: "lender", cpu: 4, admitted: 10 * time.Minute, expected: 30 * time.Minute},
				{name: "a2", cq: "lender", cpu: 4},
			},
			want: []Estimate{{Workload: "ns/a2", Position: 1, When: at(20 * time.Minute), Reason: "when ns/a1 leaves"}},
		},
		"with two flavors of a resource in the cohort, borrowing in the first flavor is approximate": {
			reclaim: kueue.PreemptionPolicyAny, second: true,
			wls: []cohortWl{
				{name: "b1", cq: "borrower", cpu: 2, admitted: 10 * time.Minute},
				{name: "b2", cq: "borrower", cpu: 3},
			},
			want: []Estimate{{Workload: "ns/b2", Position: 1, When: t0, Reason: "fits now", Note: approximate}},
		},
		"with two flavors, once quota moved, an admission in a later flavor is unknown, and every one after it": {
			// f is full, b1 borrowing: b2 takes the borrower's g, which the flavor assigner may
			// not choose where the scheduler's cycles differ from the walk's.
			reclaim: kueue.PreemptionPolicyAny, second: true,
			wls: []cohortWl{
				{name: "a1", cq: "lender", cpu: 3, admitted: 10 * time.Minute, expected: 40 * time.Minute},
				{name: "b1", cq: "borrower", cpu: 3, admitted: time.Hour},
				{name: "b2", cq: "borrower", cpu: 1},
				{name: "b3", cq: "borrower", cpu: 2},
			},
			want: []Estimate{
				{Workload: "ns/b2", Position: 1, Unknown: true, Reason: flavorsUnknown},
				{Workload: "ns/b3", Position: 2, Unknown: true, Reason: flavorsUnknown},
			},
		},
		"with two flavors, an estimate within the ClusterQueue's own quota stays known": {
			reclaim: kueue.PreemptionPolicyAny, second: true,
			wls: []cohortWl{
				{name: "a1", cq: "lender", cpu: 4, admitted: time.Hour},
				{name: "b1", cq: "borrower", cpu: 2, admitted: 10 * time.Minute, expected: 30 * time.Minute},
				{name: "b2", cq: "borrower", cpu: 2},
			},
			want: []Estimate{{Workload: "ns/b2", Position: 1, When: at(20 * time.Minute), Reason: "when ns/b1 leaves"}},
		},
		"a workload backing off after an eviction (its RequeueState) is offered when the backoff ends": {
			reclaim: kueue.PreemptionPolicyAny,
			wls: []cohortWl{
				{name: "a1", cq: "lender", cpu: 2, admitted: time.Hour},
				{name: "a2", cq: "lender", cpu: 2, requeueAt: 3 * time.Minute},
			},
			want: []Estimate{{Workload: "ns/a2", Position: 1, When: at(3 * time.Minute), Reason: "when its requeue backoff ends"}},
		},
		"a head that waits for a protected borrower holds its queue and the quota it waits for": {
			reclaim: kueue.PreemptionPolicyAny,
			wls: []cohortWl{
				{name: "a1", cq: "lender", cpu: 1, admitted: time.Hour},
				{name: "b1", cq: "borrower", cpu: 3, admitted: 10 * time.Minute},
				{name: "a2", cq: "lender", cpu: 3},
				{name: "a3", cq: "lender", cpu: 1},
			},
			want: []Estimate{
				{Workload: "ns/a2", Position: 1, When: at(20*time.Minute + time.Second), Reason: "when ns/b1 leaves", Note: approximate},
				{Workload: "ns/a3", Position: 2, When: at(20 * time.Minute), Reason: "fits now", Note: approximate},
			},
		},
		"a head that could never fit its nominal quota does not hold the ones behind it": {
			reclaim: kueue.PreemptionPolicyAny,
			wls: []cohortWl{
				{name: "a1", cq: "lender", cpu: 2, admitted: time.Hour},
				{name: "b1", cq: "borrower", cpu: 3, admitted: 10 * time.Minute},
				{name: "a2", cq: "lender", cpu: 5},
				{name: "a3", cq: "lender", cpu: 1},
			},
			want: []Estimate{
				{Workload: "ns/a2", Position: 1, Unknown: true, Reason: "held by ns/a1, which declares no runtime and has no window"},
				{Workload: "ns/a3", Position: 2, When: t0, Reason: "fits now", Note: approximate},
			},
		},
		"a borrower evicted by a reclaim is back in its line after the cycle, behind the head that cycle took": {
			reclaim: kueue.PreemptionPolicyAny, strict: true,
			wls: []cohortWl{
				{name: "a1", cq: "lender", cpu: 2, admitted: time.Hour, expected: 70 * time.Minute},
				{name: "b1", cq: "borrower", cpu: 1, admitted: 2 * time.Hour},
				{name: "b2", cq: "borrower", cpu: 3, admitted: time.Hour},
				{name: "a2", cq: "lender", cpu: 4},
				{name: "b3", cq: "borrower", cpu: 1},
			},
			want: []Estimate{
				{Workload: "ns/b3", Position: 1, When: at(10 * time.Minute), Reason: "when ns/a1 leaves", Note: approximate},
				{Workload: "ns/a2", Position: 1, When: at(10*time.Minute + time.Second), Reason: "when ns/b2 leaves", Note: approximate},
			},
		},
		"a BestEffortFIFO queue's heads take one cycle each, and the other queue's head goes between": {
			// When a1 leaves, the lender's first cycle goes to a0, which never fits, and the
			// borrower's to b2, which does not fit now; in the next, a2, which does not borrow,
			// goes before b3.
			reclaim: kueue.PreemptionPolicyNever,
			wls: []cohortWl{
				{name: "a1", cq: "lender", cpu: 4, admitted: 30 * time.Minute, expected: time.Hour},
				{name: "b1", cq: "borrower", cpu: 2, admitted: time.Hour},
				{name: "a0", cq: "lender", cpu: 7},
				{name: "b2", cq: "borrower", cpu: 5},
				{name: "b3", cq: "borrower", cpu: 3},
				{name: "a2", cq: "lender", cpu: 2},
			},
			want: []Estimate{
				{Workload: "ns/b2", Position: 1, Unknown: true, Reason: "held by ns/b1, which declares no runtime and has no window"},
				{Workload: "ns/b3", Position: 2, Unknown: true, Reason: "held by ns/b1, which declares no runtime and has no window"},
				{Workload: "ns/a0", Position: 1, Unknown: true, Reason: "does not fit in ClusterQueue lender even with every workload gone"},
				{Workload: "ns/a2", Position: 2, When: at(30 * time.Minute), Reason: "when ns/a1 leaves", Note: contested},
			},
		},
		"a head given its cycle keeps its room from the other queue's head, as any head that does not fit": {
			// When a1 leaves, 3 CPUs are free: the lender's head a2 does not fit and keeps 4 back
			// in its cycle, so b2 waits; in the next a3, which does not borrow, goes first.
			reclaim: kueue.PreemptionPolicyNever,
			wls: []cohortWl{
				{name: "a1", cq: "lender", cpu: 2, admitted: 30 * time.Minute, expected: time.Hour},
				{name: "a0", cq: "lender", cpu: 1, admitted: time.Hour},
				{name: "b1", cq: "borrower", cpu: 2, admitted: time.Hour},
				{name: "a2", cq: "lender", cpu: 4},
				{name: "a3", cq: "lender", cpu: 2, expected: time.Hour},
				{name: "b2", cq: "borrower", cpu: 2},
			},
			want: []Estimate{
				{Workload: "ns/b2", Position: 1, When: at(90 * time.Minute), Reason: "when ns/a3 leaves", Note: contested},
				{Workload: "ns/a2", Position: 1, Unknown: true, Reason: "held by ns/a0, which declares no runtime and has no window"},
				{Workload: "ns/a3", Position: 2, When: at(30 * time.Minute), Reason: "when ns/a1 leaves", Note: contested},
			},
		},
		"a workload that preempts is admitted in the next cycle, in which its ClusterQueue offers no other head": {
			// a2 preempts a1 in the first cycle, in which b2 finds no room; in the second a2 is
			// admitted and b2, in the borrower, goes before a3, which then finds too little.
			reclaim: kueue.PreemptionPolicyNever, fairSharing: true,
			wls: []cohortWl{
				{name: "a1", cq: "lender", cpu: 4, prio: -1, admitted: time.Hour},
				{name: "b1", cq: "borrower", cpu: 2, admitted: time.Hour},
				{name: "a2", cq: "lender", cpu: 2, prio: 5, expected: time.Hour},
				{name: "a3", cq: "lender", cpu: 2, prio: 5},
				{name: "b2", cq: "borrower", cpu: 1},
			},
			want: []Estimate{
				{Workload: "ns/b2", Position: 1, When: t0, Reason: "fits now", Note: approximate},
				{Workload: "ns/a2", Position: 1, When: at(time.Second), Reason: "when ns/a1 leaves", Note: approximate},
				{Workload: "ns/a3", Position: 2, When: at(time.Hour + time.Second), Reason: "when ns/a2 leaves", Note: approximate},
			},
		},
		"a workload that would borrow in a flavor does not preempt there": {
			// b2 asks 3 CPUs of the borrower's nominal 2: the flavor assigner gives it no
			// preemption there (borrowWithinCohort unset), so it waits for the lender's a1
			// rather than evicting b1.
			reclaim: kueue.PreemptionPolicyNever,
			wls: []cohortWl{
				{name: "a1", cq: "lender", cpu: 3, admitted: 30 * time.Minute, expected: time.Hour},
				{name: "b1", cq: "borrower", cpu: 2, prio: -1, admitted: time.Hour},
				{name: "b2", cq: "borrower", cpu: 3, prio: 5},
			},
			want: []Estimate{{Workload: "ns/b2", Position: 1, When: at(30 * time.Minute), Reason: "when ns/a1 leaves", Note: approximate}},
		},
		"a ClusterQueue's active preemptor goes first and keeps its room back, whatever its queue may reclaim": {
			// a2 preempted before and is pending again: it goes before b2, which would not
			// borrow, and keeps 3 CPUs back in every cycle (StrictFIFO), so b2 waits for a1.
			reclaim: kueue.PreemptionPolicyAny, strict: true, preemptor: "a2",
			wls: []cohortWl{
				{name: "a1", cq: "lender", cpu: 4, admitted: 10 * time.Minute, expected: 40 * time.Minute},
				{name: "a2", cq: "lender", cpu: 3},
				{name: "b2", cq: "borrower", cpu: 1},
			},
			want: []Estimate{
				{Workload: "ns/b2", Position: 1, When: at(30 * time.Minute), Reason: "when ns/a1 leaves", Note: contested},
				{Workload: "ns/a2", Position: 1, When: at(30 * time.Minute), Reason: "when ns/a1 leaves", Note: contested},
			},
		},
		"under fair sharing, an estimate that depends on borrowing is approximate": {
			reclaim: kueue.PreemptionPolicyAny, fairSharing: true,
			wls: []cohortWl{
				{name: "b1", cq: "borrower", cpu: 2, admitted: 10 * time.Minute},
				{name: "b2", cq: "borrower", cpu: 3},
			},
			want: []Estimate{{Workload: "ns/b2", Position: 1, When: t0, Reason: "fits now", Note: approximate}},
		},
		"under fair sharing, an estimate that preempts is unknown, as is every one after it": {
			reclaim: kueue.PreemptionPolicyAny, fairSharing: true,
			wls: []cohortWl{
				{name: "a1", cq: "lender", cpu: 1, admitted: time.Hour, expected: 2 * time.Hour},
				{name: "b1", cq: "borrower", cpu: 2, admitted: time.Hour},
				{name: "b2", cq: "borrower", cpu: 3, admitted: 10 * time.Minute},
				{name: "a2", cq: "lender", cpu: 3},
				{name: "a3", cq: "lender", cpu: 1},
			},
			want: []Estimate{
				{Workload: "ns/a2", Position: 1, Unknown: true,
					Reason: "cohort co shares its quota by fair sharing, which the estimate does not foresee (it reclaims from another ClusterQueue)"},
				{Workload: "ns/a3", Position: 2, Unknown: true,
					Reason: "cohort co shares its quota by fair sharing, which the estimate does not foresee (it reclaims from another ClusterQueue)"},
			},
		},
		"under fair sharing, the head whose side would have the lower share goes first, whatever its priority": {
			// Without fair sharing a2 would go first, by its priority.
			reclaim: kueue.PreemptionPolicyAny, fairSharing: true,
			wls: sharedHeads,
			want: []Estimate{
				{Workload: "ns/b2", Position: 1, When: at(30 * time.Minute), Reason: "when ns/b1 leaves", Note: approximate},
				{Workload: "ns/a2", Position: 1, When: at(90 * time.Minute), Reason: "when ns/b2 leaves", Note: approximate},
			},
		},
		"a workload that may reclaim its lent quota only from lower priorities cannot use a turn while its own priority borrows it: the next in line takes the turn": {
			reclaim: kueue.PreemptionPolicyLowerPriority, window: time.Hour,
			wls: []cohortWl{
				{name: "a1", cq: "lender", cpu: 2, admitted: 30 * time.Minute, expected: 3 * time.Hour},
				{name: "b1", cq: "borrower", cpu: 4, admitted: 10 * time.Minute},
				{name: "a2", cq: "lender", cpu: 4},
				{name: "a3", cq: "lender", cpu: 2},
			},
			want: []Estimate{
				{Workload: "ns/a2", Position: 1, Unknown: true, Reason: "behind workloads that take turns without end"},
				{Workload: "ns/a3", Position: 2, When: at(30*time.Minute + time.Second + time.Millisecond), Reason: "when ns/a1 leaves", Note: approximate},
			},
		},
		"without fair sharing, the same heads go by priority": {
			reclaim: kueue.PreemptionPolicyAny,
			wls:     sharedHeads,
			want: []Estimate{
				{Workload: "ns/b2", Position: 1, Unknown: true,
					Reason: "waits for quota that other ClusterQueues of cohort co hold with no declared runtime, and may not reclaim it"},
				{Workload: "ns/a2", Position: 1, When: at(30 * time.Minute), Reason: "when ns/b1 leaves", Note: approximate},
			},
		},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			if tc.budget > 0 {
				defer func(b int) { walkBudget = b }(walkBudget)
				walkBudget = tc.budget
			}
			if tc.preemptor != "" {
				// As the manager runs it.
				features.SetFeatureGateDuringTest(t, features.PrioritizePreemptorWorkloads, true)
			}
			sc := lenderAndBorrower(tc.reclaim, tc.second, tc.wls)
			turns := timebased.Settings{MinAdmitDuration: tc.window}
			for _, cq := range sc.ClusterQueues {
				if tc.window > 0 && cq.Name == "lender" {
					cq.Spec.Preemption.WithinClusterQueue = kueue.PreemptionPolicyLowerOrNewerEqualPriority
				}
			}
			sc.FairSharing = tc.fairSharing
			ctx := context.Background()
			snap, err := sc.Snapshot(ctx, logr.Discard())
			if err != nil {
				t.Fatal(err)
			}
			pending := map[kueue.ClusterQueueReference][]*workload.Info{}
			for i, w := range tc.wls {
				if w.admitted == 0 {
					info := workload.NewInfo(w.obj(i))
					info.ClusterQueue = kueue.ClusterQueueReference(w.cq)
					pending[info.ClusterQueue] = append(pending[info.ClusterQueue], info)
				}
			}
			pol := policy.New(policy.Options{}, plugins.With(plugins.Units().Features()...))
			config := func(cq *schdcache.ClusterQueueSnapshot) Config {
				var active policy.ActivePreemptor
				if tc.preemptor != "" && cq.Name == "lender" {
					active = policy.ActivePreemptor{UID: types.UID("uid-" + tc.preemptor), At: t0.Add(-time.Minute)}
				}
				c := Config{Log: logr.Discard(), Policy: pol, Handover: time.Second, StrictFIFO: tc.strict, Preemptor: active,
					Wake: policy.WakeSettings{Units: plugins.Units(), Lengths: []time.Duration{reclaimMin}},
					Against: func(*schdcache.ClusterQueueSnapshot) policy.QueueFacts {
						var q policy.QueueFacts
						minruntime.Into(&q, minruntime.Protection{MinRuntime: reclaimMin})
						return q
					}}
				if tc.window > 0 && cq.Name == "lender" {
					c.Resolved = *timebased.Resolved(turns)
					c.Wake.Queue = map[policy.Feature]any{timebased.Feature: turns}
				}
				return c
			}
			tree, members := FromCohort(snap, snap.ClusterQueue("lender"), func(cq kueue.ClusterQueueReference) []*workload.Info { return pending[cq] }, config)
			var got []Estimate
			for _, ests := range ComputeCohort(CohortOptions{Tree: tree, FairSharing: tc.fairSharing}, members, t0) {
				got = append(got, ests...)
			}
			if diff := cmp.Diff(tc.want, got, cmpopts.IgnoreFields(Estimate{}, "Sentence")); diff != "" {
				t.Errorf("estimates (-want +got):\n%s", diff)
			}
			for _, e := range got {
				if e.Note != "" && !e.Unknown && !strings.Contains(e.Sentence, e.Note) {
					t.Errorf("%s: the sentence %q does not carry the note %q", e.Workload, e.Sentence, e.Note)
				}
			}
		})
	}
}
