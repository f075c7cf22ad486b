package chart

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	authenticationv1 "k8s.io/api/authentication/v1"
	authorizationv1 "k8s.io/api/authorization/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/yaml"

	"github.com/instancemgr/instance-manager/test/env"
)

// access is one question to the authorizer: may the manager do this?
type access struct {
	verb, group, resource, subresource, namespace, name string
}

func (a access) String() string {
	r := a.resource
	if a.group != "" {
		r += "." + a.group
	}
	if a.subresource != "" {
		r += "/" + a.subresource
	}
	if a.name != "" {
		r += " " + a.name
	}
	if a.namespace != "" {
		r += " in " + a.namespace
	}
	return a.verb + " " + r
}

// TestRBAC installs the rendered ServiceAccount and RBAC into the local
// control plane and asks the API server's authorizer what the manager's
// ServiceAccount may do: what the manager needs is allowed, and what it
// does not need, nearby, is denied (other ConfigMaps and Secrets, other
// webhook configurations and Leases, deleting pods).
func TestRBAC(t *testing.T) {
	tool(t, "helm")
	e := env.Start(t, env.Options{})
	admin := kubernetes.NewForConfigOrDie(e.Config)

	t.Run("self-managed certificates", func(t *testing.T) {
		const ns = "im-rbac"
		sa := installRBAC(t, e, release{Namespace: ns})
		allowed := []access{
			{verb: "get", resource: "namespaces", name: "kube-system"},
			{verb: "list", group: "instancemgr.keikoproj.io", resource: "instancegroups"},
			{verb: "watch", group: "instancemgr.keikoproj.io", resource: "instancegroups"},
			{verb: "update", group: "instancemgr.keikoproj.io", resource: "instancegroups", namespace: "tenant"},
			{verb: "patch", group: "instancemgr.keikoproj.io", resource: "instancegroups", subresource: "status", namespace: "tenant"},
			{verb: "update", group: "instancemgr.keikoproj.io", resource: "instancegroups", subresource: "finalizers", namespace: "tenant"},
			{verb: "patch", resource: "nodes", name: "ip-10-0-0-1"},
			{verb: "list", resource: "pods"},
			{verb: "create", resource: "pods", subresource: "eviction", namespace: "tenant", name: "web-0"},
			{verb: "list", group: "policy", resource: "poddisruptionbudgets"},
			{verb: "list", group: "storage.k8s.io", resource: "volumeattachments"},
			{verb: "get", group: "apps", resource: "daemonsets", namespace: "kube-system", name: "aws-node"},
			{verb: "get", group: "apps", resource: "replicasets", namespace: "tenant", name: "web-5d8f"},
			{verb: "create", group: "authentication.k8s.io", resource: "tokenreviews"},
			{verb: "create", group: "authorization.k8s.io", resource: "subjectaccessreviews"},
			{verb: "create", resource: "events", namespace: "tenant"},
			{verb: "patch", group: "events.k8s.io", resource: "events", namespace: "tenant"},
			{verb: "get", resource: "configmaps", namespace: ns, name: "instance-manager"},
			{verb: "watch", resource: "configmaps", namespace: ns, name: "instance-manager"},
			// The rollout record: read by every replica, written by the leader.
			{verb: "watch", resource: "configmaps", namespace: ns, name: "instance-manager-rollout"},
			{verb: "update", resource: "configmaps", namespace: ns, name: "instance-manager-rollout"},
			{verb: "create", resource: "configmaps", namespace: ns},
			{verb: "create", group: "coordination.k8s.io", resource: "leases", namespace: ns},
			{verb: "update", group: "coordination.k8s.io", resource: "leases", namespace: ns, name: "instance-manager.instancemgr.keikoproj.io"},
			// The upgrade slots, listed by label, taken and given back.
			{verb: "list", group: "coordination.k8s.io", resource: "leases", namespace: ns},
			{verb: "update", group: "coordination.k8s.io", resource: "leases", namespace: ns, name: "instance-manager-upgrade-slot-0"},
			{verb: "delete", group: "coordination.k8s.io", resource: "leases", namespace: ns, name: "instance-manager-upgrade-slot-7"},
			// The GC's pending owners (reconciler/gc.PendingLeaseName).
			{verb: "get", group: "coordination.k8s.io", resource: "leases", namespace: ns, name: "instance-manager-gc-pending"},
			{verb: "update", group: "coordination.k8s.io", resource: "leases", namespace: ns, name: "instance-manager-gc-pending"},
			{verb: "update", resource: "configmaps", namespace: "kube-system", name: "aws-auth"},
			{verb: "list", resource: "configmaps", namespace: "kube-system", name: "aws-auth"},
			{verb: "watch", resource: "configmaps", namespace: "kube-system", name: "aws-auth"},
			{verb: "create", resource: "configmaps", namespace: "kube-system"},
			{verb: "update", resource: "secrets", namespace: ns, name: "instance-manager-webhook-cert"},
			{verb: "watch", resource: "secrets", namespace: ns},
			{verb: "update", group: "admissionregistration.k8s.io", resource: "mutatingwebhookconfigurations", name: "instance-manager"},
			{verb: "update", group: "admissionregistration.k8s.io", resource: "validatingwebhookconfigurations", name: "instance-manager"},
			{verb: "list", group: "admissionregistration.k8s.io", resource: "validatingwebhookconfigurations"},
		}
		denied := []access{
			{verb: "get", resource: "configmaps", namespace: ns, name: "other"},
			{verb: "delete", group: "storage.k8s.io", resource: "volumeattachments", name: "csi-0123"},
			{verb: "list", resource: "configmaps", namespace: ns},
			{verb: "update", resource: "configmaps", namespace: ns, name: "instance-manager"},
			{verb: "update", resource: "configmaps", namespace: ns, name: "other"},
			{verb: "delete", resource: "configmaps", namespace: ns, name: "instance-manager-rollout"},
			{verb: "get", resource: "configmaps", namespace: "tenant", name: "instance-manager"},
			{verb: "get", resource: "configmaps", namespace: "kube-system", name: "coredns"},
			{verb: "list", resource: "configmaps", namespace: "kube-system"},
			{verb: "delete", resource: "configmaps", namespace: "kube-system", name: "aws-auth"},
			{verb: "get", resource: "secrets", namespace: "tenant", name: "db-password"},
			{verb: "list", resource: "secrets", namespace: "kube-system"},
			{verb: "update", resource: "secrets", namespace: ns, name: "other"},
			{verb: "update", group: "admissionregistration.k8s.io", resource: "mutatingwebhookconfigurations", name: "someone-else"},
			{verb: "delete", group: "admissionregistration.k8s.io", resource: "validatingwebhookconfigurations", name: "instance-manager"},
			{verb: "delete", group: "coordination.k8s.io", resource: "leases", namespace: "kube-system", name: "someone-else"},
			{verb: "list", group: "coordination.k8s.io", resource: "leases", namespace: "tenant"},
			{verb: "update", group: "coordination.k8s.io", resource: "leases", namespace: "kube-system", name: "instance-manager.instancemgr.keikoproj.io"},
			{verb: "delete", resource: "pods", namespace: "tenant", name: "web-0"},
			{verb: "update", resource: "pods", namespace: "tenant", name: "web-0"},
			{verb: "delete", resource: "nodes", name: "ip-10-0-0-1"},
			{verb: "update", resource: "namespaces", name: "tenant"},
			{verb: "get", resource: "namespaces", name: "tenant"},
			{verb: "watch", resource: "namespaces"},
			{verb: "create", group: "instancemgr.keikoproj.io", resource: "instancegroups", namespace: "tenant"},
			{verb: "delete", group: "instancemgr.keikoproj.io", resource: "instancegroups", namespace: "tenant", name: "web"},
			{verb: "update", group: "apps", resource: "daemonsets", namespace: "kube-system", name: "aws-node"},
			{verb: "create", group: "apps", resource: "deployments", namespace: "tenant"},
			{verb: "list", group: "apps", resource: "replicasets", namespace: "tenant"},
			{verb: "update", group: "apps", resource: "replicasets", namespace: "tenant", name: "web-5d8f"},
			{verb: "create", group: "rbac.authorization.k8s.io", resource: "clusterrolebindings"},
			// The crd strategy's kinds only when the admin opts in
			// (rbac.crdStrategyResources; security review N1).
			{verb: "create", group: "upgrademgr.keikoproj.io", resource: "rollingupgrades", namespace: "tenant"},
			{verb: "delete", group: "upgrademgr.keikoproj.io", resource: "rollingupgrades", namespace: "tenant", name: "rollup"},
		}
		checkAccess(t, admin, ns, sa, allowed, true)
		checkAccess(t, admin, ns, sa, denied, false)

		// The manager's cache lists and watches the boundary ConfigMap with a
		// metadata.name field selector, which resourceNames allows; a real
		// request as the ServiceAccount proves it.
		// So does aws-auth in kube-system.
		client := kubernetes.NewForConfigOrDie(serviceAccountConfig(t, e, ns, sa))
		for cmNS, name := range map[string]string{ns: "instance-manager", "kube-system": "aws-auth"} {
			if _, err := client.CoreV1().ConfigMaps(cmNS).List(t.Context(), metav1.ListOptions{FieldSelector: "metadata.name=" + name}); err != nil {
				t.Errorf("listing ConfigMap %s/%s by name as the manager: %v", cmNS, name, err)
			}
			if _, err := client.CoreV1().ConfigMaps(cmNS).List(t.Context(), metav1.ListOptions{}); !apierrors.IsForbidden(err) {
				t.Errorf("listing every ConfigMap of %s as the manager: got %v, want Forbidden", cmNS, err)
			}
		}
	})

	t.Run("crd strategy opted in", func(t *testing.T) {
		const ns = "im-rbac-crd"
		sa := installRBAC(t, e, release{Name: "im-crd", Namespace: ns, Values: map[string]any{"rbac": map[string]any{
			"crdStrategyResources": []any{map[string]any{"apiGroup": "upgrademgr.keikoproj.io", "resources": []any{"rollingupgrades"}}}}}})
		ru := func(verb string) access {
			return access{verb: verb, group: "upgrademgr.keikoproj.io", resource: "rollingupgrades", namespace: "tenant", name: "rollup"}
		}
		checkAccess(t, admin, ns, sa, []access{ru("get"), ru("watch"), ru("delete"), {verb: "create", group: "upgrademgr.keikoproj.io", resource: "rollingupgrades", namespace: "tenant"}}, true)
		checkAccess(t, admin, ns, sa, []access{{verb: "create", group: "argoproj.io", resource: "workflows", namespace: "tenant"}}, false)
	})

	t.Run("cert-manager", func(t *testing.T) {
		const ns = "im-rbac-cm"
		sa := installRBAC(t, e, release{Name: "im-cm", Namespace: ns, Values: map[string]any{"certManager": map[string]any{"enabled": true}}})
		checkAccess(t, admin, ns, sa, []access{
			{verb: "list", group: "instancemgr.keikoproj.io", resource: "instancegroups"},
			{verb: "get", resource: "configmaps", namespace: ns, name: "instance-manager"},
		}, true)
		// Without the rotation, no Secret and no webhook configuration.
		checkAccess(t, admin, ns, sa, []access{
			{verb: "get", resource: "secrets", namespace: ns, name: "im-cm-instance-manager-webhook-cert"},
			{verb: "list", resource: "secrets", namespace: ns},
			{verb: "update", group: "admissionregistration.k8s.io", resource: "mutatingwebhookconfigurations", name: "instance-manager"},
			{verb: "list", group: "admissionregistration.k8s.io", resource: "validatingwebhookconfigurations"},
		}, false)
	})
}

