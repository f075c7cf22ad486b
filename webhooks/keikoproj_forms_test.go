package webhooks

import (
	"context"
	"encoding/json"
	"reflect"
	"strings"
	"testing"

	jsonpatch "github.com/evanphx/json-patch/v5"
	admissionv1 "k8s.io/api/admission/v1"

	"github.com/instancemgr/instance-manager/api/v1alpha1"
	"github.com/instancemgr/instance-manager/boundaries"
	"github.com/instancemgr/instance-manager/boundaries/store"
)

// The list-of-maps form of eks-fargate.tags gives the same stored spec as
// our map form; the submitted-spec annotation keeps what the tenant wrote;
// a tenant's later update that leaves tags alone keeps the list in the
// annotation; the validating webhook's re-check of the boundaries passes.
func TestMutatorNormalisesTheOriginalsForms(t *testing.T) {
	data := map[string]string{
		"boundaries": "restricted: [spec.eks-fargate.clusterName]\n",
		"defaults":   "spec:\n  eks-fargate:\n    clusterName: the-cluster\n    subnets: [subnet-1]\n",
	}
	cfg, err := boundaries.Parse(data)
	if err != nil {
		t.Fatal(err)
	}
	st := &store.Store{}
	st.SetData(cfg, "1", data, boundaries.Revision(data))
	m := &InstanceGroupMutator{Boundaries: st, ControllerUser: "controller", ConfigMap: testConfigMap}
	v := &InstanceGroupValidator{Boundaries: st, ConfigMap: testConfigMap}
	ctx := context.Background()

	admit := func(op admissionv1.Operation, obj, old map[string]any) map[string]any {
		t.Helper()
		req := request(t, op, "alice", obj, old)
		res := m.Handle(ctx, req)
		if !res.Allowed {
			t.Fatalf("refused: %s", res.Result.Message)
		}
		ops, err := json.Marshal(res.Patches)
		if err != nil {
			t.Fatal(err)
		}
		patch, err := jsonpatch.DecodePatch(ops)
		if err != nil {
			t.Fatal(err)
		}
		raw, err := patch.Apply(req.Object.Raw)
		if err != nil {
			t.Fatal(err)
		}
		var out map[string]any
		if err := json.Unmarshal(raw, &out); err != nil {
			t.Fatal(err)
		}
		if vres := v.Handle(ctx, request(t, op, "alice", out, old)); !vres.Allowed {
			t.Fatalf("the validating webhook refused the mutated object %s: %s", boundaries.CompactJSON(out["spec"]), vres.Result.Message)
		}
		return out
	}
	const selectors = `"selectors":[{"namespace":"team-a"}]`
	theirs := admit(admissionv1.Create, igJSON(`{"provisioner":"eks-fargate","strategy":{"type":"managed"},"eks-fargate":{`+selectors+`,"tags":[{"key1":"v1","key2":"v2"}]}}`, false), nil)
	ours := admit(admissionv1.Create, igJSON(`{"provisioner":"eks-fargate","strategy":{"type":"managed"},"eks-fargate":{`+selectors+`,"tags":{"key1":"v1","key2":"v2"}}}`, false), nil)
	if !reflect.DeepEqual(theirs["spec"], ours["spec"]) {
		t.Errorf("the list form stored %s, the map form %s", boundaries.CompactJSON(theirs["spec"]), boundaries.CompactJSON(ours["spec"]))
	}
	tags := theirs["spec"].(map[string]any)["eks-fargate"].(map[string]any)["tags"]
	if want := map[string]any{"key1": "v1", "key2": "v2"}; !reflect.DeepEqual(tags, want) {
		t.Errorf("stored tags %s, want %s", boundaries.CompactJSON(tags), boundaries.CompactJSON(want))
	}
	annotation := func(o map[string]any) string {
		return o["metadata"].(map[string]any)["annotations"].(map[string]any)[v1alpha1.AnnotationSubmittedSpec].(string)
	}
	if a := annotation(theirs); !strings.Contains(a, `"tags":[{"key1":"v1","key2":"v2"}]`) {
		t.Errorf("the submitted-spec annotation lost the tenant's form: %s", a)
	}

	// An update that changes something else (as kubectl apply's patch of
	// the stored object gives it) keeps the tenant's tags.
	edit := deepCopyJSON(t, theirs)
	edit["spec"].(map[string]any)["eks-fargate"].(map[string]any)["selectors"] = []any{map[string]any{"namespace": "team-a", "labels": map[string]any{"app": "web"}}}
	updated := admit(admissionv1.Update, edit, theirs)
	if a := annotation(updated); !strings.Contains(a, `"tags":[{"key1":"v1","key2":"v2"}]`) || !strings.Contains(a, `"labels":{"app":"web"}`) {
		t.Errorf("after an update the submitted-spec annotation is %s", a)
	}

	// Conflicting keys are refused, naming the path.
	res := m.Handle(ctx, request(t, admissionv1.Create, "alice",
		igJSON(`{"provisioner":"eks-fargate","eks-fargate":{`+selectors+`,"tags":[{"a":"1"},{"a":"2"}]}}`, false), nil))
	if res.Allowed || !strings.Contains(res.Result.Message, `spec.eks-fargate.tags[1][a]: Invalid value: "2": tag "a" is already set to "1" by spec.eks-fargate.tags[0][a]`) {
		t.Errorf("conflicting tags: allowed=%v %q", res.Allowed, res.Result.Message)
	}
}

func deepCopyJSON(t *testing.T, v map[string]any) map[string]any {
	t.Helper()
	b, err := json.Marshal(v)
	if err != nil {
		t.Fatal(err)
	}
	var out map[string]any
	if err := json.Unmarshal(b, &out); err != nil {
		t.Fatal(err)
	}
	return out
}

// The CRD does not type eks-fargate.tags (it takes two shapes), so the
// validating webhook is what keeps anything but our map out of storage
// when the mutating webhook did not run.
func TestValidatorRefusesAStoredListOfTags(t *testing.T) {
	st := &store.Store{}
	st.SetValid(nil, "")
	v := &InstanceGroupValidator{Boundaries: st, ConfigMap: testConfigMap}
	obj := igJSON(`{"provisioner":"eks-fargate","strategy":{"type":"managed"},"eks-fargate":{"clusterName":"c","subnets":["s"],"selectors":[{"namespace":"team-a"}],"tags":[{"a":"1"}]}}`, false)
	obj["metadata"].(map[string]any)["annotations"] = map[string]any{v1alpha1.AnnotationSubmittedSpec: `{}`, v1alpha1.AnnotationBoundariesHash: "h"}
	res := v.Handle(context.Background(), request(t, admissionv1.Create, "alice", obj, nil))
	if res.Allowed || !strings.Contains(res.Result.Message, "spec.eks-fargate.tags") {
		t.Errorf("a stored list of tags: allowed=%v %q", res.Allowed, res.Result.Message)
	}
}
