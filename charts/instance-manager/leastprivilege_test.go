package chart

import (
	"slices"
	"testing"

	corev1 "k8s.io/api/core/v1"

	"github.com/instancemgr/instance-manager/app"
	"github.com/instancemgr/instance-manager/boundaries"
)

// TestLeastPrivilegeValues: clusterName, additionalClusterNames and iam.*
// reach the manager's flags, and boundaryConfigMap.allowlists a ConfigMap
// the manager parses.
func TestLeastPrivilegeValues(t *testing.T) {
	t.Run("defaults: no cluster pinned, the default IAM path, no boundary", func(t *testing.T) {
		opts := managerFlags(t, render(t, release{Namespace: "im-system"}))
		if opts.ClusterName != "" || opts.IAMPath != "/instance-manager/" || opts.IAMPermissionsBoundary != "" {
			t.Errorf("flags %+v", opts.LeastPrivilege)
		}
	})
	t.Run("set", func(t *testing.T) {
		const boundary = "arn:aws:iam::111122223333:policy/instance-manager-node-boundary"
		opts := managerFlags(t, render(t, release{Namespace: "im-system", Values: map[string]any{
			"clusterName": "prod", "additionalClusterNames": []any{"prod-eu", "prod-us"},
			"iam": map[string]any{"path": "/nodes/", "permissionsBoundary": boundary},
		}}))
		want := app.LeastPrivilege{ClusterName: "prod", AdditionalClusterNames: []string{"prod-eu", "prod-us"}, IAMPath: "/nodes/", IAMPermissionsBoundary: boundary}
		if opts.ClusterName != want.ClusterName || !slices.Equal(opts.AdditionalClusterNames, want.AdditionalClusterNames) ||
			opts.IAMPath != want.IAMPath || opts.IAMPermissionsBoundary != want.IAMPermissionsBoundary {
			t.Errorf("flags %+v, want %+v", opts.LeastPrivilege, want)
		}
	})
	t.Run("allowlists", func(t *testing.T) {
		r := render(t, release{Namespace: "im-system", Values: map[string]any{"boundaryConfigMap": map[string]any{
			"create": true, "allowlists": map[string]any{"roles": []any{"team-*"}, "snapshots": []any{}},
		}}})
		cm := typed[corev1.ConfigMap](t, r.one(t, "ConfigMap"))
		cfg, err := boundaries.Parse(cm.Data)
		if err != nil {
			t.Fatal(err)
		}
		if l, written, _ := cfg.Allowlists.List(boundaries.AllowRoles); !written || !slices.Equal(l, []string{"team-*"}) {
			t.Errorf("roles %v (written %v)", l, written)
		}
		if l, written, _ := cfg.Allowlists.List(boundaries.AllowSnapshots); !written || len(l) != 0 {
			t.Errorf("an empty snapshots list must stay written and empty: %v %v", l, written)
		}
	})
	for name, values := range map[string]map[string]any{
		"iam.path not a path":       {"iam": map[string]any{"path": "nodes"}},
		"boundary not a policy ARN": {"iam": map[string]any{"permissionsBoundary": "boundary"}},
		"unknown allowlist":         {"boundaryConfigMap": map[string]any{"allowlists": map[string]any{"role": []any{"x"}}}},
	} {
		t.Run("schema refuses "+name, func(t *testing.T) {
			if _, err := template(t, release{Namespace: "im-system", Values: values}); err == nil {
				t.Errorf("helm template accepted %v", values)
			}
		})
	}
}
