package webhooks

import (
	"context"
	"net/http"
	"strings"
	"testing"

	admissionv1 "k8s.io/api/admission/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/instancemgr/instance-manager/api/v1alpha1"
	"github.com/instancemgr/instance-manager/boundaries/store"
)

// TestStaleTenantUpdateIsAConflict: a tenant's update made from a copy
// read before the controller re-admitted the group carries the old
// boundaries hash; it gets the Conflict the API server would give it,
// not a refusal as a forgery. The same hash change on a current copy is a
// forgery.
func TestStaleTenantUpdateIsAConflict(t *testing.T) {
	st := &store.Store{}
	st.SetValid(nil, "")
	m := &InstanceGroupMutator{Boundaries: st, AllowNoBoundaries: true, ControllerUser: "controller", ConfigMap: testConfigMap}
	withMeta := func(rv, hash string) map[string]any {
		o := igJSON(`{"eks":{"maxSize":1}}`, false)
		md := o["metadata"].(map[string]any)
		md["resourceVersion"] = rv
		md["annotations"] = map[string]any{v1alpha1.AnnotationBoundariesHash: hash, v1alpha1.AnnotationSubmittedSpec: `{"eks":{"maxSize":1}}`}
		return o
	}
	stored := withMeta("12", "new-hash")
	for _, c := range []struct {
		name     string
		obj      map[string]any
		code     int32
		reason   metav1.StatusReason
		contains string
	}{
		{"stale copy", withMeta("11", "old-hash"), http.StatusConflict, metav1.StatusReasonConflict, "read it again and apply your change to the latest version"},
		{"current copy, changed hash", withMeta("12", "forged-hash"), http.StatusForbidden, metav1.StatusReasonForbidden, "is written by instance-manager only and cannot be changed by alice"},
	} {
		t.Run(c.name, func(t *testing.T) {
			res := m.Handle(context.Background(), request(t, admissionv1.Update, "alice", c.obj, stored))
			if res.Allowed || res.Result == nil || res.Result.Code != c.code || res.Result.Reason != c.reason || !strings.Contains(res.Result.Message, c.contains) {
				t.Fatalf("allowed=%v result=%+v; want refused with %d %s containing %q", res.Allowed, res.Result, c.code, c.reason, c.contains)
			}
		})
	}
}
