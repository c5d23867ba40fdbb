package scheduler

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/google/go-cmp/cmp/cmpopts"
	corev1 "k8s.io/api/core/v1"
	apimeta "k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/component-base/featuregate"
	"k8s.io/utils/ptr"

	configapi "sigs.k8s.io/kueue/apis/config/v1beta2"
	kueue "sigs.k8s.io/kueue/apis/kueue/v1beta2"
	schdcache "sigs.k8s.io/kueue/pkg/cache/scheduler"
	"sigs.k8s.io/kueue/pkg/features"
	utiltesting "sigs.k8s.io/kueue/pkg/util/testing"
	testingwrappers "sigs.k8s.io/kueue/pkg/util/testing/v1beta2"
	"sigs.k8s.io/kueue/pkg/util/wait"
	"sigs.k8s.io/kueue/pkg/workload"
)

// result is what one cycle left on a workload.
type result struct {
	// QuotaReserved is the status of that condition, "" without one.
	QuotaReserved metav1.ConditionStatus
	Reason        string
	Admitted      bool
	Evicted       string
	Counts        []int32
	// InCache reports that the cache accounts for the workload's quota.
	InCache bool
	// Queue is "active", "inadmissible" or "" for where the queue manager holds it.
	Queue string
	// Blocked reports the BlockedOnPreemptionGates condition.
	Blocked bool
}

type cycleCase struct {
	gates       map[featuregate.Feature]bool
	objs        worldObjects
	opts        []Option
	want        map[string]result
	wantSignal  wait.SpeedSignal
	wantMessage map[string]string // substrings of QuotaReserved messages
	wantEvents  []utiltesting.EventRecord
}

var (
	// admittedNow is a workload admitted in this cycle, alreadyRunning one admitted before.
	admittedNow    = result{QuotaReserved: metav1.ConditionTrue, Reason: "QuotaReserved", Admitted: true, Counts: []int32{1}, InCache: true}
	alreadyRunning = result{QuotaReserved: metav1.ConditionTrue, Reason: "AdmittedByTest", Admitted: true, Counts: []int32{1}, InCache: true}

	lowerPriority = kueue.ClusterQueuePreemption{WithinClusterQueue: kueue.PreemptionPolicyLowerPriority}
	reclaimAny    = kueue.ClusterQueuePreemption{ReclaimWithinCohort: kueue.PreemptionPolicyAny}
)

