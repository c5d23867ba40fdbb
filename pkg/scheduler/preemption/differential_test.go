package preemption

import (
	"context"
	"flag"
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/go-logr/logr"
	"github.com/google/go-cmp/cmp"
	"github.com/google/go-cmp/cmp/cmpopts"
	corev1 "k8s.io/api/core/v1"
	clocktesting "k8s.io/utils/clock/testing"
	ctrllog "sigs.k8s.io/controller-runtime/pkg/log"

	configapi "sigs.k8s.io/kueue/apis/config/v1beta2"
	kueue "sigs.k8s.io/kueue/apis/kueue/v1beta2"
	schdcache "sigs.k8s.io/kueue/pkg/cache/scheduler"
	"sigs.k8s.io/kueue/pkg/resources"
	"sigs.k8s.io/kueue/pkg/scheduler/flavorassigner"
	upstream "sigs.k8s.io/kueue/pkg/scheduler/preemption"
	preemptioncommon "sigs.k8s.io/kueue/pkg/scheduler/preemption/common"
	preemptexpectations "sigs.k8s.io/kueue/pkg/scheduler/preemption/expectations"
	"sigs.k8s.io/kueue/pkg/workload"

	"github.com/kueue-timeshare/kueue-timeshare/pkg/plugins"
	"github.com/kueue-timeshare/kueue-timeshare/pkg/plugins/budget"
	"github.com/kueue-timeshare/kueue-timeshare/pkg/plugins/expectedruntime"
	"github.com/kueue-timeshare/kueue-timeshare/pkg/plugins/timebased"
	"github.com/kueue-timeshare/kueue-timeshare/pkg/plugins/toleration"
	"github.com/kueue-timeshare/kueue-timeshare/pkg/policy"
	"github.com/kueue-timeshare/kueue-timeshare/test/util/snapgen"
)

var (
	diffCases = flag.Int("preemption-diff-cases", 1000, "generated scenarios compared against upstream's preemptor")
	diffSeed  = flag.Uint64("preemption-diff-seed", 0, "first seed (0: derived from the clock); a failure prints the seed to rerun")
)

// outcome is what a scheduler would act on: the flavors chosen, how, and the victims.
type outcome struct {
	Mode        string
	Message     string
	Assignments []string
	Targets     []string
	// DirectTargets answer a synthetic assignment that contests every requested resource on one
	// flavor, so the search runs even where the flavor assigner would not ask for preemption.
	DirectTargets []string
	Usage         map[string]string
}

// With none of our features configured, our preemptor and oracle must choose exactly what
// upstream's do, on random cohort trees, quotas, limits, priorities and policies.
func TestDifferentialAgainstUpstream(t *testing.T) {
	first := *diffSeed
	if first == 0 {
		first = uint64(time.Now().UnixNano())
	}
	withTargets := 0
	byReason := map[string]int{}
	for i := 0; i < *diffCases; i++ {
		seed := first + uint64(i)
		sc := snapgen.Generate(seed, snapgen.Small)
		up, ours := runBoth(t, sc)
		if diff := cmp.Diff(up, ours); diff != "" {
			t.Fatalf("seed %d (rerun with -preemption-diff-seed=%d -preemption-diff-cases=1): outcome differs from upstream (-upstream +ours):\n%s\n%s",
				seed, seed, diff, describe(sc))
		}
		if len(up.Targets) > 0 {
			withTargets++
		}
		for _, tg := range append(up.Targets, up.DirectTargets...) {
			byReason[tg[strings.LastIndex(tg, " ")+1:]]++
		}
	}
	t.Logf("%d scenarios from seed %d, %d with preemption targets; targets by reason: %v", *diffCases, first, withTargets, byReason)
	// Guard against a generator that stops producing contested situations.
	if *diffCases >= 200 && withTargets < *diffCases/20 {
		t.Errorf("only %d of %d scenarios needed preemption; the generator no longer exercises the preemptor", withTargets, *diffCases)
	}
}

// TestDifferentialWithoutEachFeature builds our preemptor without each feature in turn (its unit
// and its plugin), with every feature's source given as the manager gives them but nothing
// configured: it still decides as upstream's does, so a feature taken out leaves the rest whole.
func TestDifferentialWithoutEachFeature(t *testing.T) {
	first := *diffSeed
	if first == 0 {
		first = uint64(time.Now().UnixNano())
	}
	// 25 scenarios per feature by default: this checks that a removal leaves the rest whole; the
	// parity itself is TestDifferentialAgainstUpstream's.
	cases := max(*diffCases/40, 1)
	for _, removed := range plugins.Units() {
		t.Run(string(removed.Feature), func(t *testing.T) {
			for i := range cases {
				seed := first + uint64(i)
				sc := snapgen.Generate(seed, snapgen.Small)
				up, ours := runBoth(t, sc, WithoutFeature(removed.Feature), WithSources(noSettings{}, expectedruntime.DefaultCooldown(time.Minute)))
				if diff := cmp.Diff(up, ours); diff != "" {
					t.Fatalf("seed %d (rerun with -preemption-diff-seed=%d): outcome differs from upstream (-upstream +ours):\n%s\n%s",
						seed, seed, diff, describe(sc))
				}
			}
		})
	}
}

