package webhooks

import (
	"context"
	"slices"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	admissionv1 "k8s.io/api/admission/v1"
	"k8s.io/apimachinery/pkg/runtime"
	utilfeature "k8s.io/apiserver/pkg/util/feature"
	featuregatetesting "k8s.io/component-base/featuregate/testing"
	"sigs.k8s.io/controller-runtime/pkg/webhook/admission"

	"github.com/kueue-timeshare/kueue-timeshare/pkg/features"
	"github.com/kueue-timeshare/kueue-timeshare/pkg/plugins"
	"github.com/kueue-timeshare/kueue-timeshare/pkg/plugins/budget"
	"github.com/kueue-timeshare/kueue-timeshare/pkg/plugins/notice"
	"github.com/kueue-timeshare/kueue-timeshare/pkg/policy"
)

// TestFeatureRemovalInTheWebhooks builds the ClusterQueue and Cohort validators without each
// feature in turn, every gate off, and asks them about a spec that sets the notice and the
// budget: the removed feature's settings are no longer its to refuse, every other feature's
// still are.
func TestFeatureRemovalInTheWebhooks(t *testing.T) {
	featuregatetesting.SetFeatureGateDuringTest(t, utilfeature.DefaultFeatureGate, features.PreemptionNotice, false)
	featuregatetesting.SetFeatureGateDuringTest(t, utilfeature.DefaultFeatureGate, features.PreemptionBudget, false)
	spec := `"spec":{"preemption":{"noticePeriod":"5m","preemptionBudget":{"maxPreemptions":2,"period":"1h"}}}`
	refusedBy := map[policy.Feature]string{
		notice.Feature: "spec.preemption.noticePeriod",
		budget.Feature: "spec.preemption.preemptionBudget",
	}
	validators := map[string]func(policy.Table) admission.Handler{
		"ClusterQueue": func(t policy.Table) admission.Handler { return ClusterQueueValidator{Units: t} },
		"Cohort":       func(t policy.Table) admission.Handler { return CohortValidator{Units: t} },
	}
	for kind, validator := range validators {
		for _, removed := range plugins.Units() {
			t.Run(kind+"/"+string(removed.Feature), func(t *testing.T) {
				req := admission.Request{AdmissionRequest: admissionv1.AdmissionRequest{Name: "q", Operation: admissionv1.Create,
					Object: runtime.RawExtension{Raw: []byte(`{"apiVersion":"kueue.x-k8s.io/v1beta2","kind":"` + kind + `","metadata":{"name":"q"},` + spec + `}`)}}}
				resp := validator(plugins.Units().Without(removed.Feature)).Handle(context.Background(), req)
				var want, got []string
				for f, path := range refusedBy {
					if f != removed.Feature {
						want = append(want, path)
					}
				}
				if resp.Result != nil {
					for _, path := range refusedBy {
						if strings.Contains(resp.Result.Message, path) {
							got = append(got, path)
						}
					}
				}
				slices.Sort(want)
				slices.Sort(got)
				if diff := cmp.Diff(want, got); diff != "" {
					t.Errorf("settings refused (-want +got):\n%s\nresponse: %+v", diff, resp.Result)
				}
				if resp.Allowed == (len(want) > 0) {
					t.Errorf("allowed = %v, with %d refusals expected", resp.Allowed, len(want))
				}
			})
		}
	}
}
