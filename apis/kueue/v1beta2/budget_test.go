package v1beta2

import (
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/validation/field"
	"k8s.io/utils/ptr"
)

func TestBudgetFields(t *testing.T) {
	budget := field.NewPath("spec", "preemption", "preemptionBudget")
	hour := metav1.Duration{Duration: time.Hour}
	cases := map[string]struct {
		spec      string
		want      *PreemptionBudget
		wantParse string // the field the parse error must name
		wantErrs  field.ErrorList
	}{
		"unset":              {spec: `{"preemption":{"preemptMinRuntime":"1m"}}`},
		"no spec.preemption": {spec: `{}`},
		"the least": {
			spec: `{"preemption":{"preemptionBudget":{"maxPreemptions":1,"period":"1m"}}}`,
			want: &PreemptionBudget{MaxPreemptions: 1, Period: metav1.Duration{Duration: time.Minute}},
		},
		"every field": {
			spec: `{"preemption":{"preemptionBudget":{"maxPreemptions":2,"period":"1h","burst":4,"perWorkload":{"maxPreemptions":1,"period":"168h"}}}}`,
			want: &PreemptionBudget{MaxPreemptions: 2, Period: hour, Burst: ptr.To[int32](4),
				PerWorkload: &WorkloadBudget{MaxPreemptions: 1, Period: metav1.Duration{Duration: 7 * 24 * time.Hour}}},
		},
		"no preemptions": {
			spec:     `{"preemption":{"preemptionBudget":{"maxPreemptions":0,"period":"1h"}}}`,
			want:     &PreemptionBudget{Period: hour},
			wantErrs: field.ErrorList{field.Invalid(budget.Child("maxPreemptions"), int32(0), "must be at least 1")},
		},
		"period too short": {
			spec:     `{"preemption":{"preemptionBudget":{"maxPreemptions":1,"period":"30s"}}}`,
			want:     &PreemptionBudget{MaxPreemptions: 1, Period: metav1.Duration{Duration: 30 * time.Second}},
			wantErrs: field.ErrorList{field.Invalid(budget.Child("period"), "30s", "must be from 1m0s to 168h0m0s")},
		},
		"period missing": {
			spec:     `{"preemption":{"preemptionBudget":{"maxPreemptions":1}}}`,
			want:     &PreemptionBudget{MaxPreemptions: 1},
			wantErrs: field.ErrorList{field.Invalid(budget.Child("period"), "0s", "must be from 1m0s to 168h0m0s")},
		},
		"burst below maxPreemptions": {
			spec:     `{"preemption":{"preemptionBudget":{"maxPreemptions":3,"period":"1h","burst":2}}}`,
			want:     &PreemptionBudget{MaxPreemptions: 3, Period: hour, Burst: ptr.To[int32](2)},
			wantErrs: field.ErrorList{field.Invalid(budget.Child("burst"), int32(2), "must be at least maxPreemptions (3)")},
		},
		"per workload out of range": {
			spec: `{"preemption":{"preemptionBudget":{"maxPreemptions":1,"period":"1h","perWorkload":{"maxPreemptions":0,"period":"200h"}}}}`,
			want: &PreemptionBudget{MaxPreemptions: 1, Period: hour, PerWorkload: &WorkloadBudget{Period: metav1.Duration{Duration: 200 * time.Hour}}},
			wantErrs: field.ErrorList{
				field.Invalid(budget.Child("perWorkload", "maxPreemptions"), int32(0), "must be at least 1"),
				field.Invalid(budget.Child("perWorkload", "period"), "200h0m0s", "must be from 1m0s to 168h0m0s"),
			},
		},
		"not an object": {
			spec: `{"preemption":{"preemptionBudget":3}}`, wantParse: "spec.preemption.preemptionBudget",
		},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			got, err := ParsePreemptionBudget([]byte(tc.spec))
			if tc.wantParse != "" {
				if err == nil || !strings.Contains(err.Error(), tc.wantParse) {
					t.Fatalf("parse error %v, want one naming %s", err, tc.wantParse)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if diff := cmp.Diff(tc.want, got); diff != "" {
				t.Errorf("parsed (-want +got):\n%s", diff)
			}
			// The ClusterQueue's and the Cohort's validation both check it, at the same path.
			cq, err := ParseClusterQueueExtension([]byte(tc.spec))
			if err != nil {
				t.Fatal(err)
			}
			if diff := cmp.Diff(tc.wantErrs, ValidateClusterQueueExtension(cq, nil)); diff != "" {
				t.Errorf("ClusterQueue errors (-want +got):\n%s", diff)
			}
			cohort, err := ParseCohortExtension([]byte(tc.spec))
			if err != nil {
				t.Fatal(err)
			}
			if diff := cmp.Diff(tc.wantErrs, ValidateCohortExtension(cohort)); diff != "" {
				t.Errorf("Cohort errors (-want +got):\n%s", diff)
			}
		})
	}
}
