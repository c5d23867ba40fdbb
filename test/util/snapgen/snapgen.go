// Package snapgen generates random but valid scheduling situations (cohort trees, ClusterQueues
// with quotas and limits, admitted workloads that fit, and one pending workload) for differential
// tests and benchmarks of the preemptor.
package snapgen

import (
	"context"
	"fmt"
	"math/rand/v2"
	"strconv"
	"time"

	"github.com/go-logr/logr"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/utils/ptr"

	kueue "sigs.k8s.io/kueue/apis/kueue/v1beta2"
	schdcache "sigs.k8s.io/kueue/pkg/cache/scheduler"
	"sigs.k8s.io/kueue/pkg/resources"
	utiltesting "sigs.k8s.io/kueue/pkg/util/testing"
	utiltestingapi "sigs.k8s.io/kueue/pkg/util/testing/v1beta2"
	"sigs.k8s.io/kueue/pkg/workload"
)

// Epoch is the reference time of generated timestamps.
var Epoch = time.Date(2026, 3, 1, 9, 0, 0, 0, time.UTC)

var resourceNames = []corev1.ResourceName{corev1.ResourceCPU, corev1.ResourceMemory}

// Scenario is one generated situation.
type Scenario struct {
	Seed          uint64
	FairSharing   bool
	Flavors       []*kueue.ResourceFlavor
	Cohorts       []*kueue.Cohort
	ClusterQueues []*kueue.ClusterQueue
	// Admitted are the workloads holding quota, each fitting when it was added.
	Admitted []*kueue.Workload
	Pending  *kueue.Workload
	// PendingCQ is where Pending is queued.
	PendingCQ kueue.ClusterQueueReference
	Now       time.Time
}

// Size bounds a scenario.
type Size struct {
	MaxClusterQueues int
	MaxWorkloads     int
}

// Small is the size for differential tests: large enough for multi-level trees, small enough
// that a thousand cases run in seconds.
var Small = Size{MaxClusterQueues: 6, MaxWorkloads: 24}

// Generate builds a scenario from seed.
func Generate(seed uint64, size Size) *Scenario {
	rng := rand.New(rand.NewPCG(seed, seed^0x9e3779b97f4a7c15))
	s := &Scenario{Seed: seed, FairSharing: rng.IntN(2) == 0, Now: Epoch.Add(2 * time.Hour)}
	nFlavors := 1 + rng.IntN(3)
	for i := range nFlavors {
		s.Flavors = append(s.Flavors, utiltestingapi.MakeResourceFlavor("f"+strconv.Itoa(i)).Obj())
	}

	// Cohort tree: up to three cohorts, each with a parent among the earlier ones or none.
	var cohorts []kueue.CohortReference
	for i := range rng.IntN(3) + rng.IntN(2) {
		name := kueue.CohortReference("co" + strconv.Itoa(i))
		w := utiltestingapi.MakeCohort(name)
		if i > 0 && rng.IntN(4) > 0 {
			w.Parent(cohorts[rng.IntN(len(cohorts))])
		}
		if rng.IntN(3) == 0 {
			w.ResourceGroup(s.flavorQuotas(rng, nFlavors, false)...)
		}
		if s.FairSharing && rng.IntN(3) == 0 {
			w.FairWeight(weight(rng))
		}
		cohorts = append(cohorts, name)
		s.Cohorts = append(s.Cohorts, w.Obj())
	}

	nCQs := 1 + rng.IntN(size.MaxClusterQueues)
	for i := range nCQs {
		w := utiltestingapi.MakeClusterQueue("cq" + strconv.Itoa(i)).ResourceGroup(s.flavorQuotas(rng, nFlavors, len(cohorts) > 0)...)
		if len(cohorts) > 0 && rng.IntN(10) > 0 {
			w.Cohort(cohorts[rng.IntN(len(cohorts))])
		}
		w.Preemption(preemption(rng))
		if s.FairSharing && rng.IntN(3) == 0 {
			w.FairWeight(weight(rng))
		}
		s.ClusterQueues = append(s.ClusterQueues, w.Obj())
	}

	cache, err := s.newCache(context.Background(), logr.Discard())
	if err != nil {
		panic(fmt.Sprintf("seed %d: %v", seed, err))
	}
	nWorkloads := rng.IntN(size.MaxWorkloads + 1)
	for i := range nWorkloads {
		// Crowd the first queue so that it borrows from the others.
		cq := s.ClusterQueues[0]
		if rng.IntN(2) == 0 {
			cq = s.ClusterQueues[rng.IntN(len(s.ClusterQueues))]
		}
		wl := s.workload(rng, "admitted-"+strconv.Itoa(i), cq)
		if s.admit(cache, wl, cq) {
			s.Admitted = append(s.Admitted, wl)
		}
	}
	// Often the pending workload comes to a queue that others borrow from.
	cq := s.ClusterQueues[len(s.ClusterQueues)-1]
	if rng.IntN(2) == 0 {
		cq = s.ClusterQueues[rng.IntN(len(s.ClusterQueues))]
	}
	s.Pending = s.workload(rng, "pending", cq)
	s.PendingCQ = kueue.ClusterQueueReference(cq.Name)
	return s
}

