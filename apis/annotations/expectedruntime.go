package annotations

import (
	"fmt"
	"time"
)

// Annotations on a job (copied to its Workload) or a Workload that opt it in to expected-runtime
// requeue.
const (
	// ExpectedRuntime (required to opt in): after running this long the workload may be preempted
	// by workloads of equal or higher priority of its ClusterQueue, if that lets one be admitted.
	ExpectedRuntime = "kueue-timeshare.io/expected-runtime"
	// RequeueDelay (optional): the cooldown after such a preemption; the manager's
	// defaultRequeueDelay when absent.
	RequeueDelay = "kueue-timeshare.io/requeue-delay"
	// RequeueNotBefore (system-managed, RFC 3339): written on the Workload after such a preemption;
	// the workload is not nominated again before then.
	RequeueNotBefore = "kueue-timeshare.io/requeue-not-before"
)

// Reasons a workload with ExpectedRuntime is not nominated, as counted by
// kueue_expected_runtime_nomination_skipped_total.
const (
	SkipCooldown         = "cooldown"
	SkipMissingStart     = "missing_start"
	SkipInvalidDuration  = "invalid_duration"
	SkipNotRunning       = "not_running"
	SkipMinRuntime       = "minruntime_protected"
	SkipClockSkew        = "clock_skew"
	SkipInvalidNotBefore = "invalid_not_before"
)

// MaxDuration is the longest duration an annotation gives: a longer one (up to the ~292 years
// time.ParseDuration reads, or a toleration's int64 seconds) is read as this. Ten years is
// "for as long as it runs" for any workload, and keeps every instant computed from it, and
// every sum of such durations, far from overflow.
const MaxDuration = 10 * 365 * 24 * time.Hour

// ExpectedRuntimeSettings are a workload's expected-runtime annotations, parsed.
type ExpectedRuntimeSettings struct {
	Expected time.Duration
	// Delay is the requeue delay; zero when the annotation is absent (use the default).
	Delay time.Duration
	// NotBefore is the end of the cooldown; zero when absent.
	NotBefore time.Time
	// Skip is a reason the annotations cannot be used (SkipInvalidDuration or
	// SkipInvalidNotBefore), with Problem saying what is wrong; empty when they are valid.
	Skip    string
	Problem string
}

// ParseExpectedRuntime reads the expected-runtime annotations; ok is false when the workload has
// not opted in. Durations above MaxDuration are read as MaxDuration. requeue-not-before, as RFC
// 3339, is in years 0000 to 9999; the readers' time arithmetic saturates.
func ParseExpectedRuntime(ann map[string]string) (s ExpectedRuntimeSettings, ok bool) {
	raw, ok := ann[ExpectedRuntime]
	if !ok {
		return s, false
	}
	invalid := func(key, value, rule string) (ExpectedRuntimeSettings, bool) {
		return ExpectedRuntimeSettings{Skip: SkipInvalidDuration, Problem: fmt.Sprintf("annotation %s: %q %s", key, value, rule)}, true
	}
	d, err := time.ParseDuration(raw)
	if err != nil {
		return invalid(ExpectedRuntime, raw, "is not a duration")
	}
	if d <= 0 {
		return invalid(ExpectedRuntime, raw, "must be positive")
	}
	s.Expected = min(d, MaxDuration)
	if raw, ok := ann[RequeueDelay]; ok {
		d, err := time.ParseDuration(raw)
		if err != nil {
			return invalid(RequeueDelay, raw, "is not a duration")
		}
		if d < 0 {
			return invalid(RequeueDelay, raw, "must not be negative")
		}
		s.Delay = min(d, MaxDuration)
	}
	if raw, ok := ann[RequeueNotBefore]; ok {
		t, err := time.Parse(time.RFC3339, raw)
		if err != nil {
			return ExpectedRuntimeSettings{Skip: SkipInvalidNotBefore,
				Problem: fmt.Sprintf("annotation %s: %q is not an RFC 3339 time", RequeueNotBefore, raw)}, true
		}
		s.NotBefore = t
	}
	return s, true
}
