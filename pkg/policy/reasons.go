package policy

import (
	"maps"
	"slices"

	kueue "sigs.k8s.io/kueue/apis/kueue/v1beta2"
	upstream "sigs.k8s.io/kueue/pkg/scheduler/preemption"

	tsapi "github.com/kueue-timeshare/kueue-timeshare/apis/kueue/v1beta2"
)

// OwnReasonWords are the preemption reasons this project adds to upstream's, with their words
// (API, like upstream's: tsapi.PreemptionReasons). A victim preempted for one of them is evicted
// with that reason on its Evicted condition too (upstream writes "Preempted" there), so it must
// be requeued by this project's requeue controller: upstream's job reconciler requeues only
// evictions it knows.
func OwnReasonWords() map[string]ReasonWords { return tsapi.PreemptionReasons() }

// OwnReasonWordsOf are the words of reason, ok false when it is not one of this project's.
func OwnReasonWordsOf(reason string) (ReasonWords, bool) { return tsapi.WordsOf(reason) }

// IsOwnReason reports whether reason is one of this project's preemption reasons.
func IsOwnReason(reason string) bool {
	_, ok := tsapi.WordsOf(reason)
	return ok
}

// IsTurn reports whether a preemption for reason is a turn (ReasonWords.Turn).
func IsTurn(reason string) bool {
	w, _ := tsapi.WordsOf(reason)
	return w.Turn
}

// OwnReasons lists this project's preemption reasons, sorted.
func OwnReasons() []string {
	return slices.Sorted(maps.Keys(OwnReasonWords()))
}

// upstreamReasons are upstream's preemption reasons. A reason read back from an annotation may be
// anything a tenant wrote; only these and ours are known.
var upstreamReasons = []string{kueue.InClusterQueueReason, kueue.InCohortReclamationReason,
	kueue.InCohortFairSharingReason, kueue.InCohortReclaimWhileBorrowingReason}

// IsPreemptionReason reports whether reason is a known preemption reason, upstream's or ours.
func IsPreemptionReason(reason string) bool {
	return slices.Contains(upstreamReasons, reason) || IsOwnReason(reason)
}

// OtherLabel is the value of a metric label fed from data a tenant can write (an annotation) when
// the value is outside the label's closed set: each forged value would otherwise be a new series.
const OtherLabel = "Other"

// ReasonLabel is reason as a preemption reason label: a known reason (IsPreemptionReason), else
// OtherLabel.
func ReasonLabel(reason string) string {
	if IsPreemptionReason(reason) {
		return reason
	}
	return OtherLabel
}

// HumanReason words a preemption reason: ours as their words say, upstream's from its
// HumanReadablePreemptionReasons.
func HumanReason(reason string) string {
	if w, ok := OwnReasonWordsOf(reason); ok {
		return w.Eviction
	}
	return upstream.HumanReadablePreemptionReasons[reason]
}
