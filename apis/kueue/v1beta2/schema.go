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
