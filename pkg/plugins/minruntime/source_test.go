package minruntime

import (
	"testing"
	"time"

	"github.com/kueue-timeshare/kueue-timeshare/pkg/policy"
)

func TestSourceDefault(t *testing.T) {
	cq := func(m Settings) Path {
		return Path{{Kind: "ClusterQueue", Name: "q", Settings: m}, {Kind: "Cohort", Name: "c"}}
	}
	d := Defaults{Preempt: 5 * time.Minute, Reclaim: 0}
	cases := map[string]struct {
		got  Protection
		want bool
	}{
		"nothing set: the default":          {got: ResolvePreempt(cq(Settings{}), d), want: true},
		"a zero default is still a default": {got: ResolveReclaim(ResolveQueue, nil, cq(Settings{}), d), want: true},
		"0s set on the ClusterQueue":        {got: ResolvePreempt(cq(Settings{Preempt: policy.Set(0)}), d), want: false},
		"a value set on the ClusterQueue":   {got: ResolveReclaim(ResolveQueue, nil, cq(Settings{Reclaim: policy.Set(time.Hour)}), d), want: false},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			if got := tc.got.Source.Default(); got != tc.want {
				t.Errorf("%+v: Default() = %v, want %v", tc.got, got, tc.want)
			}
		})
	}
}
