package plugins

import (
	"encoding/json"
	"fmt"
	"math/rand"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	kueue "sigs.k8s.io/kueue/apis/kueue/v1beta2"

	"github.com/kueue-timeshare/kueue-timeshare/apis/annotations"
	"github.com/kueue-timeshare/kueue-timeshare/pkg/plugins/expectedruntime"
	"github.com/kueue-timeshare/kueue-timeshare/pkg/plugins/minruntime"
	"github.com/kueue-timeshare/kueue-timeshare/pkg/plugins/timebased"
	"github.com/kueue-timeshare/kueue-timeshare/pkg/plugins/toleration"
	"github.com/kueue-timeshare/kueue-timeshare/pkg/policy"
)

// wakeCase is one random running workload, the settings its features read, and an instant.
type wakeCase struct {
	c   policy.Candidate
	s   policy.WakeSettings
	now time.Time
}

func (wc *wakeCase) on(f policy.Feature) bool { return wc.s.Enabled == nil || wc.s.Enabled(f) }

// window is the case's ClusterQueue's time-sharing settings.
func (wc *wakeCase) window() timebased.Settings {
	s, _ := wc.s.Queue[timebased.Feature].(timebased.Settings)
	return s
}

// decisions are every feature's decision about the case's candidate at t, in a fixed order: the
// oracle the wake-up times are checked against.
func (wc *wakeCase) decisions(t time.Time) []bool {
	c := &wc.c
	var out []bool
	if wc.on(timebased.Feature) {
		// Past minAdmitDuration: strictly after the turn's end.
		end := wc.window().TurnEnds(c)
		out = append(out, !end.IsZero() && t.After(end))
	}
	if wc.on(minruntime.Feature) {
		for _, d := range wc.s.Lengths {
			out = append(out, minruntime.Protected(c, minruntime.Protection{MinRuntime: d}, t))
		}
	}
	if tol := toleration.Of(c); wc.on(toleration.Feature) && tol != nil {
		out = append(out, toleration.Tolerated(c, tol.MinimumPreemptablePriority-1, t))
	}
	if wc.on(expectedruntime.Feature) {
		n, _ := expectedruntime.Nominate(c, t)
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
	durs := []time.Duration{0, wc.window().MinAdmitDuration}
	durs = append(durs, wc.s.Lengths...)
	if tol := toleration.Of(c); tol != nil {
		durs = append(durs, tol.Duration)
	}
	if er := expectedruntime.Of(c); er != nil {
		durs = append(durs, er.Expected)
		bases = append(bases, er.NotBefore)
	}
	var out []time.Time
	for _, b := range bases {
		if b.IsZero() {
			continue
		}
		for _, d := range durs {
			for _, eps := range []time.Duration{-time.Second, -policy.WakePrecision, -1, 0, 1, policy.WakePrecision, time.Second} {
				out = append(out, b.Add(d+eps))
			}
		}
	}
	return out
}

func nextWake(c *policy.Candidate, s policy.WakeSettings, now time.Time) time.Time {
	var w policy.Wakes
	for _, ch := range policy.Changes(c, s) {
		w.Add(ch, now, now)
	}
	if w.Next.At.IsZero() {
		return time.Time{}
	}
	return w.Next.Wake()
}

// randomWakeCase draws a workload with conditions at sub-second times, stored and read back as
// the API server does (condition timestamps have a one-second resolution), its annotations and
// priority class read by the units as the manager reads them, settings on the WakePrecision
// grid, and an instant on that grid.
func randomWakeCase(r *rand.Rand) wakeCase {
	t0 := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	at := func() time.Time { return t0.Add(time.Duration(r.Int63n(int64(2 * time.Hour)))) }
	dur := func() time.Duration {
		if r.Intn(4) == 0 {
			return time.Duration(r.Intn(3)) * time.Minute
		}
		return time.Duration(r.Int63n(int64(90 * time.Minute))).Truncate(policy.WakePrecision)
	}
	wl := &kueue.Workload{ObjectMeta: metav1.ObjectMeta{Annotations: map[string]string{}}}
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
	var src policy.Sources
	if r.Intn(3) != 0 {
		t := annotations.Toleration{MinimumPreemptablePriority: int64(r.Intn(100))}
		if r.Intn(5) == 0 {
			t.Forever = true
		} else {
			t.Duration = dur()
		}
		wl.Spec.PriorityClassRef = &kueue.PriorityClassRef{Name: "class"}
		src = append(src, classTolerations{"class": {Toleration: t}})
	}
	if r.Intn(3) != 0 {
		wl.Annotations[annotations.ExpectedRuntime] = dur().String()
		if r.Intn(2) == 0 {
			wl.Annotations[annotations.RequeueNotBefore] = at().UTC().Format(time.RFC3339)
		}
		if r.Intn(8) == 0 {
			wl.Annotations[annotations.ExpectedRuntime] = "soon"
		}
	}
	raw, err := json.Marshal(wl)
	if err != nil {
		panic(err)
	}
	stored := &kueue.Workload{}
	if err := json.Unmarshal(raw, stored); err != nil {
		panic(err)
	}
	clock := policy.RuntimeClockAdmitted
	if r.Intn(2) == 0 {
		clock = policy.RuntimeClockPodsReady
	}
	wc := wakeCase{c: policy.CandidateOf(stored, clock)}
	if r.Intn(4) != 0 {
		wc.s.Queue = map[policy.Feature]any{timebased.Feature: timebased.Settings{MinAdmitDuration: dur()}}
	}
	for range r.Intn(4) {
		if d := dur(); d > 0 {
			wc.s.Lengths = append(wc.s.Lengths, d)
		}
	}
	off := map[policy.Feature]bool{}
	for _, f := range Precedence() {
		off[f] = r.Intn(4) == 0
	}
	wc.s.Enabled = func(f policy.Feature) bool { return !off[f] }
	wc.s.Units = Units()
	wc.s.ReadFacts(&wc.c, stored, src)
	wc.now = t0.Add(time.Duration(r.Int63n(int64(4 * time.Hour)))).Truncate(policy.WakePrecision)
	return wc
}

// TestNextWakeIsFirstChange: for random workloads, settings and instants, the next wake-up time
// given by the registry's features is exactly the first instant after now, to WakePrecision, at
// which some feature's decision differs from one step before it; with no wake-up time, no
// decision ever changes.
func TestNextWakeIsFirstChange(t *testing.T) {
	facts := map[string]int{}
	for _, seed := range []int64{1, 2, 3, 4, 5} {
		r := rand.New(rand.NewSource(seed))
		for i := range 4000 {
			wc := randomWakeCase(r)
			if toleration.Of(&wc.c) != nil {
				facts["toleration"]++
			}
			if er := expectedruntime.Of(&wc.c); er != nil && er.Skip == "" {
				facts["expected runtime"]++
			}
			name := fmt.Sprintf("seed %d case %d", seed, i)
			next := nextWake(&wc.c, wc.s, wc.now)
			at := func(t time.Time) []bool { return wc.decisions(t) }
			before := at(wc.now)
			// No decision changes in (now, next - WakePrecision]: checked at every breakpoint.
			for _, b := range wc.breakpoints() {
				if !b.After(wc.now) || (!next.IsZero() && b.After(next.Add(-policy.WakePrecision))) {
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
			if cmp.Equal(at(next.Add(-policy.WakePrecision)), at(next)) {
				t.Fatalf("%s: no decision changes at the wake-up %s (now %s, %+v, %+v)", name, next, wc.now, wc.c, wc.s)
			}
		}
	}
	// The units read the facts the cases were drawn with.
	for _, f := range []string{"toleration", "expected runtime"} {
		if facts[f] < 5000 {
			t.Errorf("%d cases of 20000 had the facts of %s; the units did not read them", facts[f], f)
		}
	}
}
