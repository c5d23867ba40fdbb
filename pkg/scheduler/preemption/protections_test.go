package preemption

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/go-logr/logr"
	"github.com/google/go-cmp/cmp"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"
	utilfeature "k8s.io/apiserver/pkg/util/feature"
	featuregatetesting "k8s.io/component-base/featuregate/testing"
	clocktesting "k8s.io/utils/clock/testing"
	ctrllog "sigs.k8s.io/controller-runtime/pkg/log"

	configapi "sigs.k8s.io/kueue/apis/config/v1beta2"
	kueue "sigs.k8s.io/kueue/apis/kueue/v1beta2"
	"sigs.k8s.io/kueue/pkg/resources"
	preemptioncommon "sigs.k8s.io/kueue/pkg/scheduler/preemption/common"
	preemptexpectations "sigs.k8s.io/kueue/pkg/scheduler/preemption/expectations"
	utiltestingapi "sigs.k8s.io/kueue/pkg/util/testing/v1beta2"
	"sigs.k8s.io/kueue/pkg/workload"

	"github.com/kueue-timeshare/kueue-timeshare/apis/annotations"
	"github.com/kueue-timeshare/kueue-timeshare/pkg/features"
	"github.com/kueue-timeshare/kueue-timeshare/pkg/plugins/minruntime"
	"github.com/kueue-timeshare/kueue-timeshare/pkg/plugins/notice"
	"github.com/kueue-timeshare/kueue-timeshare/pkg/plugins/toleration"
	"github.com/kueue-timeshare/kueue-timeshare/pkg/policy"
	"github.com/kueue-timeshare/kueue-timeshare/test/util/snapgen"
)

// fakeMinRuntimes is a minruntime.Source from maps, as the settings store gives it.
type fakeMinRuntimes struct {
	cqs      map[kueue.ClusterQueueReference]minruntime.Settings
	cohorts  map[kueue.CohortReference]minruntime.Settings
	defaults minruntime.Defaults
	method   minruntime.ResolveMethod
}

func (f fakeMinRuntimes) SettingsPath(feat policy.Feature, cq kueue.ClusterQueueReference, parents []kueue.CohortReference) ([]policy.QueueNode, any) {
	if feat != minruntime.Feature {
		// No other unit's settings: as noNoticeSettings for the notice.
		return nil, nil
	}
	// One allocation per path, as the settings store makes.
	path := make([]policy.QueueNode, 1, len(parents)+1)
	path[0] = policy.QueueNode{Kind: "ClusterQueue", Name: string(cq)}
	for _, c := range parents {
		path = append(path, policy.QueueNode{Kind: "Cohort", Name: string(c)})
	}
	for i := range path {
		var m minruntime.Settings
		if i == 0 {
			m = f.cqs[cq]
		} else {
			m = f.cohorts[parents[i-1]]
		}
		if m != (minruntime.Settings{}) {
			path[i].Settings = m
		}
	}
	d := f.defaults
	d.Method = f.method
	return path, d
}

