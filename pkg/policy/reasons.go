package policy

import "slices"

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
