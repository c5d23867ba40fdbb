package preemption

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/go-logr/logr"
	"github.com/google/go-cmp/cmp"
	"github.com/google/go-cmp/cmp/cmpopts"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	clocktesting "k8s.io/utils/clock/testing"
	ctrllog "sigs.k8s.io/controller-runtime/pkg/log"

	configapi "sigs.k8s.io/kueue/apis/config/v1beta2"
	kueue "sigs.k8s.io/kueue/apis/kueue/v1beta2"
	schdcache "sigs.k8s.io/kueue/pkg/cache/scheduler"
	"sigs.k8s.io/kueue/pkg/scheduler/flavorassigner"
	preemptexpectations "sigs.k8s.io/kueue/pkg/scheduler/preemption/expectations"
	utiltestingapi "sigs.k8s.io/kueue/pkg/util/testing/v1beta2"
	"sigs.k8s.io/kueue/pkg/workload"

	"github.com/kueue-timeshare/kueue-timeshare/pkg/plugins/timebased"
	"github.com/kueue-timeshare/kueue-timeshare/pkg/policy"
	"github.com/kueue-timeshare/kueue-timeshare/test/util/snapgen"
)

// A ClusterQueue of 3 CPUs full of same-priority one-CPU workloads reserved 30, 90 and 150
// minutes ago, and a same-priority pending workload, created after all of them, asking for cpus.
func timeSharingScenario(cpus string, priorities ...int32) *snapgen.Scenario {
	sc := &snapgen.Scenario{Now: snapgen.Epoch.Add(4 * time.Hour)}
	sc.Flavors = []*kueue.ResourceFlavor{utiltestingapi.MakeResourceFlavor("f0").Obj()}
	sc.ClusterQueues = []*kueue.ClusterQueue{utiltestingapi.MakeClusterQueue("cq").
		ResourceGroup(*utiltestingapi.MakeFlavorQuotas("f0").Resource(corev1.ResourceCPU, "3").Obj()).
		Preemption(kueue.ClusterQueuePreemption{WithinClusterQueue: kueue.PreemptionPolicyLowerOrNewerEqualPriority}).Obj()}
	for i, age := range []time.Duration{30 * time.Minute, 90 * time.Minute, 150 * time.Minute} {
		prio := int32(10)
		if i < len(priorities) {
			prio = priorities[i]
		}
		psa := utiltestingapi.MakePodSetAssignment(kueue.DefaultPodSetName).Count(1).Flavor(corev1.ResourceCPU, "f0").ResourceUsage(corev1.ResourceCPU, "1")
		sc.Admitted = append(sc.Admitted, utiltestingapi.MakeWorkload(fmt.Sprintf("ran-%s", age), "ns").
			UID(types.UID(fmt.Sprintf("uid-%d", i))).Priority(prio).Request(corev1.ResourceCPU, "1").
			Creation(snapgen.Epoch).
			ReserveQuotaAt(utiltestingapi.MakeAdmission("cq").PodSets(psa.Obj()).Obj(), sc.Now.Add(-age)).Obj())
	}
	sc.Pending = utiltestingapi.MakeWorkload("pending", "ns").UID("uid-pending").Priority(10).
		Request(corev1.ResourceCPU, cpus).Creation(snapgen.Epoch.Add(time.Hour)).Obj()
	sc.PendingCQ = "cq"
	return sc
}

