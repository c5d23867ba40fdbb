// Package timeutil holds the saturating time arithmetic for durations and instants that come,
// directly or not, from values a tenant can write (annotations, grace periods). Duration
// arithmetic in Go wraps on overflow; a wrapped wait is negative, so a far-future instant would
// mean "now", and a timer armed with it fires at once, again and again. Here a far-future instant
// stays far in the future: sums and products stop at the largest Duration instead.
//
// time.Time's Add and Sub already saturate; what they do not guard is the Duration arithmetic
// around them, and the negative waits of instants already past.
package timeutil

import (
	"math"
	"time"
)

// Forever is the largest Duration (about 292 years): a wait that long means "not in this
// process's lifetime", never "now".
const Forever = time.Duration(math.MaxInt64)

// Add is a+b, saturated to [-Forever-1, Forever].
func Add(a, b time.Duration) time.Duration {
	s := a + b
	switch {
	case a > 0 && b > 0 && s < 0:
		return Forever
	case a < 0 && b < 0 && s >= 0:
		return time.Duration(math.MinInt64)
	}
	return s
}

// Mul is d*n, saturated like Add.
func Mul(d time.Duration, n int64) time.Duration {
	if d == 0 || n == 0 {
		return 0
	}
	p := d * time.Duration(n)
	if p/time.Duration(n) != d || (n == -1 && d == math.MinInt64) {
		if (d > 0) == (n > 0) {
			return Forever
		}
		return time.Duration(math.MinInt64)
	}
	return p
}

// Seconds is n seconds, saturated: a grace period or toleration of any int64 seconds.
func Seconds(n int64) time.Duration {
	return Mul(time.Second, n)
}

// Until is how long from now until at: zero if at is not after now, at most Forever.
func Until(now, at time.Time) time.Duration {
	return max(at.Sub(now), 0)
}

// Delay is how long a timer set at now waits to fire extra after at: never negative, at most
// Forever. A timer armed with it for a far-future at does not fire until then.
func Delay(now, at time.Time, extra time.Duration) time.Duration {
	return max(Add(Until(now, at), extra), 0)
}

// Clamp bounds d to [lo, hi].
func Clamp(d, lo, hi time.Duration) time.Duration {
	return min(max(d, lo), hi)
}
