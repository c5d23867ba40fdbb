package v1beta2

import (
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/validation/field"

	kueue "sigs.k8s.io/kueue/apis/kueue/v1beta2"
)

func TestParseAndValidate(t *testing.T) {
	path := field.NewPath("spec", "preemption", "withinClusterQueueConfig")
	cases := map[string]struct {
		spec       string
		within     kueue.PreemptionPolicy
		wantWindow time.Duration
		wantParse  string // substring of the parse error
		wantErrs   field.ErrorList
	}{
		"no extension": {
			spec: `{"preemption":{"withinClusterQueue":"LowerPriority"}}`, within: kueue.PreemptionPolicyLowerPriority,
		},
		"empty spec": {spec: ``},
		"valid window": {
			spec:   `{"preemption":{"withinClusterQueue":"LowerOrNewerEqualPriority","withinClusterQueueConfig":{"minAdmitDuration":"4h"}}}`,
			within: kueue.PreemptionPolicyLowerOrNewerEqualPriority, wantWindow: 4 * time.Hour,
		},
		"exactly one minute is accepted": {
			spec:   `{"preemption":{"withinClusterQueueConfig":{"minAdmitDuration":"1m"}}}`,
			within: kueue.PreemptionPolicyLowerOrNewerEqualPriority, wantWindow: time.Minute,
		},
		"config without a window is accepted and has no effect": {
			spec:   `{"preemption":{"withinClusterQueueConfig":{}}}`,
			within: kueue.PreemptionPolicyLowerOrNewerEqualPriority,
		},
		"too short": {
			spec:   `{"preemption":{"withinClusterQueueConfig":{"minAdmitDuration":"59s"}}}`,
			within: kueue.PreemptionPolicyLowerOrNewerEqualPriority, wantWindow: 59 * time.Second,
			wantErrs: field.ErrorList{field.Invalid(path.Child("minAdmitDuration"), "59s", "must be at least 1m0s")},
		},
		"zero": {
			spec:     `{"preemption":{"withinClusterQueueConfig":{"minAdmitDuration":"0s"}}}`,
			within:   kueue.PreemptionPolicyLowerOrNewerEqualPriority,
			wantErrs: field.ErrorList{field.Invalid(path.Child("minAdmitDuration"), "0s", "must be at least 1m0s")},
		},
		"negative": {
			spec:   `{"preemption":{"withinClusterQueueConfig":{"minAdmitDuration":"-5m"}}}`,
			within: kueue.PreemptionPolicyLowerOrNewerEqualPriority, wantWindow: -5 * time.Minute,
			wantErrs: field.ErrorList{field.Invalid(path.Child("minAdmitDuration"), "-5m0s", "must be at least 1m0s")},
		},
		"incompatible policy is named": {
			spec:   `{"preemption":{"withinClusterQueueConfig":{"minAdmitDuration":"1h"}}}`,
			within: kueue.PreemptionPolicyLowerPriority, wantWindow: time.Hour,
			wantErrs: field.ErrorList{field.Invalid(path, kueue.PreemptionPolicyLowerPriority, "requires spec.preemption.withinClusterQueue to be LowerOrNewerEqualPriority, not LowerPriority")},
		},
		"unset policy counts as Never": {
			spec:     `{"preemption":{"withinClusterQueueConfig":{}}}`,
			wantErrs: field.ErrorList{field.Invalid(path, kueue.PreemptionPolicyNever, "requires spec.preemption.withinClusterQueue to be LowerOrNewerEqualPriority, not Never")},
		},
		"not a duration": {
			spec:      `{"preemption":{"withinClusterQueueConfig":{"minAdmitDuration":"four hours"}}}`,
			wantParse: "invalid duration",
		},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			ext, err := ParseClusterQueueExtension([]byte(tc.spec))
			if tc.wantParse != "" {
				if err == nil || !strings.Contains(err.Error(), tc.wantParse) || !strings.Contains(err.Error(), "spec.preemption.withinClusterQueueConfig") {
					t.Fatalf("parse error %v, want one naming the field and mentioning %q", err, tc.wantParse)
				}
				return
			}
			if err != nil {
				t.Fatalf("unexpected parse error: %v", err)
			}
			if got := ext.MinAdmitDuration(); got != tc.wantWindow {
				t.Errorf("MinAdmitDuration() = %s, want %s", got, tc.wantWindow)
			}
			errs := ValidateClusterQueueExtension(ext, &kueue.ClusterQueuePreemption{WithinClusterQueue: tc.within})
			if diff := cmp.Diff(tc.wantErrs, errs); diff != "" {
				t.Errorf("validation (-want +got):\n%s", diff)
			}
		})
	}
}

