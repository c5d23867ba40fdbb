package policy

import (
	"flag"
	"fmt"
	"math/rand/v2"
	"strconv"
	"testing"
	"time"

	"github.com/go-logr/logr"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/utils/ptr"

	configapi "sigs.k8s.io/kueue/apis/config/v1beta2"
	kueue "sigs.k8s.io/kueue/apis/kueue/v1beta2"
	"sigs.k8s.io/kueue/pkg/controller/constants"
	"sigs.k8s.io/kueue/pkg/features"
	preemptioncommon "sigs.k8s.io/kueue/pkg/scheduler/preemption/common"
	"sigs.k8s.io/kueue/pkg/workload"
)

var parityCases = flag.Int("policy-parity-cases", 5000, "random cases compared against upstream's policy functions")

// The standard table must agree with upstream's SatisfiesPreemptionPolicy and CandidatesOrdering
// on every input; random inputs cover the corners a hand-written table misses.
func TestParityWithUpstream(t *testing.T) {
	for _, buffer := range []bool{false, true} {
		t.Run(fmt.Sprintf("timestampBuffer=%t", buffer), func(t *testing.T) {
			features.SetFeatureGateDuringTest(t, features.SchedulerTimestampPreemptionBuffer, buffer)
			opts := Options{}
			if buffer {
				opts.TimestampBuffer = 5 * time.Minute
			}
			seed := uint64(time.Now().UnixNano())
			rng := rand.New(rand.NewPCG(seed, 0))
			log := logr.Discard()
			for i := 0; i < *parityCases; i++ {
				afs := rng.IntN(2) == 0
				opts.LocalQueueFairSharing = afs
				p := New(opts)
				ordering := workload.Ordering{PodsReadyRequeuingTimestamp: configapi.EvictionTimestamp}
				now := t0.Add(time.Duration(rng.IntN(60)) * time.Minute)
				pre, a, b := randomInfo(rng, "p"), randomInfo(rng, "a"), randomInfo(rng, "b")
				policy := []kueue.PreemptionPolicy{kueue.PreemptionPolicyNever, kueue.PreemptionPolicyAny,
					kueue.PreemptionPolicyLowerPriority, kueue.PreemptionPolicyLowerOrNewerEqualPriority}[rng.IntN(4)]

				want := preemptioncommon.SatisfiesPreemptionPolicy(log, pre.Obj, a.Obj, ordering, policy)
				got := p.Decide(&Input{Preemptor: NewPending(log, pre, ordering), Candidate: ptrTo(NewCandidate(log, a, ordering)), Policy: policy, Now: now})
				if got.Eligible != want {
					t.Fatalf("seed %d case %d: eligibility %t (%s: %s), upstream %t\npreemptor %+v\ncandidate %+v",
						seed, i, got.Eligible, got.Rule, got.Message, want, pre.Obj, a.Obj)
				}

				wantOrder := sign(preemptioncommon.CandidatesOrdering(log, afs, a, b, pre.ClusterQueue, now))
				gotOrder := sign(p.Compare(&OrderContext{ClusterQueue: pre.ClusterQueue, Now: now}, ptrTo(NewCandidate(log, a, ordering)), ptrTo(NewCandidate(log, b, ordering))))
				if gotOrder != wantOrder {
					t.Fatalf("seed %d case %d: order %d, upstream %d\na %+v\nb %+v", seed, i, gotOrder, wantOrder, a.Obj, b.Obj)
				}
			}
		})
	}
}

func randomInfo(rng *rand.Rand, name string) *workload.Info {
	at := func() metav1.Time { return metav1.NewTime(t0.Add(time.Duration(rng.IntN(20)-10) * time.Minute)) }
	wl := &kueue.Workload{
		ObjectMeta: metav1.ObjectMeta{
			Name: name, Namespace: "ns", UID: types.UID(strconv.Itoa(rng.IntN(5))),
			CreationTimestamp: at(),
		},
		Spec: kueue.WorkloadSpec{QueueName: kueue.LocalQueueName("lq" + strconv.Itoa(rng.IntN(2)))},
	}
	if rng.IntN(4) > 0 {
		wl.Spec.Priority = ptr.To(int32(rng.IntN(3) * 10))
	}
	switch rng.IntN(6) {
	case 0:
		wl.Annotations = map[string]string{constants.PriorityBoostAnnotationKey: strconv.Itoa(rng.IntN(21) - 10)}
	case 1:
		wl.Annotations = map[string]string{constants.PriorityBoostAnnotationKey: "not-a-number"}
	}
	if rng.IntN(3) > 0 {
		status := metav1.ConditionTrue
		if rng.IntN(5) == 0 {
			status = metav1.ConditionFalse
		}
		wl.Status.Conditions = append(wl.Status.Conditions, metav1.Condition{Type: kueue.WorkloadQuotaReserved, Status: status, LastTransitionTime: at()})
	}
	if rng.IntN(4) == 0 {
		reason := []string{kueue.WorkloadEvictedByPreemption, kueue.WorkloadEvictedByAdmissionCheck, kueue.WorkloadEvictedByPodsReadyTimeout}[rng.IntN(3)]
		wl.Status.Conditions = append(wl.Status.Conditions, metav1.Condition{Type: kueue.WorkloadEvicted, Status: metav1.ConditionTrue, Reason: reason, LastTransitionTime: at()})
	}
	if rng.IntN(4) == 0 {
		wl.Status.Conditions = append(wl.Status.Conditions, metav1.Condition{Type: kueue.WorkloadPreempted, Status: metav1.ConditionTrue, Reason: kueue.InCohortReclaimWhileBorrowingReason, LastTransitionTime: at()})
	}
	info := &workload.Info{Obj: wl, ClusterQueue: kueue.ClusterQueueReference("cq" + strconv.Itoa(rng.IntN(2)))}
	if rng.IntN(3) > 0 {
		info.LocalQueueFSUsage = ptr.To(float64(rng.IntN(3)) / 2)
	}
	return info
}

func ptrTo[T any](v T) *T { return &v }
