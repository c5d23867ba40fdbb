package webhooks

import (
	admissionv1 "k8s.io/api/admission/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
)

// invalidResponse denies with the API's Invalid status, so clients see the field paths and code 422.
func invalidResponse(err *apierrors.StatusError) admissionv1.AdmissionResponse {
	status := err.Status()
	return admissionv1.AdmissionResponse{Allowed: false, Result: &status}
}
