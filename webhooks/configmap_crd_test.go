package webhooks

import (
	"context"
	"encoding/json"
	"strings"
	"testing"

	admissionv1 "k8s.io/api/admission/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"sigs.k8s.io/controller-runtime/pkg/client/fake"
	"sigs.k8s.io/controller-runtime/pkg/webhook/admission"

	"github.com/instancemgr/instance-manager/api/v1alpha1"
)

// A ConfigMap change that takes a kind out of crdStrategy.allowedKinds is
// admitted (the admin can always tighten) with a warning naming the groups
// whose template it refuses and why; a change that refuses nothing new
// warns nothing.
func TestConfigMapChangeWarnsOfRefusedCRDTemplates(t *testing.T) {
	scheme := runtime.NewScheme()
	if err := v1alpha1.AddToScheme(scheme); err != nil {
		t.Fatal(err)
	}
	ig := validEKS()
	ig.Namespace, ig.Name = "team-a", "rolling"
	ig.Spec.Strategy = v1alpha1.AwsUpgradeStrategy{Type: v1alpha1.StrategyCRD, CRD: &v1alpha1.CRDUpgradeStrategy{
		CRDName: "widgets", StatusJSONPath: "s", StatusSuccessString: "a", StatusFailureString: "b",
		Spec: "apiVersion: example.com/v1\nkind: Widget\nspec: {size: 1}\n"}}
	v := &ConfigMapValidator{Client: fake.NewClientBuilder().WithScheme(scheme).WithObjects(ig).Build(), ConfigMap: testConfigMap}

	allowWidget := "allowedKinds: [{group: example.com, kind: Widget, tenantFields: [spec.size]}]"
	for _, tc := range []struct {
		name     string
		old, new string // crdStrategy
		want     string // substring of the one warning; "" = none
	}{
		{"a kind taken away", allowWidget, "allowedKinds: []",
			"refuses the crd strategy template (spec.strategy.crd.spec) of 1 InstanceGroup(s); each one's next upgrade fails with the reason until its template is changed: team-a/rolling: spec.strategy.crd.spec: kind Widget.example.com is not allowed"},
		{"a field taken away", allowWidget, "allowedKinds: [{group: example.com, kind: Widget}]", "team-a/rolling: "},
		{"nothing refused", allowWidget, allowWidget, ""},
		{"refused before already", "allowedKinds: []", "allowedKinds: []", ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			res := v.Handle(context.Background(), configMapUpdate(t, map[string]string{"crdStrategy": tc.old}, map[string]string{"crdStrategy": tc.new}))
			if !res.Allowed {
				t.Fatalf("refused: %q", res.Result.Message)
			}
			var crd []string
			for _, w := range res.Warnings {
				if strings.Contains(w, "crd strategy template") {
					crd = append(crd, w)
				}
			}
			switch {
			case tc.want == "" && len(crd) > 0:
				t.Errorf("warned: %q", crd)
			case tc.want != "" && (len(crd) != 1 || !strings.Contains(crd[0], tc.want)):
				t.Errorf("warnings %q, want one containing %q", res.Warnings, tc.want)
			}
		})
	}
}

// configMapUpdate is the admission request of an update of the boundary
// ConfigMap from old to new data.
func configMapUpdate(t *testing.T, old, new map[string]string) admission.Request {
	t.Helper()
	raw := func(data map[string]string) []byte {
		b, err := json.Marshal(&corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: testConfigMap.Namespace, Name: testConfigMap.Name}, Data: data})
		if err != nil {
			t.Fatal(err)
		}
		return b
	}
	return admission.Request{AdmissionRequest: admissionv1.AdmissionRequest{
		Operation: admissionv1.Update, Namespace: testConfigMap.Namespace, Name: testConfigMap.Name,
		Object: runtime.RawExtension{Raw: raw(new)}, OldObject: runtime.RawExtension{Raw: raw(old)}}}
}
