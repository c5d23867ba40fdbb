package policy

import (
	"slices"

	kueue "sigs.k8s.io/kueue/apis/kueue/v1beta2"
)

// ownReasons are the preemption reasons this project adds to upstream's. A victim preempted for
// one of them is evicted with that reason on its Evicted condition too (upstream writes
// "Preempted" there), so it must be requeued by this project's requeue controller: upstream's job
// reconciler requeues only evictions it knows.
var ownReasons = []string{TimeBasedReason, ExpectedRuntimeReason}

// IsOwnReason reports whether reason is one of this project's preemption reasons.
func IsOwnReason(reason string) bool {
	return slices.Contains(ownReasons, reason)
}

// OwnReasons lists this project's preemption reasons.
func OwnReasons() []string {
	return append([]string(nil), ownReasons...)
}

// preemptionReasons are every reason a victim is preempted for: upstream's and ours. A reason
// read back from an annotation may be anything a tenant wrote; only these are known.
var preemptionReasons = append([]string{kueue.InClusterQueueReason, kueue.InCohortReclamationReason,
	kueue.InCohortFairSharingReason, kueue.InCohortReclaimWhileBorrowingReason}, ownReasons...)

// IsPreemptionReason reports whether reason is a known preemption reason, upstream's or ours.
func IsPreemptionReason(reason string) bool {
	return slices.Contains(preemptionReasons, reason)
}

// IsNoticeOutcome reports whether outcome is one of the NoticeOutcomes.
func IsNoticeOutcome(outcome string) bool {
	switch NoticeOutcome(outcome) {
	case NoticeEvictedAtDeadline, NoticeEndedEarly, NoticeWithdrawn:
		return true
	}
	return false
}
