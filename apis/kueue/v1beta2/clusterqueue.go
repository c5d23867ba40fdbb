package v1beta2

import (
	"encoding/json"
	"fmt"
	"slices"
	"strings"
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
	MinRuntimeSettings       `json:",inline"`
	NoticeSettings           `json:",inline"`
	BudgetSettings           `json:",inline"`
}

// MinRuntimeSettings protect running workloads from preemption for a while after admission. A
// ClusterQueue or Cohort that leaves one unset inherits it from its parent cohort, then from the
// manager configuration; 0s means no protection (and stops the inheritance).
type MinRuntimeSettings struct {
	// preemptMinRuntime is how long a workload runs, from its Admitted condition, before a workload
	// of its own ClusterQueue may preempt it.
	// +optional
	PreemptMinRuntime *metav1.Duration `json:"preemptMinRuntime,omitempty"`
	// reclaimMinRuntime is how long a workload runs before another ClusterQueue of the cohort tree
	// may reclaim its quota (see the manager's reclaimResolveMethod for where it is looked up).
	// +optional
	ReclaimMinRuntime *metav1.Duration `json:"reclaimMinRuntime,omitempty"`
}

// validate checks that the durations are not negative.
func (m *MinRuntimeSettings) validate(path *field.Path) field.ErrorList {
	var errs field.ErrorList
	for name, d := range map[string]*metav1.Duration{"preemptMinRuntime": m.PreemptMinRuntime, "reclaimMinRuntime": m.ReclaimMinRuntime} {
		if d != nil && d.Duration < 0 {
			errs = append(errs, field.Invalid(path.Child(name), d.Duration.String(), "must not be negative"))
		}
	}
	// Map order is random; messages must not be.
	slices.SortFunc(errs, func(a, b *field.Error) int { return strings.Compare(a.Field, b.Field) })
	return errs
}

// CohortPreemption is a Cohort's spec.preemption, which Kueue's Cohort does not have.
type CohortPreemption struct {
	MinRuntimeSettings `json:",inline"`
	NoticeSettings     `json:",inline"`
	BudgetSettings     `json:",inline"`
}

// parseShared reads the spec.preemption settings ClusterQueues and Cohorts have alike.
func parseShared(fields map[string]json.RawMessage, m *MinRuntimeSettings, n *NoticeSettings, b *BudgetSettings) error {
	if err := m.parse(fields); err != nil {
		return err
	}
	if err := n.parse(fields); err != nil {
		return err
	}
	return b.parse(fields)
}

// validateShared checks the spec.preemption settings ClusterQueues and Cohorts have alike.
func validateShared(path *field.Path, m *MinRuntimeSettings, n *NoticeSettings, b *BudgetSettings) field.ErrorList {
	return append(append(m.validate(path), n.validate(path)...), b.validate(path)...)
}

// CohortExtension is the part of a Cohort's spec that Kueue's own type lacks.
type CohortExtension struct {
	Preemption *CohortPreemption `json:"preemption,omitempty"`
}

// MinRuntimes returns the Cohort's min-runtime settings; nil fields are unset.
func (e *CohortExtension) MinRuntimes() MinRuntimeSettings {
	if e == nil || e.Preemption == nil {
		return MinRuntimeSettings{}
	}
	return e.Preemption.MinRuntimeSettings
}

// Notice returns the Cohort's notice settings; nil fields are unset.
func (e *CohortExtension) Notice() NoticeSettings {
	if e == nil || e.Preemption == nil {
		return NoticeSettings{}
	}
	return e.Preemption.NoticeSettings
}

// ParseCohortExtension reads the extension fields from a Cohort's spec as JSON. Errors name the field.
func ParseCohortExtension(spec json.RawMessage) (*CohortExtension, error) {
	ext := &CohortExtension{}
	fields, err := preemptionFields(spec)
	if err != nil || fields == nil {
		return ext, err
	}
	p := &CohortPreemption{}
	if err := parseShared(fields, &p.MinRuntimeSettings, &p.NoticeSettings, &p.BudgetSettings); err != nil {
		return nil, err
	}
	ext.Preemption = p
	return ext, nil
}

// ValidateCohortExtension checks a Cohort's extension fields.
func ValidateCohortExtension(ext *CohortExtension) field.ErrorList {
	if ext == nil || ext.Preemption == nil {
		return nil
	}
	p := ext.Preemption
	return validateShared(field.NewPath("spec", "preemption"), &p.MinRuntimeSettings, &p.NoticeSettings, &p.BudgetSettings)
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

// MinRuntimes returns the ClusterQueue's min-runtime settings; nil fields are unset.
func (e *ClusterQueueExtension) MinRuntimes() MinRuntimeSettings {
	if e == nil || e.Preemption == nil {
		return MinRuntimeSettings{}
	}
	return e.Preemption.MinRuntimeSettings
}

// Notice returns the ClusterQueue's notice settings; nil fields are unset.
func (e *ClusterQueueExtension) Notice() NoticeSettings {
	if e == nil || e.Preemption == nil {
		return NoticeSettings{}
	}
	return e.Preemption.NoticeSettings
}

// ParseClusterQueueExtension reads the extension fields from a ClusterQueue's spec as JSON (the
// raw object, not upstream's decoded type, which drops them). Errors name the field.
func ParseClusterQueueExtension(spec json.RawMessage) (*ClusterQueueExtension, error) {
	ext := &ClusterQueueExtension{}
	fields, err := preemptionFields(spec)
	if err != nil || fields == nil {
		return ext, err
	}
	p := &ClusterQueuePreemptionExtension{}
	if raw, ok := fields["withinClusterQueueConfig"]; ok {
		if err := json.Unmarshal(raw, &p.WithinClusterQueueConfig); err != nil {
			return nil, fmt.Errorf("spec.preemption.withinClusterQueueConfig: %w", err)
		}
	}
	if err := parseShared(fields, &p.MinRuntimeSettings, &p.NoticeSettings, &p.BudgetSettings); err != nil {
		return nil, err
	}
	ext.Preemption = p
	return ext, nil
}

// preemptionFields splits spec.preemption into its fields; nil when there is none.
func preemptionFields(spec json.RawMessage) (map[string]json.RawMessage, error) {
	if len(spec) == 0 {
		return nil, nil
	}
	var top struct {
		Preemption map[string]json.RawMessage `json:"preemption"`
	}
	if err := json.Unmarshal(spec, &top); err != nil {
		return nil, fmt.Errorf("spec.preemption: %w", err)
	}
	return top.Preemption, nil
}

func (m *MinRuntimeSettings) parse(fields map[string]json.RawMessage) error {
	for name, dst := range map[string]**metav1.Duration{"preemptMinRuntime": &m.PreemptMinRuntime, "reclaimMinRuntime": &m.ReclaimMinRuntime} {
		if raw, ok := fields[name]; ok {
			if err := json.Unmarshal(raw, dst); err != nil {
				return fmt.Errorf("spec.preemption.%s: %w", name, err)
			}
		}
	}
	return nil
}

// ValidateClusterQueueExtension checks the extension fields against the rest of the spec.
func ValidateClusterQueueExtension(ext *ClusterQueueExtension, preemption *kueue.ClusterQueuePreemption) field.ErrorList {
	if ext == nil || ext.Preemption == nil {
		return nil
	}
	p := ext.Preemption
	errs := validateShared(field.NewPath("spec", "preemption"), &p.MinRuntimeSettings, &p.NoticeSettings, &p.BudgetSettings)
	if ext.Preemption.WithinClusterQueueConfig == nil {
		return errs
	}
	path := field.NewPath("spec", "preemption", "withinClusterQueueConfig")
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
