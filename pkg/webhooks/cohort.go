package webhooks

import (
	"context"
	"encoding/json"
	"net/http"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"sigs.k8s.io/controller-runtime/pkg/webhook/admission"

	kueue "sigs.k8s.io/kueue/apis/kueue/v1beta2"

	tsapi "github.com/kueue-timeshare/kueue-timeshare/apis/kueue/v1beta2"
	"github.com/kueue-timeshare/kueue-timeshare/pkg/policy"
)

// CohortPath is where the Cohort validator is served; config/webhook names it too.
const CohortPath = "/validate-timeshare-kueue-x-k8s-io-v1beta2-cohort"

// CohortValidator checks a Cohort's spec.preemption (min-runtimes, notice) on create and update.
type CohortValidator struct {
	// Units are the features whose settings it refuses while their gate is off; nil: all of
	// them (plugins.Units).
	Units policy.Table
}

var _ admission.Handler = CohortValidator{}

// Handle reads the raw object: Kueue's Cohort type has no spec.preemption.
func (v CohortValidator) Handle(_ context.Context, req admission.Request) admission.Response {
	var obj struct {
		Spec json.RawMessage `json:"spec"`
	}
	if err := json.Unmarshal(req.Object.Raw, &obj); err != nil {
		return admission.Errored(http.StatusBadRequest, err)
	}
	ext, err := tsapi.ParseCohortExtension(obj.Spec)
	if err != nil {
		return admission.Denied(err.Error())
	}
	errs := append(tsapi.ValidateCohortExtension(ext), refusedWhileOff(v.Units, req, obj.Spec)...)
	if len(errs) > 0 {
		invalid := apierrors.NewInvalid(schema.GroupKind{Group: kueue.SchemeGroupVersion.Group, Kind: "Cohort"}, req.Name, errs)
		return admission.Response{AdmissionResponse: invalidResponse(invalid)}
	}
	return admission.Allowed("")
}