// org <- team-a <- a1 (no quota; its one 2-CPU workload borrows, running for 5m) and org <- b1
// (2 CPUs, reclaims with Any; one low-priority 1-CPU workload running for 5m when own is set).
// The pending workload asks b1 for cpus.
func reclaimScenario(cpus string, own bool) *snapgen.Scenario {
	sc := &snapgen.Scenario{Now: snapgen.Epoch.Add(time.Hour)}
	sc.Flavors = []*kueue.ResourceFlavor{utiltestingapi.MakeResourceFlavor("f0").Obj()}
	sc.Cohorts = []*kueue.Cohort{utiltestingapi.MakeCohort("org").Obj(), utiltestingapi.MakeCohort("team-a").Parent("org").Obj()}
	sc.ClusterQueues = []*kueue.ClusterQueue{
		utiltestingapi.MakeClusterQueue("a1").Cohort("team-a").
			ResourceGroup(*utiltestingapi.MakeFlavorQuotas("f0").Resource(corev1.ResourceCPU, "0").Obj()).Obj(),
		utiltestingapi.MakeClusterQueue("b1").Cohort("org").
			ResourceGroup(*utiltestingapi.MakeFlavorQuotas("f0").Resource(corev1.ResourceCPU, "2").Obj()).
			Preemption(kueue.ClusterQueuePreemption{ReclaimWithinCohort: kueue.PreemptionPolicyAny, WithinClusterQueue: kueue.PreemptionPolicyLowerPriority}).Obj(),
	}
	started := sc.Now.Add(-5 * time.Minute)
	running := func(name, cq, cpu string, prio int32) *kueue.Workload {
		psa := utiltestingapi.MakePodSetAssignment(kueue.DefaultPodSetName).Count(1).Flavor(corev1.ResourceCPU, "f0").ResourceUsage(corev1.ResourceCPU, cpu)
		return utiltestingapi.MakeWorkload(name, "ns").UID(types.UID("uid-"+name)).Priority(prio).Request(corev1.ResourceCPU, cpu).
			Creation(snapgen.Epoch).ReserveQuotaAt(utiltestingapi.MakeAdmission(kueue.ClusterQueueReference(cq)).PodSets(psa.Obj()).Obj(), started).
			AdmittedAt(true, started).Obj()
	}
	borrowCPU := "2"
	if own {
		borrowCPU = "1"
		sc.Admitted = append(sc.Admitted, running("own", "b1", "1", 1))
	}
	sc.Admitted = append(sc.Admitted, running("borrower", "a1", borrowCPU, 10))
	sc.Pending = utiltestingapi.MakeWorkload("pending", "ns").UID("uid-pending").Priority(10).
		Request(corev1.ResourceCPU, cpus).Creation(snapgen.Epoch.Add(time.Minute)).Obj()
	sc.PendingCQ = "b1"
	return sc
}

