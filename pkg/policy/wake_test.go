package policy

import (
	"encoding/json"
	"fmt"
	"math/rand"
	"slices"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/google/go-cmp/cmp/cmpopts"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	kueue "sigs.k8s.io/kueue/apis/kueue/v1beta2"

	"github.com/kueue-timeshare/kueue-timeshare/apis/annotations"
)

// wakeCase is one random running workload, the settings its features read, and an instant.
type wakeCase struct {
	c   Candidate
	s   WakeSettings
	now time.Time
}

// decisions are every feature's decision about the case's candidate at t, in a fixed order: the
// oracle the wake-up times are checked against.
func (wc *wakeCase) decisions(t time.Time) []bool {
	c := &wc.c
	var out []bool
	if wc.s.on(FeatureTimeBased) {
		out = append(out, pastMinAdmitDuration(c, wc.s.Queue, t))
	}
	if wc.s.on(FeatureMinRuntime) {
		for _, d := range wc.s.MinRuntimes {
			out = append(out, Protected(c, Protection{MinRuntime: d}, t))
		}
	}
	if wc.s.on(FeatureToleration) && toleration.Of(c) != nil {
		out = append(out, Tolerated(c, toleration.Of(c).MinimumPreemptablePriority-1, t))
	}
	if wc.s.on(FeatureExpectedRuntime) {
		n, _ := Nominate(c, t)
		out = append(out, n)
	}
	return out
}

// breakpoints are every instant the case's inputs name, and sums of them with its durations,
// each with its neighbours: the decisions are constant between breakpoints, so checking at
// these checks every instant.
func (wc *wakeCase) breakpoints() []time.Time {
	c := &wc.c
	bases := []time.Time{c.QuotaReservedAt, c.AdmittedAt, c.RunningSince}
	durs := []time.Duration{0, wc.s.Queue.MinAdmitDuration}
	durs = append(durs, wc.s.MinRuntimes...)
	if toleration.Of(c) != nil {
		durs = append(durs, toleration.Of(c).Duration)
	}
	if er := expectedRuntime.Of(c); er != nil {
		durs = append(durs, er.Expected)
		bases = append(bases, er.NotBefore)
	}
	var out []time.Time
	for _, b := range bases {
		if b.IsZero() {
			continue
		}
		for _, d := range durs {
			for _, eps := range []time.Duration{-time.Second, -WakePrecision, -1, 0, 1, WakePrecision, time.Second} {
				out = append(out, b.Add(d+eps))
			}
		}
	}
	return out
}

func nextWake(c *Candidate, s WakeSettings, now time.Time) time.Time {
	var w Wakes
	for _, ch := range Changes(c, s) {
		w.Add(ch, now, now)
	}
	if w.Next.At.IsZero() {
		return time.Time{}
	}
	return w.Next.Wake()
}

// randomWakeCase draws a workload with conditions at sub-second times, stored and read back as
// the API server does (condition timestamps have a one-second resolution), settings on the
// WakePrecision grid, and an instant on that grid.
func randomWakeCase(r *rand.Rand) wakeCase {
	t0 := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	at := func() time.Time { return t0.Add(time.Duration(r.Int63n(int64(2 * time.Hour)))) }
	dur := func() time.Duration {
		if r.Intn(4) == 0 {
			return time.Duration(r.Intn(3)) * time.Minute
		}
		return time.Duration(r.Int63n(int64(90 * time.Minute))).Truncate(WakePrecision)
	}
	wl := &kueue.Workload{}
	cond := func(typ string, status metav1.ConditionStatus, t time.Time) {
		wl.Status.Conditions = append(wl.Status.Conditions, metav1.Condition{Type: typ, Status: status, LastTransitionTime: metav1.NewTime(t)})
	}
	reserved := at()
	if r.Intn(8) != 0 {
		cond(kueue.WorkloadQuotaReserved, metav1.ConditionTrue, reserved)
	}
	admitted := reserved.Add(time.Duration(r.Int63n(int64(10 * time.Second))))
	switch r.Intn(8) {
	case 0:
	case 1:
		cond(kueue.WorkloadAdmitted, metav1.ConditionFalse, admitted)
	default:
		cond(kueue.WorkloadAdmitted, metav1.ConditionTrue, admitted)
	}
	switch r.Intn(3) {
	case 0:
		cond(kueue.WorkloadPodsReady, metav1.ConditionTrue, admitted.Add(time.Duration(r.Int63n(int64(time.Minute)))-10*time.Second))
	case 1:
		cond(kueue.WorkloadPodsReady, metav1.ConditionFalse, admitted)
	}
	if r.Intn(6) == 0 {
		cond(kueue.WorkloadEvicted, metav1.ConditionTrue, admitted)
	}
	raw, err := json.Marshal(wl)
	if err != nil {
		panic(err)
	}
	stored := &kueue.Workload{}
	if err := json.Unmarshal(raw, stored); err != nil {
		panic(err)
	}
	clock := RuntimeClockAdmitted
	if r.Intn(2) == 0 {
		clock = RuntimeClockPodsReady
	}
	wc := wakeCase{c: CandidateOf(stored, clock)}
	if r.Intn(3) != 0 {
		t := annotations.Toleration{MinimumPreemptablePriority: int64(r.Intn(100))}
		if r.Intn(5) == 0 {
			t.Forever = true
		} else {
			t.Duration = dur()
		}
		toleration.Set(&wc.c, &Toleration{Toleration: t})
	}
	if r.Intn(3) != 0 {
		er := &annotations.ExpectedRuntimeSettings{Expected: dur()}
		if r.Intn(2) == 0 {
			er.NotBefore = at().Truncate(time.Second)
		}
		if r.Intn(8) == 0 {
			er.Skip = annotations.SkipInvalidDuration
		}
		expectedRuntime.Set(&wc.c, er)
	}
	if r.Intn(4) != 0 {
		wc.s.Queue.MinAdmitDuration = dur()
	}
	for range r.Intn(4) {
		if d := dur(); d > 0 {
			wc.s.MinRuntimes = append(wc.s.MinRuntimes, d)
		}
	}
	off := map[Feature]bool{}
	for _, f := range testUnits().Features() {
		off[f] = r.Intn(4) == 0
	}
	wc.s.Enabled = func(f Feature) bool { return !off[f] }
	wc.s.Units = testUnits()
	wc.now = t0.Add(time.Duration(r.Int63n(int64(4 * time.Hour)))).Truncate(WakePrecision)
	return wc
}