// noSettings is the settings store, and the store of priority classes' tolerations, with nothing
// set: every feature is on, as in the manager, and none is configured.
type noSettings struct{}

func (noSettings) QueueSettingsOf(policy.Feature, kueue.ClusterQueueReference) any { return nil }

func (noSettings) StrictFIFO(kueue.ClusterQueueReference) bool { return false }

func (noSettings) SettingsPath(policy.Feature, kueue.ClusterQueueReference, []kueue.CohortReference) ([]policy.QueueNode, any) {
	return nil, nil
}

func (noSettings) BudgetsOf(*kueue.Workload) *budget.Budgets { return nil }

func (noSettings) For(*kueue.PriorityClassRef) *toleration.Toleration { return nil }

func runBoth(t *testing.T, sc *snapgen.Scenario, opts ...Option) (outcome, outcome) {
	t.Helper()
	ctx := ctrllog.IntoContext(context.Background(), logr.Discard())
	cache, err := sc.NewCache(ctx, logr.Discard())
	if err != nil {
		t.Fatalf("seed %d: %v", sc.Seed, err)
	}
	var fs *configapi.FairSharing
	if sc.FairSharing {
		fs = &configapi.FairSharing{}
	}
	clk := clocktesting.NewFakeClock(sc.Now)
	ordering := workload.Ordering{PodsReadyRequeuingTimestamp: configapi.EvictionTimestamp}

	upP := upstream.New(nil, ordering, nil, fs, false, clk, nil, preemptexpectations.New(), nil)
	upOut := decide(t, ctx, cache, sc, fs != nil,
		func(s *schdcache.Snapshot) oracle { return upstream.NewOracle(upP, s) },
		func(wl workload.Info, a flavorassigner.Assignment, s *schdcache.Snapshot) []*Target {
			return upP.GetTargets(ctx, wl, a, s)
		})

	// Our time-based rule is wired in, as in the manager, but no ClusterQueue sets a window.
	if len(opts) == 0 {
		opts = []Option{queueSettings(func(kueue.ClusterQueueReference) timebased.Settings { return timebased.Settings{} })}
	}
	ourP := New(nil, ordering, nil, fs, false, clk, nil, preemptexpectations.New(), nil, opts...)
	ourOut := decide(t, ctx, cache, sc, fs != nil,
		func(s *schdcache.Snapshot) oracle { return ourP.Oracle(s) },
		func(wl workload.Info, a flavorassigner.Assignment, s *schdcache.Snapshot) []*Target {
			return ourP.GetTargets(ctx, wl, a, s)
		})
	return upOut, ourOut
}

type oracle interface {
	SimulatePreemption(context.Context, *schdcache.ClusterQueueSnapshot, workload.Info, resources.FlavorResource, resources.Amount) (preemptioncommon.PreemptionPossibility, int)
}

// decide runs flavor assignment and, when it asks for preemption, target selection, on a fresh
// snapshot, and checks that the search left the snapshot as it found it.
func decide(t *testing.T, ctx context.Context, cache *schdcache.Cache, sc *snapgen.Scenario, fairSharing bool,
	newOracle func(*schdcache.Snapshot) oracle, getTargets func(workload.Info, flavorassigner.Assignment, *schdcache.Snapshot) []*Target) outcome {
	t.Helper()
	snap, err := cache.Snapshot(ctx)
	if err != nil {
		t.Fatalf("seed %d: snapshot: %v", sc.Seed, err)
	}
	info := sc.PendingInfo()
	cq := snap.ClusterQueue(info.ClusterQueue)
	before := usage(snap)
	a := flavorassigner.New(info, cq, snap.ResourceFlavors, fairSharing, newOracle(snap), nil,
		configapi.QuotaCheckBlockUndeclared, resources.NewResourceFormatter(), 1).Assign(ctx, nil)
	out := outcome{Mode: a.RepresentativeMode().String(), Message: a.Message()}
	for _, ps := range a.PodSets {
		for r, f := range ps.Flavors {
			out.Assignments = append(out.Assignments, fmt.Sprintf("%s/%s=%s:%s", ps.Name, r, f.Name, f.Mode))
		}
	}
	slices.Sort(out.Assignments)
	if a.RepresentativeMode() == flavorassigner.Preempt {
		for _, tg := range getTargets(*info, a, snap) {
			out.Targets = append(out.Targets, fmt.Sprintf("%s in %s: %s", tg.WorkloadInfo.Obj.Name, tg.WorkloadInfo.ClusterQueue, tg.Reason))
		}
	}
	slices.Sort(out.Targets)
	for _, tg := range getTargets(*info, contestAll(info, cq, sc.Seed), snap) {
		out.DirectTargets = append(out.DirectTargets, fmt.Sprintf("%s in %s: %s", tg.WorkloadInfo.Obj.Name, tg.WorkloadInfo.ClusterQueue, tg.Reason))
	}
	slices.Sort(out.DirectTargets)
	if after := usage(snap); !cmp.Equal(before, after) {
		t.Fatalf("seed %d: the search did not restore the snapshot:\n%s", sc.Seed, cmp.Diff(before, after))
	}
	out.Usage = before
	return out
}