func TestMinRuntimeTargets(t *testing.T) {
	teamA := func(d time.Duration) map[kueue.CohortReference]minruntime.Settings {
		return map[kueue.CohortReference]minruntime.Settings{"team-a": {Reclaim: policy.Set(d)}}
	}
	cases := map[string]struct {
		scenario   *snapgen.Scenario
		src        fakeMinRuntimes
		gateOff    bool
		want       []string
		wantOracle preemptioncommon.PreemptionPossibility
		// wantBlocked is whether Wait has the pending workload hold the quota it waits for.
		wantBlocked bool
		wantExplain string
	}{
		"reclaim: protected by team-a's reclaimMinRuntime": {
			scenario: reclaimScenario("2", false), src: fakeMinRuntimes{cohorts: teamA(10 * time.Minute)},
			wantOracle: preemptioncommon.NoCandidates, wantBlocked: true,
			wantExplain: "1 preemption candidate is protected (1 by reclaimMinRuntime 10m0s from Cohort team-a); the first protection ends at 2026-03-01T10:05:00Z",
		},
		"reclaim: protection over": {
			scenario: reclaimScenario("2", false), src: fakeMinRuntimes{cohorts: teamA(5 * time.Minute)},
			want: []string{"borrower: InCohortReclamation"}, wantOracle: preemptioncommon.Reclaim,
		},
		"reclaim: gate off ignores the settings": {
			scenario: reclaimScenario("2", false), src: fakeMinRuntimes{cohorts: teamA(10 * time.Minute)}, gateOff: true,
			want: []string{"borrower: InCohortReclamation"}, wantOracle: preemptioncommon.Reclaim,
		},
		"reclaim: Queue method starts at a1's 0s": {
			scenario: reclaimScenario("2", false), src: fakeMinRuntimes{cohorts: teamA(10 * time.Minute), method: minruntime.ResolveQueue,
				cqs: map[kueue.ClusterQueueReference]minruntime.Settings{"a1": {Reclaim: policy.Set(0)}}},
			want: []string{"borrower: InCohortReclamation"}, wantOracle: preemptioncommon.Reclaim,
		},
		"reclaim: the manager default applies when nothing is set": {
			scenario: reclaimScenario("2", false), src: fakeMinRuntimes{defaults: minruntime.Defaults{Reclaim: time.Hour}},
			wantOracle: preemptioncommon.NoCandidates, wantBlocked: true,
			wantExplain: "1 preemption candidate is protected (1 by defaultReclaimMinRuntime 1h0m0s from the manager configuration); the first protection ends at 2026-03-01T10:55:00Z",
		},
		"preempt settings do not protect from reclaim": {
			scenario: reclaimScenario("2", false), src: fakeMinRuntimes{defaults: minruntime.Defaults{Preempt: time.Hour}},
			want: []string{"borrower: InCohortReclamation"}, wantOracle: preemptioncommon.Reclaim,
		},
		"in queue: the protected own workload is passed over for the borrower": {
			scenario: reclaimScenario("1", true), src: fakeMinRuntimes{cqs: map[kueue.ClusterQueueReference]minruntime.Settings{"b1": {Preempt: policy.Set(time.Hour)}}},
			want: []string{"borrower: InCohortReclamation"}, wantOracle: preemptioncommon.Reclaim,
			wantExplain: "1 preemption candidate is protected (1 by preemptMinRuntime 1h0m0s from ClusterQueue b1); the first protection ends at 2026-03-01T10:55:00Z",
		},
		"in queue: protected own workload and not enough to reclaim": {
			scenario: reclaimScenario("2", true), src: fakeMinRuntimes{cqs: map[kueue.ClusterQueueReference]minruntime.Settings{"b1": {Preempt: policy.Set(time.Hour)}}},
			wantOracle:  preemptioncommon.NoCandidates,
			wantExplain: "1 preemption candidate is protected (1 by preemptMinRuntime 1h0m0s from ClusterQueue b1); the first protection ends at 2026-03-01T10:55:00Z",
		},
		"in queue and reclaim both protected": {
			scenario: reclaimScenario("2", true), src: fakeMinRuntimes{defaults: minruntime.Defaults{Preempt: time.Hour, Reclaim: 10 * time.Minute}},
			wantOracle: preemptioncommon.NoCandidates, wantBlocked: true,
			wantExplain: "2 preemption candidates are protected (1 by defaultPreemptMinRuntime 1h0m0s from the manager configuration, " +
				"1 by defaultReclaimMinRuntime 10m0s from the manager configuration); the first protection ends at 2026-03-01T10:05:00Z",
		},
	}
	for _, fairSharing := range []bool{false, true} {
		for name, tc := range cases {
			t.Run(fmt.Sprintf("fairSharing=%t/%s", fairSharing, name), func(t *testing.T) {
				if tc.gateOff {
					featuregatetesting.SetFeatureGateDuringTest(t, utilfeature.DefaultFeatureGate, features.MinRuntimeProtection, false)
				}
				ctx := ctrllog.IntoContext(context.Background(), logr.Discard())
				sc := *tc.scenario
				sc.FairSharing = fairSharing
				var fs *configapi.FairSharing
				if fairSharing {
					fs = &configapi.FairSharing{}
				}
				p := New(nil, workload.Ordering{PodsReadyRequeuingTimestamp: configapi.EvictionTimestamp}, nil, fs, false,
					clocktesting.NewFakeClock(sc.Now), nil, preemptexpectations.New(), nil, WithSources(tc.src))
				info := sc.PendingInfo()
				a := cpuPreemptAssignment(info)
				snap := snapshotOf(t, ctx, &sc)
				var got []string
				for _, tg := range p.GetTargets(ctx, *info, a, snap) {
					got = append(got, tg.WorkloadInfo.Obj.Name+": "+tg.Reason)
				}
				// Under fair sharing too the reason is a reclaim: the preemptor does not borrow.
				if diff := cmp.Diff(tc.want, got); diff != "" {
					t.Errorf("targets (-want +got):\n%s", diff)
				}
				// The flavor assigner's oracle agrees with the victim search.
				fr := resources.FlavorResource{Flavor: "f0", Resource: corev1.ResourceCPU}
				need := resources.NewAmount(info.TotalRequests[0].Requests.ResourceValue(corev1.ResourceCPU))
				possible, _ := p.Oracle(snap).SimulatePreemption(ctx, snap.ClusterQueue("b1"), *info, fr, need)
				if possible != tc.wantOracle {
					t.Errorf("oracle = %v, want %v", possible, tc.wantOracle)
				}
				note, hold := p.Wait(ctx, info, snap)
				if hold != tc.wantBlocked {
					t.Errorf("Wait: hold quota = %t, want %t", hold, tc.wantBlocked)
				}
				if note != tc.wantExplain {
					t.Errorf("Wait: note = %q, want %q", note, tc.wantExplain)
				}
			})
		}
	}
}

