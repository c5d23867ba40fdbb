package estimate

import (
	"fmt"
	"testing"
	"time"
)

// BenchmarkEstimate is one ClusterQueue taking turns, 10,000 workloads holding a cpu each (full)
// and 1,000 pending, some with an expected runtime.
func BenchmarkEstimate(b *testing.B) {
	const holding, waiting = 10000, 1000
	holders := make([]wl, holding)
	for i := range holders {
		holders[i] = wl{name: fmt.Sprintf("h%d", i), cpu: 1, since: time.Duration(i%3600) * time.Second}
		if i%10 == 0 {
			holders[i].expected = 2 * time.Hour
		}
	}
	pending := make([]wl, waiting)
	for i := range pending {
		pending[i] = wl{name: fmt.Sprintf("p%d", i), cpu: 1 + int64(i%3)}
	}
	q, hs, ws := inputs(queueCase{capacity: holding, window: time.Hour, preemptMin: 10 * time.Minute, handover: time.Second}, holders, pending)
	b.ReportAllocs()
	for b.Loop() {
		out := Compute(q, hs, ws, t0)
		if out[waiting-1].Unknown {
			b.Fatalf("last one unknown: %s", out[waiting-1].Reason)
		}
	}
}
