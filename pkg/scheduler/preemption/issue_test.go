package preemption

import (
	"context"
	"errors"
	"maps"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/google/go-cmp/cmp/cmpopts"
	"github.com/prometheus/client_golang/prometheus/testutil"
	corev1 "k8s.io/api/core/v1"
	apimeta "k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	clocktesting "k8s.io/utils/clock/testing"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/interceptor"
	ctrllog "sigs.k8s.io/controller-runtime/pkg/log"

	configapi "sigs.k8s.io/kueue/apis/config/v1beta2"
	kueue "sigs.k8s.io/kueue/apis/kueue/v1beta2"
	schdcache "sigs.k8s.io/kueue/pkg/cache/scheduler"
	kueuemetrics "sigs.k8s.io/kueue/pkg/metrics"
	upstream "sigs.k8s.io/kueue/pkg/scheduler/preemption"
	preemptexpectations "sigs.k8s.io/kueue/pkg/scheduler/preemption/expectations"
	utilexpectations "sigs.k8s.io/kueue/pkg/util/expectations"
	"sigs.k8s.io/kueue/pkg/util/roletracker"
	utiltesting "sigs.k8s.io/kueue/pkg/util/testing"
	"sigs.k8s.io/kueue/pkg/workload"

	"github.com/kueue-timeshare/kueue-timeshare/apis/annotations"
	tsapi "github.com/kueue-timeshare/kueue-timeshare/apis/kueue/v1beta2"
	"github.com/kueue-timeshare/kueue-timeshare/pkg/plugins/expectedruntime"
	"github.com/kueue-timeshare/kueue-timeshare/pkg/plugins/timebased"
	"github.com/kueue-timeshare/kueue-timeshare/pkg/policy"
	"github.com/kueue-timeshare/kueue-timeshare/test/util/snapgen"
)

// issueWorld is a fake API server holding timeSharingScenario's workloads (three one-CPU
// same-priority workloads, "ran-30m0s", "ran-1h30m0s" and "ran-2h30m0s", and "pending"), with the
// scheduler's view of them.
type issueWorld struct {
	sc       *snapgen.Scenario
	client   client.Client
	cache    *schdcache.Cache
	recorder *utiltesting.EventRecorder
	store    *utilexpectations.Store
	cq       *schdcache.ClusterQueueSnapshot
}

func newIssueWorld(t *testing.T, ctx context.Context, prepare func(*snapgen.Scenario), failPatchOf string) *issueWorld {
	t.Helper()
	sc := timeSharingScenario("1")
	if prepare != nil {
		prepare(sc)
	}
	objs := []client.Object{sc.Pending.DeepCopy()}
	for _, wl := range sc.Admitted {
		objs = append(objs, wl.DeepCopy())
	}
	funcs := interceptor.Funcs{SubResourcePatch: func(ctx context.Context, c client.Client, sub string, obj client.Object, patch client.Patch, opts ...client.SubResourcePatchOption) error {
		if obj.GetName() == failPatchOf {
			return errors.New("the API server is down")
		}
		return utiltesting.TreatSSAAsStrategicMerge(ctx, c, sub, obj, patch, opts...)
	}}
	cl := utiltesting.NewClientBuilder().WithObjects(objs...).WithStatusSubresource(&kueue.Workload{}).WithInterceptorFuncs(funcs).Build()
	cache, err := sc.NewCache(ctx, ctrllog.FromContext(ctx))
	if err != nil {
		t.Fatal(err)
	}
	snap, err := cache.Snapshot(ctx)
	if err != nil {
		t.Fatal(err)
	}
	return &issueWorld{sc: sc, client: cl, cache: cache, recorder: &utiltesting.EventRecorder{}, store: preemptexpectations.New(), cq: snap.ClusterQueue("cq")}
}

func (w *issueWorld) preemptor() *Preemptor {
	return New(w.client, workload.Ordering{PodsReadyRequeuingTimestamp: configapi.EvictionTimestamp}, w.recorder, nil, false,
		clocktesting.NewFakeClock(w.sc.Now), nil, w.store, nil, WithSources(expectedruntime.DefaultCooldown(10*time.Minute)))
}

// targets are the named admitted workloads of the snapshot, with their preemption reasons.
func (w *issueWorld) targets(t *testing.T, reasons map[string]string) []*Target {
	t.Helper()
	var out []*Target
	for _, name := range slices.Sorted(maps.Keys(reasons)) {
		info := w.cq.Workloads[workload.Key(&kueue.Workload{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: name}})]
		if info == nil {
			t.Fatalf("no admitted workload %s", name)
		}
		out = append(out, &Target{WorkloadInfo: info, Reason: reasons[name], WorkloadCq: w.cq})
	}
	return out
}

