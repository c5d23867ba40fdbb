package v1beta2

import (
	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
)

// Descriptions shown by `kubectl explain`; keep them in step with the field comments above.
const (
	withinClusterQueueConfigDescription = "withinClusterQueueConfig provides additional configuration for the " +
		"withinClusterQueue preemption policy (kueue-timeshare). Only valid when withinClusterQueue is " +
		"LowerOrNewerEqualPriority."
	minAdmitDurationDescription = "minAdmitDuration is how long a workload keeps its quota before same-priority " +
		"workloads of the same ClusterQueue may preempt it, measured from the lastTransitionTime of its " +
		"QuotaReserved condition. At least 1m. Without it, same-priority preemption behaves as in upstream Kueue. " +
		"A Go duration, for example 30m or 4h."
)

const (
	preemptMinRuntimeDescription = "preemptMinRuntime is how long a workload runs, from the lastTransitionTime of its " +
		"Admitted condition, before a workload of its own ClusterQueue may preempt it (kueue-timeshare). Unset: " +
		"inherited from the parent Cohort, then the manager's defaultPreemptMinRuntime; 0s: no protection. " +
		"A Go duration, for example 10m."
	reclaimMinRuntimeDescription = "reclaimMinRuntime is how long a workload runs, from the lastTransitionTime of its " +
		"Admitted condition, before another ClusterQueue of the cohort tree may reclaim its quota (kueue-timeshare). " +
		"Looked up from the child of the lowest common ancestor on the victim's side (reclaimResolveMethod LCA) or " +
		"from the victim's ClusterQueue (Queue), walking up; then the manager's defaultReclaimMinRuntime. " +
		"0s: no protection. A Go duration, for example 10m."
	cohortPreemptionDescription = "preemption holds min-runtime protection inherited by the Cohort's ClusterQueues " +
		"and child Cohorts (kueue-timeshare)."
)

// durationPattern accepts Go duration strings; the sign and the minimum are left to the webhook,
// whose message says what the rule is.
const durationPattern = `^-?([0-9]+(\.[0-9]+)?(ns|us|µs|ms|s|m|h))+$`

// WithinClusterQueueConfigSchema is the OpenAPI schema of spec.preemption.withinClusterQueueConfig.
func WithinClusterQueueConfigSchema() apiextensionsv1.JSONSchemaProps {
	return apiextensionsv1.JSONSchemaProps{
		Type:        "object",
		Description: withinClusterQueueConfigDescription,
		Properties: map[string]apiextensionsv1.JSONSchemaProps{
			"minAdmitDuration": {
				Type:        "string",
				Description: minAdmitDurationDescription,
				Pattern:     durationPattern,
			},
		},
	}
}

// MinRuntimeSchemaProperties are the min-runtime fields, for spec.preemption of ClusterQueues
// and Cohorts.
func MinRuntimeSchemaProperties() map[string]apiextensionsv1.JSONSchemaProps {
	return map[string]apiextensionsv1.JSONSchemaProps{
		"preemptMinRuntime": {Type: "string", Description: preemptMinRuntimeDescription, Pattern: durationPattern},
		"reclaimMinRuntime": {Type: "string", Description: reclaimMinRuntimeDescription, Pattern: durationPattern},
	}
}

// CohortPreemptionSchema is the OpenAPI schema of a Cohort's spec.preemption.
func CohortPreemptionSchema() apiextensionsv1.JSONSchemaProps {
	return apiextensionsv1.JSONSchemaProps{
		Type:        "object",
		Description: cohortPreemptionDescription,
		Properties:  MinRuntimeSchemaProperties(),
	}
}
