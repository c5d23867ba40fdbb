package scheduler

import (
	"testing"

	"github.com/google/go-cmp/cmp"

	qcache "sigs.k8s.io/kueue/pkg/cache/queue"
	"sigs.k8s.io/kueue/pkg/features"
	"sigs.k8s.io/kueue/pkg/workload"
)

// entryState is what the requeue pass reads from an entry.
type entryState struct {
	Status        entryStatus
	Message       string
	RequeueReason qcache.RequeueReason
	KeepsProgress bool
}

func stateOf(e *entry) entryState {
	return entryState{Status: e.status, Message: e.inadmissibleMsg, RequeueReason: e.requeueReason, KeepsProgress: e.LastAssignment != nil}
}

func TestEntryTransitions(t *testing.T) {
	cases := map[string]struct {
		preserveScan bool
		apply        func(e *entry)
		want         entryState
	}{
		"skip keeps the scan progress with FlavorFungibilityPreserveScanProgress": {
			preserveScan: true,
			apply:        func(e *entry) { e.markSkipped("lost") },
			want:         entryState{Status: skipped, Message: "lost", KeepsProgress: true},
		},
		"skip drops the scan progress without it": {
			apply: func(e *entry) { e.markSkipped("lost") },
			want:  entryState{Status: skipped, Message: "lost"},
		},
		"gate always drops the scan progress": {
			preserveScan: true,
			apply:        func(e *entry) { e.markPreemptionGated("gated") },
			want:         entryState{Status: preemptionGated, Message: "gated", RequeueReason: qcache.RequeueReasonPreemptionGated},
		},
		"preemptions issued": {
			preserveScan: true,
			apply:        func(e *entry) { e.inadmissibleMsg = "needs room"; e.markPreemptionOutcome(2, 1) },
			want: entryState{
				Message:       "needs room. Pending the preemption of 2 workload(s)",
				RequeueReason: qcache.RequeueReasonPendingPreemption,
			},
		},
		"preemptions failed": {
			apply: func(e *entry) { e.inadmissibleMsg = "needs room"; e.markPreemptionOutcome(0, 3) },
			want: entryState{
				Message:       "needs room. Preempting 3 workload(s) failed, will retry.",
				RequeueReason: qcache.RequeueReasonPreemptionFailed,
			},
		},
		"nothing preempted, nothing failed": {
			preserveScan: true,
			apply:        func(e *entry) { e.inadmissibleMsg = "needs room"; e.markPreemptionOutcome(0, 0) },
			want:         entryState{Message: "needs room"},
		},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			features.SetFeatureGateDuringTest(t, features.FlavorFungibilityPreserveScanProgress, tc.preserveScan)
			e := &entry{}
			e.LastAssignment = &workload.AssignmentClusterQueueState{ClusterQueueGeneration: 1}
			tc.apply(e)
			if diff := cmp.Diff(tc.want, stateOf(e)); diff != "" {
				t.Errorf("entry (-want +got):\n%s", diff)
			}
		})
	}
}

func TestScanProgressStale(t *testing.T) {
	last := &workload.AssignmentClusterQueueState{ClusterQueueGeneration: 5, SchedulingCycle: 10, SchedulingHash: "42"}
	cases := map[string]struct {
		preserveScan bool
		cqGeneration int64
		cycle        int64
		hash         workload.EquivalenceHash
		want         bool
	}{
		"same generation":                  {preserveScan: true, cqGeneration: 5, cycle: 20, hash: "42", want: false},
		"newer generation, old cycle":      {preserveScan: true, cqGeneration: 6, cycle: 12, hash: "42", want: true},
		"newer generation, previous cycle": {preserveScan: true, cqGeneration: 6, cycle: 11, hash: "42", want: false},
		"newer generation, same cycle":     {preserveScan: true, cqGeneration: 9, cycle: 10, hash: "42", want: false},
		"shape changed, previous cycle":    {preserveScan: true, cqGeneration: 5, cycle: 11, hash: "7", want: true},
		"without the gate the cycle does not matter": {
			cqGeneration: 6, cycle: 11, hash: "42", want: true,
		},
		"without the gate the shape does not matter": {
			cqGeneration: 5, cycle: 11, hash: "7", want: false,
		},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			features.SetFeatureGateDuringTest(t, features.FlavorFungibilityPreserveScanProgress, tc.preserveScan)
			if got := lastAssignmentOutdated(last, tc.cqGeneration, tc.cycle, tc.hash); got != tc.want {
				t.Errorf("stale = %t, want %t", got, tc.want)
			}
		})
	}
}
