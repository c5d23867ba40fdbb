// Package webhooks serves kueue-timeshare's admission webhooks, for the fields that upstream's
// webhooks cannot see because they decode into Kueue's own types.
package webhooks

import (
	"context"
	"encoding/json"
	"net/http"

	admissionv1 "k8s.io/api/admission/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/util/validation/field"
	"sigs.k8s.io/controller-runtime/pkg/webhook"
	"sigs.k8s.io/controller-runtime/pkg/webhook/admission"

	kueue "sigs.k8s.io/kueue/apis/kueue/v1beta2"

	tsapi "github.com/kueue-timeshare/kueue-timeshare/apis/kueue/v1beta2"
	"github.com/kueue-timeshare/kueue-timeshare/pkg/plugins"
	"github.com/kueue-timeshare/kueue-timeshare/pkg/policy"
)

// ClusterQueuePath is where the ClusterQueue validator is served; config/webhook names it too.
const ClusterQueuePath = "/validate-timeshare-kueue-x-k8s-io-v1beta2-clusterqueue"

// ClusterQueueValidator checks our spec.preemption fields (withinClusterQueueConfig, the
// min-runtimes, the notice) on create and update.
type ClusterQueueValidator struct {
	// Units are the features whose settings it refuses while their gate is off; nil: all of
	// them (plugins.Units).
	Units policy.Table
}

var _ admission.Handler = ClusterQueueValidator{}

// Handle reads the raw object, so fields unknown to Kueue's type are seen.
func (v ClusterQueueValidator) Handle(_ context.Context, req admission.Request) admission.Response {
	var obj struct {
		Spec json.RawMessage `json:"spec"`
	}
	if err := json.Unmarshal(req.Object.Raw, &obj); err != nil {
		return admission.Errored(http.StatusBadRequest, err)
	}
	var cq kueue.ClusterQueue
	if err := json.Unmarshal(req.Object.Raw, &cq); err != nil {
		return admission.Errored(http.StatusBadRequest, err)
	}
	ext, err := tsapi.ParseClusterQueueExtension(obj.Spec)
	if err != nil {
		return admission.Denied(err.Error())
	}
	errs := append(tsapi.ValidateClusterQueueExtension(ext, cq.Spec.Preemption), refusedWhileOff(v.Units, req, obj.Spec)...)
	if len(errs) > 0 {
		invalid := apierrors.NewInvalid(schema.GroupKind{Group: kueue.SchemeGroupVersion.Group, Kind: "ClusterQueue"}, req.Name, errs)
		return admission.Response{AdmissionResponse: invalidResponse(invalid)}
	}
	return admission.Allowed("")
}

// refusedWhileOff is what units (nil: plugins.Units) refuse in spec while their gate is off
// (policy.Unit.RefusedWhileOff), given the stored spec on an update.
func refusedWhileOff(units policy.Table, req admission.Request, spec json.RawMessage) field.ErrorList {
	var old json.RawMessage
	if req.Operation == admissionv1.Update && len(req.OldObject.Raw) > 0 {
		var obj struct {
			Spec json.RawMessage `json:"spec"`
		}
		if err := json.Unmarshal(req.OldObject.Raw, &obj); err == nil {
			old = obj.Spec
		}
	}
	if units == nil {
		units = plugins.Units()
	}
	return units.RefusedWhileOff(field.NewPath("spec", "preemption"), spec, old, policy.GateOn)
}

// Register adds the validators to the manager's webhook server; manager is the user name of the
// manager's own requests (ManagerUser), the only one allowed to write its Workload annotations.
func Register(server webhook.Server, manager string) {
	server.Register(WorkloadPath, &webhook.Admission{Handler: WorkloadValidator{Manager: manager}})
	server.Register(ClusterQueuePath, &webhook.Admission{Handler: ClusterQueueValidator{}})
	server.Register(CohortPath, &webhook.Admission{Handler: CohortValidator{}})
	server.Register(WorkloadPriorityClassPath, &webhook.Admission{Handler: PriorityClassValidator{
		Kind: schema.GroupKind{Group: kueue.SchemeGroupVersion.Group, Kind: "WorkloadPriorityClass"}}})
	server.Register(PriorityClassPath, &webhook.Admission{Handler: PriorityClassValidator{
		Kind: schema.GroupKind{Group: "scheduling.k8s.io", Kind: "PriorityClass"}}})
}
