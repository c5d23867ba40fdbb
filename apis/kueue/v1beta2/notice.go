package v1beta2

import (
	"encoding/json"
	"fmt"
	"time"

	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/validation/field"
)

// MaximumNoticePeriod bounds noticePeriod. While a notice runs, the room it will free stays
// promised to the preemptor and nobody else is admitted into it; a longer notice would keep a
// preemptor, and every workload queued behind it, waiting for longer than a checkpoint takes.
const MaximumNoticePeriod = time.Hour

func init() {
	sharedGroups = append(sharedGroups, sharedGroup{properties: NoticeSchemaProperties,
		columns: []apiextensionsv1.CustomResourceColumnDefinition{{Name: "Notice Period", Type: "string", Priority: 1, JSONPath: ".spec.preemption.noticePeriod",
			Description: "Time a victim keeps running, with the deadline announced, before its eviction, where set here (kueue-timeshare)"}}})
}

const (
	noticePeriodDescription = "noticePeriod is how long a workload chosen as a victim of a time-based " +
		"(InClusterQueueTimeBased) or expected-runtime (InClusterQueueExpectedRuntime) preemption keeps running, " +
		"with the deadline announced, before it is evicted, so that it can save its work (kueue-timeshare). " +
		"Unset: inherited from the parent Cohort, then the manager's defaultNoticePeriod; 0s: no notice. At most 1h. " +
		"Needs the PreemptionNotice feature gate (beta, on). A Go duration, for example 5m."
	noticeOnPriorityPreemptionDescription = "noticeOnPriorityPreemption extends noticePeriod to preemption by a " +
		"higher-priority workload of the victim's own ClusterQueue (InClusterQueue) (kueue-timeshare). Unset: inherited " +
		"from the parent Cohort; default false. Needs the PreemptionNotice feature gate (beta, on)."
	noticeOnReclaimDescription = "noticeOnReclaim extends noticePeriod to preemption by another ClusterQueue of the " +
		"cohort tree (InCohortReclamation, InCohortReclaimWhileBorrowing, InCohortFairSharing) (kueue-timeshare). " +
		"Unset: inherited from the parent Cohort; default false. Needs the PreemptionNotice feature gate (beta, on)."
)

// noticePeriodMaximumRule repeats the webhook's bound (see durationPattern's rules).
var noticePeriodMaximumRule = apiextensionsv1.ValidationRule{
	Rule:    fmt.Sprintf("!self.matches(%s) || duration(self) <= duration('%s')", celString(durationPattern), MaximumNoticePeriod),
	Message: fmt.Sprintf("must be at most %s", MaximumNoticePeriod),
}

// NoticeSchemaProperties are the notice fields, for spec.preemption of ClusterQueues and Cohorts.
func NoticeSchemaProperties() map[string]apiextensionsv1.JSONSchemaProps {
	return map[string]apiextensionsv1.JSONSchemaProps{
		"noticePeriod": {Type: "string", Description: noticePeriodDescription, Pattern: durationPattern,
			XValidations: apiextensionsv1.ValidationRules{notNegativeRule, noticePeriodMaximumRule}},
		"noticeOnPriorityPreemption": {Type: "boolean", Description: noticeOnPriorityPreemptionDescription},
		"noticeOnReclaim":            {Type: "boolean", Description: noticeOnReclaimDescription},
	}
}

