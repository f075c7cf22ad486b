package webhooks

import (
	"context"
	"encoding/json"
	"strings"
	"testing"

	admissionv1 "k8s.io/api/admission/v1"
	authenticationv1 "k8s.io/api/authentication/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client/fake"
	"sigs.k8s.io/controller-runtime/pkg/webhook/admission"

	"github.com/instancemgr/instance-manager/api/v1alpha1"
	"github.com/instancemgr/instance-manager/boundaries"
	"github.com/instancemgr/instance-manager/boundaries/store"
)

var testConfigMap = types.NamespacedName{Namespace: "instance-manager", Name: "instance-manager"}

func request(t *testing.T, op admissionv1.Operation, user string, obj, old map[string]any) admission.Request {
	t.Helper()
	raw := func(v map[string]any) runtime.RawExtension {
		if v == nil {
			return runtime.RawExtension{}
		}
		b, err := json.Marshal(v)
		if err != nil {
			t.Fatal(err)
		}
		return runtime.RawExtension{Raw: b}
	}
	return admission.Request{AdmissionRequest: admissionv1.AdmissionRequest{
		Operation: op, Namespace: "team-a", Name: "g", UserInfo: authenticationv1.UserInfo{Username: user},
		Object: raw(obj), OldObject: raw(old),
	}}
}

func igJSON(spec string, deleting bool) map[string]any {
	md := map[string]any{"name": "g", "namespace": "team-a"}
	if deleting {
		md["deletionTimestamp"] = "2026-11-23T10:00:00Z"
	}
	var s map[string]any
	_ = json.Unmarshal([]byte(spec), &s)
	return map[string]any{"apiVersion": "instancemgr.keikoproj.io/v1alpha1", "kind": "InstanceGroup", "metadata": md, "spec": s}
}

func TestMutatorFailsClosedWithoutAConfigMap(t *testing.T) {
	st := &store.Store{}
	st.SetValid(nil, "") // loaded: the ConfigMap does not exist
	m := &InstanceGroupMutator{Boundaries: st, ControllerUser: "controller", ConfigMap: testConfigMap}
	ctx := context.Background()

	res := m.Handle(ctx, request(t, admissionv1.Create, "alice", igJSON(`{"eks":{"maxSize":1}}`, false), nil))
	if res.Allowed || !strings.Contains(res.Result.Message, "the boundary ConfigMap instance-manager/instance-manager does not exist, so InstanceGroups are refused") {
		t.Errorf("create without a ConfigMap: allowed=%v %q", res.Allowed, res.Result.Message)
	}
	res = m.Handle(ctx, request(t, admissionv1.Update, "alice", igJSON(`{"eks":{"maxSize":2}}`, false), igJSON(`{"eks":{"maxSize":1}}`, false)))
	if res.Allowed {
		t.Error("a spec change without a ConfigMap was allowed")
	}
	res = m.Handle(ctx, request(t, admissionv1.Update, "controller", igJSON(`{"eks":{"maxSize":1}}`, false), igJSON(`{"eks":{"maxSize":1}}`, false)))
	if !res.Allowed || len(res.Patches) != 0 {
		t.Errorf("a metadata-only update (finalizers) must pass unchanged: allowed=%v patches=%v", res.Allowed, res.Patches)
	}

	m.AllowNoBoundaries = true
	res = m.Handle(ctx, request(t, admissionv1.Create, "alice", igJSON(`{"eks":{"maxSize":1}}`, false), nil))
	if !res.Allowed {
		t.Errorf("open mode refused a create: %q", res.Result.Message)
	}
}

func TestValidatorRefusesSpecChangesWhileDeleting(t *testing.T) {
	v := &InstanceGroupValidator{}
	ctx := context.Background()
	old := igJSON(`{"eks":{"maxSize":1}}`, true)
	res := v.Handle(ctx, request(t, admissionv1.Update, "alice", igJSON(`{"provisioner":"eks-fargate","eks":{"maxSize":1}}`, true), old))
	if res.Allowed || !strings.Contains(res.Result.Message, "is being deleted: spec changes are refused") {
		t.Errorf("spec change while deleting: allowed=%v %q", res.Allowed, res.Result.Message)
	}
	noFinalizers := igJSON(`{"eks":{"maxSize":1}}`, true)
	if res := v.Handle(ctx, request(t, admissionv1.Update, "controller", noFinalizers, old)); !res.Allowed {
		t.Errorf("finalizer removal refused: %q", res.Result.Message)
	}
}