func TestSchedulingCycle(t *testing.T) {
	cases := map[string]cycleCase{
		"a workload that fits is admitted": {
			objs: worldObjects{
				clusterQueues: []*kueue.ClusterQueue{cpuQueue("cq", "4").Obj()},
				workloads:     []*kueue.Workload{cpuWorkload("a", "cq", "2").Obj()},
			},
			want:       map[string]result{"a": {QuotaReserved: metav1.ConditionTrue, Reason: "QuotaReserved", Admitted: true, Counts: []int32{1}, InCache: true}},
			wantSignal: wait.KeepGoing,
			wantEvents: []utiltesting.EventRecord{
				{Key: key("a"), EventType: corev1.EventTypeNormal, Reason: "QuotaReserved", Message: "Quota reserved in ClusterQueue cq, wait time since queued was 0s"},
				{Key: key("a"), EventType: corev1.EventTypeNormal, Reason: "Admitted", Message: "Admitted by ClusterQueue cq, wait time since reservation was 0s"},
			},
		},
		"a workload over quota waits with the flavor assigner's reason": {
			objs: worldObjects{
				clusterQueues: []*kueue.ClusterQueue{cpuQueue("cq", "1").Obj()},
				workloads:     []*kueue.Workload{cpuWorkload("a", "cq", "2").Obj()},
			},
			want:        map[string]result{"a": {QuotaReserved: metav1.ConditionFalse, Reason: "Pending", Queue: "inadmissible"}},
			wantMessage: map[string]string{"a": "couldn't assign flavors to pod set main: insufficient quota for cpu in flavor default"},
			wantSignal:  wait.SlowDown,
			wantEvents: []utiltesting.EventRecord{
				{Key: key("a"), EventType: corev1.EventTypeWarning, Reason: "Pending", Message: "couldn't assign flavors to pod set main: insufficient quota for cpu in flavor default"},
			},
		},
		"granular reason with UnadmittedWorkloadsObservability": {
			gates: map[featuregate.Feature]bool{features.UnadmittedWorkloadsObservability: true},
			objs: worldObjects{
				clusterQueues: []*kueue.ClusterQueue{cpuQueue("cq", "2").Preemption(lowerPriority).Obj()},
				workloads: []*kueue.Workload{
					running(cpuWorkload("same", "cq", "2"), "cq"),
					cpuWorkload("a", "cq", "2").Obj(),
				},
			},
			want: map[string]result{
				"same": alreadyRunning,
				"a":    {QuotaReserved: metav1.ConditionFalse, Reason: kueue.WorkloadQuotaReservedReasonWaitingForQuota, Queue: "inadmissible"},
			},
			wantSignal: wait.SlowDown,
		},
		"a namespace outside the ClusterQueue's selector": {
			objs: worldObjects{
				clusterQueues: []*kueue.ClusterQueue{cpuQueue("cq", "4").NamespaceSelector(&metav1.LabelSelector{MatchLabels: map[string]string{"team": "x"}}).Obj()},
				workloads:     []*kueue.Workload{cpuWorkload("a", "cq", "1").Obj()},
			},
			want:        map[string]result{"a": {QuotaReserved: metav1.ConditionFalse, Reason: "Pending", Queue: "inadmissible"}},
			wantMessage: map[string]string{"a": "namespace doesn't match ClusterQueue selector"},
			wantSignal:  wait.SlowDown,
		},
		"a higher priority workload preempts and waits": {
			objs: worldObjects{
				clusterQueues: []*kueue.ClusterQueue{cpuQueue("cq", "2").Preemption(lowerPriority).Obj()},
				workloads: []*kueue.Workload{
					running(cpuWorkload("low", "cq", "2"), "cq"),
					cpuWorkload("high", "cq", "2").Priority(10).Obj(),
				},
			},
			want: map[string]result{
				"low":  {QuotaReserved: metav1.ConditionTrue, Reason: "AdmittedByTest", Admitted: true, Evicted: kueue.WorkloadEvictedByPreemption, Counts: []int32{1}, InCache: true},
				"high": {QuotaReserved: metav1.ConditionFalse, Reason: "Pending", Queue: "active"},
			},
			wantMessage: map[string]string{"high": "Pending the preemption of 1 workload(s)"},
			wantSignal:  wait.SlowDown,
		},
		"a closed preemption gate holds the preemption": {
			gates: map[featuregate.Feature]bool{features.MultiKueueOrchestratedPreemption: true, features.UnadmittedWorkloadsObservability: true},
			objs: worldObjects{
				clusterQueues: []*kueue.ClusterQueue{cpuQueue("cq", "2").Preemption(lowerPriority).Obj()},
				workloads: []*kueue.Workload{
					running(cpuWorkload("low", "cq", "2"), "cq"),
					cpuWorkload("high", "cq", "2").Priority(10).PreemptionGates(kueue.PreemptionGate{Name: "orchestrator"}).Obj(),
				},
			},
			want: map[string]result{
				"low":  alreadyRunning,
				"high": {QuotaReserved: metav1.ConditionFalse, Reason: kueue.WorkloadAdmissionGated, Queue: "inadmissible", Blocked: true},
			},
			wantMessage: map[string]string{"high": "Workload requires preemption, but it's gated"},
			wantSignal:  wait.SlowDown,
		},
		"a closed preemption gate is ignored without the gates that use it": {
			objs: worldObjects{
				clusterQueues: []*kueue.ClusterQueue{cpuQueue("cq", "2").Preemption(lowerPriority).Obj()},
				workloads: []*kueue.Workload{
					running(cpuWorkload("low", "cq", "2"), "cq"),
					cpuWorkload("high", "cq", "2").Priority(10).PreemptionGates(kueue.PreemptionGate{Name: "orchestrator"}).Obj(),
				},
			},
			want: map[string]result{
				"low":  {QuotaReserved: metav1.ConditionTrue, Reason: "AdmittedByTest", Admitted: true, Evicted: kueue.WorkloadEvictedByPreemption, Counts: []int32{1}, InCache: true},
				"high": {QuotaReserved: metav1.ConditionFalse, Reason: "Pending", Queue: "active"},
			},
			wantSignal: wait.SlowDown,
		},
		"partial admission reduces the pod count": {
			objs: worldObjects{
				clusterQueues: []*kueue.ClusterQueue{cpuQueue("cq", "3").Obj()},
				workloads: []*kueue.Workload{
					testingwrappers.MakeWorkload("a", "ns").Queue("cq").Creation(t0).
						PodSets(*testingwrappers.MakePodSet(kueue.DefaultPodSetName, 5).SetMinimumCount(2).Request(corev1.ResourceCPU, "1").Obj()).Obj(),
				},
			},
			want:       map[string]result{"a": {QuotaReserved: metav1.ConditionTrue, Reason: "QuotaReserved", Admitted: true, Counts: []int32{3}, InCache: true}},
			wantSignal: wait.KeepGoing,
		},
		"without partial admission the pod count is kept": {
			gates: map[featuregate.Feature]bool{features.PartialAdmission: false},
			objs: worldObjects{
				clusterQueues: []*kueue.ClusterQueue{cpuQueue("cq", "3").Obj()},
				workloads: []*kueue.Workload{
					testingwrappers.MakeWorkload("a", "ns").Queue("cq").Creation(t0).
						PodSets(*testingwrappers.MakePodSet(kueue.DefaultPodSetName, 5).SetMinimumCount(2).Request(corev1.ResourceCPU, "1").Obj()).Obj(),
				},
			},
			want:       map[string]result{"a": {QuotaReserved: metav1.ConditionFalse, Reason: "Pending", Queue: "inadmissible"}},
			wantSignal: wait.SlowDown,
		},
		// Heads of a-cq and b-cq compete for the one free cpu of the cohort; both borrow.
		"classical order: the higher priority wins": {
			objs:       competingHeads(false),
			want:       competingResult("a3", "b2"),
			wantSignal: wait.KeepGoing,
			wantMessage: map[string]string{
				"b2": "Workload no longer fits after processing another workload",
			},
		},
		"fair sharing: the ClusterQueue borrowing less wins": {
			objs:       competingHeads(true),
			opts:       []Option{WithFairSharing(&configapi.FairSharing{})},
			want:       competingResult("b2", "a3"),
			wantSignal: wait.KeepGoing,
			wantMessage: map[string]string{
				"a3": "Workload no longer fits after processing another workload",
			},
		},
		// A head that needs preemption and has no victims holds the quota it waits for,
		// unless its ClusterQueue can always reclaim it later.
		"no victims: the quota waited for is held": {
			objs:       heldQuota(kueue.ClusterQueuePreemption{WithinClusterQueue: kueue.PreemptionPolicyLowerPriority}),
			want:       heldResult(false),
			wantSignal: wait.SlowDown,
			wantMessage: map[string]string{
				"borrower": "Workload no longer fits after processing another workload",
			},
		},
		"no victims, but reclaim is always possible: nothing is held": {
			objs: heldQuota(kueue.ClusterQueuePreemption{
				WithinClusterQueue:  kueue.PreemptionPolicyLowerPriority,
				ReclaimWithinCohort: kueue.PreemptionPolicyAny,
			}),
			want:       heldResult(true),
			wantSignal: wait.KeepGoing,
		},
		"no victims, reclaim possible by policy but blocked by protections: the quota is held": {
			objs: heldQuota(kueue.ClusterQueuePreemption{
				WithinClusterQueue:  kueue.PreemptionPolicyLowerPriority,
				ReclaimWithinCohort: kueue.PreemptionPolicyAny,
			}),
			opts: []Option{WithPreemptor(func(c PreemptorConfig) Preemptor {
				return reclaimGuarded{Preemptor: NewUpstreamPreemptor(c)}
			})},
			// ... and the head stays active, to hold it again next cycle.
			want:       heldWhileBlocked(),
			wantSignal: wait.SlowDown,
			wantMessage: map[string]string{
				"borrower": "Workload no longer fits after processing another workload",
			},
		},
		// Both heads reclaim from c-cq and pick the same victim, c2.
		"overlapping victims: the second head waits": {
			objs: overlappingVictims(),
			want: map[string]result{
				"c1":    alreadyRunning,
				"c2":    {QuotaReserved: metav1.ConditionTrue, Reason: "AdmittedByTest", Admitted: true, Evicted: kueue.WorkloadEvictedByPreemption, Counts: []int32{1}, InCache: true},
				"a-new": {QuotaReserved: metav1.ConditionFalse, Reason: "Pending", Queue: "active"},
				"b-new": {QuotaReserved: metav1.ConditionFalse, Reason: "Pending", Queue: "active"},
			},
			wantMessage: map[string]string{
				"a-new": "Pending the preemption of 1 workload(s)",
				"b-new": "Workload has overlapping preemption targets with another workload",
			},
			wantSignal: wait.SlowDown,
		},
		"overlapping victims with RecomputeAssignmentUponPreemptionTargetsOverlap: the second head finds another": {
			gates: map[featuregate.Feature]bool{features.RecomputeAssignmentUponPreemptionTargetsOverlap: true},
			objs:  overlappingVictims(),
			want: map[string]result{
				"c1":    {QuotaReserved: metav1.ConditionTrue, Reason: "AdmittedByTest", Admitted: true, Evicted: kueue.WorkloadEvictedByPreemption, Counts: []int32{1}, InCache: true},
				"c2":    {QuotaReserved: metav1.ConditionTrue, Reason: "AdmittedByTest", Admitted: true, Evicted: kueue.WorkloadEvictedByPreemption, Counts: []int32{1}, InCache: true},
				"a-new": {QuotaReserved: metav1.ConditionFalse, Reason: "Pending", Queue: "active"},
				"b-new": {QuotaReserved: metav1.ConditionFalse, Reason: "Pending", Queue: "active"},
			},
			wantMessage: map[string]string{
				"a-new": "Pending the preemption of 1 workload(s)",
				"b-new": "Pending the preemption of 1 workload(s)",
			},
			wantSignal: wait.SlowDown,
		},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) { runCycleCase(t, tc) })
	}
}

