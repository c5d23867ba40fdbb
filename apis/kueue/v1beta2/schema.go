package v1beta2

import (
	"fmt"
	"maps"

	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"

	kueue "sigs.k8s.io/kueue/apis/kueue/v1beta2"
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
	cohortPreemptionDescription = "preemption holds min-runtime protection and notice settings inherited by the " +
		"Cohort's ClusterQueues and child Cohorts (kueue-timeshare)."
)

// durationPattern accepts Go duration strings; the sign and the minimum are checked by the
// rules below, whose messages say what the rule is.
const durationPattern = `^-?([0-9]+(\.[0-9]+)?(ns|us|µs|ms|s|m|h))+$`

// The schema's rules repeat the webhook's (ValidateClusterQueueExtension,
// ValidateCohortExtension) with the same messages, so that the API server holds them itself,
// without the manager's webhook (a dry run where only the CRDs are installed, schema-aware
// tools). CEL's duration() reads Go duration strings. A value that is not a duration fails the
// pattern only: the rules let it pass rather than add an error of their own.
var (
	minAdmitDurationRule = apiextensionsv1.ValidationRule{
		Rule:    fmt.Sprintf("!self.matches(%s) || duration(self) >= duration('%s')", celString(durationPattern), MinimumMinAdmitDuration),
		Message: fmt.Sprintf("must be at least %s", MinimumMinAdmitDuration),
	}
	notNegativeRule = apiextensionsv1.ValidationRule{
		Rule:    fmt.Sprintf("!self.matches(%s) || duration(self) >= duration('0s')", celString(durationPattern)),
		Message: "must not be negative",
	}
	// withinClusterQueueConfigRule sits on spec.preemption, where the policy it depends on is.
	withinClusterQueueConfigRule = apiextensionsv1.ValidationRule{
		Rule: fmt.Sprintf("!has(self.withinClusterQueueConfig) || (has(self.withinClusterQueue) && self.withinClusterQueue == '%s')",
			kueue.PreemptionPolicyLowerOrNewerEqualPriority),
		MessageExpression: fmt.Sprintf("'requires spec.preemption.withinClusterQueue to be %s, not ' + (has(self.withinClusterQueue) ? self.withinClusterQueue : '%s')",
			kueue.PreemptionPolicyLowerOrNewerEqualPriority, kueue.PreemptionPolicyNever),
		FieldPath: ".withinClusterQueueConfig",
	}
)

// WithinClusterQueueConfigSchema is the OpenAPI schema of spec.preemption.withinClusterQueueConfig.
func WithinClusterQueueConfigSchema() apiextensionsv1.JSONSchemaProps {
	return apiextensionsv1.JSONSchemaProps{
		Type:        "object",
		Description: withinClusterQueueConfigDescription,
		Properties: map[string]apiextensionsv1.JSONSchemaProps{
			"minAdmitDuration": {
				Type:         "string",
				Description:  minAdmitDurationDescription,
				Pattern:      durationPattern,
				XValidations: apiextensionsv1.ValidationRules{minAdmitDurationRule},
			},
		},
	}
}

// WithinClusterQueueConfigParentRules go on spec.preemption of a ClusterQueue, beside upstream's.
func WithinClusterQueueConfigParentRules() apiextensionsv1.ValidationRules {
	return apiextensionsv1.ValidationRules{withinClusterQueueConfigRule}
}

// MinRuntimeSchemaProperties are the min-runtime fields, for spec.preemption of ClusterQueues
// and Cohorts.
func MinRuntimeSchemaProperties() map[string]apiextensionsv1.JSONSchemaProps {
	prop := func(description string) apiextensionsv1.JSONSchemaProps {
		return apiextensionsv1.JSONSchemaProps{Type: "string", Description: description, Pattern: durationPattern,
			XValidations: apiextensionsv1.ValidationRules{notNegativeRule}}
	}
	return map[string]apiextensionsv1.JSONSchemaProps{
		"preemptMinRuntime": prop(preemptMinRuntimeDescription),
		"reclaimMinRuntime": prop(reclaimMinRuntimeDescription),
	}
}

// CohortPreemptionSchema is the OpenAPI schema of a Cohort's spec.preemption.
func CohortPreemptionSchema() apiextensionsv1.JSONSchemaProps {
	props := MinRuntimeSchemaProperties()
	for _, g := range sharedGroups {
		maps.Copy(props, g.properties())
	}
	return apiextensionsv1.JSONSchemaProps{
		Type:        "object",
		Description: cohortPreemptionDescription,
		Properties:  props,
	}
}

// celString quotes s as a CEL raw string literal (no escapes inside).
func celString(s string) string {
	return "r'" + s + "'"
}
