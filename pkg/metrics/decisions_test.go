package metrics

import (
	"testing"
	"time"
)

func TestDecisionsCountEachDecisionOnce(t *testing.T) {
	t0 := time.Date(2026, 11, 24, 12, 0, 0, 0, time.UTC)
	type step struct {
		key     string
		at      time.Duration
		expires time.Duration // from t0; 0: none known
		want    bool
	}
	cases := map[string][]step{
		"the same decision in later searches is not counted again": {
			{key: "a", at: 0, expires: 10 * time.Minute, want: true},
			{key: "a", at: 5 * time.Second, expires: 10 * time.Minute, want: false},
			{key: "b", at: 5 * time.Second, expires: 10 * time.Minute, want: true},
		},
		"after its protection ended, the same pair is a new decision": {
			{key: "a", at: 0, expires: time.Minute, want: true},
			{key: "a", at: 2 * time.Minute, expires: 30 * time.Minute, want: true},
		},
		"without a known end it is remembered for a day": {
			{key: "a", at: 0, want: true},
			{key: "a", at: 23 * time.Hour, want: false},
			{key: "a", at: 25 * time.Hour, want: true},
		},
	}
	for name, steps := range cases {
		t.Run(name, func(t *testing.T) {
			d := NewDecisions()
			for i, s := range steps {
				var exp time.Time
				if s.expires != 0 {
					exp = t0.Add(s.expires)
				}
				if got := d.First(s.key, t0.Add(s.at), exp); got != s.want {
					t.Errorf("step %d (%s at %s): First = %v, want %v", i, s.key, s.at, got, s.want)
				}
			}
		})
	}
}

func TestDecisionsForgetExpired(t *testing.T) {
	t0 := time.Date(2026, 11, 24, 12, 0, 0, 0, time.UTC)
	d := NewDecisions()
	for i := range 100 {
		d.First(string(rune('a'+i%26))+time.Duration(i).String(), t0, t0.Add(time.Minute))
	}
	d.First("late", t0.Add(2*time.Minute), t0.Add(3*time.Minute))
	if got := d.Len(); got != 1 {
		t.Errorf("remembered %d decisions after the others expired, want 1", got)
	}
}