// fakeTolerations gives every workload of class "sticky" the toleration t.
type fakeTolerations struct{ t *toleration.Toleration }

func (f fakeTolerations) For(ref *kueue.PriorityClassRef) *toleration.Toleration {
	if ref != nil && ref.Name == "sticky" {
		return f.t
	}
	return nil
}

func TestTolerationTargets(t *testing.T) {
	forever := &toleration.Toleration{Toleration: annotations.Toleration{MinimumPreemptablePriority: 100, Forever: true}, Source: "WorkloadPriorityClass sticky"}
	fourMin := &toleration.Toleration{Toleration: annotations.Toleration{MinimumPreemptablePriority: 100, Duration: 4 * time.Minute}, Source: "WorkloadPriorityClass sticky"}
	cases := map[string]struct {
		toleration  *toleration.Toleration
		gateOff     bool
		want        []string
		wantExplain string
	}{
		"tolerated forever: no victims, and reclaim cannot be counted on": {
			toleration:  forever,
			wantExplain: "1 preemption candidate is protected (1 by the preemption toleration of WorkloadPriorityClass sticky)",
		},
		"toleration over after 4 minutes": {
			toleration: fourMin, want: []string{"borrower: InCohortReclamation"},
			wantExplain: "",
		},
		"gate off": {
			toleration: forever, gateOff: true, want: []string{"borrower: InCohortReclamation"},
		},
	}
	for _, fairSharing := range []bool{false, true} {
		for name, tc := range cases {
			t.Run(fmt.Sprintf("fairSharing=%t/%s", fairSharing, name), func(t *testing.T) {
				if tc.gateOff {
					featuregatetesting.SetFeatureGateDuringTest(t, utilfeature.DefaultFeatureGate, features.PreemptionToleration, false)
				}
				ctx := ctrllog.IntoContext(context.Background(), logr.Discard())
				sc := *reclaimScenario("2", false)
				sc.FairSharing = fairSharing
				sc.Admitted[0].Spec.PriorityClassRef = kueue.NewWorkloadPriorityClassRef("sticky")
				var fs *configapi.FairSharing
				if fairSharing {
					fs = &configapi.FairSharing{}
				}
				p := New(nil, workload.Ordering{PodsReadyRequeuingTimestamp: configapi.EvictionTimestamp}, nil, fs, false,
					clocktesting.NewFakeClock(sc.Now), nil, preemptexpectations.New(), nil, WithSources(fakeTolerations{tc.toleration}))
				info := sc.PendingInfo()
				a := cpuPreemptAssignment(info)
				snap := snapshotOf(t, ctx, &sc)
				var got []string
				for _, tg := range p.GetTargets(ctx, *info, a, snap) {
					got = append(got, tg.WorkloadInfo.Obj.Name+": "+tg.Reason)
				}
				if diff := cmp.Diff(tc.want, got); diff != "" {
					t.Errorf("targets (-want +got):\n%s", diff)
				}
				note, hold := p.Wait(ctx, info, snap)
				if want := len(tc.want) == 0; hold != want {
					t.Errorf("Wait: hold quota = %t, want %t", hold, want)
				}
				if note != tc.wantExplain {
					t.Errorf("Wait: note = %q, want %q", note, tc.wantExplain)
				}
			})
		}
	}
}

