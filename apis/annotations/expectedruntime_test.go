package annotations

import (
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
)

func TestParseExpectedRuntime(t *testing.T) {
	cases := map[string]struct {
		ann    map[string]string
		want   ExpectedRuntimeSettings
		wantOK bool
	}{
		"not opted in":          {ann: map[string]string{RequeueDelay: "5m"}},
		"nil annotations":       {},
		"expected runtime only": {ann: map[string]string{ExpectedRuntime: "2h"}, want: ExpectedRuntimeSettings{Expected: 2 * time.Hour}, wantOK: true},
		"with delay and not-before": {
			ann:    map[string]string{ExpectedRuntime: "30m", RequeueDelay: "10m", RequeueNotBefore: "2026-11-21T10:00:00Z"},
			want:   ExpectedRuntimeSettings{Expected: 30 * time.Minute, Delay: 10 * time.Minute, NotBefore: time.Date(2026, 11, 21, 10, 0, 0, 0, time.UTC)},
			wantOK: true,
		},
		"zero delay is allowed": {
			ann: map[string]string{ExpectedRuntime: "1m", RequeueDelay: "0s"}, want: ExpectedRuntimeSettings{Expected: time.Minute}, wantOK: true,
		},
		"expected runtime not a duration": {
			ann:    map[string]string{ExpectedRuntime: "2 hours"},
			want:   ExpectedRuntimeSettings{Skip: SkipInvalidDuration, Problem: `annotation kueue-timeshare.io/expected-runtime: "2 hours" is not a duration`},
			wantOK: true,
		},
		"expected runtime zero": {
			ann:    map[string]string{ExpectedRuntime: "0s"},
			want:   ExpectedRuntimeSettings{Skip: SkipInvalidDuration, Problem: `annotation kueue-timeshare.io/expected-runtime: "0s" must be positive`},
			wantOK: true,
		},
		"negative delay": {
			ann:    map[string]string{ExpectedRuntime: "1h", RequeueDelay: "-1m"},
			want:   ExpectedRuntimeSettings{Skip: SkipInvalidDuration, Problem: `annotation kueue-timeshare.io/requeue-delay: "-1m" must not be negative`},
			wantOK: true,
		},
		"delay not a duration": {
			ann:    map[string]string{ExpectedRuntime: "1h", RequeueDelay: "soon"},
			want:   ExpectedRuntimeSettings{Skip: SkipInvalidDuration, Problem: `annotation kueue-timeshare.io/requeue-delay: "soon" is not a duration`},
			wantOK: true,
		},
		"ten years: kept": {
			ann:    map[string]string{ExpectedRuntime: "87600h", RequeueDelay: "87600h"},
			want:   ExpectedRuntimeSettings{Expected: MaxDuration, Delay: MaxDuration},
			wantOK: true,
		},
		"over ten years: the maximum": {
			ann:    map[string]string{ExpectedRuntime: "87600h1s", RequeueDelay: "100000h"},
			want:   ExpectedRuntimeSettings{Expected: MaxDuration, Delay: MaxDuration},
			wantOK: true,
		},
		"the largest duration: the maximum": {
			ann:    map[string]string{ExpectedRuntime: "2562047h47m16.854775807s", RequeueDelay: "2562047h47m16.854775807s"},
			want:   ExpectedRuntimeSettings{Expected: MaxDuration, Delay: MaxDuration},
			wantOK: true,
		},
		"beyond a duration's range": {
			ann:    map[string]string{ExpectedRuntime: "2562048h"},
			want:   ExpectedRuntimeSettings{Skip: SkipInvalidDuration, Problem: `annotation kueue-timeshare.io/expected-runtime: "2562048h" is not a duration`},
			wantOK: true,
		},
		"not-before in year 9999: kept": {
			ann:    map[string]string{ExpectedRuntime: "1h", RequeueNotBefore: "9999-12-31T23:59:59Z"},
			want:   ExpectedRuntimeSettings{Expected: time.Hour, NotBefore: time.Date(9999, 12, 31, 23, 59, 59, 0, time.UTC)},
			wantOK: true,
		},
		"not-before in year 0: kept": {
			ann:    map[string]string{ExpectedRuntime: "1h", RequeueNotBefore: "0000-01-01T00:00:00Z"},
			want:   ExpectedRuntimeSettings{Expected: time.Hour, NotBefore: time.Date(0, 1, 1, 0, 0, 0, 0, time.UTC)},
			wantOK: true,
		},
		"not-before past year 9999": {
			ann:    map[string]string{ExpectedRuntime: "1h", RequeueNotBefore: "10000-01-01T00:00:00Z"},
			want:   ExpectedRuntimeSettings{Skip: SkipInvalidNotBefore, Problem: `annotation kueue-timeshare.io/requeue-not-before: "10000-01-01T00:00:00Z" is not an RFC 3339 time`},
			wantOK: true,
		},
		"not-before not a time": {
			ann:    map[string]string{ExpectedRuntime: "1h", RequeueNotBefore: "tomorrow"},
			want:   ExpectedRuntimeSettings{Skip: SkipInvalidNotBefore, Problem: `annotation kueue-timeshare.io/requeue-not-before: "tomorrow" is not an RFC 3339 time`},
			wantOK: true,
		},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			got, ok := ParseExpectedRuntime(tc.ann)
			if ok != tc.wantOK {
				t.Fatalf("ok = %t, want %t", ok, tc.wantOK)
			}
			if diff := cmp.Diff(tc.want, got); diff != "" {
				t.Errorf("settings (-want +got):\n%s", diff)
			}
		})
	}
}