func (s *Scenario) flavorQuotas(rng *rand.Rand, nFlavors int, inCohort bool) []kueue.FlavorQuotas {
	var out []kueue.FlavorQuotas
	for f := range 1 + rng.IntN(nFlavors) {
		fq := utiltestingapi.MakeFlavorQuotas("f" + strconv.Itoa(f))
		for _, r := range resourceNames {
			nominal := strconv.Itoa(rng.IntN(9))
			borrowing, lending := "", ""
			if inCohort && rng.IntN(4) == 0 {
				borrowing = strconv.Itoa(rng.IntN(6))
			}
			if inCohort && rng.IntN(4) == 0 {
				lending = strconv.Itoa(rng.IntN(9))
				if l, _ := strconv.Atoi(lending); l > atoi(nominal) {
					lending = nominal
				}
			}
			fq.Resource(r, nominal, borrowing, lending)
		}
		out = append(out, *fq.Obj())
	}
	return out
}

func atoi(s string) int {
	n, _ := strconv.Atoi(s)
	return n
}

func weight(rng *rand.Rand) resource.Quantity {
	return resource.MustParse([]string{"0", "0.5", "1", "2"}[rng.IntN(4)])
}

func preemption(rng *rand.Rand) kueue.ClusterQueuePreemption {
	p := kueue.ClusterQueuePreemption{
		WithinClusterQueue: []kueue.PreemptionPolicy{kueue.PreemptionPolicyNever, kueue.PreemptionPolicyLowerPriority,
			kueue.PreemptionPolicyLowerOrNewerEqualPriority}[rng.IntN(3)],
		ReclaimWithinCohort: []kueue.PreemptionPolicy{kueue.PreemptionPolicyNever, kueue.PreemptionPolicyLowerPriority,
			kueue.PreemptionPolicyAny}[rng.IntN(3)],
	}
	// borrowWithinCohort needs reclaimWithinCohort other than Never (webhook rule).
	if p.ReclaimWithinCohort != kueue.PreemptionPolicyNever {
		switch rng.IntN(3) {
		case 1:
			p.BorrowWithinCohort = &kueue.BorrowWithinCohort{Policy: kueue.BorrowWithinCohortPolicyLowerPriority}
		case 2:
			p.BorrowWithinCohort = &kueue.BorrowWithinCohort{Policy: kueue.BorrowWithinCohortPolicyLowerPriority, MaxPriorityThreshold: ptr.To(int32(rng.IntN(3) * 10))}
		}
	}
	return p
}