func (w *issueWorld) get(t *testing.T, ctx context.Context, name string) *kueue.Workload {
	t.Helper()
	var wl kueue.Workload
	if err := w.client.Get(ctx, types.NamespacedName{Namespace: "ns", Name: name}, &wl); err != nil {
		t.Fatal(err)
	}
	return &wl
}

// counts reads the preemption and eviction counters of ClusterQueue "cq" for reason.
func counts(reason string) [2]float64 {
	role := roletracker.GetRole(nil)
	return [2]float64{
		testutil.ToFloat64(kueuemetrics.PreemptedWorkloadsTotal.WithLabelValues("cq", reason, role)),
		testutil.ToFloat64(kueuemetrics.EvictedWorkloadsTotal.WithLabelValues("cq", reason, "", "", role)),
	}
}

const (
	timeBasedMessage = "Preempted to accommodate a workload (UID: uid-pending, JobUID: UNKNOWN) due to time-sharing: the workload held " +
		"its quota longer than its ClusterQueue's minAdmitDuration; preemptor path: /cq; preemptee path: /cq"
	expectedRuntimeMessage = "Preempted to accommodate a workload (UID: uid-pending, JobUID: UNKNOWN) due to expected runtime: the workload ran " +
		"past its expected runtime and a workload of its ClusterQueue needed the quota; preemptor path: /cq; preemptee path: /cq"
	upstreamMessage = "Preempted to accommodate a workload (UID: uid-pending, JobUID: UNKNOWN) due to prioritization in the ClusterQueue; " +
		"preemptor path: /cq; preemptee path: /cq"
	priorities10 = "; preemptor effective priority: 10 (base: 10, boost: 0); preemptee effective priority: 10 (base: 10, boost: 0)"
)

func event(name, reason, message string) utiltesting.EventRecord {
	return utiltesting.EventRecord{Key: types.NamespacedName{Namespace: "ns", Name: name}, EventType: corev1.EventTypeNormal, Reason: reason, Message: message}
}

// evictionEvents are the three events of one eviction of victim (UID uid) for reason.
func evictionEvents(victim, uid, reason, evictedReason, message string) []utiltesting.EventRecord {
	return []utiltesting.EventRecord{
		event(victim, "EvictedDueTo"+evictedReason, message),
		event(victim, "Preempted", message+priorities10),
		event("pending", "PreemptedWorkload", "Preempted workload ns/"+victim+" (UID: "+uid+") in ClusterQueue cq"+priorities10),
	}
}