func TestTimeBasedTargets(t *testing.T) {
	// Two other workloads waiting in the queue: one created before the pending one, and one created
	// even earlier but preempted for time-sharing after the pending one was created.
	older := utiltestingapi.MakeWorkload("older", "ns").UID("uid-older").Priority(10).Creation(snapgen.Epoch.Add(30 * time.Minute)).Obj()
	rotatedOut := utiltestingapi.MakeWorkload("rotated-out", "ns").UID("uid-rotated").Priority(10).Creation(snapgen.Epoch).Obj()
	rotatedOut.Status.Conditions = []metav1.Condition{{Type: kueue.WorkloadPreempted, Status: metav1.ConditionTrue,
		Reason: timebased.Reason, LastTransitionTime: metav1.NewTime(snapgen.Epoch.Add(2 * time.Hour))}}
	lowerWaiting := utiltestingapi.MakeWorkload("lower", "ns").UID("uid-lower").Priority(1).Creation(snapgen.Epoch).Obj()

	// The pending workload is older than the running ones but was rotated out after they started
	// waiting: it must not snatch the quota back through upstream's "newer equal priority" rule.
	rotatedBack := timeSharingScenario("1")
	rotatedBack.Pending.CreationTimestamp = metav1.NewTime(snapgen.Epoch.Add(-time.Hour))
	rotatedBack.Pending.Status.Conditions = []metav1.Condition{{Type: kueue.WorkloadPreempted, Status: metav1.ConditionTrue,
		Reason: timebased.Reason, LastTransitionTime: metav1.NewTime(snapgen.Epoch.Add(3 * time.Hour))}}
	olderNotRotated := timeSharingScenario("1")
	olderNotRotated.Pending.CreationTimestamp = metav1.NewTime(snapgen.Epoch.Add(-time.Hour))

	cases := map[string]struct {
		scenario *snapgen.Scenario
		window   time.Duration
		noOption bool
		pending  []*kueue.Workload
		want     []string
	}{
		"rotated out: only expired workloads, for time": {
			scenario: rotatedBack, window: time.Hour,
			want: []string{"ran-2h30m0s: InClusterQueueTimeBased"},
		},
		"older and never rotated out: eligible by upstream's rule (its reason), expired ones first": {
			scenario: olderNotRotated, window: time.Hour,
			want: []string{"ran-2h30m0s: InClusterQueue"},
		},
		"not its turn: a same-priority workload waited longer": {
			scenario: timeSharingScenario("1"), window: time.Hour, pending: []*kueue.Workload{older},
		},
		"its turn: the other one was rotated out after it started waiting": {
			scenario: timeSharingScenario("1"), window: time.Hour, pending: []*kueue.Workload{rotatedOut},
			want: []string{"ran-2h30m0s: InClusterQueueTimeBased"},
		},
		"lower-priority waiters do not take turns from it": {
			scenario: timeSharingScenario("1"), window: time.Hour, pending: []*kueue.Workload{lowerWaiting},
			want: []string{"ran-2h30m0s: InClusterQueueTimeBased"},
		},
		"the longest-running expired workload goes first": {
			scenario: timeSharingScenario("1"), window: time.Hour,
			want: []string{"ran-2h30m0s: InClusterQueueTimeBased"},
		},
		"only as many as needed": {
			scenario: timeSharingScenario("2"), window: time.Hour,
			want: []string{"ran-1h30m0s: InClusterQueueTimeBased", "ran-2h30m0s: InClusterQueueTimeBased"},
		},
		"workloads inside their window are protected": {
			scenario: timeSharingScenario("3"), window: time.Hour,
		},
		"nobody expired": {
			scenario: timeSharingScenario("1"), window: 3 * time.Hour,
		},
		"no window: upstream keeps the oldest running": {
			scenario: timeSharingScenario("1"),
		},
		"not configured at all: upstream": {
			scenario: timeSharingScenario("1"), window: time.Hour, noOption: true,
		},
		"a lower priority goes before an expired same-priority workload, with upstream's reason": {
			scenario: timeSharingScenario("1", 5, 10, 10), window: time.Hour,
			want: []string{"ran-30m0s: InClusterQueue"},
		},
	}
	// The rule lives in the victim policy, so classical and fair-sharing preemption must agree.
	for _, fairSharing := range []bool{false, true} {
		for name, tc := range cases {
			t.Run(fmt.Sprintf("fairSharing=%t/%s", fairSharing, name), func(t *testing.T) {
				ctx := ctrllog.IntoContext(context.Background(), logr.Discard())
				sc := *tc.scenario
				sc.FairSharing = fairSharing
				snap := snapshotOf(t, ctx, &sc)
				var fs *configapi.FairSharing
				if fairSharing {
					fs = &configapi.FairSharing{}
				}
				var opts []Option
				if !tc.noOption {
					opts = timeSharingOptions(tc.window, tc.pending)
				}
				p := New(nil, workload.Ordering{PodsReadyRequeuingTimestamp: configapi.EvictionTimestamp}, nil, fs, false,
					clocktesting.NewFakeClock(sc.Now), nil, preemptexpectations.New(), nil, opts...)
				info := sc.PendingInfo()
				a := cpuPreemptAssignment(info)
				var got []string
				for _, tg := range p.GetTargets(ctx, *info, a, snap) {
					got = append(got, tg.WorkloadInfo.Obj.Name+": "+tg.Reason)
				}
				if diff := cmp.Diff(tc.want, got, cmpopts.SortSlices(func(a, b string) bool { return a < b })); diff != "" {
					t.Errorf("targets (-want +got):\n%s", diff)
				}
			})
		}
	}
}

