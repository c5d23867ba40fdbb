package policy

import (
	"slices"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/google/go-cmp/cmp/cmpopts"
)

// TestChangesEdges pins each feature's interval edge.
func TestChangesEdges(t *testing.T) {
	t0 := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	running := Candidate{QuotaReservedAt: t0, Admitted: true, AdmittedAt: t0.Add(time.Second)}
	cases := map[string]struct {
		c    Candidate
		s    WakeSettings
		want []Change
	}{
		"minAdmitDuration counts once strictly passed": {
			c: running, s: WakeSettings{Queue: QueueSettings{MinAdmitDuration: time.Minute}},
			want: []Change{{At: t0.Add(time.Minute), After: true}},
		},
		"an evicted workload's window still ends": {
			c:    Candidate{QuotaReservedAt: t0, Admitted: true, AdmittedAt: t0, Evicted: true},
			s:    WakeSettings{Queue: QueueSettings{MinAdmitDuration: time.Minute}},
			want: []Change{{At: t0.Add(time.Minute), After: true}},
		},
		"time-based preemption off": {
			c: running, s: WakeSettings{Queue: QueueSettings{MinAdmitDuration: time.Minute}, Enabled: func(f Feature) bool { return f != FeatureTimeBased }},
		},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			tc.s.Units = testUnits()
			got := Changes(&tc.c, tc.s)
			slices.SortFunc(got, func(a, b Change) int { return a.At.Compare(b.At) })
			if diff := cmp.Diff(tc.want, got, cmp.Comparer(time.Time.Equal), cmpopts.EquateEmpty()); diff != "" {
				t.Errorf("Changes (-want +got):\n%s", diff)
			}
		})
	}
}

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
