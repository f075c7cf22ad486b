package webhooks

import (
	"errors"
	"fmt"
	"net/http"

	admissionv1 "k8s.io/api/admission/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/webhook/admission"
)

// errStale: an update made from a copy older than the stored object.
var errStale = errors.New("stale update")

// staleResponse refuses an update made from a stale copy with the
// Conflict (409) the API server would give it after admission, so that
// clients that re-read and retry on a conflict (kubectl edit,
// client-go's RetryOnConflict) do so.
func staleResponse(ref string, req admission.Request) admission.Response {
	return admission.Response{AdmissionResponse: admissionv1.AdmissionResponse{UID: req.UID, Allowed: false, Result: &metav1.Status{
		Status: metav1.StatusFailure, Code: http.StatusConflict, Reason: metav1.StatusReasonConflict,
		Message: fmt.Sprintf("%s: the object has been modified (instance-manager re-admitted it after a boundary change); read it again and apply your change to the latest version (your resourceVersion is older than the stored one)", ref),
	}}}
}

// resourceVersion is metadata.resourceVersion ("" when absent).
func (o object) resourceVersion() string {
	rv, _ := o.metadata()["resourceVersion"].(string)
	return rv
}
