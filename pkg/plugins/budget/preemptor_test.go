package budget

import (
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus/testutil"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	kueue "sigs.k8s.io/kueue/apis/kueue/v1beta2"
	"sigs.k8s.io/kueue/pkg/workload"

	"github.com/kueue-timeshare/kueue-timeshare/pkg/plugins/minruntime"
	"github.com/kueue-timeshare/kueue-timeshare/pkg/policy"
	"github.com/kueue-timeshare/kueue-timeshare/pkg/policy/policytest"
)

// TestAfterSearchCountsHeldBackOncePerWait: a preemptor held back by a spent budget counts once
// for as long as it waits for the same token, again when it waits for another, and never when it
// found victims or was held back by another rule.
func TestAfterSearchCountsHeldBackOncePerWait(t *testing.T) {
	t0 := time.Date(2026, 1, 1, 12, 0, 0, 0, time.UTC)
	preemptor := &workload.Info{Obj: &kueue.Workload{ObjectMeta: metav1.ObjectMeta{UID: "p"}}}
	spent := map[string]time.Time{RuleSpent: t0.Add(time.Hour)}
	searches := []struct {
		name string
		s    policy.Search
		want float64
	}{
		{name: "held back by the budget", s: policy.Search{VetoEnds: spent}, want: 1},
		{name: "the same wait again", s: policy.Search{VetoEnds: spent}, want: 1},
		{name: "victims found", s: policy.Search{Victims: 1, VetoEnds: spent}, want: 1},
		{name: "held back by another rule", s: policy.Search{VetoEnds: map[string]time.Time{minruntime.Rule: t0}}, want: 1},
		{name: "a wait for a later token", s: policy.Search{VetoEnds: map[string]time.Time{RuleSpent: t0.Add(2 * time.Hour)}}, want: 2},
	}
	h := &policytest.Handle{At: t0}
	const cq = "held-back-test"
	for _, step := range searches {
		step.s.Preemptor, step.s.ClusterQueue = preemptor, cq
		Plugin{}.AfterSearch(h, step.s)
		if got := testutil.ToFloat64(heldBack.WithLabelValues(cq)); got != step.want {
			t.Fatalf("%s: kueue_preemptions_held_back_total = %v, want %v", step.name, got, step.want)
		}
	}
}
