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
