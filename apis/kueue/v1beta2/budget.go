package v1beta2

import (
	"encoding/json"
	"fmt"
	"time"

	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/validation/field"
	"k8s.io/utils/ptr"
)

// The bounds of a budget's period: shorter than a minute would refill faster than preemptions
// take effect; longer than a week would need a ledger that outlives most restarts.
const (
	MinimumBudgetPeriod = time.Minute
	MaximumBudgetPeriod = 7 * 24 * time.Hour
)

func init() {
	sharedGroups = append(sharedGroups, sharedGroup{properties: BudgetSchemaProperties,
		columns: []apiextensionsv1.CustomResourceColumnDefinition{{Name: "Preemption Budget", Type: "integer", Priority: 1,
			JSONPath:    ".spec.preemption.preemptionBudget.maxPreemptions",
			Description: "Preemptions of the workloads below this queue allowed per period, where set here (kueue-timeshare)"}}})
}

// PreemptionBudget caps how many workloads below a ClusterQueue or Cohort are preempted per
// period: a token bucket of burst tokens, refilled at maxPreemptions per period. Time-sharing
// turns neither spend it nor wait for it. It acts while the PreemptionBudget feature gate is on
// (docs/preemption-budget.md).
type PreemptionBudget struct {
	// maxPreemptions is how many tokens return per period; at least 1.
	MaxPreemptions int32 `json:"maxPreemptions"`
	// period is the refill period, from 1m to 7d.
	Period metav1.Duration `json:"period"`
	// burst is the bucket's size; at least maxPreemptions, which it defaults to.
	// +optional
	Burst *int32 `json:"burst,omitempty"`
	// perWorkload caps how often one workload below is preempted per period; the nearest setting
	// up the tree applies.
	// +optional
	PerWorkload *WorkloadBudget `json:"perWorkload,omitempty"`
}

// WorkloadBudget caps how often one workload is preempted per period.
type WorkloadBudget struct {
	// maxPreemptions is how many preemptions of one workload are allowed per period; at least 1.
	MaxPreemptions int32 `json:"maxPreemptions"`
	// period is from 1m to 7d.
	Period metav1.Duration `json:"period"`
}

// BurstOrDefault is burst, or maxPreemptions when unset.
func (b *PreemptionBudget) BurstOrDefault() int32 {
	return ptr.Deref(b.Burst, b.MaxPreemptions)
}

// BudgetSettings hold the preemption budget of a ClusterQueue or Cohort.
type BudgetSettings struct {
	// preemptionBudget caps the preemptions of the workloads below this queue.
	// +optional
	PreemptionBudget *PreemptionBudget `json:"preemptionBudget,omitempty"`
}

// Validate checks the budget's ranges; path is the budget's own.
func (b *PreemptionBudget) Validate(path *field.Path) field.ErrorList {
	if b == nil {
		return nil
	}
	var errs field.ErrorList
	if b.MaxPreemptions < 1 {
		errs = append(errs, field.Invalid(path.Child("maxPreemptions"), b.MaxPreemptions, "must be at least 1"))
	}
	errs = append(errs, validateBudgetPeriod(path.Child("period"), b.Period.Duration)...)
	if b.Burst != nil && *b.Burst < b.MaxPreemptions {
		errs = append(errs, field.Invalid(path.Child("burst"), *b.Burst, fmt.Sprintf("must be at least maxPreemptions (%d)", b.MaxPreemptions)))
	}
	if w := b.PerWorkload; w != nil {
		if w.MaxPreemptions < 1 {
			errs = append(errs, field.Invalid(path.Child("perWorkload", "maxPreemptions"), w.MaxPreemptions, "must be at least 1"))
		}
		errs = append(errs, validateBudgetPeriod(path.Child("perWorkload", "period"), w.Period.Duration)...)
	}
	return errs
}

func validateBudgetPeriod(path *field.Path, d time.Duration) field.ErrorList {
	if d < MinimumBudgetPeriod || d > MaximumBudgetPeriod {
		return field.ErrorList{field.Invalid(path, d.String(), fmt.Sprintf("must be from %s to %s", MinimumBudgetPeriod, MaximumBudgetPeriod))}
	}
	return nil
}

