package annotations

import (
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"k8s.io/apimachinery/pkg/util/validation/field"
)

func TestParseToleration(t *testing.T) {
	path := field.NewPath("metadata", "annotations")
	cases := map[string]struct {
		annotations map[string]string
		value       int32
		want        Toleration
		wantErrs    field.ErrorList
	}{
		"no annotations: no toleration": {
			value: 8000, want: Toleration{MinimumPreemptablePriority: 8001},
		},
		"low-non-preempted: forever below 10000": {
			annotations: map[string]string{MinimumPreemptablePriority: "10000", TolerationSeconds: "-1"}, value: 8000,
			want: Toleration{MinimumPreemptablePriority: 10000, Forever: true},
		},
		"low-non-preempted-10min": {
			annotations: map[string]string{MinimumPreemptablePriority: "10000", TolerationSeconds: "600"}, value: 8000,
			want: Toleration{MinimumPreemptablePriority: 10000, Duration: 10 * time.Minute},
		},
		"seconds only: defaults to value + 1": {
			annotations: map[string]string{TolerationSeconds: "60"}, value: 5,
			want: Toleration{MinimumPreemptablePriority: 6, Duration: time.Minute},
		},
		"zero seconds: no toleration": {
			annotations: map[string]string{MinimumPreemptablePriority: "100", TolerationSeconds: "0"}, value: 5,
			want: Toleration{MinimumPreemptablePriority: 100},
		},
		"not a number": {
			annotations: map[string]string{MinimumPreemptablePriority: "high"},
			wantErrs:    field.ErrorList{field.Invalid(path.Key(MinimumPreemptablePriority), "high", "must be a 32-bit integer")},
		},
		"beyond int32": {
			annotations: map[string]string{MinimumPreemptablePriority: "3000000000"},
			wantErrs:    field.ErrorList{field.Invalid(path.Key(MinimumPreemptablePriority), "3000000000", "must be a 32-bit integer")},
		},
		"seconds not an integer": {
			annotations: map[string]string{TolerationSeconds: "10m"},
			wantErrs:    field.ErrorList{field.Invalid(path.Key(TolerationSeconds), "10m", "must be a 64-bit integer (seconds; negative: forever)")},
		},
		"ten years: kept": {
			annotations: map[string]string{TolerationSeconds: "315360000"}, value: 5,
			want: Toleration{MinimumPreemptablePriority: 6, Duration: MaxDuration},
		},
		"a second over ten years: the maximum": {
			annotations: map[string]string{TolerationSeconds: "315360001"}, value: 5,
			want: Toleration{MinimumPreemptablePriority: 6, Duration: MaxDuration},
		},
		"seconds beyond a duration's range: the maximum": {
			annotations: map[string]string{TolerationSeconds: "9223372036854775807"}, value: 5,
			want: Toleration{MinimumPreemptablePriority: 6, Duration: MaxDuration},
		},
		"seconds beyond int64": {
			annotations: map[string]string{TolerationSeconds: "9223372036854775808"},
			wantErrs:    field.ErrorList{field.Invalid(path.Key(TolerationSeconds), "9223372036854775808", "must be a 64-bit integer (seconds; negative: forever)")},
		},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			got, errs := ParseToleration(tc.annotations, tc.value)
			if diff := cmp.Diff(tc.wantErrs, errs); diff != "" {
				t.Errorf("errors (-want +got):\n%s", diff)
			}
			if diff := cmp.Diff(tc.want, got); diff != "" {
				t.Errorf("toleration (-want +got):\n%s", diff)
			}
		})
	}
}