// NoticeSettings give a preempted workload time to save its work before it is evicted. A
// ClusterQueue or Cohort that leaves one unset inherits it from its parent cohort; noticePeriod
// then comes from the manager configuration. They act while the PreemptionNotice feature gate is
// on (docs/preemption-notice.md).
type NoticeSettings struct {
	// noticePeriod is how long a workload chosen as a victim keeps running, with the deadline
	// announced, before it is evicted. It applies to time-based (InClusterQueueTimeBased) and
	// expected-runtime (InClusterQueueExpectedRuntime) preemptions; 0s: no notice.
	// +optional
	NoticePeriod *metav1.Duration `json:"noticePeriod,omitempty"`
	// noticeOnPriorityPreemption extends the notice to preemption by a higher-priority workload of
	// the victim's own ClusterQueue (InClusterQueue).
	// +optional
	NoticeOnPriorityPreemption *bool `json:"noticeOnPriorityPreemption,omitempty"`
	// noticeOnReclaim extends the notice to preemption by another ClusterQueue of the cohort tree
	// (InCohortReclamation, InCohortReclaimWhileBorrowing, InCohortFairSharing).
	// +optional
	NoticeOnReclaim *bool `json:"noticeOnReclaim,omitempty"`
}

// validate checks the range of noticePeriod; the booleans need no check.
func (n *NoticeSettings) validate(path *field.Path) field.ErrorList {
	d := n.NoticePeriod
	switch {
	case d == nil:
		return nil
	case d.Duration < 0:
		return field.ErrorList{field.Invalid(path.Child("noticePeriod"), d.Duration.String(), "must not be negative")}
	case d.Duration > MaximumNoticePeriod:
		return field.ErrorList{field.Invalid(path.Child("noticePeriod"), d.Duration.String(), fmt.Sprintf("must be at most %s", MaximumNoticePeriod))}
	}
	return nil
}

// InUse lists, as Forbidden errors with detail, the settings that would change what happens to a
// victim: a positive noticePeriod, or an extension turned on. Zero and false are not listed, since
// they ask for what happens anyway; nor is a setting equal to the one in old (the stored object an
// update replaces; nil on create), so that an object stored with a setting can still be updated
// otherwise (finalizers, labels, other fields) once the setting is no longer allowed.
func (n NoticeSettings) InUse(path *field.Path, detail string, old *NoticeSettings) field.ErrorList {
	if old == nil {
		old = &NoticeSettings{}
	}
	var errs field.ErrorList
	if d := n.NoticePeriod; d != nil && d.Duration > 0 && (old.NoticePeriod == nil || old.NoticePeriod.Duration != d.Duration) {
		errs = append(errs, field.Forbidden(path.Child("noticePeriod"), detail))
	}
	for _, b := range []struct {
		name     string
		new, old *bool
	}{
		{"noticeOnPriorityPreemption", n.NoticeOnPriorityPreemption, old.NoticeOnPriorityPreemption},
		{"noticeOnReclaim", n.NoticeOnReclaim, old.NoticeOnReclaim},
	} {
		if b.new != nil && *b.new && (b.old == nil || !*b.old) {
			errs = append(errs, field.Forbidden(path.Child(b.name), detail))
		}
	}
	return errs
}

// ParseNoticeSettings reads the notice settings from a ClusterQueue's or a Cohort's spec (they
// are the same in both). Errors name the field.
func ParseNoticeSettings(spec json.RawMessage) (NoticeSettings, error) {
	var n NoticeSettings
	fields, err := preemptionFields(spec)
	if err != nil || fields == nil {
		return n, err
	}
	err = n.parse(fields)
	return n, err
}

func (n *NoticeSettings) parse(fields map[string]json.RawMessage) error {
	if raw, ok := fields["noticePeriod"]; ok {
		if err := json.Unmarshal(raw, &n.NoticePeriod); err != nil {
			return fmt.Errorf("spec.preemption.noticePeriod: %w", err)
		}
	}
	for _, b := range []struct {
		name string
		dst  **bool
	}{{"noticeOnPriorityPreemption", &n.NoticeOnPriorityPreemption}, {"noticeOnReclaim", &n.NoticeOnReclaim}} {
		if raw, ok := fields[b.name]; ok {
			if err := json.Unmarshal(raw, b.dst); err != nil {
				return fmt.Errorf("spec.preemption.%s: %w", b.name, err)
			}
		}
	}
	return nil
}
