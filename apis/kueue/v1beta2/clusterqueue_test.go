package v1beta2

import (
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
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
