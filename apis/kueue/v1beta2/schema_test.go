package v1beta2

import (
	"context"
	"encoding/json"
	"slices"
	"testing"

	"github.com/google/go-cmp/cmp"
	apiextensionsinternal "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions"
	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	structuralschema "k8s.io/apiextensions-apiserver/pkg/apiserver/schema"
	"k8s.io/apiextensions-apiserver/pkg/apiserver/schema/cel"
	"k8s.io/apimachinery/pkg/util/validation/field"

	kueue "sigs.k8s.io/kueue/apis/kueue/v1beta2"
)

// Limits the API server applies to CRD validation rules (k8s.io/apiserver's cel config).
const (
	perCallLimit  = 1000000
	runtimeBudget = 10000000
)

// celValidator compiles the rules of the schema our fields give their parent at spec.preemption,
// as the API server does for the patched CRD.
func celValidator(t *testing.T, kind string) *cel.Validator {
	t.Helper()
	parent := apiextensionsv1.JSONSchemaProps{Type: "object", Properties: map[string]apiextensionsv1.JSONSchemaProps{}}
	if kind == "ClusterQueue" {
		// Upstream's, which a rule of ours reads.
		parent.Properties["withinClusterQueue"] = apiextensionsv1.JSONSchemaProps{Type: "string"}
	}
	for _, f := range Fields()[kind] {
		switch {
		case slices.Equal(f.Parent, []string{"spec", "preemption"}):
			parent.Properties[f.Name] = f.Schema
			parent.XValidations = append(parent.XValidations, f.ParentRules...)
		case f.String() == "spec.preemption":
			parent = f.Schema
		default:
			t.Fatalf("%s %s: this test covers fields at or under spec.preemption only", kind, f)
		}
	}
	var internal apiextensionsinternal.JSONSchemaProps
	if err := apiextensionsv1.Convert_v1_JSONSchemaProps_To_apiextensions_JSONSchemaProps(&parent, &internal, nil); err != nil {
		t.Fatal(err)
	}
	s, err := structuralschema.NewStructural(&internal)
	if err != nil {
		t.Fatal(err)
	}
	v := cel.NewValidator(s, false, perCallLimit)
	if v == nil {
		t.Fatalf("%s: no validation rules in the schema", kind)
	}
	return v
}

// messages are "field: detail", sorted: the type of the value shown differs (the webhook shows
// the value, CEL its type), the rest must not.
func messages(errs field.ErrorList) []string {
	var out []string
	for _, e := range errs {
		out = append(out, e.Field+": "+e.Detail)
	}
	slices.Sort(out)
	return out
}

