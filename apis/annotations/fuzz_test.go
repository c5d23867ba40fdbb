package annotations

import (
	"strings"
	"testing"
)

// FuzzParseToleration: never panics; either field errors that name an annotation, or a toleration
// that is consistent (forever, or a non-negative duration).
func FuzzParseToleration(f *testing.F) {
	f.Add("10000", "-1", int32(8000), true, true)
	f.Add("high", "600", int32(1), true, true)
	f.Add("", "9223372036854775807", int32(-5), false, true)
	f.Fuzz(func(t *testing.T, minimum, seconds string, value int32, hasMin, hasSeconds bool) {
		ann := map[string]string{}
		if hasMin {
			ann[MinimumPreemptablePriority] = minimum
		}
		if hasSeconds {
			ann[TolerationSeconds] = seconds
		}
		tol, errs := ParseToleration(ann, value)
		if len(errs) > 0 {
			for _, e := range errs {
				if !strings.Contains(e.Field, "preemption-toleration.scheduling.x-k8s.io/") {
					t.Fatalf("error does not name the annotation: %v", e)
				}
			}
			return
		}
		if tol.Duration < 0 || (tol.Forever && tol.Duration != 0) {
			t.Fatalf("inconsistent toleration %+v", tol)
		}
		if !hasMin && tol.MinimumPreemptablePriority != int64(value)+1 {
			t.Fatalf("default minimum %d, want %d", tol.MinimumPreemptablePriority, int64(value)+1)
		}
	})
}

// FuzzParseExpectedRuntime: never panics; a usable result has a positive expected runtime and a
// non-negative delay; an unusable one says why.
func FuzzParseExpectedRuntime(f *testing.F) {
	f.Add("2h", "10m", "2026-11-21T10:00:00Z", true, true)
	f.Add("0s", "-1m", "tomorrow", true, true)
	f.Add("1h30m", "", "", false, false)
	f.Fuzz(func(t *testing.T, expected, delay, notBefore string, hasDelay, hasNotBefore bool) {
		ann := map[string]string{ExpectedRuntime: expected}
		if hasDelay {
			ann[RequeueDelay] = delay
		}
		if hasNotBefore {
			ann[RequeueNotBefore] = notBefore
		}
		s, ok := ParseExpectedRuntime(ann)
		if !ok {
			t.Fatal("opted in but not recognised")
		}
		if s.Skip != "" {
			if s.Problem == "" || !strings.Contains(s.Problem, "kueue-timeshare.io/") {
				t.Fatalf("skip %q without a problem naming the annotation: %q", s.Skip, s.Problem)
			}
			return
		}
		if s.Expected <= 0 || s.Delay < 0 {
			t.Fatalf("usable settings out of range: %+v", s)
		}
	})
}
