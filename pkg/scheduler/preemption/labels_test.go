package preemption

import (
	"fmt"
	"testing"

	"github.com/prometheus/client_golang/prometheus/testutil"

	kueuemetrics "sigs.k8s.io/kueue/pkg/metrics"
	utiltesting "sigs.k8s.io/kueue/pkg/util/testing"

	"github.com/kueue-timeshare/kueue-timeshare/pkg/policy"
)

// A target evicted for a reason read from a notice's annotation (anything a tenant wrote) counts
// on upstream's kueue_preempted_workloads_total as Other: 100 forged reasons add one series.
func TestForgedReasonsAddOnePreemptedSeriesAtMost(t *testing.T) {
	ctx, _ := utiltesting.ContextWithLog(t)
	w := newIssueWorld(t, ctx, nil, "")
	p := w.preemptor()
	p.expectations = nil // each eviction writes, as a first one would
	before := testutil.CollectAndCount(kueuemetrics.PreemptedWorkloadsTotal)
	others := testutil.ToFloat64(kueuemetrics.PreemptedWorkloadsTotal.WithLabelValues("cq", policy.OtherLabel, "standalone"))
	for i := range 100 {
		targets := w.targets(t, map[string]string{"ran-2h30m0s": fmt.Sprintf("Forged%d", i)})
		if err := p.evict(ctx, w.cache, w.sc.PendingInfo(), targets[0], w.cq); err != nil {
			t.Fatal(err)
		}
	}
	if got := testutil.CollectAndCount(kueuemetrics.PreemptedWorkloadsTotal); got > before+1 {
		t.Errorf("kueue_preempted_workloads_total has %d series after 100 forged reasons, want at most %d", got, before+1)
	}
	if got := testutil.ToFloat64(kueuemetrics.PreemptedWorkloadsTotal.WithLabelValues("cq", policy.OtherLabel, "standalone")) - others; got != 100 {
		t.Errorf("preemptions counted as Other = %v, want 100", got)
	}
}
