package preemption

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/go-logr/logr"
	"github.com/google/go-cmp/cmp"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	clocktesting "k8s.io/utils/clock/testing"
	ctrllog "sigs.k8s.io/controller-runtime/pkg/log"

	configapi "sigs.k8s.io/kueue/apis/config/v1beta2"
	kueue "sigs.k8s.io/kueue/apis/kueue/v1beta2"
	"sigs.k8s.io/kueue/pkg/resources"
	preemptexpectations "sigs.k8s.io/kueue/pkg/scheduler/preemption/expectations"
	utiltestingapi "sigs.k8s.io/kueue/pkg/util/testing/v1beta2"
	"sigs.k8s.io/kueue/pkg/workload"

	"github.com/kueue-timeshare/kueue-timeshare/pkg/plugins/timebased"
	"github.com/kueue-timeshare/kueue-timeshare/test/util/snapgen"
)

// Who holds the turn in the 3-CPU ClusterQueue of timeSharingScenario (running workloads reserved
// 30, 90 and 150 minutes ago, window 1h: the first is protected for another 30 minutes), when a
// same-priority workload created before the pending one waits too.
func TestTurnGoesToWhoCanUseIt(t *testing.T) {
	waiting := func(cpus string) *kueue.Workload {
		return utiltestingapi.MakeWorkload("older", "ns").UID("uid-older").Priority(10).
			Request(corev1.ResourceCPU, cpus).Creation(snapgen.Epoch.Add(30 * time.Minute)).Obj()
	}
	// What ExplainWait says of a workload that keeps its place while windows run.
	protected := "same-priority workloads are protected by minAdmitDuration 1h0m0s; the first becomes preemptible after 2026-03-01T13:30:00Z"
	passedOver := "passed over for time-sharing turns: it does not fit in ClusterQueue cq even if every workload it may preempt were preempted; the turn goes to the next workload in line and comes back to it once it can fit"
	type outcome struct {
		// Targets of the pending 1-CPU workload, and what ExplainWait says of the older one.
		Targets      []string
		OlderExplain string
	}
	cases := map[string]struct {
		older  *kueue.Workload
		strict bool
		want   outcome
	}{
		"older can use the turn now: it keeps it": {
			older: waiting("1"),
			want:  outcome{OlderExplain: protected},
		},
		"older needs the protected workload too: it keeps its place": {
			older: waiting("3"),
			want:  outcome{OlderExplain: protected},
		},
		"older can never fit: the turn passes over it": {
			older: waiting("4"),
			want:  outcome{Targets: []string{"ran-2h30m0s"}, OlderExplain: passedOver},
		},
		"StrictFIFO: older blocks the line as upstream's head does": {
			older: waiting("4"), strict: true,
			want: outcome{OlderExplain: protected},
		},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			ctx := ctrllog.IntoContext(context.Background(), logr.Discard())
			sc := timeSharingScenario("1")
			snap := snapshotOf(t, ctx, sc)
			opts := timeSharingOptions(time.Hour, []*kueue.Workload{tc.older})
			opts[0] = queueSettings(func(kueue.ClusterQueueReference) timebased.Settings {
				return timebased.Settings{MinAdmitDuration: time.Hour, StrictFIFO: tc.strict}
			})
			p := New(nil, workload.Ordering{PodsReadyRequeuingTimestamp: configapi.EvictionTimestamp}, nil, nil, false,
				clocktesting.NewFakeClock(sc.Now), nil, preemptexpectations.New(), nil, opts...)
			info := sc.PendingInfo()
			var got outcome
			for _, tg := range p.GetTargets(ctx, *info, cpuPreemptAssignment(info), snap) {
				got.Targets = append(got.Targets, tg.WorkloadInfo.Obj.Name)
			}
			older := workload.NewInfo(tc.older)
			older.ClusterQueue = "cq"
			got.OlderExplain = p.ExplainWait(ctx, older, snap)
			if diff := cmp.Diff(tc.want, got); diff != "" {
				t.Errorf("(-want +got):\n%s", diff)
			}
		})
	}
}