func (s *BudgetSettings) validate(path *field.Path) field.ErrorList {
	return s.PreemptionBudget.Validate(path.Child("preemptionBudget"))
}

func (s *BudgetSettings) parse(fields map[string]json.RawMessage) error {
	raw, ok := fields["preemptionBudget"]
	if !ok {
		return nil
	}
	if err := json.Unmarshal(raw, &s.PreemptionBudget); err != nil {
		return fmt.Errorf("spec.preemption.preemptionBudget: %w", err)
	}
	return nil
}

// ParsePreemptionBudget reads spec.preemption.preemptionBudget from a ClusterQueue's or a Cohort's
// spec (it is the same in both); nil when unset. Errors name the field.
func ParsePreemptionBudget(spec json.RawMessage) (*PreemptionBudget, error) {
	fields, err := preemptionFields(spec)
	if err != nil || fields == nil {
		return nil, err
	}
	var s BudgetSettings
	err = s.parse(fields)
	return s.PreemptionBudget, err
}

const (
	preemptionBudgetDescription = "preemptionBudget caps how many workloads below this queue are preempted per " +
		"period: a token bucket of burst tokens refilled at maxPreemptions per period; a victim needs a token from every " +
		"budget on its path. Time-sharing turns neither spend nor wait for it (kueue-timeshare). Needs the " +
		"PreemptionBudget feature gate (alpha, off)."
	budgetMaxDescription    = "maxPreemptions is how many preemptions are allowed per period; at least 1."
	budgetPeriodDescription = "period is the refill period, from 1m to 168h. A Go duration, for example 1h."
	budgetBurstDescription  = "burst is the size of the bucket; at least maxPreemptions, which it defaults to."
	perWorkloadDescription  = "perWorkload caps how often one workload below this queue is preempted per period; " +
		"the nearest setting up the tree applies."
)

// budgetPeriodRule repeats the webhook's bounds.
var budgetPeriodRule = apiextensionsv1.ValidationRule{
	Rule: fmt.Sprintf("!self.matches(%s) || (duration(self) >= duration('%s') && duration(self) <= duration('%s'))",
		celString(durationPattern), MinimumBudgetPeriod, MaximumBudgetPeriod),
	Message: fmt.Sprintf("must be from %s to %s", MinimumBudgetPeriod, MaximumBudgetPeriod),
}

// BudgetSchemaProperties are the budget field, for spec.preemption of ClusterQueues and Cohorts.
func BudgetSchemaProperties() map[string]apiextensionsv1.JSONSchemaProps {
	one := float64(1)
	period := apiextensionsv1.JSONSchemaProps{Type: "string", Description: budgetPeriodDescription, Pattern: durationPattern,
		XValidations: apiextensionsv1.ValidationRules{budgetPeriodRule}}
	maxPreemptions := apiextensionsv1.JSONSchemaProps{Type: "integer", Format: "int32", Minimum: &one, Description: budgetMaxDescription}
	return map[string]apiextensionsv1.JSONSchemaProps{
		"preemptionBudget": {
			Type: "object", Description: preemptionBudgetDescription, Required: []string{"maxPreemptions", "period"},
			Properties: map[string]apiextensionsv1.JSONSchemaProps{
				"maxPreemptions": maxPreemptions,
				"period":         period,
				"burst":          {Type: "integer", Format: "int32", Minimum: &one, Description: budgetBurstDescription},
				"perWorkload": {Type: "object", Description: perWorkloadDescription, Required: []string{"maxPreemptions", "period"},
					Properties: map[string]apiextensionsv1.JSONSchemaProps{"maxPreemptions": maxPreemptions, "period": period}},
			},
			XValidations: apiextensionsv1.ValidationRules{{
				Rule: "!has(self.burst) || self.burst >= self.maxPreemptions", Message: "burst must be at least maxPreemptions", FieldPath: ".burst",
			}},
		},
	}
}
