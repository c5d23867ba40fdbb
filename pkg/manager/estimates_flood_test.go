package manager

import (
	"fmt"
	"slices"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"k8s.io/utils/clock"

	kueue "sigs.k8s.io/kueue/apis/kueue/v1beta2"
	schdcache "sigs.k8s.io/kueue/pkg/cache/scheduler"
	"sigs.k8s.io/kueue/pkg/workload"

	"github.com/kueue-timeshare/kueue-timeshare/pkg/estimate"
)

// BenchmarkEstimateReadFlood: one tenant changes its ClusterQueue's pending list and reads its
// LocalQueue's estimates as fast as it can, while another team reads its own every 10 ms; each
// walk costs walkCost of CPU. It reports the other team's slowest read and the walks per second
// of the flooded queue, with and without the flood.
func BenchmarkEstimateReadFlood(b *testing.B) {
	const walkCost = 5 * time.Millisecond
	for _, flood := range []bool{false, true} {
		b.Run(fmt.Sprintf("flood=%t", flood), func(b *testing.B) {
			var floodWalks, changes atomic.Int64
			c := &cachedEstimates{clock: clock.RealClock{}, ttl: estimateTTL, minInterval: estimateMinInterval,
				pending: func(cq kueue.ClusterQueueReference) []*workload.Info {
					if cq == "flooded" {
						return infosOf([]string{fmt.Sprintf("ns/w-%d", changes.Load())})
					}
					return infosOf([]string{"other/w"})
				},
				compute: func(cq kueue.ClusterQueueReference, _ []*workload.Info, _ func() *schdcache.Snapshot) map[string]estimate.Estimate {
					if cq == "flooded" {
						floodWalks.Add(1)
					}
					for start := time.Now(); time.Since(start) < walkCost; {
					}
					return map[string]estimate.Estimate{}
				}}
			var worst time.Duration
			for range b.N {
				stop := make(chan struct{})
				var wg sync.WaitGroup
				if flood {
					wg.Go(func() {
						for {
							select {
							case <-stop:
								return
							default:
								changes.Add(1)
								c.Estimates("flooded")
							}
						}
					})
				}
				var reads []time.Duration
				start := time.Now()
				for time.Since(start) < 2*time.Second {
					t := time.Now()
					c.Estimates("team-b")
					reads = append(reads, time.Since(t))
					time.Sleep(10 * time.Millisecond)
				}
				close(stop)
				wg.Wait()
				worst = max(worst, slices.Max(reads))
			}
			b.ReportMetric(float64(worst.Microseconds())/1000, "worst-other-read-ms")
			b.ReportMetric(float64(floodWalks.Load())/(2*float64(b.N)), "flood-walks/s")
		})
	}
}