func TestConfigMapDeleteRefusedWhileGroupsExist(t *testing.T) {
	scheme := runtime.NewScheme()
	if err := v1alpha1.AddToScheme(scheme); err != nil {
		t.Fatal(err)
	}
	req := admission.Request{AdmissionRequest: admissionv1.AdmissionRequest{Operation: admissionv1.Delete, Namespace: testConfigMap.Namespace, Name: testConfigMap.Name}}

	empty := &ConfigMapValidator{Client: fake.NewClientBuilder().WithScheme(scheme).Build(), ConfigMap: testConfigMap}
	if res := empty.Handle(context.Background(), req); !res.Allowed {
		t.Errorf("deleting with no groups: %q", res.Result.Message)
	}
	ig := &v1alpha1.InstanceGroup{ObjectMeta: metav1.ObjectMeta{Namespace: "team-a", Name: "web"}}
	busy := &ConfigMapValidator{Client: fake.NewClientBuilder().WithScheme(scheme).WithObjects(ig).Build(), ConfigMap: testConfigMap}
	res := busy.Handle(context.Background(), req)
	if res.Allowed || !strings.Contains(res.Result.Message, "holds the boundaries of 1 InstanceGroup(s) (team-a/web) and cannot be deleted") {
		t.Errorf("deleting with a group: allowed=%v %q", res.Allowed, res.Result.Message)
	}
}

func TestValidatorRefusesAClusterScopedCRDKind(t *testing.T) {
	st := &store.Store{}
	cfg, err := boundaries.Parse(map[string]string{"crdStrategy": "allowedKinds: [{group: example.com, kind: Cluster}]"})
	if err != nil {
		t.Fatal(err)
	}
	st.SetValid(cfg, "1")
	mapper := meta.NewDefaultRESTMapper(nil)
	mapper.Add(schema.GroupVersionKind{Group: "example.com", Version: "v1", Kind: "Cluster"}, meta.RESTScopeRoot)
	v := &InstanceGroupValidator{Boundaries: st, Mapper: mapper, ConfigMap: testConfigMap}
	ig := validEKS()
	ig.Namespace, ig.Name = "team-a", "g"
	ig.Spec.Strategy = v1alpha1.AwsUpgradeStrategy{Type: v1alpha1.StrategyCRD, CRD: &v1alpha1.CRDUpgradeStrategy{
		CRDName: "clusters", StatusJSONPath: "s", StatusSuccessString: "a", StatusFailureString: "b",
		Spec: "apiVersion: example.com/v1\nkind: Cluster\nmetadata: {name: x}\n"}}
	raw, _ := json.Marshal(ig)
	var obj map[string]any
	_ = json.Unmarshal(raw, &obj)
	submitted, _ := json.Marshal(obj["spec"])
	obj["metadata"].(map[string]any)["annotations"] = map[string]any{
		v1alpha1.AnnotationSubmittedSpec: string(submitted), v1alpha1.AnnotationBoundariesHash: "h"}
	res := v.Handle(context.Background(), request(t, admissionv1.Create, "alice", obj, nil))
	if res.Allowed || !strings.Contains(res.Result.Message, "kind Cluster is cluster-scoped") {
		t.Errorf("allowed=%v %q", res.Allowed, res.Result.Message)
	}
}

// The force-delete annotation changes how a deletion goes, so it stays a
// restricted behaviour annotation on a group being deleted (whose other
// metadata changes go through unrecomputed): refused in deny mode unless
// the ConfigMap shares it, dropped with a warning in warn mode.
func TestBehaviourAnnotationsRestrictedWhileDeleting(t *testing.T) {
	withAnnotation := func(deleting bool, ann map[string]any) map[string]any {
		o := igJSON(`{"eks":{"maxSize":1}}`, deleting)
		if ann != nil {
			o["metadata"].(map[string]any)["annotations"] = ann
		}
		return o
	}
	force := map[string]any{v1alpha1.AnnotationForceDelete: "true"}
	cases := []struct {
		name, user, data string
		want             string // "allow", "deny" or "warn"
	}{
		{"deny mode, not shared", "alice", "enforcement: deny", "deny"},
		{"warn mode, not shared", "alice", "enforcement: warn", "warn"},
		{"shared", "alice", "enforcement: deny", "allow+shared"},
		{"the controller", "controller", "enforcement: deny", "allow"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			data := map[string]string{"enforcement": strings.TrimPrefix(tc.data, "enforcement: ")}
			want := tc.want
			if want == "allow+shared" {
				data["sharedAnnotations"] = "[" + v1alpha1.AnnotationForceDelete + "]"
				want = "allow"
			}
			cfg, err := boundaries.Parse(data)
			if err != nil {
				t.Fatal(err)
			}
			st := &store.Store{}
			st.SetValid(cfg, "1")
			m := &InstanceGroupMutator{Boundaries: st, ControllerUser: "controller", ConfigMap: testConfigMap}
			res := m.Handle(context.Background(), request(t, admissionv1.Update, tc.user, withAnnotation(true, force), withAnnotation(true, nil)))
			switch want {
			case "deny":
				if res.Allowed || !strings.Contains(res.Result.Message, "metadata.annotations "+v1alpha1.AnnotationForceDelete+" are restricted by ConfigMap") {
					t.Errorf("allowed=%v %q, want a refusal naming the annotation", res.Allowed, res.Result.Message)
				}
			case "warn":
				if !res.Allowed || len(res.Patches) != 1 || len(res.Warnings) != 1 || !strings.Contains(res.Warnings[0], "the change was dropped") {
					t.Errorf("allowed=%v patches=%v warnings=%v, want the annotation dropped with a warning", res.Allowed, res.Patches, res.Warnings)
				}
			default:
				if !res.Allowed || len(res.Patches) != 0 {
					t.Errorf("allowed=%v patches=%v %q, want it through unchanged", res.Allowed, res.Patches, res.Result.Message)
				}
			}
			// Other metadata of a deleting group (finalizers) goes through.
			fin := withAnnotation(true, nil)
			fin["metadata"].(map[string]any)["finalizers"] = []any{}
			if res := m.Handle(context.Background(), request(t, admissionv1.Update, tc.user, fin, withAnnotation(true, nil))); !res.Allowed || len(res.Patches) != 0 {
				t.Errorf("a finalizer change: allowed=%v patches=%v", res.Allowed, res.Patches)
			}
		})
	}
}