// The schema's rules and the webhook's agree on every value: same fields, same messages.
func TestSchemaRulesMatchTheWebhook(t *testing.T) {
	cases := map[string]struct {
		kind       string
		preemption string
		want       []string
	}{
		"a window of exactly a minute": {kind: "ClusterQueue",
			preemption: `{"withinClusterQueue":"LowerOrNewerEqualPriority","withinClusterQueueConfig":{"minAdmitDuration":"1m"}}`},
		"a minute written in milliseconds": {kind: "ClusterQueue",
			preemption: `{"withinClusterQueue":"LowerOrNewerEqualPriority","withinClusterQueueConfig":{"minAdmitDuration":"60000ms"}}`},
		"a fractional window": {kind: "ClusterQueue",
			preemption: `{"withinClusterQueue":"LowerOrNewerEqualPriority","withinClusterQueueConfig":{"minAdmitDuration":"0.5h"}}`},
		"just under a minute": {kind: "ClusterQueue",
			preemption: `{"withinClusterQueue":"LowerOrNewerEqualPriority","withinClusterQueueConfig":{"minAdmitDuration":"59.999s"}}`,
			want:       []string{"spec.preemption.withinClusterQueueConfig.minAdmitDuration: must be at least 1m0s"}},
		"microseconds": {kind: "ClusterQueue",
			preemption: `{"withinClusterQueue":"LowerOrNewerEqualPriority","withinClusterQueueConfig":{"minAdmitDuration":"59999999µs"}}`,
			want:       []string{"spec.preemption.withinClusterQueueConfig.minAdmitDuration: must be at least 1m0s"}},
		"zero": {kind: "ClusterQueue",
			preemption: `{"withinClusterQueue":"LowerOrNewerEqualPriority","withinClusterQueueConfig":{"minAdmitDuration":"0s"}}`,
			want:       []string{"spec.preemption.withinClusterQueueConfig.minAdmitDuration: must be at least 1m0s"}},
		"negative": {kind: "ClusterQueue",
			preemption: `{"withinClusterQueue":"LowerOrNewerEqualPriority","withinClusterQueueConfig":{"minAdmitDuration":"-1h"}}`,
			want:       []string{"spec.preemption.withinClusterQueueConfig.minAdmitDuration: must be at least 1m0s"}},
		"an empty config": {kind: "ClusterQueue",
			preemption: `{"withinClusterQueue":"LowerOrNewerEqualPriority","withinClusterQueueConfig":{}}`},
		"the config with LowerPriority": {kind: "ClusterQueue",
			preemption: `{"withinClusterQueue":"LowerPriority","withinClusterQueueConfig":{"minAdmitDuration":"1h"}}`,
			want:       []string{"spec.preemption.withinClusterQueueConfig: requires spec.preemption.withinClusterQueue to be LowerOrNewerEqualPriority, not LowerPriority"}},
		"the config without a policy": {kind: "ClusterQueue",
			preemption: `{"withinClusterQueueConfig":{}}`,
			want:       []string{"spec.preemption.withinClusterQueueConfig: requires spec.preemption.withinClusterQueue to be LowerOrNewerEqualPriority, not Never"}},
		"every rule broken at once": {kind: "ClusterQueue",
			preemption: `{"withinClusterQueue":"Never","withinClusterQueueConfig":{"minAdmitDuration":"10s"},"preemptMinRuntime":"-1s","reclaimMinRuntime":"-2h"}`,
			want: []string{
				"spec.preemption.preemptMinRuntime: must not be negative",
				"spec.preemption.reclaimMinRuntime: must not be negative",
				"spec.preemption.withinClusterQueueConfig.minAdmitDuration: must be at least 1m0s",
				"spec.preemption.withinClusterQueueConfig: requires spec.preemption.withinClusterQueue to be LowerOrNewerEqualPriority, not Never",
			}},
		"min-runtimes of zero, and negative zero": {kind: "ClusterQueue",
			preemption: `{"preemptMinRuntime":"0s","reclaimMinRuntime":"-0s"}`},
		"a Cohort's min-runtimes": {kind: "Cohort",
			preemption: `{"preemptMinRuntime":"30m","reclaimMinRuntime":"1ns"}`},
		"a notice of an hour, and the extensions": {kind: "ClusterQueue",
			preemption: `{"noticePeriod":"1h","noticeOnPriorityPreemption":true,"noticeOnReclaim":false}`},
		"a notice of zero": {kind: "Cohort", preemption: `{"noticePeriod":"0s"}`},
		"a notice just over an hour": {kind: "ClusterQueue", preemption: `{"noticePeriod":"3600.001s"}`,
			want: []string{"spec.preemption.noticePeriod: must be at most 1h0m0s"}},
		"a negative notice": {kind: "Cohort", preemption: `{"noticePeriod":"-1s","noticeOnReclaim":true}`,
			want: []string{"spec.preemption.noticePeriod: must not be negative"}},
		"a Cohort's notice of a day": {kind: "Cohort", preemption: `{"noticePeriod":"24h"}`,
			want: []string{"spec.preemption.noticePeriod: must be at most 1h0m0s"}},
		"a Cohort's negative min-runtimes": {kind: "Cohort",
			preemption: `{"preemptMinRuntime":"-1ns","reclaimMinRuntime":"-10s"}`,
			want: []string{
				"spec.preemption.preemptMinRuntime: must not be negative",
				"spec.preemption.reclaimMinRuntime: must not be negative",
			}},
	}
	validators := map[string]*cel.Validator{"ClusterQueue": celValidator(t, "ClusterQueue"), "Cohort": celValidator(t, "Cohort")}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			spec := []byte(`{"preemption":` + tc.preemption + `}`)
			var webhookErrs field.ErrorList
			if tc.kind == "ClusterQueue" {
				ext, err := ParseClusterQueueExtension(spec)
				if err != nil {
					t.Fatal(err)
				}
				var upstream struct {
					Preemption kueue.ClusterQueuePreemption `json:"preemption"`
				}
				if err := json.Unmarshal(spec, &upstream); err != nil {
					t.Fatal(err)
				}
				webhookErrs = ValidateClusterQueueExtension(ext, &upstream.Preemption)
			} else {
				ext, err := ParseCohortExtension(spec)
				if err != nil {
					t.Fatal(err)
				}
				webhookErrs = ValidateCohortExtension(ext)
			}
			var obj map[string]any
			if err := json.Unmarshal([]byte(tc.preemption), &obj); err != nil {
				t.Fatal(err)
			}
			celErrs, remaining := validators[tc.kind].Validate(context.Background(), field.NewPath("spec", "preemption"), nil, obj, nil, runtimeBudget)
			if remaining < 0 {
				t.Fatalf("over the cost budget: %v", celErrs)
			}
			if diff := cmp.Diff(tc.want, messages(webhookErrs)); diff != "" {
				t.Errorf("webhook (-want +got):\n%s", diff)
			}
			if diff := cmp.Diff(tc.want, messages(celErrs)); diff != "" {
				t.Errorf("schema rules (-want +got):\n%s", diff)
			}
		})
	}
}

// A value that is not a duration is the pattern's to reject: the rules stay silent on it rather
// than fail to evaluate.
func TestSchemaRulesLeaveNonDurationsToThePattern(t *testing.T) {
	for kind, preemption := range map[string]map[string]any{
		"ClusterQueue": {"withinClusterQueue": "LowerOrNewerEqualPriority",
			"withinClusterQueueConfig": map[string]any{"minAdmitDuration": "four hours"}, "preemptMinRuntime": "1 day"},
		"Cohort": {"reclaimMinRuntime": "soon", "noticePeriod": "a minute"},
	} {
		errs, _ := celValidator(t, kind).Validate(context.Background(), field.NewPath("spec", "preemption"), nil, preemption, nil, runtimeBudget)
		if len(errs) > 0 {
			t.Errorf("%s: %v", kind, errs)
		}
	}
}