func usage(s *schdcache.Snapshot) map[string]string {
	out := map[string]string{}
	for name, cq := range s.ClusterQueues() {
		for fr, v := range cq.ResourceNode.Usage {
			if v.CmpInt64(0) == 0 {
				// Removing and re-adding a workload may leave explicit zeros.
				continue
			}
			out[fmt.Sprintf("%s/%s/%s", name, fr.Flavor, fr.Resource)] = v.String()
		}
	}
	return out
}

func describe(sc *snapgen.Scenario) string {
	s := fmt.Sprintf("fairSharing=%t pending=%s in %s priority=%d requests=%v\n", sc.FairSharing, sc.Pending.Name, sc.PendingCQ,
		*sc.Pending.Spec.Priority, sc.Pending.Spec.PodSets[0].Template.Spec.Containers[0].Resources.Requests)
	for _, co := range sc.Cohorts {
		s += fmt.Sprintf("cohort %s parent=%q groups=%v\n", co.Name, co.Spec.ParentName, co.Spec.ResourceGroups)
	}
	for _, cq := range sc.ClusterQueues {
		s += fmt.Sprintf("cq %s cohort=%q preemption=%+v groups=%v\n", cq.Name, cq.Spec.CohortName, cq.Spec.Preemption, cq.Spec.ResourceGroups)
	}
	for _, wl := range sc.Admitted {
		s += fmt.Sprintf("admitted %s in %s priority=%d usage=%v conditions=%d\n", wl.Name, wl.Status.Admission.ClusterQueue, *wl.Spec.Priority,
			wl.Status.Admission.PodSetAssignments[0].ResourceUsage, len(wl.Status.Conditions))
	}
	return s
}

// contestAll assigns every requested resource to one flavor of the queue, in preempt mode.
func contestAll(info *workload.Info, cq *schdcache.ClusterQueueSnapshot, seed uint64) flavorassigner.Assignment {
	flavors := cq.ResourceGroups[0].Flavors
	flavor := flavors[int(seed%uint64(len(flavors)))]
	ps := flavorassigner.PodSetAssignment{Name: info.TotalRequests[0].Name, Count: info.TotalRequests[0].Count, Flavors: flavorassigner.ResourceAssignment{}}
	info.TotalRequests[0].Requests.ForEach(func(r corev1.ResourceName, _ int64) {
		ps.Flavors[r] = &flavorassigner.FlavorAssignment{Name: flavor, Mode: flavorassigner.Preempt}
	})
	return flavorassigner.Assignment{PodSets: []flavorassigner.PodSetAssignment{ps}}
}

// The differential runs above build the preemptor as the manager does: the sources turn every
// feature on, and WithoutFeature takes one out.
func TestNoSettingsTurnsEveryFeatureOn(t *testing.T) {
	clk := clocktesting.NewFakeClock(time.Now())
	all := plugins.Precedence()
	for _, removed := range append([]policy.Feature{""}, all...) {
		opts := []Option{WithSources(noSettings{}, expectedruntime.DefaultCooldown(time.Minute))}
		if removed != "" {
			opts = append(opts, WithoutFeature(removed))
		}
		p := New(nil, workload.Ordering{}, nil, nil, false, clk, nil, preemptexpectations.New(), nil, opts...)
		want := slices.DeleteFunc(slices.Clone(all), func(f policy.Feature) bool { return f == removed })
		if diff := cmp.Diff(want, p.features, cmpopts.SortSlices(func(a, b policy.Feature) bool { return a < b })); diff != "" {
			t.Errorf("without %q: features on (-want +got):\n%s", removed, diff)
		}
	}
}
