package webhooks

import (
	"context"
	"encoding/json"
	"strings"
	"testing"

	jsonpatch "github.com/evanphx/json-patch/v5"
	admissionv1 "k8s.io/api/admission/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"sigs.k8s.io/controller-runtime/pkg/client/fake"
	"sigs.k8s.io/controller-runtime/pkg/webhook/admission"

	"github.com/instancemgr/instance-manager/api/v1alpha1"
	"github.com/instancemgr/instance-manager/boundaries"
	"github.com/instancemgr/instance-manager/boundaries/record"
	"github.com/instancemgr/instance-manager/boundaries/store"
)

// patchedImage applies the response's patches and returns the image and
// the boundaries-hash.
func patchedImage(t *testing.T, req admission.Request, res admission.Response) (string, string) {
	t.Helper()
	if !res.Allowed {
		t.Fatalf("refused: %s", res.Result.Message)
	}
	raw := req.Object.Raw
	if len(res.Patches) > 0 {
		ops, err := json.Marshal(res.Patches)
		if err != nil {
			t.Fatal(err)
		}
		patch, err := jsonpatch.DecodePatch(ops)
		if err != nil {
			t.Fatal(err)
		}
		if raw, err = patch.Apply(raw); err != nil {
			t.Fatal(err)
		}
	}
	var ig v1alpha1.InstanceGroup
	if err := json.Unmarshal(raw, &ig); err != nil {
		t.Fatal(err)
	}
	img := ""
	if ig.Spec.EKS != nil && ig.Spec.EKS.Configuration != nil {
		img = ig.Spec.EKS.Configuration.Image
	}
	return img, ig.Annotations[v1alpha1.AnnotationBoundariesHash]
}

// During a rollout that holds team-a back, a tenant's edit is merged with
// the revision its group runs; the controller's update carrying the
// target's hash moves it; a new group starts on the last good revision.
func TestMutatorAdmitsAgainstTheGroupsRevision(t *testing.T) {
	data := func(image string) map[string]string {
		return map[string]string{
			"boundaries": "restricted: [spec.eks.configuration.image]\n",
			"defaults":   "spec:\n  provisioner: eks\n  eks:\n    configuration:\n      image: " + image + "\n",
			"rollout":    "waves:\n- {name: canary, namespaces: [canary]}\n",
		}
	}
	oldCfg, _ := boundaries.Parse(data("ami-old"))
	newCfg, _ := boundaries.Parse(data("ami-new"))
	oldRev, newRev := boundaries.Revision(data("ami-old")), boundaries.Revision(data("ami-new"))
	st := &store.Store{}
	st.SetRecord(&record.Record{Target: newRev, Stable: oldRev, Phase: record.PhaseHalted, Wave: 0,
		Waves: []record.Wave{{Name: "canary"}, {Name: "rest"}}}, map[string]*boundaries.Config{oldRev: oldCfg})
	st.SetData(newCfg, "2", data("ami-new"), newRev)
	m := &InstanceGroupMutator{Boundaries: st, ControllerUser: "controller", ConfigMap: testConfigMap}
	ctx := context.Background()

	stored := igJSON(`{"provisioner":"eks","eks":{"maxSize":1,"configuration":{"image":"ami-old"}}}`, false)
	stored["metadata"].(map[string]any)["annotations"] = map[string]any{
		v1alpha1.AnnotationSubmittedSpec:  `{"eks":{"maxSize":1}}`,
		v1alpha1.AnnotationBoundariesHash: oldCfg.Hash(false),
	}
	edit := igJSON(`{"provisioner":"eks","eks":{"maxSize":3,"configuration":{"image":"ami-old"}}}`, false)
	edit["metadata"] = stored["metadata"]
	req := request(t, admissionv1.Update, "alice", edit, stored)
	if img, hash := patchedImage(t, req, m.Handle(ctx, req)); img != "ami-old" || hash != oldCfg.Hash(false) {
		t.Errorf("tenant edit during the halted rollout: image %s hash %s, want the last good ami-old", img, hash)
	}

	move := igJSON(`{"provisioner":"eks","eks":{"maxSize":1,"configuration":{"image":"ami-old"}}}`, false)
	move["metadata"] = map[string]any{"name": "g", "namespace": "team-a", "annotations": map[string]any{
		v1alpha1.AnnotationSubmittedSpec:  `{"eks":{"maxSize":1}}`,
		v1alpha1.AnnotationBoundariesHash: newCfg.Hash(false),
	}}
	req = request(t, admissionv1.Update, "controller", move, stored)
	if img, hash := patchedImage(t, req, m.Handle(ctx, req)); img != "ami-new" || hash != newCfg.Hash(false) {
		t.Errorf("the controller's move: image %s hash %s, want ami-new", img, hash)
	}

	// A revision this replica does not know yet: retry, do not guess.
	move["metadata"].(map[string]any)["annotations"].(map[string]any)[v1alpha1.AnnotationBoundariesHash] = "unknown"
	req = request(t, admissionv1.Update, "controller", move, stored)
	if res := m.Handle(ctx, req); res.Allowed || res.Result.Code != 503 {
		t.Errorf("unknown revision: allowed=%v code %d %q, want 503", res.Allowed, res.Result.Code, res.Result.Message)
	}

	req = request(t, admissionv1.Create, "alice", igJSON(`{"eks":{"maxSize":1}}`, false), nil)
	if img, _ := patchedImage(t, req, m.Handle(ctx, req)); img != "ami-old" {
		t.Errorf("create during the rollout got %s, want the last good ami-old", img)
	}
}

// The rollout action on the boundary ConfigMap itself is a slip: the
// change is allowed with a warning naming the rollout record.
func TestConfigMapWarnsAboutARolloutActionInTheWrongPlace(t *testing.T) {
	scheme := runtime.NewScheme()
	if err := v1alpha1.AddToScheme(scheme); err != nil {
		t.Fatal(err)
	}
	v := &ConfigMapValidator{Client: fake.NewClientBuilder().WithScheme(scheme).Build(), ConfigMap: testConfigMap}
	cm, _ := json.Marshal(map[string]any{"metadata": map[string]any{"name": testConfigMap.Name, "namespace": testConfigMap.Namespace,
		"annotations": map[string]any{record.AnnotationAction: "rollback"}}, "data": map[string]any{}})
	res := v.Handle(context.Background(), admission.Request{AdmissionRequest: admissionv1.AdmissionRequest{
		Operation: admissionv1.Create, Namespace: testConfigMap.Namespace, Name: testConfigMap.Name, Object: runtime.RawExtension{Raw: cm}}})
	if !res.Allowed || len(res.Warnings) != 1 || !strings.Contains(res.Warnings[0], "annotate ConfigMap instance-manager/instance-manager-rollout") {
		t.Errorf("allowed=%v warnings %q", res.Allowed, res.Warnings)
	}
}
