package policy

import (
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
)

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
