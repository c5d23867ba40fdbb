package manager

import (
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	clocktesting "k8s.io/utils/clock/testing"

	kueue "sigs.k8s.io/kueue/apis/kueue/v1beta2"

	"github.com/kueue-timeshare/kueue-timeshare/pkg/estimate"
)

func TestCachedEstimates(t *testing.T) {
	start := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	// read is one request: after how long since the first, for which ClusterQueue.
	type read struct {
		after time.Duration
		cq    kueue.ClusterQueueReference
		// pending is the ClusterQueue's pending list at the read (nil: unchanged, "ns/w").
		pending []string
	}
	cases := map[string]struct {
		reads []read
		// want is, per read, the computation it was served from (1 for the first).
		want []int
	}{
		"repeated reads within the TTL are served from the cache": {
			reads: []read{{0, "a", nil}, {time.Second, "a", nil}, {estimateTTL - time.Millisecond, "a", nil}},
			want:  []int{1, 1, 1},
		},
		"a read at the TTL computes again": {
			reads: []read{{0, "a", nil}, {estimateTTL, "a", nil}, {estimateTTL + time.Second, "a", nil}},
			want:  []int{1, 2, 2},
		},
		"a changed pending list computes again within the TTL": {
			reads: []read{{0, "a", nil}, {time.Second, "a", []string{"ns/w", "ns/x"}}, {2 * time.Second, "a", []string{"ns/w", "ns/x"}}, {3 * time.Second, "a", []string{"ns/x", "ns/w"}}},
			want:  []int{1, 2, 2, 3},
		},
		"each ClusterQueue has its own entry": {
			reads: []read{{0, "a", nil}, {0, "b", nil}, {time.Second, "a", nil}, {time.Second, "b", nil}},
			want:  []int{1, 2, 1, 2},
		},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			clk := clocktesting.NewFakePassiveClock(start)
			computed := 0
			pending := []string{"ns/w"}
			c := &cachedEstimates{clock: clk, ttl: estimateTTL, pending: func(kueue.ClusterQueueReference) []string { return pending }, compute: func(cq kueue.ClusterQueueReference) map[string]estimate.Estimate {
				computed++
				return map[string]estimate.Estimate{"ns/w": {Workload: "ns/w", Position: computed}}
			}}
			var got []int
			for _, r := range tc.reads {
				clk.SetTime(start.Add(r.after))
				if r.pending != nil {
					pending = r.pending
				}
				got = append(got, c.Estimates(r.cq)["ns/w"].Position)
			}
			if diff := cmp.Diff(tc.want, got); diff != "" {
				t.Errorf("computations served (-want +got):\n%s", diff)
			}
		})
	}
}
