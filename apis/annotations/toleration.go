package annotations

import (
	"fmt"
	"strconv"
	"time"

	"k8s.io/apimachinery/pkg/util/validation/field"
)

// Annotations on a WorkloadPriorityClass or a PriorityClass that declare preemption toleration.
const (
	MinimumPreemptablePriority = "preemption-toleration.scheduling.x-k8s.io/minimum-preemptable-priority"
	TolerationSeconds          = "preemption-toleration.scheduling.x-k8s.io/toleration-seconds"
)

// Toleration is a priority class's preemption toleration: its workloads are not preempted by a
// preemptor whose priority is below MinimumPreemptablePriority, for Duration after admission
// (Forever: for as long as they run).
type Toleration struct {
	MinimumPreemptablePriority int64
	Duration                   time.Duration
	Forever                    bool
}

// Tolerates reports whether the toleration is in force at all (some toleration time).
func (t Toleration) Tolerates() bool { return t.Forever || t.Duration > 0 }

// String renders the toleration for messages.
func (t Toleration) String() string {
	switch {
	case t.Forever:
		return fmt.Sprintf("tolerates priorities below %d forever", t.MinimumPreemptablePriority)
	case t.Duration > 0:
		return fmt.Sprintf("tolerates priorities below %d for %s", t.MinimumPreemptablePriority, t.Duration)
	default:
		return "no toleration"
	}
}

// ParseToleration reads the toleration annotations of a class with priority value. Without the
// annotations there is no toleration; the errors name the annotation and the rule. A toleration
// time above MaxDuration is read as MaxDuration.
func ParseToleration(annotations map[string]string, value int32) (Toleration, field.ErrorList) {
	path := field.NewPath("metadata", "annotations")
	t := Toleration{MinimumPreemptablePriority: int64(value) + 1}
	var errs field.ErrorList
	if s, ok := annotations[MinimumPreemptablePriority]; ok {
		v, err := strconv.ParseInt(s, 10, 32)
		if err != nil {
			errs = append(errs, field.Invalid(path.Key(MinimumPreemptablePriority), s, "must be a 32-bit integer"))
		} else {
			t.MinimumPreemptablePriority = v
		}
	}
	if s, ok := annotations[TolerationSeconds]; ok {
		v, err := strconv.ParseInt(s, 10, 64)
		switch {
		case err != nil:
			errs = append(errs, field.Invalid(path.Key(TolerationSeconds), s, "must be a 64-bit integer (seconds; negative: forever)"))
		case v < 0:
			t.Forever = true
		case v > int64(MaxDuration/time.Second):
			t.Duration = MaxDuration
		default:
			t.Duration = time.Duration(v) * time.Second
		}
	}
	if len(errs) > 0 {
		return Toleration{}, errs
	}
	return t, nil
}
