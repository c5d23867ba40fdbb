package notice

import (
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/prometheus/client_golang/prometheus/testutil"

	kueue "sigs.k8s.io/kueue/apis/kueue/v1beta2"

	"github.com/kueue-timeshare/kueue-timeshare/pkg/plugins/timebased"
	"github.com/kueue-timeshare/kueue-timeshare/pkg/policy"
)

// An outcome outside Outcome counts as policy.OtherLabel.
func TestNoticeOutcomeLabel(t *testing.T) {
	cases := map[string]string{
		string(EvictedAtDeadline): "EvictedAtDeadline",
		string(EndedEarly):        "EndedEarly",
		string(Withdrawn):         "Withdrawn",
		"":                        policy.OtherLabel,
		"Forged":                  policy.OtherLabel,
	}
	for outcome, want := range cases {
		t.Run(outcome, func(t *testing.T) {
			noticeMetrics(func(names ...string) []string { return names })
			ReportEnded(nil, "cq", timebased.Reason, outcome, "standalone", false, 0)
			got := map[string]float64{}
			for _, o := range []string{string(EvictedAtDeadline), string(EndedEarly), string(Withdrawn), policy.OtherLabel} {
				if v := testutil.ToFloat64(noticesEnded.WithLabelValues("cq", timebased.Reason, o, "standalone")); v > 0 {
					got[o] = v
				}
			}
			if diff := cmp.Diff(map[string]float64{want: 1}, got); diff != "" {
				t.Errorf("notices by outcome after one ended with %q (-want +got):\n%s", outcome, diff)
			}
		})
	}
}

// Each forged notice reason (or outcome) was a new series: 100 forged notices made 2 series 102.
// They now add one at the most, Other.
func TestForgedNoticeReasonsAddOneSeriesAtMost(t *testing.T) {
	noticeMetrics(func(names ...string) []string { return names })
	const cq = "cq-forged"
	ReportEnded(nil, cq, timebased.Reason, string(EvictedAtDeadline), "standalone", true, time.Minute)
	ReportEnded(nil, cq, kueue.InClusterQueueReason, string(Withdrawn), "standalone", false, 0)
	notices, delays := testutil.CollectAndCount(noticesEnded), testutil.CollectAndCount(noticeToEviction)
	for i := range 100 {
		ReportEnded(nil, cq, fmt.Sprintf("Forged%d", i), string(EvictedAtDeadline), "standalone", true, time.Minute)
		ReportEnded(nil, cq, timebased.Reason, fmt.Sprintf("Forged%d", i), "standalone", false, 0)
	}
	if got := testutil.CollectAndCount(noticesEnded); got > notices+2 {
		t.Errorf("kueue_preemption_notices_total has %d series after 100 forged reasons and outcomes, want at most %d", got, notices+2)
	}
	if got := testutil.CollectAndCount(noticeToEviction); got != delays {
		t.Errorf("kueue_preemption_notice_to_eviction_seconds has %d series, want %d", got, delays)
	}
	if got := testutil.ToFloat64(noticesEnded.WithLabelValues(cq, policy.OtherLabel, string(EvictedAtDeadline), "standalone")); got != 100 {
		t.Errorf("notices with reason Other = %v, want 100", got)
	}
}

// A notice that says it started in the future is observed as evicted at once, not a negative time.
func TestNoticeToEvictionNeverNegative(t *testing.T) {
	noticeToEviction.Reset()
	const cq = "cq-future-start"
	ReportEnded(nil, cq, timebased.Reason, string(EvictedAtDeadline), "standalone", true, -time.Hour)
	const want = `
# HELP kueue_preemption_notice_to_eviction_seconds Time from a preemption notice to the eviction that ended it, by the victim's ClusterQueue.
# TYPE kueue_preemption_notice_to_eviction_seconds histogram
kueue_preemption_notice_to_eviction_seconds_bucket{cluster_queue="cq-future-start",replica_role="standalone",le="1"} 1
kueue_preemption_notice_to_eviction_seconds_bucket{cluster_queue="cq-future-start",replica_role="standalone",le="5"} 1
kueue_preemption_notice_to_eviction_seconds_bucket{cluster_queue="cq-future-start",replica_role="standalone",le="15"} 1
kueue_preemption_notice_to_eviction_seconds_bucket{cluster_queue="cq-future-start",replica_role="standalone",le="30"} 1
kueue_preemption_notice_to_eviction_seconds_bucket{cluster_queue="cq-future-start",replica_role="standalone",le="60"} 1
kueue_preemption_notice_to_eviction_seconds_bucket{cluster_queue="cq-future-start",replica_role="standalone",le="120"} 1
kueue_preemption_notice_to_eviction_seconds_bucket{cluster_queue="cq-future-start",replica_role="standalone",le="300"} 1
kueue_preemption_notice_to_eviction_seconds_bucket{cluster_queue="cq-future-start",replica_role="standalone",le="600"} 1
kueue_preemption_notice_to_eviction_seconds_bucket{cluster_queue="cq-future-start",replica_role="standalone",le="1200"} 1
kueue_preemption_notice_to_eviction_seconds_bucket{cluster_queue="cq-future-start",replica_role="standalone",le="1800"} 1
kueue_preemption_notice_to_eviction_seconds_bucket{cluster_queue="cq-future-start",replica_role="standalone",le="3600"} 1
kueue_preemption_notice_to_eviction_seconds_bucket{cluster_queue="cq-future-start",replica_role="standalone",le="+Inf"} 1
kueue_preemption_notice_to_eviction_seconds_sum{cluster_queue="cq-future-start",replica_role="standalone"} 0
kueue_preemption_notice_to_eviction_seconds_count{cluster_queue="cq-future-start",replica_role="standalone"} 1
`
	if err := testutil.CollectAndCompare(noticeToEviction, strings.NewReader(want)); err != nil {
		t.Error(err)
	}
}
