package boundaries

import (
	"strings"
	"testing"
)

// Security review 2026-11-26 section 3: settings the ConfigMap webhook
// admits with a warning.
func TestAdminWarnings(t *testing.T) {
	for _, tc := range []struct {
		name string
		data map[string]string
		want []string // each must be in one warning; nil: no warning
	}{
		{"the example's kind of settings", map[string]string{"boundaries": "shared: {replace: [spec.strategy]}"}, nil},
		{"a reviewed crd kind", map[string]string{"crdStrategy": "allowedKinds: [{group: upgrademgr.keikoproj.io, kind: RollingUpgrade, tenantFields: [spec.strategy]}]"}, nil},
		{"an unreviewed crd kind", map[string]string{"crdStrategy": "allowedKinds: [{group: batch, kind: Job, tenantFields: [spec.template]}]"},
			[]string{"data.crdStrategy.allowedKinds[0]: instance-manager has not reviewed kind Job.batch", "runs tenant-written text"}},
		{"a namespace entry keeping every bound", map[string]string{"quotas": "perNamespace: {maxGroups: 5, maxSize: 10}\nnamespaces: {team-a: {maxGroups: 20, maxSize: 10}}"}, nil},
		{"a namespace entry dropping bounds", map[string]string{"quotas": "perNamespace: {maxGroups: 5, maxSize: 10, maxTotalVCPU: 64}\nnamespaces: {team-a: {maxGroups: 20}}"},
			[]string{"quotas.namespaces.team-a replaces quotas.perNamespace for namespace team-a, which then has no maxSize, maxTotalVCPU"}},
		{"a namespace entry without perNamespace", map[string]string{"quotas": "namespaces: {team-a: {maxGroups: 20}}"}, nil},
		{"waves by namespace", map[string]string{"rollout": "waves:\n- {name: canary, namespaces: [team-canary], selector: tier=canary}\n- {name: all}\n"}, nil},
		{"a wave by labels only", map[string]string{"rollout": "waves:\n- {name: canary, selector: rollout=canary}\n- {name: all}\n"},
			[]string{`data.rollout.waves[0] (canary) selects InstanceGroups by their labels (selector "rollout=canary"): tenants may no longer add, change or remove the labels it selects on`}},
		{"a conditional on a tenant's annotation", map[string]string{"conditionals": conditionalRole},
			[]string{`data.conditionals[0].annotationSelector "team=gpu" matches annotations tenants write on their own groups (team)`}},
		{"a conditional on an admin-only annotation", map[string]string{"conditionals": "- annotationSelector: 'instancemgr.keikoproj.io/os-family = windows, team'\n  defaults: {spec: {eks: {configuration: {volSize: 50}}}}\n"}, nil},
		{"a conditional on a shared behaviour annotation", map[string]string{"sharedAnnotations": "[instancemgr.keikoproj.io/os-family]",
			"conditionals": "- annotationSelector: 'instancemgr.keikoproj.io/os-family = windows'\n  defaults: {spec: {eks: {configuration: {volSize: 50}}}}\n"},
			[]string{"(instancemgr.keikoproj.io/os-family)"}},
		{"a conditional excluding an admin-only annotation", map[string]string{"conditionals": "- annotationSelector: '!instancemgr.keikoproj.io/lock-upgrades'\n  defaults: {spec: {eks: {configuration: {volSize: 50}}}}\n"},
			[]string{"matches annotations tenants write"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got := mustParse(t, tc.data).AdminWarnings()
			if tc.want == nil {
				if len(got) != 0 {
					t.Errorf("AdminWarnings = %q, want none", got)
				}
				return
			}
			joined := strings.Join(got, "\n")
			for _, w := range tc.want {
				if !strings.Contains(joined, w) {
					t.Errorf("%q does not contain %q", joined, w)
				}
			}
		})
	}
	if w := (*Config)(nil).AdminWarnings(); w != nil {
		t.Errorf("a nil Config warns: %q", w)
	}
}
