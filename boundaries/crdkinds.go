package boundaries

import (
	"fmt"
	"regexp"
	"slices"
	"strconv"
	"strings"
)

// GroupKind names a kind the crd upgrade strategy may create: API group
// ("" is the core group) and kind, e.g. {upgrademgr.keikoproj.io,
// RollingUpgrade}.
type GroupKind struct {
	Group string `json:"group"`
	Kind  string `json:"kind"`
}

func (g GroupKind) String() string {
	if g.Group == "" {
		return g.Kind
	}
	return g.Kind + "." + g.Group
}

// CRDKind is one entry of crdStrategy.allowedKinds: a kind the crd
// strategy may create and the fields of the rendered object tenants may
// set. TenantFields are dotted paths from the object's root
// ("spec.strategy", "spec.nodeIntervalSeconds"); a path allows everything
// below it. apiVersion, kind and metadata's name, generateName, namespace
// (the group's own only), labels and annotations are always allowed;
// every other field must be under a TenantFields path.
type CRDKind struct {
	Group        string   `json:"group"`
	Kind         string   `json:"kind"`
	TenantFields []string `json:"tenantFields,omitempty"`
}

// GroupKind returns the kind's group and kind.
func (k CRDKind) GroupKind() GroupKind { return GroupKind{Group: k.Group, Kind: k.Kind} }

// CRDKindFacts is what the project knows of a kind's fields from its
// controller's source: Executed are paths whose values the controller runs
// as commands (never tenant-set, whatever the ConfigMap says); Targets
// maps a path naming a cloud resource to the only placeholder it may hold
// (the group's own resource; the controller fills it when absent).
type CRDKindFacts struct {
	Executed []string
	Targets  map[string]string
}

// RollingUpgrade is keikoproj/upgrade-manager's kind.
var RollingUpgrade = GroupKind{Group: "upgrademgr.keikoproj.io", Kind: "RollingUpgrade"}

// KnownCRDKinds holds the facts of reviewed kinds. upgrade-manager
// (api/v1alpha1/rollingupgrade_types.go, its ScriptRunner) runs the
// preDrain/postDrain/postTerminate scripts with /bin/sh -c in its own pod,
// and rotates whichever Auto Scaling group spec.asgName names.
var KnownCRDKinds = map[GroupKind]CRDKindFacts{
	RollingUpgrade: {
		Executed: []string{"spec.preDrain.script", "spec.postDrain.script", "spec.postDrain.postWaitScript", "spec.postTerminate.script"},
		Targets:  map[string]string{"spec.asgName": "${.status.activeScalingGroupName}"},
	},
}

// DefaultCRDKinds is what the crd strategy may create when the ConfigMap
// has no crdStrategy: nothing. Every allowed kind's controller acts with
// its own rights on what tenants write, so an admin opts in per kind after
// reviewing it (docs/upgrades.md, "The crd strategy: which kinds to allow").
var DefaultCRDKinds []CRDKind

// forbiddenCRDGroups may never be created by the crd strategy, whatever
// the ConfigMap says: core objects (Pods, Secrets, Events...) and
// InstanceGroups themselves would hand the controller's rights to tenants.
var forbiddenCRDGroups = []string{"", "instancemgr.keikoproj.io", "rbac.authorization.k8s.io", "admissionregistration.k8s.io"}

// CRDKind returns the ConfigMap's entry for kind of group and whether the
// crd strategy may create it. A nil Config allows nothing.
func (c *Config) CRDKind(group, kind string) (CRDKind, bool) {
	if c == nil {
		return CRDKind{}, false
	}
	for _, k := range c.CRDKinds {
		if k.Group == group && k.Kind == kind {
			return k, true
		}
	}
	return CRDKind{}, false
}

// CRDKindList renders the allowed kinds for messages, e.g.
// "RollingUpgrade.upgrademgr.keikoproj.io", or "none".
func (c *Config) CRDKindList() string {
	if c == nil || len(c.CRDKinds) == 0 {
		return "none"
	}
	s := make([]string, len(c.CRDKinds))
	for i, k := range c.CRDKinds {
		s[i] = k.GroupKind().String()
	}
	return strings.Join(s, ", ")
}