func TestMinRuntimeFields(t *testing.T) {
	preemption := field.NewPath("spec", "preemption")
	ten := &metav1.Duration{Duration: 10 * time.Minute}
	cases := map[string]struct {
		spec      string
		want      MinRuntimeSettings
		wantParse string // the field the parse error must name
		wantErrs  field.ErrorList
	}{
		"both set": {
			spec: `{"preemption":{"preemptMinRuntime":"10m","reclaimMinRuntime":"0s"}}`,
			want: MinRuntimeSettings{PreemptMinRuntime: ten, ReclaimMinRuntime: &metav1.Duration{}},
		},
		"unset stays nil, unlike 0s": {
			spec: `{"preemption":{"reclaimMinRuntime":"10m"}}`,
			want: MinRuntimeSettings{ReclaimMinRuntime: ten},
		},
		"no preemption section": {spec: `{"parentName":"root"}`},
		"negative values are named": {
			spec: `{"preemption":{"preemptMinRuntime":"-1s","reclaimMinRuntime":"-2h"}}`,
			want: MinRuntimeSettings{PreemptMinRuntime: &metav1.Duration{Duration: -time.Second}, ReclaimMinRuntime: &metav1.Duration{Duration: -2 * time.Hour}},
			wantErrs: field.ErrorList{
				field.Invalid(preemption.Child("preemptMinRuntime"), "-1s", "must not be negative"),
				field.Invalid(preemption.Child("reclaimMinRuntime"), "-2h0m0s", "must not be negative"),
			},
		},
		"not a duration names the field": {
			spec: `{"preemption":{"reclaimMinRuntime":"ten minutes"}}`, wantParse: "spec.preemption.reclaimMinRuntime",
		},
		"preemption of the wrong type": {
			spec: `{"preemption":"yes"}`, wantParse: "spec.preemption",
		},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			expectEachKind(t, tc.spec, tc.wantParse, tc.want, tc.wantErrs,
				(*ClusterQueueExtension).MinRuntimes, (*CohortExtension).MinRuntimes)
		})
	}
}

// expectEachKind reads spec as a ClusterQueue's and as a Cohort's, and checks what fromCQ and
// fromCohort read from the extension and its validation: a parse error naming wantParse, or want
// and wantErrs. It returns what was read, by kind.
func expectEachKind[T any](t *testing.T, spec, wantParse string, want T, wantErrs field.ErrorList,
	fromCQ func(*ClusterQueueExtension) T, fromCohort func(*CohortExtension) T) map[string]T {
	t.Helper()
	read := map[string]T{}
	for kind, parse := range map[string]func() (T, field.ErrorList, error){
		"ClusterQueue": func() (T, field.ErrorList, error) {
			ext, err := ParseClusterQueueExtension([]byte(spec))
			if err != nil {
				return *new(T), nil, err
			}
			return fromCQ(ext), ValidateClusterQueueExtension(ext, nil), nil
		},
		"Cohort": func() (T, field.ErrorList, error) {
			ext, err := ParseCohortExtension([]byte(spec))
			if err != nil {
				return *new(T), nil, err
			}
			return fromCohort(ext), ValidateCohortExtension(ext), nil
		},
	} {
		got, errs, err := parse()
		if wantParse != "" {
			if err == nil || !strings.Contains(err.Error(), wantParse) {
				t.Errorf("%s: parse error %v, want one naming %s", kind, err, wantParse)
			}
			continue
		}
		if err != nil {
			t.Fatalf("%s: unexpected parse error: %v", kind, err)
		}
		if diff := cmp.Diff(want, got); diff != "" {
			t.Errorf("%s: settings (-want +got):\n%s", kind, diff)
		}
		if diff := cmp.Diff(wantErrs, errs); diff != "" {
			t.Errorf("%s: validation (-want +got):\n%s", kind, diff)
		}
		read[kind] = got
	}
	return read
}
