package integration

import (
	"bytes"
	"context"
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	authorizationv1 "k8s.io/api/authorization/v1"
	corev1 "k8s.io/api/core/v1"
	eventsv1 "k8s.io/api/events/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/rest"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/yaml"

	"github.com/instancemgr/instance-manager/api/v1alpha1"
	"github.com/instancemgr/instance-manager/app"
	"github.com/instancemgr/instance-manager/test/harness"
)

const configNamespace = "instance-manager"

// examplePath is a manifest of examples/, which must work unchanged.
func examplePath(name string) string {
	return filepath.Join(repoRoot, "examples", name)
}

// exampleConfigMapData returns the data of the example boundary ConfigMap.
func exampleConfigMapData(t *testing.T) map[string]string {
	t.Helper()
	raw, err := os.ReadFile(examplePath("boundaries-configmap.yaml"))
	if err != nil {
		t.Fatalf("reading the example ConfigMap: %v", err)
	}
	cm := &corev1.ConfigMap{}
	if err := yaml.UnmarshalStrict(raw, cm); err != nil {
		t.Fatalf("decoding the example ConfigMap: %v", err)
	}
	return cm.Data
}

// setConfigMap creates or replaces the boundary ConfigMap's data as admin
// and returns the API error, if any.
func setConfigMap(ctx context.Context, data map[string]string) error {
	return harness.WriteBoundaries(ctx, admin, data)
}

// mustSetConfigMap sets the ConfigMap and waits until the manager has
// loaded that version.
func mustSetConfigMap(t *testing.T, data map[string]string) {
	t.Helper()
	if err := harness.SetBoundaries(context.Background(), admin, data); err != nil {
		t.Fatal(err)
	}
}

// waitForEvent waits until an Event about namespace/name has reason and a
// note containing text.
func waitForEvent(t *testing.T, namespace, name, reason, text string) eventsv1.Event {
	t.Helper()
	e, err := harness.WaitForEvent(context.Background(), admin, namespace, name, reason, text, harness.ConvergeTimeout)
	if err != nil {
		t.Fatal(err)
	}
	return e
}

// ensureNamespace creates ns (with annotations) if missing, and makes
// sure the namespace carries exactly the given annotations.
func ensureNamespace(t *testing.T, name string, annotations map[string]string) {
	t.Helper()
	ctx := context.Background()
	ns := &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: name}}
	err := admin.Get(ctx, client.ObjectKeyFromObject(ns), ns)
	if apierrors.IsNotFound(err) {
		ns.Annotations = annotations
		if err := admin.Create(ctx, ns); err != nil {
			t.Fatalf("creating namespace %s: %v", name, err)
		}
		return
	}
	if err != nil {
		t.Fatal(err)
	}
	ns.Annotations = annotations
	if err := admin.Update(ctx, ns); err != nil {
		t.Fatalf("updating namespace %s: %v", name, err)
	}
}

// tenant is a user allowed, by RBAC, to manage InstanceGroups in one
// namespace only.
type tenant struct {
	user      string
	namespace string
	client    client.Client
	warnings  *warningCollector
}

// newTenant creates the namespace, a Role and RoleBinding giving user full
// access to InstanceGroups there, and a client impersonating user.
func newTenant(t *testing.T, user, namespace string) *tenant {
	t.Helper()
	ctx := context.Background()
	ensureNamespace(t, namespace, nil)
	role := &rbacv1.Role{
		ObjectMeta: metav1.ObjectMeta{Namespace: namespace, Name: "instancegroup-editor"},
		Rules: []rbacv1.PolicyRule{{
			APIGroups: []string{v1alpha1.GroupVersion.Group}, Resources: []string{"instancegroups"},
			Verbs: []string{"get", "list", "watch", "create", "update", "patch", "delete"},
		}},
	}
	if err := admin.Create(ctx, role); err != nil && !apierrors.IsAlreadyExists(err) {
		t.Fatal(err)
	}
	binding := &rbacv1.RoleBinding{
		ObjectMeta: metav1.ObjectMeta{Namespace: namespace, Name: "instancegroup-editor-" + user},
		RoleRef:    rbacv1.RoleRef{APIGroup: "rbac.authorization.k8s.io", Kind: "Role", Name: role.Name},
		Subjects:   []rbacv1.Subject{{Kind: "User", APIGroup: "rbac.authorization.k8s.io", Name: user}},
	}
	if err := admin.Create(ctx, binding); err != nil && !apierrors.IsAlreadyExists(err) {
		t.Fatal(err)
	}
	w := &warningCollector{}
	cfg := rest.CopyConfig(environment.Config)
	cfg.Impersonate = rest.ImpersonationConfig{UserName: user, Groups: []string{"system:authenticated"}}
	cfg.WarningHandlerWithContext = w
	c, err := client.New(cfg, client.Options{Scheme: app.Scheme()})
	if err != nil {
		t.Fatal(err)
	}
	awaitAuthorized(t, c, namespace)
	return &tenant{user: user, namespace: namespace, client: c, warnings: w}
}

