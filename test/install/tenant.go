package install

import (
	"context"
	"fmt"

	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/rest"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/instancemgr/instance-manager/api/v1alpha1"
	"github.com/instancemgr/instance-manager/app"
)

// TenantRole is the Role a tenant gets in its namespace: its
// InstanceGroups, the Events about them, and the workloads it runs on
// their nodes. Nothing cluster-wide: a tenant cannot see Nodes or the
// boundary ConfigMap.
var TenantRole = []rbacv1.PolicyRule{
	{APIGroups: []string{v1alpha1.GroupVersion.Group}, Resources: []string{"instancegroups"},
		Verbs: []string{"get", "list", "watch", "create", "update", "patch", "delete"}},
	{APIGroups: []string{"", "events.k8s.io"}, Resources: []string{"events"}, Verbs: []string{"get", "list", "watch"}},
	{APIGroups: []string{"apps"}, Resources: []string{"deployments"}, Verbs: []string{"get", "list", "watch", "create", "update", "patch", "delete"}},
	{APIGroups: []string{"policy"}, Resources: []string{"poddisruptionbudgets"}, Verbs: []string{"get", "list", "watch", "create", "update", "patch", "delete"}},
	{APIGroups: []string{""}, Resources: []string{"pods"}, Verbs: []string{"get", "list", "watch"}},
}

// Tenant is a namespace owner: a user bound to TenantRole in its
// namespace, acting through impersonation.
type Tenant struct {
	// Namespace is the tenant's namespace; User its user name.
	Namespace, User string
	// Config and Client act as User (the admin's credentials
	// impersonating it, with group system:authenticated only).
	Config *rest.Config
	Client client.Client
}

// NewTenant creates the namespace (if missing), the Role TenantRole named
// "instancegroup-owner" and its RoleBinding to user, and returns a client
// acting as user. Errors: the API calls failing (named).
func NewTenant(ctx context.Context, adminConfig *rest.Config, namespace, user string) (*Tenant, error) {
	admin, err := client.New(adminConfig, client.Options{Scheme: app.Scheme()})
	if err != nil {
		return nil, err
	}
	for _, o := range []client.Object{
		&corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: namespace}},
		&rbacv1.Role{ObjectMeta: metav1.ObjectMeta{Namespace: namespace, Name: "instancegroup-owner"}, Rules: TenantRole},
		&rbacv1.RoleBinding{
			ObjectMeta: metav1.ObjectMeta{Namespace: namespace, Name: "instancegroup-owner"},
			RoleRef:    rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "Role", Name: "instancegroup-owner"},
			Subjects:   []rbacv1.Subject{{APIGroup: rbacv1.GroupName, Kind: rbacv1.UserKind, Name: user}},
		},
	} {
		if err := admin.Create(ctx, o); err != nil && !apierrors.IsAlreadyExists(err) {
			return nil, fmt.Errorf("creating %T %s for tenant %s: %w", o, client.ObjectKeyFromObject(o), user, err)
		}
	}
	cfg := rest.CopyConfig(adminConfig)
	cfg.Impersonate = rest.ImpersonationConfig{UserName: user, Groups: []string{"system:authenticated"}}
	c, err := client.New(cfg, client.Options{Scheme: app.Scheme()})
	if err != nil {
		return nil, err
	}
	return &Tenant{Namespace: namespace, User: user, Config: cfg, Client: c}, nil
}

// ShortGroup returns the example tenant InstanceGroup (tenant-short.yaml)
// in the tenant's namespace.
func (t *Tenant) ShortGroup() (*v1alpha1.InstanceGroup, error) {
	ig, err := ExampleTenantGroup()
	if err != nil {
		return nil, err
	}
	ig.Namespace = t.Namespace
	return ig, nil
}