// overlappingVictims: c-cq (nominal 0) borrows all of a-cq and b-cq with c1 and the
// lower-priority c2; a-new and b-new want their nominal quota back.
func overlappingVictims() worldObjects {
	return worldObjects{
		clusterQueues: []*kueue.ClusterQueue{
			cpuQueue("a-cq", "2").Cohort("co").Preemption(reclaimAny).Obj(),
			cpuQueue("b-cq", "2").Cohort("co").Preemption(reclaimAny).Obj(),
			cpuQueue("c-cq", "0").Cohort("co").Obj(),
		},
		workloads: []*kueue.Workload{
			running(cpuWorkload("c1", "c-cq", "2").Priority(5), "c-cq"),
			running(cpuWorkload("c2", "c-cq", "2").Priority(1), "c-cq"),
			cpuWorkload("a-new", "a-cq", "2").Obj(),
			cpuWorkload("b-new", "b-cq", "2").Creation(t0.Add(time.Second)).Obj(),
		},
	}
}

func key(name string) types.NamespacedName { return types.NamespacedName{Namespace: "ns", Name: name} }

// competingHeads: cohort capacity 5 cpu, 4 used; a borrows already, b is at nominal.
func competingHeads(fair bool) worldObjects {
	return worldObjects{
		fairSharing: fair,
		clusterQueues: []*kueue.ClusterQueue{
			cpuQueue("a-cq", "1").Cohort("co").Obj(),
			cpuQueue("b-cq", "1").Cohort("co").Obj(),
			cpuQueue("c-cq", "3").Cohort("co").Obj(),
		},
		workloads: []*kueue.Workload{
			running(cpuWorkload("c1", "c-cq", "1"), "c-cq"),
			running(cpuWorkload("a1", "a-cq", "1"), "a-cq"),
			running(cpuWorkload("a2", "a-cq", "1"), "a-cq"),
			running(cpuWorkload("b1", "b-cq", "1"), "b-cq"),
			cpuWorkload("a3", "a-cq", "1").Priority(10).Obj(),
			cpuWorkload("b2", "b-cq", "1").Priority(1).Obj(),
		},
	}
}