// awaitAuthorized waits until the API server's RBAC authorizer, which
// reads Roles from its informers, lets c create InstanceGroups in
// namespace: a request right after the RoleBinding was created can be
// refused with "role ... not found" on a loaded machine.
func awaitAuthorized(t *testing.T, c client.Client, namespace string) {
	t.Helper()
	deadline := time.Now().Add(30 * time.Second)
	for {
		review := &authorizationv1.SelfSubjectAccessReview{Spec: authorizationv1.SelfSubjectAccessReviewSpec{ResourceAttributes: &authorizationv1.ResourceAttributes{
			Namespace: namespace, Verb: "create", Group: v1alpha1.GroupVersion.Group, Resource: "instancegroups",
		}}}
		err := c.Create(context.Background(), review)
		if err == nil && review.Status.Allowed {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("the tenant is not allowed to create InstanceGroups in %s 30s after its RoleBinding: %v %+v", namespace, err, review.Status)
		}
		time.Sleep(100 * time.Millisecond)
	}
}

// kubectl runs kubectl as the tenant (impersonated) against the local
// control plane; stdin, if not nil, is the manifest.
func (tn *tenant) kubectl(t *testing.T, stdin []byte, args ...string) (string, error) {
	t.Helper()
	all := append([]string{"--kubeconfig", environment.Kubeconfig, "--as", tn.user, "--as-group", "system:authenticated", "-n", tn.namespace}, args...)
	cmd := exec.Command("kubectl", all...)
	if stdin != nil {
		cmd.Stdin = bytes.NewReader(stdin)
	}
	out, err := cmd.CombinedOutput()
	return string(out), err
}

type warningCollector struct {
	mu   sync.Mutex
	msgs []string
}

func (w *warningCollector) HandleWarningHeaderWithContext(_ context.Context, _ int, _ string, msg string) {
	w.mu.Lock()
	defer w.mu.Unlock()
	w.msgs = append(w.msgs, msg)
}

// take returns and clears the warnings received so far.
func (w *warningCollector) take() []string {
	w.mu.Lock()
	defer w.mu.Unlock()
	out := w.msgs
	w.msgs = nil
	return out
}

// specJSON returns the stored spec of ig as a generic JSON value.
func specJSON(t *testing.T, ig *v1alpha1.InstanceGroup) map[string]any {
	t.Helper()
	return toJSONMap(t, ig.Spec)
}

func toJSONMap(t *testing.T, v any) map[string]any {
	t.Helper()
	raw, err := json.Marshal(v)
	if err != nil {
		t.Fatal(err)
	}
	var out map[string]any
	if err := json.Unmarshal(raw, &out); err != nil {
		t.Fatal(err)
	}
	return out
}

func yamlToMap(t *testing.T, s string) map[string]any {
	t.Helper()
	var out map[string]any
	if err := yaml.Unmarshal([]byte(strings.TrimSpace(s)), &out); err != nil {
		t.Fatalf("bad test YAML: %v", err)
	}
	return out
}

func getIG(t *testing.T, namespace, name string) *v1alpha1.InstanceGroup {
	t.Helper()
	ig := &v1alpha1.InstanceGroup{}
	if err := admin.Get(context.Background(), client.ObjectKey{Namespace: namespace, Name: name}, ig); err != nil {
		t.Fatalf("getting InstanceGroup %s/%s: %v", namespace, name, err)
	}
	return ig
}

// deleteAllGroups deletes every InstanceGroup in the cluster, for a test
// whose assertions cover all groups. Groups being deleted are ignored by
// admission's dry runs, so the finalizers need not have run.
func deleteAllGroups(t *testing.T) {
	t.Helper()
	ctx := context.Background()
	list := &v1alpha1.InstanceGroupList{}
	if err := admin.List(ctx, list); err != nil {
		t.Fatalf("listing InstanceGroups: %v", err)
	}
	for i := range list.Items {
		if err := admin.Delete(ctx, &list.Items[i]); err != nil && !apierrors.IsNotFound(err) {
			t.Fatalf("deleting InstanceGroup %s/%s: %v", list.Items[i].Namespace, list.Items[i].Name, err)
		}
	}
}