// installRBAC creates r's namespace and applies the ServiceAccount and RBAC
// objects of r's rendering; it returns the ServiceAccount's name.
func installRBAC(t *testing.T, e *env.Environment, r release) string {
	t.Helper()
	rendering := render(t, r)
	var docs []string
	sa := ""
	for _, o := range rendering.objects {
		switch o.GetKind() {
		case "ServiceAccount":
			sa = o.GetName()
		case "ClusterRole", "ClusterRoleBinding", "Role", "RoleBinding":
		default:
			continue
		}
		b, err := yaml.Marshal(o.Object)
		if err != nil {
			t.Fatal(err)
		}
		docs = append(docs, string(b))
	}
	if sa == "" {
		t.Fatal("the rendering has no ServiceAccount")
	}
	ns := &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: r.Namespace}}
	if _, err := kubernetes.NewForConfigOrDie(e.Config).CoreV1().Namespaces().Create(t.Context(), ns, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	applyManifest(t, e, strings.Join(docs, "\n---\n"))
	return sa
}

// applyManifest applies manifest to e with kubectl (for real).
func applyManifest(t *testing.T, e *env.Environment, manifest string) {
	t.Helper()
	path := filepath.Join(t.TempDir(), "manifest.yaml")
	if err := os.WriteFile(path, []byte(manifest), 0o600); err != nil {
		t.Fatal(err)
	}
	if out, err := run(kubectl(t), "--kubeconfig", e.Kubeconfig, "apply", "-f", path); err != nil {
		t.Fatalf("kubectl apply: %v\n%s", err, out)
	}
}