// workload makes a one-pod-set workload requesting whole units of the resources that cq covers.
func (s *Scenario) workload(rng *rand.Rand, name string, cq *kueue.ClusterQueue) *kueue.Workload {
	w := utiltestingapi.MakeWorkload(name, "ns").
		UID(types.UID(fmt.Sprintf("%s-%d", name, rng.IntN(1000)))).
		Queue(kueue.LocalQueueName("lq-" + cq.Name)).
		Priority(int32(rng.IntN(3) * 10)).
		Creation(Epoch.Add(time.Duration(rng.IntN(120)) * time.Minute))
	for _, r := range resourceNames {
		if r == corev1.ResourceCPU || rng.IntN(2) == 0 {
			w.Request(r, strconv.Itoa(1+rng.IntN(4)))
		}
	}
	wl := w.Obj()
	wl.Spec.PodSets[0].Count = 1
	return wl
}

// admit reserves quota for wl in cq, on a random flavor that has room, and adds it to the cache.
// It reports false, changing nothing, when no flavor fits.
func (s *Scenario) admit(cache *schdcache.Cache, wl *kueue.Workload, cq *kueue.ClusterQueue) bool {
	snap, err := cache.Snapshot(context.Background())
	if err != nil {
		panic(err)
	}
	cqs := snap.ClusterQueue(kueue.ClusterQueueReference(cq.Name))
	requests := wl.Spec.PodSets[0].Template.Spec.Containers[0].Resources.Requests
	rng := rand.New(rand.NewPCG(s.Seed, uint64(len(s.Admitted))))
	flavors := cq.Spec.ResourceGroups[0].Flavors
	start := rng.IntN(len(flavors))
	for k := range flavors {
		f := flavors[(start+k)%len(flavors)].Name
		ok := true
		for r, q := range requests {
			fr := resources.FlavorResource{Flavor: f, Resource: r}
			if resources.AmountFromQuantity(r, q).Cmp(cqs.Available(fr)) > 0 {
				ok = false
				break
			}
		}
		if !ok {
			continue
		}
		psa := utiltestingapi.MakePodSetAssignment(kueue.DefaultPodSetName).Count(1)
		for r, q := range requests {
			psa.Flavor(r, f).ResourceUsage(r, q.String())
		}
		reserved := Epoch.Add(30*time.Minute + time.Duration(rng.IntN(90))*time.Minute)
		wrapped := &utiltestingapi.WorkloadWrapper{Workload: *wl}
		wrapped.ReserveQuotaAt(utiltestingapi.MakeAdmission(kueue.ClusterQueueReference(cq.Name)).PodSets(psa.Obj()).Obj(), reserved)
		if rng.IntN(8) == 0 {
			wrapped.Condition(metav1.Condition{Type: kueue.WorkloadEvicted, Status: metav1.ConditionTrue, Reason: kueue.WorkloadEvictedByPreemption, LastTransitionTime: metav1.NewTime(reserved.Add(time.Minute))})
		}
		*wl = wrapped.Workload
		cache.AddOrUpdateWorkload(logr.Discard(), wl)
		return true
	}
	return false
}

// NewCache returns a scheduler cache holding the scenario's objects.
func (s *Scenario) NewCache(ctx context.Context, log logr.Logger) (*schdcache.Cache, error) {
	c, err := s.newCache(ctx, log)
	if err != nil {
		return nil, err
	}
	for _, wl := range s.Admitted {
		c.AddOrUpdateWorkload(log, wl.DeepCopy())
	}
	return c, nil
}

// Snapshot returns a snapshot of a scheduler cache holding the scenario's objects (NewCache).
func (s *Scenario) Snapshot(ctx context.Context, log logr.Logger) (*schdcache.Snapshot, error) {
	c, err := s.NewCache(ctx, log)
	if err != nil {
		return nil, err
	}
	return c.Snapshot(ctx)
}

func (s *Scenario) newCache(ctx context.Context, log logr.Logger) (*schdcache.Cache, error) {
	c := schdcache.New(utiltesting.NewClientBuilder().Build(), schdcache.WithFairSharing(s.FairSharing))
	for _, f := range s.Flavors {
		c.AddOrUpdateResourceFlavor(log, f.DeepCopy())
	}
	for _, co := range s.Cohorts {
		if err := c.AddOrUpdateCohort(co.DeepCopy()); err != nil {
			return nil, fmt.Errorf("cohort %s: %w", co.Name, err)
		}
	}
	for _, cq := range s.ClusterQueues {
		if err := c.AddClusterQueue(ctx, cq.DeepCopy()); err != nil {
			return nil, fmt.Errorf("cluster queue %s: %w", cq.Name, err)
		}
	}
	return c, nil
}

