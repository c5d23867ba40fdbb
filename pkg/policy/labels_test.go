package policy

import (
	"testing"

	"github.com/google/go-cmp/cmp"

	kueue "sigs.k8s.io/kueue/apis/kueue/v1beta2"

	tsapi "github.com/kueue-timeshare/kueue-timeshare/apis/kueue/v1beta2"
)

func TestReasonLabel(t *testing.T) {
	cases := map[string]string{
		kueue.InClusterQueueReason:                "InClusterQueue",
		kueue.InCohortReclamationReason:           "InCohortReclamation",
		kueue.InCohortFairSharingReason:           "InCohortFairSharing",
		kueue.InCohortReclaimWhileBorrowingReason: "InCohortReclaimWhileBorrowing",
		tsapi.TimeBasedReason:                     "InClusterQueueTimeBased",
		tsapi.ExpectedRuntimeReason:               "InClusterQueueExpectedRuntime",
		"":                                        OtherLabel,
		"Forged":                                  OtherLabel,
		"inclusterqueue":                          OtherLabel,
		"InClusterQueue ":                         OtherLabel,
	}
	for reason, want := range cases {
		t.Run(reason, func(t *testing.T) {
			if diff := cmp.Diff(want, ReasonLabel(reason)); diff != "" {
				t.Errorf("ReasonLabel(%q) (-want +got):\n%s", reason, diff)
			}
		})
	}
}