// fieldPath is a dotted path of JSON field names.
var fieldPath = regexp.MustCompile(`^[A-Za-z0-9_-]+(\.[A-Za-z0-9_-]+)*$`)

// alwaysCRDFields are the top-level keys TenantFields may not name:
// apiVersion, kind and metadata are governed by the strategy itself,
// status is the kind's controller's output.
var alwaysCRDFields = []string{"apiVersion", "kind", "metadata", "status"}

// Covers reports whether path (dotted) equals prefix or lies below it.
func Covers(prefix, path string) bool {
	return path == prefix || strings.HasPrefix(path, prefix+".")
}

// crdStrategy parses data key crdStrategy ({allowedKinds: [{group, kind,
// tenantFields}]}) into c.CRDKinds.
func (p *parser) crdStrategy(c *Config, data map[string]string) {
	if strings.TrimSpace(data[KeyCRDStrategy]) == "" {
		return
	}
	var cs struct {
		AllowedKinds []CRDKind `json:"allowedKinds"`
	}
	if err := decodeStrict(data[KeyCRDStrategy], &cs); err != nil {
		p.addf("data.%s%v (expected {allowedKinds: [{group: upgrademgr.keikoproj.io, kind: RollingUpgrade, tenantFields: [spec.strategy]}]})", KeyCRDStrategy, err)
		return
	}
	c.CRDKinds = []CRDKind{}
	for i, k := range cs.AllowedKinds {
		at := fmt.Sprintf("data.%s.allowedKinds[%d]", KeyCRDStrategy, i)
		switch {
		case k.Kind == "" || strings.Contains(k.Kind, "*") || strings.Contains(k.Group, "*"):
			p.addf("%s: needs a kind and a group, without wildcards", at)
			continue
		case slices.Contains(forbiddenCRDGroups, k.Group):
			p.addf("%s: kind %s of group %s cannot be created by the crd strategy: it would act with the controller's rights for tenants "+
				"(refused groups: %s); allow a kind of another group, e.g. {group: upgrademgr.keikoproj.io, kind: RollingUpgrade}",
				at, k.Kind, groupName(k.Group), refusedGroups())
			continue
		}
		ok := true
		facts := KnownCRDKinds[k.GroupKind()]
		for j, f := range k.TenantFields {
			fat := fmt.Sprintf("%s.tenantFields[%d]", at, j)
			if !fieldPath.MatchString(f) {
				p.addf("%s: %q is not a dotted field path (e.g. spec.strategy)", fat, f)
				ok = false
				continue
			}
			if top, _, _ := strings.Cut(f, "."); slices.Contains(alwaysCRDFields, top) {
				p.addf("%s: %q cannot be shared: apiVersion, kind and metadata are governed by the crd strategy and status is the %s controller's; name fields below spec", fat, f, k.Kind)
				ok = false
				continue
			}
			for _, e := range facts.Executed {
				if Covers(f, e) {
					p.addf("%s: %q covers %s, which the %s controller runs as a command in its own pod: tenants may never set it; list the fields below %s tenants may set instead",
						fat, f, e, k.GroupKind(), f)
					ok = false
					break
				}
			}
		}
		if ok {
			c.CRDKinds = append(c.CRDKinds, k)
		}
	}
}

// groupName is an API group for messages: "" is the core group.
func groupName(g string) string {
	if g == "" {
		return `"" (core: Secrets, ConfigMaps, Pods, ...)`
	}
	return strconv.Quote(g)
}

// refusedGroups lists forbiddenCRDGroups for messages.
func refusedGroups() string {
	names := make([]string, len(forbiddenCRDGroups))
	for i, g := range forbiddenCRDGroups {
		names[i] = strconv.Quote(g)
	}
	return strings.Join(names, ", ")
}
