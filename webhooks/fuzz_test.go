package webhooks

import (
	"context"
	"encoding/json"
	"net/http"
	"testing"

	jsonpatch "github.com/evanphx/json-patch/v5"
	admissionv1 "k8s.io/api/admission/v1"
	authenticationv1 "k8s.io/api/authentication/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"sigs.k8s.io/controller-runtime/pkg/client/fake"
	"sigs.k8s.io/controller-runtime/pkg/webhook/admission"

	"github.com/instancemgr/instance-manager/boundaries"
	"github.com/instancemgr/instance-manager/boundaries/store"
)

// FuzzAdmission sends arbitrary objects (as the API server would decode
// them from a hostile manifest) to the mutating and validating webhooks,
// under boundaries that restrict, merge and default. Whatever comes in, a
// handler never panics, a refusal always says why, and an allowed mutation
// is a JSON patch that applies to the object and leaves valid JSON.
// make test runs it for a fixed time (make fuzz).
func FuzzAdmission(f *testing.F) {
	for _, seed := range []string{
		`{"apiVersion":"instancemgr.keikoproj.io/v1alpha1","kind":"InstanceGroup","metadata":{"name":"g","namespace":"team-a"},"spec":{"eks":{"minSize":1,"maxSize":3,"configuration":{"instanceType":"m5.large","labels":{"a":"b"},"tags":[{"key":"k","value":"v"}]}}}}`,
		`{"metadata":{"name":"g","annotations":{"instancemgr.keikoproj.io/submitted-spec":"{}"}},"spec":{"provisioner":"eks-fargate"}}`,
		`{"metadata":{"name":"g"},"spec":{"strategy":{"type":"crd","crd":{"spec":"{{range 9}}x{{end}}"}},"eks":{"configuration":{"volumes":[{"name":"v","mountOptions":{"mount":"/a;b"}}]}}}}`,
		`{"spec":null}`, `[]`, `{"spec":{"eks":{"minSize":-1,"maxSize":"x"}}}`, `null`,
	} {
		f.Add([]byte(seed), true)
	}
	cfg, err := boundaries.Parse(map[string]string{
		"boundaries": "restricted: [spec.eks.configuration.image, spec.eks.configuration.clusterName]\nshared:\n  merge: [spec.eks.configuration.labels]\n  mergeOverride: [spec.eks.configuration.tags]\n  replace: [spec.strategy]\n",
		"defaults":   "spec:\n  provisioner: eks\n  eks:\n    configuration:\n      clusterName: c\n      image: ami-1\n      subnets: [s-1]\n      securityGroups: [sg-1]\n      labels: {team: default}\n",
	})
	if err != nil {
		f.Fatal(err)
	}
	st := &store.Store{}
	st.SetValid(cfg, "1")
	mutator := &InstanceGroupMutator{Boundaries: st, ControllerUser: "controller", ConfigMap: testConfigMap}
	validator := &InstanceGroupValidator{Boundaries: st, Reader: fake.NewClientBuilder().Build(), ConfigMap: testConfigMap}

	f.Fuzz(func(t *testing.T, raw []byte, create bool) {
		op := admissionv1.Update
		if create {
			op = admissionv1.Create
		}
		req := admission.Request{AdmissionRequest: admissionv1.AdmissionRequest{
			Operation: op, Namespace: "team-a", Name: "g", UserInfo: authenticationv1.UserInfo{Username: "alice"},
			Object: runtime.RawExtension{Raw: raw}, OldObject: runtime.RawExtension{Raw: raw},
		}}
		ctx := context.Background()
		res := mutator.Handle(ctx, req)
		checkResponse(t, "mutating", res)
		if res.Allowed && len(res.Patches) > 0 {
			ops, err := json.Marshal(res.Patches)
			if err != nil {
				t.Fatalf("patch does not marshal: %v", err)
			}
			patch, err := jsonpatch.DecodePatch(ops)
			if err != nil {
				t.Fatalf("the mutating webhook answered a patch that does not decode: %v\n%s", err, ops)
			}
			out, err := patch.Apply(raw)
			if err != nil {
				t.Fatalf("the mutating webhook answered a patch that does not apply to its input: %v\ninput %s\npatch %s", err, raw, ops)
			}
			if !json.Valid(out) {
				t.Fatalf("the patched object is not JSON: %s", out)
			}
			raw = out
			req.Object.Raw, req.OldObject.Raw = out, out
		}
		checkResponse(t, "validating", validator.Handle(ctx, req))
	})
}

// checkResponse fails t when a refusal says nothing or the status code is
// not an HTTP error code.
func checkResponse(t *testing.T, which string, res admission.Response) {
	t.Helper()
	if res.Allowed {
		return
	}
	if res.Result == nil || res.Result.Message == "" {
		t.Fatalf("the %s webhook refused without a message: %+v", which, res.Result)
	}
	if c := res.Result.Code; c != 0 && (c < http.StatusBadRequest || c > 599) {
		t.Fatalf("the %s webhook refused with status %d: %s", which, c, res.Result.Message)
	}
}