// checkAccess asks the authorizer, through SubjectAccessReviews, whether the
// ServiceAccount ns/sa may do each of accesses, and fails t where the
// answer is not want.
func checkAccess(t *testing.T, admin kubernetes.Interface, ns, sa string, accesses []access, want bool) {
	t.Helper()
	user := fmt.Sprintf("system:serviceaccount:%s:%s", ns, sa)
	for _, a := range accesses {
		review, err := admin.AuthorizationV1().SubjectAccessReviews().Create(context.Background(), &authorizationv1.SubjectAccessReview{
			Spec: authorizationv1.SubjectAccessReviewSpec{
				User:   user,
				Groups: []string{"system:serviceaccounts", "system:serviceaccounts:" + ns, "system:authenticated"},
				ResourceAttributes: &authorizationv1.ResourceAttributes{
					Verb: a.verb, Group: a.group, Resource: a.resource, Subresource: a.subresource, Namespace: a.namespace, Name: a.name,
				},
			},
		}, metav1.CreateOptions{})
		if err != nil {
			t.Fatalf("SubjectAccessReview %s: %v", a, err)
		}
		if review.Status.Allowed != want {
			t.Errorf("%s as %s: allowed = %v, want %v (%s)", a, user, review.Status.Allowed, want, review.Status.Reason)
		}
	}
}

// serviceAccountConfig returns a client configuration authenticating as the
// ServiceAccount ns/name with a token from the TokenRequest API, as a pod
// running under it would.
func serviceAccountConfig(t *testing.T, e *env.Environment, ns, name string) *rest.Config {
	t.Helper()
	tr, err := kubernetes.NewForConfigOrDie(e.Config).CoreV1().ServiceAccounts(ns).CreateToken(t.Context(), name,
		&authenticationv1.TokenRequest{Spec: authenticationv1.TokenRequestSpec{ExpirationSeconds: ptr.To[int64](3600)}}, metav1.CreateOptions{})
	if err != nil {
		t.Fatalf("token for %s/%s: %v", ns, name, err)
	}
	cfg := rest.AnonymousClientConfig(e.Config)
	cfg.BearerToken = tr.Status.Token
	return cfg
}
