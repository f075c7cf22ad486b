package upgrade

import (
	"context"
	"strings"
	"testing"

	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/tools/events"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/fake"

	"github.com/instancemgr/instance-manager/api/v1alpha1"
	"github.com/instancemgr/instance-manager/boundaries"
	"github.com/instancemgr/instance-manager/boundaries/store"
	"github.com/instancemgr/instance-manager/providers"
)

var ruGVK = schema.GroupVersionKind{Group: "upgrademgr.keikoproj.io", Version: "v1alpha1", Kind: "RollingUpgrade"}

func confinedStrategy(objs ...client.Object) (*CRDStrategy, client.Client) {
	mapper := meta.NewDefaultRESTMapper(nil)
	mapper.Add(ruGVK, meta.RESTScopeNamespace)
	mapper.Add(v1alpha1.GroupVersion.WithKind("InstanceGroup"), meta.RESTScopeNamespace)
	mapper.Add(schema.GroupVersionKind{Group: "rbac.authorization.k8s.io", Version: "v1", Kind: "ClusterRoleBinding"}, meta.RESTScopeRoot)
	c := fake.NewClientBuilder().WithRESTMapper(mapper).WithObjects(objs...).Build()
	cfg, err := boundaries.Parse(map[string]string{"crdStrategy": "allowedKinds: [{group: upgrademgr.keikoproj.io, kind: RollingUpgrade, tenantFields: [spec.strategy]}]"})
	if err != nil {
		panic(err)
	}
	st := &store.Store{}
	st.SetValid(cfg, "1")
	return &CRDStrategy{Client: c, Recorder: events.NewFakeRecorder(10), Boundaries: st}, c
}

func crdGroup(ns, tmpl string) *v1alpha1.InstanceGroup {
	ig := &v1alpha1.InstanceGroup{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "g", UID: "uid-g"}}
	ig.Spec.Strategy = v1alpha1.AwsUpgradeStrategy{Type: v1alpha1.StrategyCRD, CRD: &v1alpha1.CRDUpgradeStrategy{
		CRDName: "rollingupgrades", Spec: tmpl, StatusJSONPath: "status.currentStatus", StatusSuccessString: "completed", StatusFailureString: "error"}}
	return ig
}

const ruTemplate = "apiVersion: upgrademgr.keikoproj.io/v1alpha1\nkind: RollingUpgrade\nmetadata: {name: rollup-nodes}\nspec: {}\n"

func TestCRDStrategyIsConfined(t *testing.T) {
	ctx := context.Background()
	obs := &providers.Observation{LatestTemplateVersion: "2", GroupName: "team-asg-1a2b"}

	// Another tenant's object with the fixed name is never deleted.
	theirs := &unstructured.Unstructured{}
	theirs.SetGroupVersionKind(ruGVK)
	theirs.SetNamespace("team-a")
	theirs.SetName("rollup-nodes")
	s, c := confinedStrategy(theirs)
	_, err := s.Step(ctx, crdGroup("team-a", ruTemplate), obs)
	if err == nil || !strings.Contains(err.Error(), "is not owned by InstanceGroup g") {
		t.Fatalf("Step = %v, want a refusal to touch an object it does not own", err)
	}
	if err := c.Get(ctx, client.ObjectKeyFromObject(theirs), theirs); err != nil {
		t.Fatalf("the unowned object is gone: %v", err)
	}

	// What it creates carries an ownerReference and lands in the group's namespace.
	s, c = confinedStrategy()
	if _, err := s.Step(ctx, crdGroup("team-b", ruTemplate), obs); err != nil {
		t.Fatal(err)
	}
	mine := &unstructured.Unstructured{}
	mine.SetGroupVersionKind(ruGVK)
	if err := c.Get(ctx, client.ObjectKey{Namespace: "team-b", Name: "rollup-nodes"}, mine); err != nil {
		t.Fatal(err)
	}
	if refs := mine.GetOwnerReferences(); len(refs) != 1 || refs[0].UID != "uid-g" {
		t.Errorf("owner references = %v", refs)
	}
	// The template leaves asgName out: the controller fills the observed group.
	if name, _, _ := unstructured.NestedString(mine.Object, "spec", "asgName"); name != "team-asg-1a2b" {
		t.Errorf("asgName = %q, want the observed group", name)
	}

	for name, tc := range map[string]struct{ tmpl, want string }{
		"another namespace":   {strings.Replace(ruTemplate, "{name: rollup-nodes}", "{name: x, namespace: payments}", 1), `metadata.namespace "payments" is not the group's namespace "team-c"`},
		"a kind not allowed":  {"apiVersion: instancemgr.keikoproj.io/v1alpha1\nkind: InstanceGroup\nmetadata: {name: payments-nodes}\n", "kind InstanceGroup.instancemgr.keikoproj.io is not allowed"},
		"a template bomb":     {"apiVersion: v1\nkind: ConfigMap\n{{range 100000000}}x{{end}}", "Go templates are no longer accepted"},
		"a script":            {strings.Replace(ruTemplate, "spec: {}", "spec: {preDrain: {script: id}}", 1), "spec.preDrain.script may not be set"},
		"another group's ASG": {strings.Replace(ruTemplate, "spec: {}", "spec: {asgName: system-nodes}", 1), "spec.asgName must be ${.status.activeScalingGroupName}"},
		// Security review attack 04: stored behind a status branch, met by
		// the reconciler with the status set. Never evaluated.
		"a status-guarded bomb": {strings.Replace(ruTemplate, "spec: {}", "spec: {strategy: {mode: '{{if .InstanceGroup.Status.ActiveScalingGroupName}}{{$a := \"x\"}}"+
			strings.Repeat(`{{$a = printf \"%s%s\" $a $a}}`, 30)+"{{end}}'}}", 1), "Go templates are no longer accepted"},
	} {
		s, c := confinedStrategy()
		ig := crdGroup("team-c", tc.tmpl)
		ig.Status.ActiveScalingGroupName = "team-asg-1a2b"
		if _, err := s.Step(ctx, ig, obs); err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%s: Step = %v, want %q", name, err, tc.want)
		}
		list := &unstructured.UnstructuredList{}
		list.SetGroupVersionKind(ruGVK.GroupVersion().WithKind("RollingUpgradeList"))
		if err := c.List(ctx, list); err != nil || len(list.Items) != 0 {
			t.Errorf("%s: submitted %d objects (%v)", name, len(list.Items), err)
		}
	}

	// The admin withdraws the kind: a template admitted earlier is refused
	// before anything is submitted.
	s, _ = confinedStrategy()
	none, err := boundaries.Parse(nil)
	if err != nil {
		t.Fatal(err)
	}
	s.Boundaries.SetValid(none, "2")
	if _, err := s.Step(ctx, crdGroup("team-d", ruTemplate), obs); err == nil || !strings.Contains(err.Error(), "crdStrategy.allowedKinds (allowed: none)") {
		t.Errorf("Step after the kind was withdrawn = %v", err)
	}
}