// A rotated-out queue head steps aside only for a workload that can take its turn now; under
// StrictFIFO for the one whose turn it is, whatever it can do.
func TestSubstituteHeadOnlyForWhoCanGoNow(t *testing.T) {
	head := utiltestingapi.MakeWorkload("head", "ns").UID("uid-head").Priority(10).
		Request(corev1.ResourceCPU, "1").Creation(snapgen.Epoch).Obj()
	head.Status.Conditions = []metav1.Condition{{Type: kueue.WorkloadPreempted, Status: metav1.ConditionTrue,
		Reason: timebased.Reason, LastTransitionTime: metav1.NewTime(snapgen.Epoch.Add(3 * time.Hour))}}
	waiting := func(cpus string) *kueue.Workload {
		return utiltestingapi.MakeWorkload("older", "ns").UID("uid-older").Priority(10).
			Request(corev1.ResourceCPU, cpus).Creation(snapgen.Epoch.Add(30 * time.Minute)).Obj()
	}
	cases := map[string]struct {
		older  *kueue.Workload
		strict bool
		want   string
	}{
		"it can preempt now":                    {older: waiting("1"), want: "older"},
		"it waits for a protection to end":      {older: waiting("3")},
		"it can never fit":                      {older: waiting("4")},
		"StrictFIFO: it waits for a protection": {older: waiting("3"), strict: true, want: "older"},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			ctx := ctrllog.IntoContext(context.Background(), logr.Discard())
			sc := timeSharingScenario("1")
			snap := snapshotOf(t, ctx, sc)
			opts := timeSharingOptions(time.Hour, []*kueue.Workload{tc.older})
			opts[0] = queueSettings(func(kueue.ClusterQueueReference) timebased.Settings {
				return timebased.Settings{MinAdmitDuration: time.Hour, StrictFIFO: tc.strict}
			})
			p := New(nil, workload.Ordering{PodsReadyRequeuingTimestamp: configapi.EvictionTimestamp}, nil, nil, false,
				clocktesting.NewFakeClock(sc.Now), nil, preemptexpectations.New(), nil, opts...)
			info := workload.NewInfo(head)
			info.ClusterQueue = "cq"
			got := ""
			if sub := p.SubstituteHead(ctx, info, snap); sub != nil {
				got = sub.Obj.Name
			}
			if got != tc.want {
				t.Errorf("SubstituteHead = %q, want %q", got, tc.want)
			}
		})
	}
}

// A workload found unable to use a turn stays passed over across cycles only while its
// ClusterQueue is unchanged: once the workload that kept it out is gone, the same preemptor (and
// its memory of earlier answers) gives it its place in line back, and a later workload waits for
// it again.
func TestPassedOverUntilTheQueueChanges(t *testing.T) {
	ctx := ctrllog.IntoContext(context.Background(), logr.Discard())
	older := utiltestingapi.MakeWorkload("older", "ns").UID("uid-older").Priority(10).
		Request(corev1.ResourceCPU, "3").Creation(snapgen.Epoch.Add(30 * time.Minute)).Obj()

	// The workload that ran for 2h30m has priority 100: the older one, which needs all three CPUs,
	// can never have them.
	sc := timeSharingScenario("1", 10, 10, 100)
	p := New(nil, workload.Ordering{PodsReadyRequeuingTimestamp: configapi.EvictionTimestamp}, nil, nil, false,
		clocktesting.NewFakeClock(sc.Now), nil, preemptexpectations.New(), nil, timeSharingOptions(time.Hour, []*kueue.Workload{older})...)
	pending := sc.PendingInfo()
	var got []string
	// Two cycles with the high-priority workload, then two after it finished.
	for range 2 {
		got = append(got, p.ExplainWait(ctx, pending, snapshotOf(t, ctx, sc)))
	}
	sc.Admitted = sc.Admitted[:2]
	for range 2 {
		got = append(got, p.ExplainWait(ctx, pending, snapshotOf(t, ctx, sc)))
	}
	protected := "same-priority workloads are protected by minAdmitDuration 1h0m0s; the first becomes preemptible after 2026-03-01T13:30:00Z"
	want := []string{protected, protected, waitingForTurn, waitingForTurn}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("what the pending workload is told, per cycle (-want +got):\n%s", diff)
	}
}