// TestIssueSplit: targets preempted for our reasons are evicted by us with the reason on the
// Evicted condition; the others go to upstream's issuer and keep "Preempted".
func TestIssueSplit(t *testing.T) {
	const (
		young, middle, old = "ran-30m0s", "ran-1h30m0s", "ran-2h30m0s"
	)
	type victim struct {
		// evicted and preempted are the reasons of the Evicted and Preempted conditions; "" for none.
		evicted, preempted string
		message            string
		cooldown           bool
	}
	cases := map[string]struct {
		prepare     func(*snapgen.Scenario)
		expect      []string
		failPatchOf string
		targets     map[string]string
		wantCounts  [2]int
		wantErr     bool
		want        map[string]victim
		wantEvents  []utiltesting.EventRecord
		// wantMetrics is the increase of the preempted and evicted counters, by reason.
		wantMetrics map[string][2]float64
		// wantExpecting are the targets whose eviction the store still expects to observe.
		wantExpecting []string
	}{
		"time-sharing: evicted by us with our reason": {
			targets:    map[string]string{old: timebased.Reason},
			wantCounts: [2]int{1, 0},
			want:       map[string]victim{old: {evicted: timebased.Reason, preempted: timebased.Reason, message: timeBasedMessage}},
			wantEvents: evictionEvents(old, "uid-2", timebased.Reason, timebased.Reason, timeBasedMessage),
			wantMetrics: map[string][2]float64{
				timebased.Reason: {1, 1}, kueue.WorkloadEvictedByPreemption: {0, 0},
			},
			wantExpecting: []string{old},
		},
		"upstream's reason: upstream's issuer, Evicted reason Preempted": {
			targets:    map[string]string{young: kueue.InClusterQueueReason},
			wantCounts: [2]int{1, 0},
			want:       map[string]victim{young: {evicted: kueue.WorkloadEvictedByPreemption, preempted: kueue.InClusterQueueReason, message: upstreamMessage}},
			wantEvents: evictionEvents(young, "uid-0", kueue.InClusterQueueReason, kueue.WorkloadEvictedByPreemption, upstreamMessage),
			wantMetrics: map[string][2]float64{
				kueue.InClusterQueueReason: {1, 0}, kueue.WorkloadEvictedByPreemption: {0, 1}, timebased.Reason: {0, 0},
			},
			wantExpecting: []string{young},
		},
		"mixed: each target its own way; only the expected-runtime victim gets a cooldown": {
			targets:    map[string]string{old: timebased.Reason, middle: tsapi.ExpectedRuntimeReason, young: kueue.InClusterQueueReason},
			wantCounts: [2]int{3, 0},
			want: map[string]victim{
				old:    {evicted: timebased.Reason, preempted: timebased.Reason, message: timeBasedMessage},
				middle: {evicted: tsapi.ExpectedRuntimeReason, preempted: tsapi.ExpectedRuntimeReason, message: expectedRuntimeMessage, cooldown: true},
				young:  {evicted: kueue.WorkloadEvictedByPreemption, preempted: kueue.InClusterQueueReason, message: upstreamMessage},
			},
			wantEvents: slices.Concat(
				evictionEvents(old, "uid-2", timebased.Reason, timebased.Reason, timeBasedMessage),
				evictionEvents(middle, "uid-1", tsapi.ExpectedRuntimeReason, tsapi.ExpectedRuntimeReason, expectedRuntimeMessage),
				evictionEvents(young, "uid-0", kueue.InClusterQueueReason, kueue.WorkloadEvictedByPreemption, upstreamMessage)),
			wantMetrics: map[string][2]float64{
				timebased.Reason: {1, 1}, tsapi.ExpectedRuntimeReason: {1, 1}, kueue.InClusterQueueReason: {1, 0}, kueue.WorkloadEvictedByPreemption: {0, 1},
			},
			wantExpecting: []string{old, middle, young},
		},
		"already evicted: counted, not written again": {
			prepare: func(sc *snapgen.Scenario) {
				apimeta.SetStatusCondition(&sc.Admitted[2].Status.Conditions, metav1.Condition{Type: kueue.WorkloadEvicted, Status: metav1.ConditionTrue,
					Reason: timebased.Reason, Message: "earlier", LastTransitionTime: metav1.NewTime(sc.Now.Add(-time.Second))})
			},
			targets:     map[string]string{old: timebased.Reason},
			wantCounts:  [2]int{1, 0},
			want:        map[string]victim{old: {evicted: timebased.Reason, message: "earlier"}},
			wantMetrics: map[string][2]float64{timebased.Reason: {0, 0}},
		},
		"eviction issued and not yet observed: counted, not written again": {
			expect:        []string{old},
			targets:       map[string]string{old: timebased.Reason},
			wantCounts:    [2]int{1, 0},
			want:          map[string]victim{old: {}},
			wantMetrics:   map[string][2]float64{timebased.Reason: {0, 0}},
			wantExpecting: []string{old},
		},
		"write fails: counted as failed, expectation cleared, no event, no cooldown": {
			failPatchOf: middle,
			targets:     map[string]string{middle: tsapi.ExpectedRuntimeReason},
			wantCounts:  [2]int{0, 1},
			wantErr:     true,
			want:        map[string]victim{middle: {}},
			wantMetrics: map[string][2]float64{tsapi.ExpectedRuntimeReason: {0, 0}},
		},
		"a failure of ours does not stop upstream's targets": {
			failPatchOf: old,
			targets:     map[string]string{old: timebased.Reason, young: kueue.InClusterQueueReason},
			wantCounts:  [2]int{1, 1},
			wantErr:     true,
			want: map[string]victim{
				old:   {},
				young: {evicted: kueue.WorkloadEvictedByPreemption, preempted: kueue.InClusterQueueReason, message: upstreamMessage},
			},
			wantEvents:    evictionEvents(young, "uid-0", kueue.InClusterQueueReason, kueue.WorkloadEvictedByPreemption, upstreamMessage),
			wantExpecting: []string{young},
		},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			ctx, log := utiltesting.ContextWithLog(t)
			w := newIssueWorld(t, ctx, tc.prepare, tc.failPatchOf)
			for _, name := range tc.expect {
				wl := w.get(t, ctx, name)
				w.store.ExpectUIDs(log, client.ObjectKeyFromObject(wl), []types.UID{wl.UID})
			}
			before := map[string][2]float64{}
			for reason := range tc.wantMetrics {
				before[reason] = counts(reason)
			}
			p := w.preemptor()
			preempted, failed, err := p.IssuePreemptions(ctx, w.cache, w.sc.PendingInfo(), w.targets(t, tc.targets), w.cq)
			if got := [2]int{preempted, failed}; got != tc.wantCounts {
				t.Errorf("preempted, failed = %v, want %v", got, tc.wantCounts)
			}
			if (err != nil) != tc.wantErr {
				t.Errorf("error = %v, want one: %v", err, tc.wantErr)
			}
			for name, want := range tc.want {
				wl := w.get(t, ctx, name)
				var got victim
				if c := apimeta.FindStatusCondition(wl.Status.Conditions, kueue.WorkloadEvicted); c != nil && c.Status == metav1.ConditionTrue {
					got.evicted, got.message = c.Reason, c.Message
				}
				if c := apimeta.FindStatusCondition(wl.Status.Conditions, kueue.WorkloadPreempted); c != nil && c.Status == metav1.ConditionTrue {
					got.preempted = c.Reason
					if c.Message != got.message {
						t.Errorf("%s: Preempted message %q differs from Evicted message %q", name, c.Message, got.message)
					}
				}
				_, got.cooldown = wl.Annotations[annotations.RequeueNotBefore]
				if diff := cmp.Diff(want, got, cmp.AllowUnexported(victim{})); diff != "" {
					t.Errorf("%s (-want +got):\n%s", name, diff)
				}
			}
			if diff := cmp.Diff(tc.wantEvents, w.recorder.RecordedEvents, cmpopts.EquateEmpty(), cmpopts.SortSlices(utiltesting.SortEvents)); diff != "" {
				t.Errorf("events (-want +got):\n%s", diff)
			}
			for reason, want := range tc.wantMetrics {
				now := counts(reason)
				if got := [2]float64{now[0] - before[reason][0], now[1] - before[reason][1]}; got != want {
					t.Errorf("preempted and evicted counters for reason %s rose by %v, want %v", reason, got, want)
				}
			}
			var expecting []string
			for name := range tc.targets {
				if !w.store.Satisfied(log, types.NamespacedName{Namespace: "ns", Name: name}) {
					expecting = append(expecting, name)
				}
			}
			if diff := cmp.Diff(tc.wantExpecting, expecting, cmpopts.EquateEmpty(), cmpopts.SortSlices(func(a, b string) bool { return a < b })); diff != "" {
				t.Errorf("expected evictions (-want +got):\n%s", diff)
			}
		})
	}
}