func competingResult(winner, loser string) map[string]result {
	return map[string]result{
		"c1": alreadyRunning, "a1": alreadyRunning, "a2": alreadyRunning, "b1": alreadyRunning,
		winner: admittedNow,
		// Lost to another head of the cycle: retried right away.
		loser: {QuotaReserved: metav1.ConditionFalse, Reason: "Pending", Queue: "active"},
	}
}

// heldQuota: holder-cq (nominal 2) runs 1 cpu at the head's priority and waits with a
// 2-cpu head; borrower-cq (nominal 0) wants to borrow the free cpu.
func heldQuota(p kueue.ClusterQueuePreemption) worldObjects {
	return worldObjects{
		clusterQueues: []*kueue.ClusterQueue{
			cpuQueue("holder-cq", "2").Cohort("co").Preemption(p).Obj(),
			cpuQueue("borrower-cq", "0").Cohort("co").Obj(),
		},
		workloads: []*kueue.Workload{
			running(cpuWorkload("running", "holder-cq", "1"), "holder-cq"),
			// The waiting head is older, so it is processed first whatever order the heads come in.
			cpuWorkload("waiting", "holder-cq", "2").Creation(t0.Add(-time.Minute)).Obj(),
			cpuWorkload("borrower", "borrower-cq", "1").Obj(),
		},
	}
}