func TestExplainWait(t *testing.T) {
	older := utiltestingapi.MakeWorkload("older", "ns").UID("uid-older").Priority(10).Creation(snapgen.Epoch.Add(30 * time.Minute)).Obj()
	oldest := utiltestingapi.MakeWorkload("oldest", "ns").UID("uid-oldest").Priority(10).Creation(snapgen.Epoch.Add(10 * time.Minute)).Obj()
	cases := map[string]struct {
		window  time.Duration
		pending []*kueue.Workload
		want    string
	}{
		"no window: nothing to add": {},
		"protected: says until when": {
			window: 3 * time.Hour,
			want:   "same-priority workloads are protected by minAdmitDuration 3h0m0s; the first becomes preemptible after 2026-03-01T13:30:00Z",
		},
		"another workload has the turn": {
			window: time.Hour, pending: []*kueue.Workload{older},
			want: "waiting for a time-sharing turn: same-priority workloads that have waited longer go first",
		},
		"another workload has the turn: the message is the same whoever it is, so a handover rewrites no pending status": {
			window: time.Hour, pending: []*kueue.Workload{oldest},
			want: "waiting for a time-sharing turn: same-priority workloads that have waited longer go first",
		},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			sc := timeSharingScenario("1")
			ctx := ctrllog.IntoContext(context.Background(), logr.Discard())
			snap := snapshotOf(t, ctx, sc)
			p := New(nil, workload.Ordering{PodsReadyRequeuingTimestamp: configapi.EvictionTimestamp}, nil, nil, false,
				clocktesting.NewFakeClock(sc.Now), nil, preemptexpectations.New(), nil, timeSharingOptions(tc.window, tc.pending)...)
			if got := p.ExplainWait(ctx, sc.PendingInfo(), snap); got != tc.want {
				t.Errorf("ExplainWait = %q, want %q", got, tc.want)
			}
		})
	}
}

// timeSharingOptions configure the window of every ClusterQueue and its pending workloads.
func timeSharingOptions(window time.Duration, pending []*kueue.Workload) []Option {
	return []Option{
		queueSettings(func(kueue.ClusterQueueReference) timebased.Settings {
			return timebased.Settings{MinAdmitDuration: window}
		}),
		WithPendingWorkloads(func(kueue.ClusterQueueReference) []*workload.Info {
			var out []*workload.Info
			for _, wl := range pending {
				out = append(out, workload.NewInfo(wl))
			}
			return out
		}),
	}
}

func snapshotOf(t *testing.T, ctx context.Context, sc *snapgen.Scenario) *schdcache.Snapshot {
	t.Helper()
	cache, err := sc.NewCache(ctx, logr.Discard())
	if err != nil {
		t.Fatal(err)
	}
	snap, err := cache.Snapshot(ctx)
	if err != nil {
		t.Fatal(err)
	}
	return snap
}

func TestSubstituteHead(t *testing.T) {
	rotated := func(name string, uid types.UID, created, preemptedAt time.Time) *kueue.Workload {
		wl := utiltestingapi.MakeWorkload(name, "ns").UID(uid).Priority(10).Creation(created).Obj()
		if !preemptedAt.IsZero() {
			wl.Status.Conditions = []metav1.Condition{{Type: kueue.WorkloadPreempted, Status: metav1.ConditionTrue,
				Reason: timebased.Reason, LastTransitionTime: metav1.NewTime(preemptedAt)}}
		}
		return wl
	}
	head := rotated("head", "uid-head", snapgen.Epoch, snapgen.Epoch.Add(2*time.Hour))
	waitingSince1h := rotated("waited", "uid-waited", snapgen.Epoch.Add(time.Hour), time.Time{})
	waitingSince30m := rotated("waited-more", "uid-waited-more", snapgen.Epoch.Add(30*time.Minute), time.Time{})
	rotatedLater := rotated("later", "uid-later", snapgen.Epoch.Add(time.Minute), snapgen.Epoch.Add(3*time.Hour))
	lower := utiltestingapi.MakeWorkload("lower", "ns").UID("uid-lower").Priority(1).Creation(snapgen.Epoch).Obj()
	cases := map[string]struct {
		head    *kueue.Workload
		window  time.Duration
		pending []*kueue.Workload
		want    string
	}{
		"rotated-out head steps aside for the one that waited longest": {
			head: head, window: time.Hour, pending: []*kueue.Workload{waitingSince1h, waitingSince30m, rotatedLater, lower}, want: "waited-more",
		},
		"nobody waited longer": {head: head, window: time.Hour, pending: []*kueue.Workload{rotatedLater, lower}},
		"a head never rotated out keeps its place": {
			head: waitingSince1h, window: time.Hour, pending: []*kueue.Workload{waitingSince30m},
		},
		"no window: upstream order": {head: head, pending: []*kueue.Workload{waitingSince30m}},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			ctx := ctrllog.IntoContext(context.Background(), logr.Discard())
			p := New(nil, workload.Ordering{PodsReadyRequeuingTimestamp: configapi.EvictionTimestamp}, nil, nil, false,
				clocktesting.NewFakeClock(snapgen.Epoch.Add(4*time.Hour)), nil, preemptexpectations.New(), nil, timeSharingOptions(tc.window, tc.pending)...)
			info := workload.NewInfo(tc.head)
			info.ClusterQueue = "cq"
			got := ""
			if sub := p.SubstituteHead(ctx, info, nil); sub != nil {
				got = sub.Obj.Name
			}
			if got != tc.want {
				t.Errorf("SubstituteHead = %q, want %q", got, tc.want)
			}
		})
	}
}