// noNoticeSettings is a notice.Source where no queue sets a notice: only notices already given
// matter to these tests.
// giveNotice puts n on wl as the preemptor does: the annotations and the record in its status.
func giveNotice(wl *kueue.Workload, n annotations.Notice) {
	wl.Annotations = n.Annotations()
	wl.Status.Conditions = append(wl.Status.Conditions, notice.ConditionOf(&n, wl.Generation))
}

type noNoticeSettings struct{}

func (noNoticeSettings) SettingsPath(policy.Feature, kueue.ClusterQueueReference, []kueue.CohortReference) ([]policy.QueueNode, any) {
	return nil, nil
}

// A borrower under notice for another preemptor is promised to it: a reclaiming head leaves it
// alone and says so, without holding quota against the cohort for it (that room goes to the
// noticed preemptor at the deadline).
func TestNoticeForAnotherPreemptorTargets(t *testing.T) {
	sc0 := reclaimScenario("2", false)
	deadline := sc0.Now.Add(3 * time.Minute)
	noticeFor := func(preemptor string) annotations.Notice {
		return annotations.Notice{Start: sc0.Now.Add(-time.Minute), Deadline: deadline, Reason: kueue.InClusterQueueReason,
			Preemptor: "ns/" + preemptor, PreemptorUID: types.UID("uid-" + preemptor)}
	}
	cases := map[string]struct {
		notice      annotations.Notice
		forged      bool
		gateOff     bool
		want        []string
		wantExplain string
	}{
		"under notice for another preemptor: no victims": {
			notice:      noticeFor("other"),
			wantExplain: "1 preemption candidate is protected (1 by its preemption notice for ns/other); the first protection ends at " + deadline.UTC().Format(time.RFC3339),
		},
		"under notice for this preemptor, not due: it waits for it": {
			notice:      noticeFor("pending"),
			wantExplain: "waiting for the preemption notice of 1 workload(s) (ns/borrower) to end at " + deadline.UTC().Format(time.RFC3339) + ", or sooner once they say their checkpoint is done",
		},
		"gate off: the notice is not read": {
			notice: noticeFor("other"), gateOff: true, want: []string{"borrower: InCohortReclamation"},
		},
		"a notice for another preemptor that the manager never gave: ignored, the borrower is a victim": {
			notice: noticeFor("other"), forged: true, want: []string{"borrower: InCohortReclamation"},
		},
	}
	for _, fairSharing := range []bool{false, true} {
		for name, tc := range cases {
			t.Run(fmt.Sprintf("fairSharing=%t/%s", fairSharing, name), func(t *testing.T) {
				if tc.gateOff {
					featuregatetesting.SetFeatureGateDuringTest(t, utilfeature.DefaultFeatureGate, features.PreemptionNotice, false)
				}
				ctx := ctrllog.IntoContext(context.Background(), logr.Discard())
				sc := *reclaimScenario("2", false)
				sc.FairSharing = fairSharing
				if tc.forged {
					sc.Admitted[0].Annotations = tc.notice.Annotations()
				} else {
					giveNotice(sc.Admitted[0], tc.notice)
				}
				var fs *configapi.FairSharing
				if fairSharing {
					fs = &configapi.FairSharing{}
				}
				p := New(nil, workload.Ordering{PodsReadyRequeuingTimestamp: configapi.EvictionTimestamp}, nil, fs, false,
					clocktesting.NewFakeClock(sc.Now), nil, preemptexpectations.New(), nil, WithSources(noNoticeSettings{}))
				info := sc.PendingInfo()
				snap := snapshotOf(t, ctx, &sc)
				var got []string
				for _, tg := range p.GetTargets(ctx, *info, cpuPreemptAssignment(info), snap) {
					got = append(got, tg.WorkloadInfo.Obj.Name+": "+tg.Reason)
				}
				if diff := cmp.Diff(tc.want, got); diff != "" {
					t.Errorf("targets (-want +got):\n%s", diff)
				}
				note, hold := p.Wait(ctx, info, snap)
				if hold {
					t.Error("Wait: hold quota = true, want false: a noticed workload's room is not this head's to hold")
				}
				if note != tc.wantExplain {
					t.Errorf("Wait: note = %q, want %q", note, tc.wantExplain)
				}
			})
		}
	}
}
