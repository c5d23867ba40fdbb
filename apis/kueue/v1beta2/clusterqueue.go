package v1beta2

import (
	"encoding/json"
	"fmt"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/validation/field"

	kueue "sigs.k8s.io/kueue/apis/kueue/v1beta2"
)

// MinimumMinAdmitDuration is the smallest minAdmitDuration accepted: shorter windows would let
// workloads be preempted before they make progress.
const MinimumMinAdmitDuration = time.Minute

// WithinClusterQueueConfig tunes withinClusterQueue preemption of a ClusterQueue (KEP-8522).
type WithinClusterQueueConfig struct {
	// minAdmitDuration is how long a workload keeps its quota before same-priority workloads of the
	// same ClusterQueue may preempt it, measured from its QuotaReserved condition's
	// lastTransitionTime. Only valid with withinClusterQueue: LowerOrNewerEqualPriority; at least 1m.
	// Without it, same-priority preemption behaves as in upstream Kueue.
	// +optional
	MinAdmitDuration *metav1.Duration `json:"minAdmitDuration,omitempty"`
}

// ClusterQueuePreemptionExtension is the part of spec.preemption that Kueue's own type lacks.
type ClusterQueuePreemptionExtension struct {
	// withinClusterQueueConfig provides additional configuration for withinClusterQueue.
	// +optional
	WithinClusterQueueConfig *WithinClusterQueueConfig `json:"withinClusterQueueConfig,omitempty"`
}

// ClusterQueueExtension is the part of a ClusterQueue's spec that Kueue's own type lacks.
type ClusterQueueExtension struct {
	Preemption *ClusterQueuePreemptionExtension `json:"preemption,omitempty"`
}

// MinAdmitDuration returns the configured window, or 0 when none is set.
func (e *ClusterQueueExtension) MinAdmitDuration() time.Duration {
	if e == nil || e.Preemption == nil || e.Preemption.WithinClusterQueueConfig == nil || e.Preemption.WithinClusterQueueConfig.MinAdmitDuration == nil {
		return 0
	}
	return e.Preemption.WithinClusterQueueConfig.MinAdmitDuration.Duration
}

// ParseClusterQueueExtension reads the extension fields from a ClusterQueue's spec as JSON (the
// raw object, not upstream's decoded type, which drops them).
func ParseClusterQueueExtension(spec json.RawMessage) (*ClusterQueueExtension, error) {
	ext := &ClusterQueueExtension{}
	if len(spec) == 0 {
		return ext, nil
	}
	if err := json.Unmarshal(spec, ext); err != nil {
		return nil, fmt.Errorf("spec.preemption.withinClusterQueueConfig: %w", err)
	}
	return ext, nil
}

// ValidateClusterQueueExtension checks the extension fields against the rest of the spec.
func ValidateClusterQueueExtension(ext *ClusterQueueExtension, preemption *kueue.ClusterQueuePreemption) field.ErrorList {
	if ext == nil || ext.Preemption == nil || ext.Preemption.WithinClusterQueueConfig == nil {
		return nil
	}
	path := field.NewPath("spec", "preemption", "withinClusterQueueConfig")
	var errs field.ErrorList
	policy := kueue.PreemptionPolicyNever
	if preemption != nil && preemption.WithinClusterQueue != "" {
		policy = preemption.WithinClusterQueue
	}
	if policy != kueue.PreemptionPolicyLowerOrNewerEqualPriority {
		errs = append(errs, field.Invalid(path, policy,
			fmt.Sprintf("requires spec.preemption.withinClusterQueue to be %s, not %s", kueue.PreemptionPolicyLowerOrNewerEqualPriority, policy)))
	}
	if d := ext.Preemption.WithinClusterQueueConfig.MinAdmitDuration; d != nil && d.Duration < MinimumMinAdmitDuration {
		errs = append(errs, field.Invalid(path.Child("minAdmitDuration"), d.Duration.String(),
			fmt.Sprintf("must be at least %s", MinimumMinAdmitDuration)))
	}
	return errs
}