// cpuPreemptAssignment is the flavor assigner's answer for a one-podset CPU workload that needs
// preemption in flavor f0.
func cpuPreemptAssignment(info *workload.Info) flavorassigner.Assignment {
	return flavorassigner.Assignment{PodSets: []flavorassigner.PodSetAssignment{{
		Name: info.TotalRequests[0].Name, Count: 1,
		Flavors: flavorassigner.ResourceAssignment{corev1.ResourceCPU: {Name: "f0", Mode: flavorassigner.Preempt}},
	}}}
}

// The queue manager sorts a ClusterQueue's pending list on every read, so a scheduling cycle (one
// snapshot) reads it once, however many searches it runs; the next cycle reads it again.
func TestPendingReadOncePerCycle(t *testing.T) {
	older := utiltestingapi.MakeWorkload("older", "ns").UID("uid-older").Priority(10).Creation(snapgen.Epoch.Add(30 * time.Minute)).Obj()
	ctx := ctrllog.IntoContext(context.Background(), logr.Discard())
	sc := timeSharingScenario("1")
	var pending []*kueue.Workload
	reads := 0
	p := New(nil, workload.Ordering{PodsReadyRequeuingTimestamp: configapi.EvictionTimestamp}, nil, nil, false,
		clocktesting.NewFakeClock(sc.Now), nil, preemptexpectations.New(), nil,
		queueSettings(func(kueue.ClusterQueueReference) timebased.Settings {
			return timebased.Settings{MinAdmitDuration: time.Hour}
		}),
		WithPendingWorkloads(func(kueue.ClusterQueueReference) []*workload.Info {
			reads++
			var out []*workload.Info
			for _, wl := range pending {
				out = append(out, workload.NewInfo(wl))
			}
			return out
		}))
	info := sc.PendingInfo()
	targets := func(snap *schdcache.Snapshot) []string {
		var got []string
		for _, tg := range p.GetTargets(ctx, *info, cpuPreemptAssignment(info), snap) {
			got = append(got, tg.WorkloadInfo.Obj.Name)
		}
		return got
	}
	type step struct {
		Targets []string
		Explain string
		Reads   int
	}
	var got []step
	cycle := func(snap *schdcache.Snapshot) {
		s := step{Targets: targets(snap), Explain: p.ExplainWait(ctx, info, snap)}
		s.Reads = reads
		got = append(got, s)
	}
	first := snapshotOf(t, ctx, sc)
	cycle(first)
	// A workload that waited longer joins the queue during the cycle: the cycle keeps its view.
	pending = []*kueue.Workload{older}
	cycle(first)
	cycle(snapshotOf(t, ctx, sc))
	protected := "same-priority workloads are protected by minAdmitDuration 1h0m0s; the first becomes preemptible after 2026-03-01T13:30:00Z"
	want := []step{
		{Targets: []string{"ran-2h30m0s"}, Explain: protected, Reads: 1},
		{Targets: []string{"ran-2h30m0s"}, Explain: protected, Reads: 1},
		{Explain: "waiting for a time-sharing turn: same-priority workloads that have waited longer go first", Reads: 2},
	}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("per cycle (-want +got):\n%s", diff)
	}
}

// queueSettings gives every ClusterQueue's time-sharing settings by f, as the settings store does
// (a timebased.Source), which turns time-based preemption on.
func queueSettings(f func(kueue.ClusterQueueReference) timebased.Settings) Option {
	return WithSources(fakeSettings(f))
}

type fakeSettings func(kueue.ClusterQueueReference) timebased.Settings

func (f fakeSettings) QueueSettingsOf(feat policy.Feature, cq kueue.ClusterQueueReference) any {
	if s := f(cq); feat == timebased.Feature && s.MinAdmitDuration > 0 {
		return timebased.Settings{MinAdmitDuration: s.MinAdmitDuration}
	}
	return nil
}

func (f fakeSettings) StrictFIFO(cq kueue.ClusterQueueReference) bool { return f(cq).StrictFIFO }
