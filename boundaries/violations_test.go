package boundaries

import (
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	"sigs.k8s.io/yaml"

	"github.com/instancemgr/instance-manager/api/v1alpha1"
)

// The controller's re-check of a stored group (Violations) finds
// nothing in the group the mutating webhook made from the example tenant
// manifest under the example ConfigMap, and finds a restricted value
// changed behind the webhooks' back.
func TestViolations(t *testing.T) {
	read := func(name string, into any) {
		raw, err := os.ReadFile(filepath.Join("..", "examples", name))
		if err != nil {
			t.Fatal(err)
		}
		if err := yaml.Unmarshal(raw, into); err != nil {
			t.Fatal(err)
		}
	}
	cm := &corev1.ConfigMap{}
	read("boundaries-configmap.yaml", cm)
	cfg, err := Parse(cm.Data)
	if err != nil {
		t.Fatal(err)
	}
	tenant := &v1alpha1.InstanceGroup{}
	read("tenant-short.yaml", tenant)
	raw, _ := json.Marshal(tenant.Spec)
	var submitted map[string]any
	_ = json.Unmarshal(raw, &submitted)
	NormalizeSpellings(submitted)
	res, err := spelledCanonically(cfg).Effective(Input{Spec: submitted})
	if err != nil {
		t.Fatal(err)
	}
	NormalizeSpellings(res.Spec)
	stored := tenant.DeepCopy()
	stored.Spec = v1alpha1.InstanceGroupSpec{}
	effective, _ := json.Marshal(res.Spec)
	if err := json.Unmarshal(effective, &stored.Spec); err != nil {
		t.Fatal(err)
	}
	submittedJSON, _ := json.Marshal(submitted)
	stored.Annotations = map[string]string{v1alpha1.AnnotationSubmittedSpec: string(submittedJSON), v1alpha1.AnnotationBoundariesHash: res.Hash}

	if got, err := Violations(cfg, stored, nil, "instance-manager"); err != nil || len(got) != 0 {
		t.Fatalf("the admitted group: violations %v, %v; want none", got, err)
	}
	forged := stored.DeepCopy()
	forged.Spec.EKS.Configuration.Image = "ami-0forged000000000"
	got, err := Violations(cfg, forged, nil, "instance-manager")
	if err != nil || len(got) != 1 || !strings.Contains(got[0], "spec.eks.configuration.image") {
		t.Fatalf("the forged image: violations %v, %v; want one naming spec.eks.configuration.image", got, err)
	}
	if got, _ := Violations(nil, forged, nil, "instance-manager"); len(got) != 0 {
		t.Errorf("without boundaries: violations %v, want none", got)
	}
	if got, err := Violations(cfg, forged, map[string]any(res.Spec), "instance-manager"); err != nil || len(got) != 0 {
		t.Errorf("the forged group with the admitted spec about to be stored: violations %v, %v; want none", got, err)
	}
	// Recompute gives what admission stored, from the kept submission.
	again, err := Recompute(cfg, forged, "instance-manager")
	if err != nil {
		t.Fatal(err)
	}
	if d := diff(t, res.Spec, again); d != "" {
		t.Errorf("Recompute (-admitted +recomputed):\n%s", d)
	}
}