// TestNextWakeIsFirstChange: for random workloads, settings and instants, the next wake-up time
// is exactly the first instant after now, to WakePrecision, at which some feature's decision
// differs from one step before it; with no wake-up time, no decision ever changes.
func TestNextWakeIsFirstChange(t *testing.T) {
	for _, seed := range []int64{1, 2, 3, 4, 5} {
		r := rand.New(rand.NewSource(seed))
		for i := range 4000 {
			wc := randomWakeCase(r)
			name := fmt.Sprintf("seed %d case %d", seed, i)
			next := nextWake(&wc.c, wc.s, wc.now)
			at := func(t time.Time) []bool { return wc.decisions(t) }
			before := at(wc.now)
			// No decision changes in (now, next - WakePrecision]: checked at every breakpoint.
			for _, b := range wc.breakpoints() {
				if !b.After(wc.now) || (!next.IsZero() && b.After(next.Add(-WakePrecision))) {
					continue
				}
				if diff := cmp.Diff(before, at(b)); diff != "" {
					t.Fatalf("%s: a decision changed at %s, before the next wake-up %s (now %s, %+v, %+v):\n%s", name, b, next, wc.now, wc.c, wc.s, diff)
				}
			}
			if next.IsZero() {
				if diff := cmp.Diff(before, at(wc.now.Add(1000*time.Hour))); diff != "" {
					t.Fatalf("%s: no wake-up, but a decision changed (now %s, %+v, %+v):\n%s", name, wc.now, wc.c, wc.s, diff)
				}
				continue
			}
			if !next.After(wc.now) {
				t.Fatalf("%s: next wake-up %s is not after now %s", name, next, wc.now)
			}
			if cmp.Equal(at(next.Add(-WakePrecision)), at(next)) {
				t.Fatalf("%s: no decision changes at the wake-up %s (now %s, %+v, %+v)", name, next, wc.now, wc.c, wc.s)
			}
		}
	}
}

