package timeutil

import (
	"math"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
)

const minDuration = time.Duration(math.MinInt64)

var (
	now       = time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)
	farFuture = time.Date(9999, 12, 31, 23, 59, 59, 0, time.UTC)
	farPast   = time.Date(1, 1, 1, 0, 0, 1, 0, time.UTC)
)

func TestAdd(t *testing.T) {
	cases := []struct {
		name string
		a, b time.Duration
		want time.Duration
	}{
		{name: "small", a: time.Second, b: time.Millisecond, want: time.Second + time.Millisecond},
		{name: "max plus precision", a: Forever, b: time.Millisecond, want: Forever},
		{name: "max plus max", a: Forever, b: Forever, want: Forever},
		{name: "max plus negative", a: Forever, b: -time.Second, want: Forever - time.Second},
		{name: "min plus negative", a: minDuration, b: -1, want: minDuration},
		{name: "min plus min", a: minDuration, b: minDuration, want: minDuration},
		{name: "min plus max", a: minDuration, b: Forever, want: -1},
		{name: "zero", a: 0, b: 0, want: 0},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			if diff := cmp.Diff(tc.want, Add(tc.a, tc.b)); diff != "" {
				t.Errorf("Add(%d, %d) (-want +got):\n%s", tc.a, tc.b, diff)
			}
			if diff := cmp.Diff(tc.want, Add(tc.b, tc.a)); diff != "" {
				t.Errorf("Add(%d, %d) (-want +got):\n%s", tc.b, tc.a, diff)
			}
		})
	}
}

func TestMulAndSeconds(t *testing.T) {
	cases := []struct {
		name string
		d    time.Duration
		n    int64
		want time.Duration
	}{
		{name: "thirty seconds", d: time.Second, n: 30, want: 30 * time.Second},
		{name: "largest seconds that fit", d: time.Second, n: math.MaxInt64 / int64(time.Second), want: time.Duration(math.MaxInt64/int64(time.Second)) * time.Second},
		{name: "one second too many", d: time.Second, n: math.MaxInt64/int64(time.Second) + 1, want: Forever},
		{name: "max int64 seconds", d: time.Second, n: math.MaxInt64, want: Forever},
		{name: "min int64 seconds", d: time.Second, n: math.MinInt64, want: minDuration},
		{name: "negative times negative", d: -time.Second, n: math.MinInt64, want: Forever},
		{name: "min times minus one", d: minDuration, n: -1, want: Forever},
		{name: "zero", d: 0, n: math.MaxInt64, want: 0},
		{name: "negative small", d: time.Second, n: -5, want: -5 * time.Second},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			if diff := cmp.Diff(tc.want, Mul(tc.d, tc.n)); diff != "" {
				t.Errorf("Mul(%d, %d) (-want +got):\n%s", tc.d, tc.n, diff)
			}
			if tc.d == time.Second {
				if diff := cmp.Diff(tc.want, Seconds(tc.n)); diff != "" {
					t.Errorf("Seconds(%d) (-want +got):\n%s", tc.n, diff)
				}
			}
		})
	}
}

func TestUntilAndDelay(t *testing.T) {
	cases := []struct {
		name      string
		at        time.Time
		extra     time.Duration
		wantUntil time.Duration
		wantDelay time.Duration
	}{
		{name: "a second ahead", at: now.Add(time.Second), extra: time.Millisecond, wantUntil: time.Second, wantDelay: time.Second + time.Millisecond},
		{name: "now", at: now, extra: time.Millisecond, wantUntil: 0, wantDelay: time.Millisecond},
		{name: "a second ago", at: now.Add(-time.Second), extra: time.Millisecond, wantUntil: 0, wantDelay: time.Millisecond},
		// The bug this package exists for: Sub saturates, and the precision added wrapped it negative.
		{name: "year 9999", at: farFuture, extra: time.Millisecond, wantUntil: Forever, wantDelay: Forever},
		{name: "year 1", at: farPast, extra: time.Millisecond, wantUntil: 0, wantDelay: time.Millisecond},
		{name: "negative extra", at: now.Add(time.Second), extra: -2 * time.Second, wantUntil: time.Second, wantDelay: 0},
		{name: "largest time", at: time.Unix(math.MaxInt64-62135596801, 999999999), extra: Forever, wantUntil: Forever, wantDelay: Forever},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			if diff := cmp.Diff(tc.wantUntil, Until(now, tc.at)); diff != "" {
				t.Errorf("Until (-want +got):\n%s", diff)
			}
			if diff := cmp.Diff(tc.wantDelay, Delay(now, tc.at, tc.extra)); diff != "" {
				t.Errorf("Delay (-want +got):\n%s", diff)
			}
		})
	}
}

func TestClamp(t *testing.T) {
	cases := []struct {
		name string
		d    time.Duration
		want time.Duration
	}{
		{name: "inside", d: time.Hour, want: time.Hour},
		{name: "below", d: -time.Hour, want: 0},
		{name: "above", d: Forever, want: 24 * time.Hour},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			if diff := cmp.Diff(tc.want, Clamp(tc.d, 0, 24*time.Hour)); diff != "" {
				t.Errorf("Clamp (-want +got):\n%s", diff)
			}
		})
	}
}