// TestOwnIssuingMatchesUpstream evicts the same target for the same reason with our issuing and
// with upstream's: conditions, events and counters are the same but for the Evicted reason.
func TestOwnIssuingMatchesUpstream(t *testing.T) {
	for _, reason := range policy.OwnReasons() {
		t.Run(reason, func(t *testing.T) {
			ctx, _ := utiltesting.ContextWithLog(t)
			// Upstream's issuer words only its own reasons: lend it ours for the comparison.
			words, _ := policy.OwnReasonWordsOf(reason)
			upstream.HumanReadablePreemptionReasons[reason] = words.Eviction
			t.Cleanup(func() { delete(upstream.HumanReadablePreemptionReasons, reason) })
			type result struct {
				conditions []metav1.Condition
				stats      *kueue.SchedulingStats
				events     []utiltesting.EventRecord
			}
			run := func(issue func(w *issueWorld) (int, int, error)) result {
				w := newIssueWorld(t, ctx, nil, "")
				if ok, bad, err := issue(w); ok != 1 || bad != 0 || err != nil {
					t.Fatalf("preempted, failed, err = %d, %d, %v", ok, bad, err)
				}
				wl := w.get(t, ctx, "ran-2h30m0s")
				slices.SortFunc(wl.Status.Conditions, func(a, b metav1.Condition) int { return strings.Compare(a.Type, b.Type) })
				return result{conditions: wl.Status.Conditions, stats: wl.Status.SchedulingStats, events: w.recorder.RecordedEvents}
			}
			ours := run(func(w *issueWorld) (int, int, error) {
				return w.preemptor().issueOwn(ctx, w.cache, w.sc.PendingInfo(), w.targets(t, map[string]string{"ran-2h30m0s": reason}), w.cq)
			})
			theirs := run(func(w *issueWorld) (int, int, error) {
				up := upstream.New(w.client, workload.Ordering{}, w.recorder, nil, false, clocktesting.NewFakeClock(w.sc.Now), nil, w.store, nil)
				return up.IssuePreemptions(ctx, w.cache, w.sc.PendingInfo(), w.targets(t, map[string]string{"ran-2h30m0s": reason}), w.cq)
			})
			// What upstream writes with "Preempted" we write with the preemption reason.
			for i := range theirs.conditions {
				if theirs.conditions[i].Type == kueue.WorkloadEvicted {
					theirs.conditions[i].Reason = reason
				}
			}
			for i := range theirs.stats.Evictions {
				theirs.stats.Evictions[i].Reason = reason
			}
			for i := range theirs.events {
				if theirs.events[i].Reason == "EvictedDueTo"+kueue.WorkloadEvictedByPreemption {
					theirs.events[i].Reason = "EvictedDueTo" + reason
				}
			}
			if diff := cmp.Diff(theirs, ours, cmp.AllowUnexported(result{}), cmpopts.SortSlices(utiltesting.SortEvents)); diff != "" {
				t.Errorf("upstream's eviction, reason replaced (-) vs ours (+):\n%s", diff)
			}
		})
	}
}