// TestChangesEdges pins each feature's interval edge.
func TestChangesEdges(t *testing.T) {
	t0 := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	running := Candidate{QuotaReservedAt: t0, Admitted: true, AdmittedAt: t0.Add(time.Second)}
	cases := map[string]struct {
		c    Candidate
		s    WakeSettings
		want []Change
	}{
		"minAdmitDuration counts once strictly passed": {
			c: running, s: WakeSettings{Queue: QueueSettings{MinAdmitDuration: time.Minute}},
			want: []Change{{At: t0.Add(time.Minute), After: true}},
		},
		"a min-runtime ends at its last instant, counted from admission": {
			c: running, s: WakeSettings{MinRuntimes: []time.Duration{time.Minute, time.Hour}},
			want: []Change{{At: t0.Add(time.Second + time.Minute)}, {At: t0.Add(time.Second + time.Hour)}},
		},
		"an evicted workload has no protection to end": {
			c:    Candidate{QuotaReservedAt: t0, Admitted: true, AdmittedAt: t0, Evicted: true},
			s:    WakeSettings{MinRuntimes: []time.Duration{time.Minute}, Queue: QueueSettings{MinAdmitDuration: time.Minute}},
			want: []Change{{At: t0.Add(time.Minute), After: true}},
		},
		"not started by the runtime clock: no min-runtime end known": {
			c: Candidate{QuotaReservedAt: t0, Admitted: true, AdmittedAt: t0, NotStarted: true},
			s: WakeSettings{MinRuntimes: []time.Duration{time.Minute}},
		},
		"toleration ends after its duration from admission": {
			c:    *withFacts(Candidate{Admitted: true, AdmittedAt: t0}, &Toleration{Toleration: annotations.Toleration{Duration: time.Minute}}),
			want: []Change{{At: t0.Add(time.Minute)}},
		},
		"a toleration for ever never ends": {
			c: *withFacts(Candidate{Admitted: true, AdmittedAt: t0}, &Toleration{Toleration: annotations.Toleration{Forever: true}}),
		},
		"toleration off": {
			c: *withFacts(Candidate{Admitted: true, AdmittedAt: t0}, &Toleration{Toleration: annotations.Toleration{Duration: time.Minute}}),
			s: WakeSettings{Enabled: func(f Feature) bool { return f != FeatureToleration }},
		},
		"min-runtime off": {
			c: running, s: WakeSettings{MinRuntimes: []time.Duration{time.Minute}, Enabled: func(f Feature) bool { return f != FeatureMinRuntime }},
		},
		"time-based preemption off": {
			c: running, s: WakeSettings{Queue: QueueSettings{MinAdmitDuration: time.Minute}, Enabled: func(f Feature) bool { return f != FeatureTimeBased }},
		},
		"expected-runtime requeue off": {
			c: *withFacts(Candidate{Admitted: true, AdmittedAt: t0}, &annotations.ExpectedRuntimeSettings{Expected: time.Minute}),
			s: WakeSettings{Enabled: func(f Feature) bool { return f != FeatureExpectedRuntime }},
		},
		"expected runtime reached": {
			c:    *withFacts(Candidate{Admitted: true, AdmittedAt: t0}, &annotations.ExpectedRuntimeSettings{Expected: time.Minute}),
			want: []Change{{At: t0.Add(time.Minute)}},
		},
		"expected runtime reached during a cooldown: nominated when it ends": {
			c:    *withFacts(Candidate{Admitted: true, AdmittedAt: t0}, &annotations.ExpectedRuntimeSettings{Expected: time.Minute, NotBefore: t0.Add(time.Hour)}),
			want: []Change{{At: t0.Add(time.Hour)}},
		},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			tc.s.Units = testUnits()
			got := Changes(&tc.c, tc.s)
			slices.SortFunc(got, func(a, b Change) int { return a.At.Compare(b.At) })
			if diff := cmp.Diff(tc.want, got, cmp.Comparer(time.Time.Equal), cmpopts.EquateEmpty()); diff != "" {
				t.Errorf("Changes (-want +got):\n%s", diff)
			}
		})
	}
}

func TestWakesAdd(t *testing.T) {
	t0 := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	since, now := t0, t0.Add(time.Second)
	cases := map[string]struct {
		changes []Change
		want    Wakes
	}{
		"none":                   {},
		"at since: swept before": {changes: []Change{{At: since}}},
		"at now: due":            {changes: []Change{{At: now}}, want: Wakes{Due: true}},
		"a window ending now: not yet passed": {
			changes: []Change{{At: now, After: true}}, want: Wakes{Next: Change{At: now, After: true}},
		},
		"a window that ended at since: due": {changes: []Change{{At: since, After: true}}, want: Wakes{Due: true}},
		"after now: the earliest to wake": {
			changes: []Change{{At: now.Add(2 * time.Second)}, {At: now, After: true}, {At: now.Add(time.Nanosecond)}},
			want:    Wakes{Next: Change{At: now.Add(time.Nanosecond)}},
		},
		"due and next": {
			changes: []Change{{At: since.Add(1)}, {At: now.Add(time.Minute)}},
			want:    Wakes{Due: true, Next: Change{At: now.Add(time.Minute)}},
		},
		"long past: neither": {changes: []Change{{At: since.Add(-time.Hour)}}},
		"two waking at once: the earlier end is noted": {
			changes: []Change{{At: now.Add(WakePrecision)}, {At: now, After: true}},
			want:    Wakes{Next: Change{At: now, After: true}},
		},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			var got Wakes
			for _, ch := range tc.changes {
				got.Add(ch, since, now)
			}
			if diff := cmp.Diff(tc.want, got); diff != "" {
				t.Errorf("Wakes (-want +got):\n%s", diff)
			}
		})
	}
}
