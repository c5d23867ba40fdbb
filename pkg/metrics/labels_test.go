package metrics

import (
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/prometheus/client_golang/prometheus/testutil"

	kueue "sigs.k8s.io/kueue/apis/kueue/v1beta2"

	"github.com/kueue-timeshare/kueue-timeshare/pkg/policy"
)

func TestReasonLabel(t *testing.T) {
	cases := map[string]string{
		kueue.InClusterQueueReason:                "InClusterQueue",
		kueue.InCohortReclamationReason:           "InCohortReclamation",
		kueue.InCohortFairSharingReason:           "InCohortFairSharing",
		kueue.InCohortReclaimWhileBorrowingReason: "InCohortReclaimWhileBorrowing",
		policy.TimeBasedReason:                    "InClusterQueueTimeBased",
		policy.ExpectedRuntimeReason:              "InClusterQueueExpectedRuntime",
		"":                                        Other,
		"Forged":                                  Other,
		"inclusterqueue":                          Other,
		"InClusterQueue ":                         Other,
	}
	for reason, want := range cases {
		t.Run(reason, func(t *testing.T) {
			if diff := cmp.Diff(want, ReasonLabel(reason)); diff != "" {
				t.Errorf("ReasonLabel(%q) (-want +got):\n%s", reason, diff)
			}
		})
	}
}

func TestOutcomeLabel(t *testing.T) {
	cases := map[string]string{
		string(policy.NoticeEvictedAtDeadline): "EvictedAtDeadline",
		string(policy.NoticeEndedEarly):        "EndedEarly",
		string(policy.NoticeWithdrawn):         "Withdrawn",
		"":                                     Other,
		"Forged":                               Other,
	}
	for outcome, want := range cases {
		t.Run(outcome, func(t *testing.T) {
			if diff := cmp.Diff(want, OutcomeLabel(outcome)); diff != "" {
				t.Errorf("OutcomeLabel(%q) (-want +got):\n%s", outcome, diff)
			}
		})
	}
}

// Each forged notice reason (or outcome) was a new series: 100 forged notices made 2 series 102.
// They now add one at the most, Other.
func TestForgedNoticeReasonsAddOneSeriesAtMost(t *testing.T) {
	InitVectors(nil)
	const cq = "cq-forged"
	ReportNoticeEnded(nil, cq, policy.TimeBasedReason, string(policy.NoticeEvictedAtDeadline), "standalone", true, time.Minute)
	ReportNoticeEnded(nil, cq, kueue.InClusterQueueReason, string(policy.NoticeWithdrawn), "standalone", false, 0)
	notices, delays := testutil.CollectAndCount(PreemptionNotices), testutil.CollectAndCount(NoticeToEvictionSeconds)
	for i := range 100 {
		ReportNoticeEnded(nil, cq, fmt.Sprintf("Forged%d", i), string(policy.NoticeEvictedAtDeadline), "standalone", true, time.Minute)
		ReportNoticeEnded(nil, cq, policy.TimeBasedReason, fmt.Sprintf("Forged%d", i), "standalone", false, 0)
	}
	if got := testutil.CollectAndCount(PreemptionNotices); got > notices+2 {
		t.Errorf("kueue_preemption_notices_total has %d series after 100 forged reasons and outcomes, want at most %d", got, notices+2)
	}
	if got := testutil.CollectAndCount(NoticeToEvictionSeconds); got != delays {
		t.Errorf("kueue_preemption_notice_to_eviction_seconds has %d series, want %d", got, delays)
	}
	if got := testutil.ToFloat64(PreemptionNotices.WithLabelValues(cq, Other, string(policy.NoticeEvictedAtDeadline), "standalone")); got != 100 {
		t.Errorf("notices with reason Other = %v, want 100", got)
	}
}

// A notice that says it started in the future is observed as evicted at once, not a negative time.
func TestNoticeToEvictionNeverNegative(t *testing.T) {
	InitVectors(nil)
	NoticeToEvictionSeconds.Reset()
	const cq = "cq-future-start"
	ReportNoticeEnded(nil, cq, policy.TimeBasedReason, string(policy.NoticeEvictedAtDeadline), "standalone", true, -time.Hour)
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
	if err := testutil.CollectAndCompare(NoticeToEvictionSeconds, strings.NewReader(want)); err != nil {
		t.Error(err)
	}
}
