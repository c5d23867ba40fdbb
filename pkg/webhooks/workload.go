package webhooks

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"

	admissionv1 "k8s.io/api/admission/v1"
	authenticationv1 "k8s.io/api/authentication/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/util/validation/field"
	"k8s.io/client-go/rest"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/webhook/admission"

	kueue "sigs.k8s.io/kueue/apis/kueue/v1beta2"

	"github.com/kueue-timeshare/kueue-timeshare/apis/annotations"
)

// WorkloadPath is the path of the Workload validator; config/webhook names it too.
const WorkloadPath = "/validate-timeshare-kueue-x-k8s-io-v1beta2-workload"

// WorkloadValidator refuses a change to a manager-owned annotation of a Workload
// (annotations.ManagerOwned) by anyone but the manager: a Workload's owner may write its other
// annotations, never the manager's state. Readers check that state against the manager's record
// too; this keeps a forgery from being written at all.
type WorkloadValidator struct {
	// Manager is the user name the manager's own requests carry.
	Manager string
}

var _ admission.Handler = WorkloadValidator{}

func (v WorkloadValidator) Handle(_ context.Context, req admission.Request) admission.Response {
	if req.UserInfo.Username == v.Manager {
		return admission.Allowed("")
	}
	newAnn, err := annotationsOf(req.Object.Raw)
	if err != nil {
		return admission.Errored(http.StatusBadRequest, err)
	}
	var oldAnn map[string]string
	if req.Operation == admissionv1.Update {
		if oldAnn, err = annotationsOf(req.OldObject.Raw); err != nil {
			return admission.Errored(http.StatusBadRequest, err)
		}
	}
	if errs := ManagerOwnedChanges(oldAnn, newAnn, v.Manager); len(errs) > 0 {
		kind := kueue.SchemeGroupVersion.WithKind("Workload").GroupKind()
		return admission.Response{AdmissionResponse: invalidResponse(apierrors.NewInvalid(kind, req.Name, errs))}
	}
	return admission.Allowed("")
}

// ManagerOwnedChanges lists, as field errors, the manager-owned annotations that differ between
// old and updated (added, changed or removed).
func ManagerOwnedChanges(old, updated map[string]string, manager string) field.ErrorList {
	var errs field.ErrorList
	path := field.NewPath("metadata", "annotations")
	for _, k := range annotations.ManagerOwned() {
		was, hadIt := old[k]
		is, hasIt := updated[k]
		if was == is && hadIt == hasIt {
			continue
		}
		errs = append(errs, field.Forbidden(path.Key(k), fmt.Sprintf("may be written only by the kueue-timeshare manager (%s)", manager)))
	}
	return errs
}

func annotationsOf(raw []byte) (map[string]string, error) {
	var obj struct {
		Metadata struct {
			Annotations map[string]string `json:"annotations"`
		} `json:"metadata"`
	}
	if len(raw) == 0 {
		return nil, nil
	}
	err := json.Unmarshal(raw, &obj)
	return obj.Metadata.Annotations, err
}

// ManagerUser asks the API server who cfg authenticates as (a SelfSubjectReview): the user name
// the manager's writes carry, whatever credentials it runs with.
func ManagerUser(ctx context.Context, cfg *rest.Config) (string, error) {
	c, err := client.New(cfg, client.Options{})
	if err != nil {
		return "", err
	}
	review := &authenticationv1.SelfSubjectReview{}
	if err := c.Create(ctx, review); err != nil {
		return "", fmt.Errorf("asking the API server who the manager is: %w", err)
	}
	if review.Status.UserInfo.Username == "" {
		return "", fmt.Errorf("asking the API server who the manager is: no user name in the review")
	}
	return review.Status.UserInfo.Username, nil
}