// The turn line of a ClusterQueue with more than largeQueue pending is read again at most every
// largeQueueAge; a smaller one's at every cycle.
func TestLargeTurnLinesAreReadLessOften(t *testing.T) {
	ctx := ctrllog.IntoContext(context.Background(), logr.Discard())
	pendingAt := func(name string, created time.Time) *kueue.Workload {
		return utiltestingapi.MakeWorkload(name, "ns").UID(types.UID(name)).Priority(10).
			Request(corev1.ResourceCPU, "1").Creation(created).Obj()
	}
	cases := map[string]struct {
		pending int
		// want is, per cycle (before the earlier workload joins, just after it joined, then after
		// each step), whose turn comes first.
		steps []time.Duration
		want  []string
	}{
		"small queue: seen at the next cycle": {pending: 10, steps: []time.Duration{largeQueueAge}, want: []string{"w-0", "earlier", "earlier"}},
		"large queue: seen a second later":    {pending: largeQueue + 1, steps: []time.Duration{largeQueueAge}, want: []string{"w-0", "w-0", "earlier"}},
		"three times as large: seen three seconds later": {pending: 3*largeQueue + 1, steps: []time.Duration{2 * largeQueueAge, largeQueueAge},
			want: []string{"w-0", "w-0", "w-0", "earlier"}},
		"a flood: seen at most ten seconds later": {pending: 30 * largeQueue, steps: []time.Duration{maxLargeQueueAge - time.Millisecond, time.Millisecond},
			want: []string{"w-0", "w-0", "w-0", "earlier"}},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			sc := timeSharingScenario("1")
			var pending []*kueue.Workload
			for i := range tc.pending {
				pending = append(pending, pendingAt(fmt.Sprintf("w-%d", i), snapgen.Epoch.Add(time.Duration(i+1)*time.Second)))
			}
			clk := clocktesting.NewFakeClock(sc.Now)
			opts := timeSharingOptions(time.Hour, nil)
			opts[0] = queueSettings(func(kueue.ClusterQueueReference) timebased.Settings {
				return timebased.Settings{MinAdmitDuration: time.Hour, StrictFIFO: true}
			})
			opts[1] = WithPendingWorkloads(func(kueue.ClusterQueueReference) []*workload.Info {
				var out []*workload.Info
				for _, wl := range pending {
					out = append(out, workload.NewInfo(wl))
				}
				return out
			})
			p := New(nil, workload.Ordering{PodsReadyRequeuingTimestamp: configapi.EvictionTimestamp}, nil, nil, false,
				clk, nil, preemptexpectations.New(), nil, opts...)
			asker := workload.NewInfo(pendingAt("asker", snapgen.Epoch.Add(time.Hour)))
			asker.ClusterQueue = "cq"
			first := func() string {
				got := p.firstTurn(logr.Discard(), snapshotOf(t, ctx, sc), asker, 10, nil)
				if got == nil {
					return ""
				}
				return got.Obj.Name
			}
			got := []string{first()}
			pending = append(pending, pendingAt("earlier", snapgen.Epoch))
			got = append(got, first())
			for _, step := range tc.steps {
				clk.Step(step)
				got = append(got, first())
			}
			if diff := cmp.Diff(tc.want, got); diff != "" {
				t.Errorf("whose turn comes first, per cycle (-want +got):\n%s", diff)
			}
		})
	}
}

// The holders of a large turn line are looked for once per reading of the line while the queue is
// unchanged, not at every cycle: a flood of workloads that cannot hold the turn costs one walk per
// reading (largeListAge), however many cycles ask.
func TestLargeTurnLineHoldersAreKeptWithTheLine(t *testing.T) {
	ctx := ctrllog.IntoContext(context.Background(), logr.Discard())
	cases := map[string]struct {
		pending int
		// steps are the clock's steps between cycles; want is how many workloads canHold was
		// asked about in each cycle (the first, then one after each step).
		steps []time.Duration
		want  []int
	}{
		// 3,001 pending: kept 3 s; none can hold, so each walk asks about all of them.
		"kept for the line's age": {pending: 3*largeQueue + 1, steps: []time.Duration{time.Second, time.Second, time.Second},
			want: []int{3*largeQueue + 1, 0, 0, 3*largeQueue + 1}},
		// A small queue's line is read, and walked, at every cycle.
		"small queue: every cycle": {pending: 10, steps: []time.Duration{time.Second}, want: []int{10, 10}},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			sc := timeSharingScenario("1")
			var pending []*workload.Info
			for i := range tc.pending {
				pending = append(pending, workload.NewInfo(utiltestingapi.MakeWorkload(fmt.Sprintf("w-%d", i), "ns").UID(types.UID(fmt.Sprintf("w-%d", i))).
					Priority(10).Request(corev1.ResourceCPU, "1").Creation(snapgen.Epoch.Add(time.Duration(i+1)*time.Second)).Obj()))
			}
			clk := clocktesting.NewFakeClock(sc.Now)
			opts := timeSharingOptions(time.Hour, nil)
			opts[1] = WithPendingWorkloads(func(kueue.ClusterQueueReference) []*workload.Info { return pending })
			p := New(nil, workload.Ordering{PodsReadyRequeuingTimestamp: configapi.EvictionTimestamp}, nil, nil, false,
				clk, nil, preemptexpectations.New(), nil, opts...)
			asker := workload.NewInfo(utiltestingapi.MakeWorkload("asker", "ns").UID("asker").Priority(10).
				Request(corev1.ResourceCPU, "1").Creation(snapgen.Epoch.Add(-time.Hour)).Obj())
			asker.ClusterQueue = "cq"
			asked := 0
			nobody := func(*workload.Info) bool { asked++; return false }
			cycle := func() int {
				asked = 0
				if got := p.firstTurn(logr.Discard(), snapshotOf(t, ctx, sc), asker, 10, nobody); got != nil {
					t.Errorf("%s holds the turn, but canHold accepts nobody", got.Obj.Name)
				}
				return asked
			}
			got := []int{cycle()}
			for _, step := range tc.steps {
				clk.Step(step)
				got = append(got, cycle())
			}
			if diff := cmp.Diff(tc.want, got); diff != "" {
				t.Errorf("workloads asked about, per cycle (-want +got):\n%s", diff)
			}
		})
	}
}

