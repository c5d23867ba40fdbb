package annotations

// Annotations of a pending workload's admission estimate (issue 32), set only on the items the
// visibility API returns, never on stored objects.
const (
	// EstimatedAdmission is when the workload is expected to be admitted (RFC 3339), or
	// EstimateUnknown.
	EstimatedAdmission = "kueue-timeshare.io/estimated-admission"
	// AdmissionEstimate is the estimate for a person: the sentence, or why it is unknown.
	AdmissionEstimate = "kueue-timeshare.io/admission-estimate"
	// EstimateUnknown is EstimatedAdmission's value when no time can be foreseen.
	EstimateUnknown = "unknown"
)
