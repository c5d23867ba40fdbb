package queuesettings

import (
	"strconv"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	clocktesting "k8s.io/utils/clock/testing"

	kueue "sigs.k8s.io/kueue/apis/kueue/v1beta2"

	"github.com/kueue-timeshare/kueue-timeshare/apis/annotations"
	"github.com/kueue-timeshare/kueue-timeshare/pkg/plugins/timebased"
	"github.com/kueue-timeshare/kueue-timeshare/pkg/plugins/toleration"
	"github.com/kueue-timeshare/kueue-timeshare/pkg/policy"
	"github.com/kueue-timeshare/kueue-timeshare/pkg/timeutil"
)

// FuzzWakeTimes drives the Waker's next wake-up (policy.Changes through Waker.wakes, then the
// exact timer's wait) with arbitrary annotation values, toleration, window and min-runtime, and
// steps an injected clock to each wake-up in turn. A wake-up is never at or before the clock's
// now, the timer never waits zero or less, and fires at the wake-up (or waits the longest a timer
// can); once reached, an instant is never named again, so a wake-up fires at most once per
// instant.
func FuzzWakeTimes(f *testing.F) {
	const y9999 = "9999-12-31T23:59:59Z"
	for _, seed := range []struct {
		expected, delay, notBefore, deadline string
		tolerationSeconds                    int64
		admitted, now, window, minRuntime    int64
	}{
		{expected: "1s", notBefore: y9999, admitted: -int64(time.Minute)},
		{deadline: y9999, admitted: -int64(time.Minute)},
		{expected: "1s", notBefore: y9999, deadline: y9999, tolerationSeconds: -1},
		{expected: "2562047h47m16.854775807s", delay: "2562047h47m16.854775807s", tolerationSeconds: 1<<63 - 1},
		{expected: "1h", delay: "10m", notBefore: "2026-11-24T12:30:00Z", deadline: "2026-11-24T12:10:00Z",
			tolerationSeconds: 600, admitted: -int64(time.Minute), window: int64(5 * time.Minute), minRuntime: int64(7 * time.Minute)},
		{expected: "1ms", notBefore: "0000-01-01T00:00:00Z", deadline: "0001-01-01T00:00:00Z", admitted: -1 << 63},
		{expected: "-1h", delay: "x", notBefore: "tomorrow", deadline: "soon", tolerationSeconds: 1, admitted: 1 << 62},
		{expected: "5m", admitted: 0, now: 1<<63 - 1, window: 1<<63 - 1, minRuntime: 1<<63 - 1},
		{expected: "5m", notBefore: y9999, admitted: -(1 << 63), now: -(1 << 63), window: 1, minRuntime: 1},
	} {
		f.Add(seed.expected, seed.delay, seed.notBefore, seed.deadline, seed.tolerationSeconds, seed.admitted, seed.now, seed.window, seed.minRuntime)
	}
	base := time.Date(2026, 11, 24, 12, 0, 0, 0, time.UTC)
	f.Fuzz(func(t *testing.T, expected, delay, notBefore, deadline string, tolerationSeconds, admitted, now, window, minRuntime int64) {
		clk := clocktesting.NewFakeClock(base.Add(time.Duration(now)))
		at := metav1.NewTime(clk.Now().Add(time.Duration(admitted)))
		ann := map[string]string{}
		for k, v := range map[string]string{annotations.ExpectedRuntime: expected, annotations.RequeueDelay: delay,
			annotations.RequeueNotBefore: notBefore, annotations.PreemptionDeadline: deadline} {
			if v != "" {
				ann[k] = v
			}
		}
		if deadline != "" {
			ann[annotations.PreemptionNotice] = `{"start":"2026-11-24T12:00:00Z","reason":"InClusterQueueTimeBased","preemptor":"ns/p","preemptorUID":"u"}`
		}
		wl := &kueue.Workload{
			ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "wl", Annotations: ann},
			Status: kueue.WorkloadStatus{
				Admission: &kueue.Admission{ClusterQueue: "cq"},
				Conditions: []metav1.Condition{
					{Type: kueue.WorkloadQuotaReserved, Status: metav1.ConditionTrue, Reason: "QuotaReserved", LastTransitionTime: at},
					{Type: kueue.WorkloadAdmitted, Status: metav1.ConditionTrue, Reason: "Admitted", LastTransitionTime: at},
				},
			},
		}
		tol, errs := annotations.ParseToleration(map[string]string{annotations.TolerationSeconds: strconv.FormatInt(tolerationSeconds, 10)}, 0)
		w := &Waker{Lead: RequeueBatchPeriod() - LeadMargin}
		var classes classTolerations
		if len(errs) == 0 {
			classes = classTolerations{Toleration: tol, Source: "fuzz"}
		}
		ws := policy.WakeSettings{Lengths: []time.Duration{time.Duration(minRuntime)}}

		// Every change's wake-up is at or after its boundary: the precision added never wraps.
		c := policy.CandidateOf(wl, "")
		ws.ReadFacts(&c, wl, policy.Sources{classes})
		ws.Queue = map[policy.Feature]any{timebased.Feature: timebased.Settings{MinAdmitDuration: time.Duration(window)}}
		for _, ch := range policy.Changes(&c, ws) {
			if ch.Wake().Before(ch.At) {
				t.Fatalf("change %+v wakes at %s, before its boundary", ch, ch.Wake())
			}
		}

		since := clk.Now().Add(-SweepPeriod)
		// reached is the last wake-up the timer reached. One further than the largest wait is
		// named again by each sweep the timer brings closer to it, but reached once.
		var reached time.Time
		for range 8 {
			now := clk.Now()
			next := w.wakes(wl, ws.Queue, ws, policy.Sources{classes}, since, now).Next
			if next.At.IsZero() {
				return
			}
			wake := next.Wake()
			if !wake.After(now) {
				t.Fatalf("next wake-up %s is not after now %s", wake, now)
			}
			if !reached.IsZero() && !wake.After(reached) {
				t.Fatalf("next wake-up %s names again (or before) the instant %s already reached", wake, reached)
			}
			d, ok := exactDelay(now, next.At)
			if !ok || d <= 0 {
				t.Fatalf("the exact timer for %s at %s waits %s (armed: %t)", next.At, now, d, ok)
			}
			fires := now.Add(d)
			switch {
			case !fires.Before(wake):
				reached = wake
			case d != timeutil.Forever:
				t.Fatalf("the exact timer fires at %s, before the wake-up %s, without waiting as long as a timer can", fires, wake)
			}
			clk.Step(d)
			since = now
		}
	})
}

// classTolerations gives every priority class one toleration; none when zero.
type classTolerations toleration.Toleration

func (c classTolerations) For(*kueue.PriorityClassRef) *toleration.Toleration {
	if c == (classTolerations{}) {
		return nil
	}
	t := toleration.Toleration(c)
	return &t
}