// Kueue parks the workloads of a refused one's shape with it (SchedulingEquivalenceHashing). Where
// turns are taken a refusal may depend on whose turn it is, so the queue must not, except for a
// workload found unable to use a turn at all: that answer is the same for its whole shape, and a
// flood of such workloads is then parked at once instead of one per cycle.
func TestRefusalsDependOnWorkload(t *testing.T) {
	ctx := ctrllog.IntoContext(context.Background(), logr.Discard())
	cases := map[string]struct {
		cpus   string
		window time.Duration
		// asked: the cycle asked about the workload's turn before it was refused.
		asked bool
		want  bool
	}{
		"it can use a turn: its shape may get another answer":    {cpus: "1", window: time.Hour, asked: true, want: true},
		"it can never use a turn: its whole shape is refused":    {cpus: "4", window: time.Hour, asked: true, want: false},
		"not asked in this cycle: its shape may get another one": {cpus: "4", window: time.Hour, want: true},
		"no turns taken: upstream's parking":                     {cpus: "1", want: false},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			sc := timeSharingScenario("1")
			waiting := utiltestingapi.MakeWorkload("waiting", "ns").UID("uid-waiting").Priority(10).
				Request(corev1.ResourceCPU, tc.cpus).Creation(snapgen.Epoch.Add(30 * time.Minute)).Obj()
			opts := timeSharingOptions(tc.window, []*kueue.Workload{waiting})
			if tc.window == 0 {
				opts[0] = queueSettings(func(kueue.ClusterQueueReference) timebased.Settings { return timebased.Settings{} })
			}
			p := New(nil, workload.Ordering{PodsReadyRequeuingTimestamp: configapi.EvictionTimestamp}, nil, nil, false,
				clocktesting.NewFakeClock(sc.Now), nil, preemptexpectations.New(), nil, opts...)
			info := workload.NewInfo(waiting)
			info.ClusterQueue = "cq"
			snap := snapshotOf(t, ctx, sc)
			if tc.asked {
				p.ExplainWait(ctx, info, snap)
			}
			if got := p.RefusalsDependOnWorkload(info); got != tc.want {
				t.Errorf("RefusalsDependOnWorkload = %t, want %t", got, tc.want)
			}
		})
	}
}

// Whether a pending workload can use a turn is remembered beyond the cycle; the rest of the
// cohort counts through the room it leaves the workload's ClusterQueue. "Cannot" is kept while the
// cohort leaves no more room (more room may let it borrow); "can" while it leaves no less.
func TestUselessMemoKeepsWithTheCohortsRoom(t *testing.T) {
	fr := resources.FlavorResource{Flavor: "f0", Resource: corev1.ResourceCPU}
	room := func(v int64) *cohortRoom { return &cohortRoom{available: map[resources.FlavorResource]int64{fr: v}} }
	wl := utiltestingapi.MakeWorkload("w", "ns").UID("uid-w").ResourceVersion("1").Obj()
	cases := map[string]struct {
		useless bool
		now     int64
		want    bool
	}{
		"cannot, the cohort leaves less room: kept":        {useless: true, now: 1, want: true},
		"cannot, the same room: kept":                      {useless: true, now: 2, want: true},
		"cannot, the cohort leaves more room: asked again": {useless: true, now: 3, want: false},
		"can, the cohort leaves more room: kept":           {useless: false, now: 3, want: true},
		"can, the cohort leaves less room: asked again":    {useless: false, now: 1, want: false},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			var m uselessMemo
			m.put(wl, 7, room(2), tc.useless, snapgen.Epoch)
			_, kept := m.get(wl, 7, room(tc.now), snapgen.Epoch)
			if kept != tc.want {
				t.Errorf("kept = %t, want %t", kept, tc.want)
			}
		})
	}
}