// The crd template is judged when it is new or changed; an unchanged one
// that the ConfigMap no longer allows goes through other edits (the
// reconciler refuses it before submitting), so the admin can tighten the
// crd strategy without freezing the groups that use it.
func TestValidatorChecksTheCRDTemplateWhenItChanges(t *testing.T) {
	st := &store.Store{}
	// No crdStrategy: no kind. The namespace opts out of the restricted
	// paths' re-check, not of the crd strategy's confinement.
	cfg, err := boundaries.Parse(map[string]string{"excludedNamespaces": "[team-a]"})
	if err != nil {
		t.Fatal(err)
	}
	st.SetValid(cfg, "1")
	v := &InstanceGroupValidator{Boundaries: st, ConfigMap: testConfigMap}
	group := func(tmpl string, maxSize int64) map[string]any {
		ig := validEKS()
		ig.Namespace, ig.Name = "team-a", "g"
		ig.Spec.EKS.MaxSize = maxSize
		ig.Spec.Strategy = v1alpha1.AwsUpgradeStrategy{Type: v1alpha1.StrategyCRD, CRD: &v1alpha1.CRDUpgradeStrategy{
			CRDName: "rollingupgrades", StatusJSONPath: "s", StatusSuccessString: "a", StatusFailureString: "b", Spec: tmpl}}
		raw, _ := json.Marshal(ig)
		var obj map[string]any
		_ = json.Unmarshal(raw, &obj)
		submitted, _ := json.Marshal(obj["spec"])
		obj["metadata"].(map[string]any)["annotations"] = map[string]any{
			v1alpha1.AnnotationSubmittedSpec: string(submitted), v1alpha1.AnnotationBoundariesHash: "h"}
		return obj
	}
	const ru = "apiVersion: upgrademgr.keikoproj.io/v1alpha1\nkind: RollingUpgrade\n"
	const refused = "kind RollingUpgrade.upgrademgr.keikoproj.io is not allowed by the boundary ConfigMap's crdStrategy.allowedKinds (allowed: none)"
	for name, tc := range map[string]struct {
		op       admissionv1.Operation
		obj, old map[string]any
		want     string
	}{
		"create":                   {admissionv1.Create, group(ru, 3), nil, refused},
		"update of the template":   {admissionv1.Update, group(ru+"spec: {}\n", 3), group(ru, 3), refused},
		"update of something else": {admissionv1.Update, group(ru, 4), group(ru, 3), ""},
		"switch to crd, template kept": {admissionv1.Update, group(ru, 3), func() map[string]any {
			o := group(ru, 3)
			o["spec"].(map[string]any)["strategy"] = map[string]any{"type": "rollingUpdate"}
			return o
		}(), refused},
	} {
		t.Run(name, func(t *testing.T) {
			res := v.Handle(context.Background(), request(t, tc.op, "alice", tc.obj, tc.old))
			if tc.want == "" && !res.Allowed || tc.want != "" && (res.Allowed || !strings.Contains(res.Result.Message, tc.want)) {
				t.Errorf("allowed=%v %q, want %q", res.Allowed, res.Result.Message, tc.want)
			}
		})
	}
}
