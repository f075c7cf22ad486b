package crdtemplate

import (
	"strings"
	"testing"

	"github.com/instancemgr/instance-manager/api/v1alpha1"
	"github.com/instancemgr/instance-manager/boundaries"
)

func TestChanged(t *testing.T) {
	rolling := group(ruTemplate)
	rolling.Spec.Strategy = v1alpha1.AwsUpgradeStrategy{Type: v1alpha1.StrategyRollingUpdate}
	edited := group(strings.Replace(ruTemplate, "30", "60", 1))
	cases := []struct {
		name    string
		old, ig *v1alpha1.InstanceGroup
		want    bool
	}{
		{"a create", nil, group(ruTemplate), true},
		{"the same template", group(ruTemplate), group(ruTemplate), false},
		{"an edited template", group(ruTemplate), edited, true},
		{"a switch to the crd strategy", rolling, group(ruTemplate), true},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			if got := Changed(tc.old, tc.ig); got != tc.want {
				t.Errorf("Changed = %v, want %v", got, tc.want)
			}
		})
	}
}

func TestNewlyRefused(t *testing.T) {
	allows := config(t, allowRU)
	refuses := config(t, "allowedKinds: []")
	noTemplate := group("")
	cases := []struct {
		name          string
		ig            *v1alpha1.InstanceGroup
		current, next *boundaries.Config
		want          string // substring of the error; "" for nil
	}{
		{"the kind no longer allowed", group(ruTemplate), allows, refuses, "RollingUpgrade"},
		{"still allowed", group(ruTemplate), allows, allows, ""},
		{"refused already", group(ruTemplate), refuses, refuses, ""},
		{"no boundaries in force", group(ruTemplate), nil, refuses, ""},
		{"no template", noTemplate, allows, refuses, ""},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			err := NewlyRefused(tc.ig, tc.current, tc.next)
			if (err != nil) != (tc.want != "") || err != nil && !strings.Contains(err.Error(), tc.want) {
				t.Errorf("NewlyRefused = %v, want an error containing %q", err, tc.want)
			}
		})
	}
}