// PendingInfo is the pending workload as the scheduler sees it.
func (s *Scenario) PendingInfo() *workload.Info {
	info := workload.NewInfo(s.Pending.DeepCopy())
	info.ClusterQueue = s.PendingCQ
	return info
}

// Crowded is a deterministic large scenario for benchmarks: ten ClusterQueues in two cohorts under
// one root, `admitted` one-CPU workloads of mixed priorities filling the tree, most of them in a
// queue that borrows, and a pending workload that can only fit by reclaiming and preempting.
func Crowded(admitted int, fairSharing bool) *Scenario {
	const queues = 10
	per := admitted / queues
	s := &Scenario{Seed: uint64(admitted), FairSharing: fairSharing, Now: Epoch.Add(2 * time.Hour)}
	s.Flavors = []*kueue.ResourceFlavor{utiltestingapi.MakeResourceFlavor("f0").Obj()}
	s.Cohorts = []*kueue.Cohort{
		utiltestingapi.MakeCohort("root").Obj(),
		utiltestingapi.MakeCohort("left").Parent("root").Obj(),
		utiltestingapi.MakeCohort("right").Parent("root").Obj(),
	}
	for i := range queues {
		cohort := kueue.CohortReference("left")
		if i >= queues/2 {
			cohort = "right"
		}
		s.ClusterQueues = append(s.ClusterQueues, utiltestingapi.MakeClusterQueue("cq"+strconv.Itoa(i)).
			Cohort(cohort).
			ResourceGroup(*utiltestingapi.MakeFlavorQuotas("f0").Resource(corev1.ResourceCPU, strconv.Itoa(per)).Obj()).
			Preemption(kueue.ClusterQueuePreemption{
				WithinClusterQueue:  kueue.PreemptionPolicyLowerPriority,
				ReclaimWithinCohort: kueue.PreemptionPolicyAny,
				BorrowWithinCohort:  &kueue.BorrowWithinCohort{Policy: kueue.BorrowWithinCohortPolicyLowerPriority},
			}).Obj())
	}
	// cq0 holds half its neighbour's quota on top of its own; cq1 keeps half its own quota free.
	counts := make([]int, queues)
	for i := range counts {
		counts[i] = per
	}
	counts[0] += per / 2
	counts[1] -= per / 2
	n := 0
	for q, c := range counts {
		cq := "cq" + strconv.Itoa(q)
		for range c {
			psa := utiltestingapi.MakePodSetAssignment(kueue.DefaultPodSetName).Count(1).Flavor(corev1.ResourceCPU, "f0").ResourceUsage(corev1.ResourceCPU, "1")
			wl := utiltestingapi.MakeWorkload(fmt.Sprintf("wl-%05d", n), "ns").
				UID(types.UID(fmt.Sprintf("uid-%05d", n))).
				Queue(kueue.LocalQueueName("lq-"+cq)).
				Priority(int32(n%3)*10).
				Creation(Epoch.Add(time.Duration(n)*time.Second)).
				Request(corev1.ResourceCPU, "1").
				ReserveQuotaAt(utiltestingapi.MakeAdmission(kueue.ClusterQueueReference(cq)).PodSets(psa.Obj()).Obj(), Epoch.Add(time.Hour+time.Duration(n)*time.Second)).
				Obj()
			s.Admitted = append(s.Admitted, wl)
			n++
		}
	}
	// Needs all of cq1's free half plus a tenth more: reclaim from cq0, then preempt in cq1.
	need := per/2 + max(per/10, 1)
	s.Pending = utiltestingapi.MakeWorkload("pending", "ns").UID("uid-pending").Queue("lq-cq1").Priority(20).
		Creation(Epoch.Add(90*time.Minute)).Request(corev1.ResourceCPU, strconv.Itoa(need)).Obj()
	s.PendingCQ = "cq1"
	return s
}
