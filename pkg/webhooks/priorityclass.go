package webhooks

import (
	"context"
	"encoding/json"
	"net/http"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"sigs.k8s.io/controller-runtime/pkg/webhook/admission"

	"github.com/kueue-timeshare/kueue-timeshare/apis/annotations"
)

// Paths of the priority class validators; config/webhook names them too.
const (
	WorkloadPriorityClassPath = "/validate-timeshare-kueue-x-k8s-io-v1beta2-workloadpriorityclass"
	PriorityClassPath         = "/validate-timeshare-scheduling-k8s-io-v1-priorityclass"
)

// PriorityClassValidator checks the preemption toleration annotations of a WorkloadPriorityClass
// or a PriorityClass (both carry metadata.annotations and an int32 value) on create and update.
type PriorityClassValidator struct {
	Kind schema.GroupKind
}

var _ admission.Handler = PriorityClassValidator{}

func (v PriorityClassValidator) Handle(_ context.Context, req admission.Request) admission.Response {
	var obj struct {
		Metadata struct {
			Annotations map[string]string `json:"annotations"`
		} `json:"metadata"`
		Value int32 `json:"value"`
	}
	if err := json.Unmarshal(req.Object.Raw, &obj); err != nil {
		return admission.Errored(http.StatusBadRequest, err)
	}
	if _, errs := annotations.ParseToleration(obj.Metadata.Annotations, obj.Value); len(errs) > 0 {
		return admission.Response{AdmissionResponse: invalidResponse(apierrors.NewInvalid(v.Kind, req.Name, errs))}
	}
	return admission.Allowed("")
}
