package main

import (
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
)

func TestProbeLoad(t *testing.T) {
	cases := map[string]struct {
		pending  int
		wantSets []int
	}{
		"1,200 pending behind one holder": {pending: 1200, wantSets: []int{50, 50, 50, 50, 50, 50, 50, 50, 50, 50, 50, 50, 50, 50, 50, 50, 50, 50, 50, 50, 50, 50, 50, 50, 1}},
		"a few":                           {pending: 3, wantSets: []int{4}},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			cfg := probeLoad(tc.pending)
			qs := cfg.Cohorts[0].QueuesSets[0]
			var sets []int
			for _, ws := range qs.WorkloadsSets {
				sets = append(sets, ws.Count)
			}
			if diff := cmp.Diff(tc.wantSets, sets); diff != "" {
				t.Errorf("workloads sets (-want +got):\n%s", diff)
			}
			// The quota holds one of them: the rest stay pending for the whole run.
			if worth, err := quotaWorth(cfg); err != nil || worth != 1 {
				t.Errorf("quota holds %d workloads (%v), want 1", worth, err)
			}
			if n, cqs := workloadCount(cfg); n != tc.pending+1 || cqs != 1 {
				t.Errorf("%d workloads in %d ClusterQueues, want %d in 1", n, cqs, tc.pending+1)
			}
			if cfg.ResourceFlavor.Name != probeClass || cfg.Cohorts[0].ClassName != probeClass || qs.ClassName != probeClass {
				t.Errorf("the probe shares a flavor or class with the load: %+v", cfg)
			}
		})
	}
}

func TestPercentile(t *testing.T) {
	ms := func(vs ...int) []time.Duration {
		var out []time.Duration
		for _, v := range vs {
			out = append(out, time.Duration(v)*time.Millisecond)
		}
		return out
	}
	cases := map[string]struct {
		samples []time.Duration
		p       float64
		want    time.Duration
	}{
		"empty":              {p: 0.5, want: 0},
		"median of five":     {samples: ms(50, 10, 40, 20, 30), p: 0.5, want: 30 * time.Millisecond},
		"p99 of 100 is 99th": {samples: ms(seq(100)...), p: 0.99, want: 99 * time.Millisecond},
		"p99 of ten is max":  {samples: ms(1, 2, 3, 4, 5, 6, 7, 8, 9, 100), p: 0.99, want: 100 * time.Millisecond},
		"p0 is the smallest": {samples: ms(3, 1, 2), p: 0, want: time.Millisecond},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			if got := percentile(tc.samples, tc.p); got != tc.want {
				t.Errorf("percentile(%v, %g) = %s, want %s", tc.samples, tc.p, got, tc.want)
			}
		})
	}
}

// seq is 1..n.
func seq(n int) []int {
	out := make([]int, n)
	for i := range out {
		out[i] = i + 1
	}
	return out
}
