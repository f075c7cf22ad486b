package instancegroup

import (
	"strings"
	"testing"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/instancemgr/instance-manager/api/v1alpha1"
	"github.com/instancemgr/instance-manager/boundaries"
	"github.com/instancemgr/instance-manager/boundaries/store"
)

func TestAdmissionGate(t *testing.T) {
	cfg, err := boundaries.Parse(map[string]string{"defaults": "spec:\n  provisioner: eks\n", "excludedNamespaces": "[free]"})
	if err != nil {
		t.Fatal(err)
	}
	loaded := func(c *boundaries.Config) store.State {
		st := &store.Store{}
		st.SetValid(c, "1")
		return st.Get()
	}
	group := func(ns, hash string, conds ...metav1.Condition) *v1alpha1.InstanceGroup {
		ig := &v1alpha1.InstanceGroup{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "web"}}
		if hash != "" {
			ig.Annotations = map[string]string{v1alpha1.AnnotationBoundariesHash: hash}
		}
		ig.Status.Conditions = conds
		return ig
	}
	refused := metav1.Condition{Type: v1alpha1.ConditionBoundariesApplied, Status: metav1.ConditionFalse, Reason: "Rejected", Message: "quota exceeded"}
	var noConfig *boundaries.Config
	for _, tc := range []struct {
		name       string
		ig         *v1alpha1.InstanceGroup
		st         store.State
		open       bool
		violations Violations
		wantReason string
		wantText   string
	}{
		{"admitted under the boundaries in force", group("team", cfg.Hash(false)), loaded(cfg), false, nil, "", ""},
		{"admitted in an opted-out namespace", group("free", cfg.Hash(true)), loaded(cfg), false, nil, "", ""},
		{"boundaries not read yet", group("team", cfg.Hash(false)), store.State{}, false, nil, ReasonBoundariesNotLoaded, ""},
		{"stored without admission", group("team", ""), loaded(cfg), false, nil, ReasonNotAdmitted, "webhooks were unavailable or bypassed"},
		{"stored without admission, no ConfigMap", group("team", ""), loaded(nil), false, nil, ReasonNotAdmitted, ""},
		{"admitted under older boundaries", group("team", "old"), loaded(cfg), false, nil, ReasonBoundariesStale, "hash old"},
		{"re-admission refused", group("team", "old", refused), loaded(cfg), false, nil, ReasonBoundariesStale, "re-admission was refused: quota exceeded"},
		{"no ConfigMap: the last spec is kept", group("team", "old"), loaded(nil), false, nil, "", ""},
		{"open mode without a ConfigMap", group("team", noConfig.Hash(false)), loaded(nil), true, nil, "", ""},
		{"admitted, then changed while the webhooks were bypassed", group("team", cfg.Hash(false)), loaded(cfg), false,
			func(*boundaries.Config, *v1alpha1.InstanceGroup) ([]string, error) {
				return []string{`spec.eks.configuration.image is "ami-forged", the boundaries give "ami-admin"`}, nil
			}, ReasonNotAdmitted, `changed without instance-manager's admission`},
		{"admitted and unchanged", group("team", cfg.Hash(false)), loaded(cfg), false,
			func(*boundaries.Config, *v1alpha1.InstanceGroup) ([]string, error) { return nil, nil }, "", ""},
		{"open mode, admitted under a deleted ConfigMap", group("team", cfg.Hash(false)), loaded(nil), true, nil, ReasonBoundariesStale, ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			reason, msg := admissionGate(tc.ig, tc.st, tc.open, tc.violations)
			if reason != tc.wantReason || !strings.Contains(msg, tc.wantText) {
				t.Errorf("admissionGate = %q, %q; want %q containing %q", reason, msg, tc.wantReason, tc.wantText)
			}
		})
	}
}