func heldResult(borrowerAdmitted bool) map[string]result {
	out := map[string]result{
		"running": alreadyRunning,
		"waiting": {QuotaReserved: metav1.ConditionFalse, Reason: "Pending", Queue: "inadmissible"},
		"borrower": {
			QuotaReserved: metav1.ConditionFalse, Reason: "Pending", Queue: "active",
		},
	}
	if borrowerAdmitted {
		out["borrower"] = admittedNow
	}
	return out
}

// heldWhileBlocked is heldResult(false) with the waiting head kept active rather than parked.
func heldWhileBlocked() map[string]result {
	out := heldResult(false)
	w := out["waiting"]
	w.Queue = "active"
	out["waiting"] = w
	return out
}

func runCycleCase(t *testing.T, tc cycleCase) {
	features.SetFeatureGatesDuringTest(t, tc.gates)
	w := newWorld(t, tc.objs)
	s, written := w.scheduler(tc.opts...)
	gotSignal := s.schedule(w.ctx)
	written()

	inCache := map[string]bool{}
	for _, cq := range w.snapshot().ClusterQueues() {
		for k := range cq.Workloads {
			inCache[string(k)] = true
		}
	}
	queued := map[string]string{}
	for _, refs := range w.queues.Dump() {
		for _, r := range refs {
			queued[string(r)] = "active"
		}
	}
	for _, refs := range w.queues.DumpInadmissible() {
		for _, r := range refs {
			queued[string(r)] = "inadmissible"
		}
	}

	got := map[string]result{}
	for name := range tc.want {
		wl := w.workload(name)
		r := result{
			Admitted: workload.IsAdmitted(wl),
			InCache:  inCache[string(workload.Key(wl))],
			Queue:    queued[string(workload.Key(wl))],
		}
		if c := apimeta.FindStatusCondition(wl.Status.Conditions, kueue.WorkloadQuotaReserved); c != nil {
			r.QuotaReserved, r.Reason = c.Status, c.Reason
		}
		if c := apimeta.FindStatusCondition(wl.Status.Conditions, kueue.WorkloadEvicted); c != nil && c.Status == metav1.ConditionTrue {
			r.Evicted = c.Reason
		}
		r.Blocked = apimeta.IsStatusConditionTrue(wl.Status.Conditions, kueue.WorkloadBlockedOnPreemptionGates)
		if wl.Status.Admission != nil {
			for _, psa := range wl.Status.Admission.PodSetAssignments {
				r.Counts = append(r.Counts, ptr.Deref(psa.Count, 0))
			}
		}
		got[name] = r
		if sub, ok := tc.wantMessage[name]; ok {
			c := apimeta.FindStatusCondition(wl.Status.Conditions, kueue.WorkloadQuotaReserved)
			if c == nil || !strings.Contains(c.Message, sub) {
				t.Errorf("%s: QuotaReserved message %v, want it to contain %q", name, c, sub)
			}
		}
	}
	if diff := cmp.Diff(tc.want, got); diff != "" {
		t.Errorf("workloads (-want +got):\n%s", diff)
	}
	if gotSignal != tc.wantSignal {
		t.Errorf("speed signal %v, want %v", gotSignal, tc.wantSignal)
	}
	if tc.wantEvents != nil {
		// Messages are compared by prefix: the flavor assigner adds detail of its own.
		trim := cmp.Comparer(func(a, b utiltesting.EventRecord) bool {
			return a.Key == b.Key && a.EventType == b.EventType && a.Reason == b.Reason &&
				(strings.HasPrefix(a.Message, b.Message) || strings.HasPrefix(b.Message, a.Message))
		})
		if diff := cmp.Diff(tc.wantEvents, w.recorder.RecordedEvents, trim, cmpopts.EquateEmpty()); diff != "" {
			t.Errorf("events (-want +got):\n%s", diff)
		}
	}
}

// reclaimGuarded is a preemptor whose protections keep every ClusterQueue from reclaiming now.
type reclaimGuarded struct {
	Preemptor
}

func (reclaimGuarded) Wait(context.Context, *workload.Info, *schdcache.Snapshot) WaitVerdict {
	return WaitVerdict{HoldQuota: true}
}

func (g reclaimGuarded) Hooks() Hooks {
	return Hooks{Wait: g.Wait}
}
