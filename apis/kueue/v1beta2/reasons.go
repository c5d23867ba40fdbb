package v1beta2

import "maps"

// The preemption reasons this project adds to upstream's (InClusterQueue, InCohortReclamation
// and the others of kueue.x-k8s.io/v1beta2). They are API, as upstream's are: they are written
// in the Preempted and Evicted conditions of a Workload, in notices, and in the reason label of
// kueue_preempted_workloads_total, whichever features are on.
const (
	// TimeBasedReason: a same-priority workload held its quota longer than its ClusterQueue's
	// minAdmitDuration (KEP-8522).
	TimeBasedReason = "InClusterQueueTimeBased"
	// ExpectedRuntimeReason: a workload ran past its expected runtime.
	ExpectedRuntimeReason = "InClusterQueueExpectedRuntime"
)

// ReasonWords say in words what a preemption reason means.
type ReasonWords struct {
	// Eviction is the eviction message's account of the reason (upstream's
	// HumanReadablePreemptionReasons).
	Eviction string
	// Requeue says why a workload evicted for it went back to its queue.
	Requeue string
	// Turn: a preemption for it is a turn, which always gets the notice period and never
	// spends a preemption budget.
	Turn bool
}

var reasonWords = map[string]ReasonWords{
	TimeBasedReason: {
		Eviction: "time-sharing: the workload held its quota longer than its ClusterQueue's minAdmitDuration",
		Requeue:  "Requeued after time-sharing preemption",
		Turn:     true,
	},
	ExpectedRuntimeReason: {
		Eviction: "expected runtime: the workload ran past its expected runtime and a workload of its ClusterQueue needed the quota",
		Requeue:  "Requeued after preemption for running past its expected runtime",
		Turn:     true,
	},
}

// PreemptionReasons are this project's preemption reasons with their words.
func PreemptionReasons() map[string]ReasonWords { return maps.Clone(reasonWords) }

// WordsOf are the words of reason, ok false when it is not one of this project's reasons.
func WordsOf(reason string) (ReasonWords, bool) {
	w, ok := reasonWords[reason]
	return w, ok
}
