package annotations

import (
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
)

func TestNoticeAnnotations(t *testing.T) {
	start := time.Date(2026, 11, 25, 10, 0, 0, 500_000_000, time.UTC)
	n := Notice{Start: start, Deadline: start.Add(10 * time.Minute), Reason: "InClusterQueueTimeBased", Preemptor: "team-a/next", PreemptorUID: "uid-1"}
	got, err := ParseNotice(n.Annotations())
	if err != nil {
		t.Fatalf("ParseNotice: %v", err)
	}
	want := n
	want.Start, want.Deadline = start.Truncate(time.Second), start.Add(10*time.Minute).Truncate(time.Second)
	if diff := cmp.Diff(&want, got); diff != "" {
		t.Errorf("round trip (-want +got):\n%s", diff)
	}
	if got := n.Annotations()[PreemptionDeadline]; got != "2026-11-25T10:10:00Z" {
		t.Errorf("deadline annotation %q, want RFC 3339 to the second", got)
	}
}

func TestParseNotice(t *testing.T) {
	valid := `{"start":"2026-11-25T10:00:00Z","reason":"InClusterQueueTimeBased","preemptor":"a/b","preemptorUID":"u"}`
	cases := map[string]struct {
		ann     map[string]string
		wantNil bool
		wantErr string
	}{
		"none":                  {ann: map[string]string{"other": "x"}, wantNil: true},
		"not JSON":              {ann: map[string]string{PreemptionNotice: "soon", PreemptionDeadline: "2026-11-25T10:10:00Z"}, wantErr: "annotation kueue-timeshare.io/preemption-notice: invalid character 's' looking for beginning of value"},
		"no preemptor":          {ann: map[string]string{PreemptionNotice: `{"reason":"r"}`, PreemptionDeadline: "2026-11-25T10:10:00Z"}, wantErr: "annotation kueue-timeshare.io/preemption-notice: preemptorUID and reason are required"},
		"deadline missing":      {ann: map[string]string{PreemptionNotice: valid}, wantErr: `annotation kueue-timeshare.io/preemption-deadline: parsing time "" as "2006-01-02T15:04:05Z07:00": cannot parse "" as "2006"`},
		"valid with a deadline": {ann: map[string]string{PreemptionNotice: valid, PreemptionDeadline: "2026-11-25T10:10:00Z"}},
		"a 40 kB preemptor": {ann: map[string]string{PreemptionNotice: `{"start":"2026-11-25T10:00:00Z","reason":"InClusterQueueTimeBased","preemptor":"a/` + strings.Repeat("b", 40*1024) + `","preemptorUID":"u"}`, PreemptionDeadline: "2026-11-25T10:10:00Z"},
			wantErr: "annotation kueue-timeshare.io/preemption-notice: 41063 bytes, must be at most 1024"},
		"a reason that cannot be a condition's": {ann: map[string]string{PreemptionNotice: `{"start":"2026-11-25T10:00:00Z","reason":"not a reason!","preemptor":"a/b","preemptorUID":"u"}`, PreemptionDeadline: "2026-11-25T10:10:00Z"},
			wantErr: "annotation kueue-timeshare.io/preemption-notice: reason must be a condition reason of at most 64 characters"},
		"a preemptor that is no namespace/name": {ann: map[string]string{PreemptionNotice: `{"start":"2026-11-25T10:00:00Z","reason":"InClusterQueueTimeBased","preemptor":"Team A","preemptorUID":"u"}`, PreemptionDeadline: "2026-11-25T10:10:00Z"},
			wantErr: "annotation kueue-timeshare.io/preemption-notice: preemptor must be namespace/name of a Workload, or left out"},
		"a preemptor of another namespace, left out": {ann: map[string]string{PreemptionNotice: `{"start":"2026-11-25T10:00:00Z","reason":"InClusterQueueTimeBased","preemptorUID":"u"}`, PreemptionDeadline: "2026-11-25T10:10:00Z"}},
		"a deadline before the start": {ann: map[string]string{PreemptionNotice: valid, PreemptionDeadline: "2026-11-25T09:00:00Z"},
			wantErr: "annotation kueue-timeshare.io/preemption-deadline: must be after the notice's start"},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			n, err := ParseNotice(tc.ann)
			gotErr := ""
			if err != nil {
				gotErr = err.Error()
			}
			if gotErr != tc.wantErr {
				t.Errorf("error %q, want %q", gotErr, tc.wantErr)
			}
			if tc.wantErr == "" && (n == nil) != tc.wantNil {
				t.Errorf("notice %v, want nil: %v", n, tc.wantNil)
			}
		})
	}
}
