package boundaries

import (
	"slices"
	"strings"
)

// SensitivePaths are the security-sensitive paths of every provisioner:
// what runs on a node and as whom (user data, bootstrap arguments and
// options such as the kubelet's max-pods, image — for a managed node group
// its AMI type, Kubernetes version and AMI release version —,
// volumes and snapshots, IAM role, profile and policies, SSH key, metadata
// options), where it runs (cluster, subnets, security groups, placement and
// tenancy) and lifecycle hooks (an IAM role and a notification target).
// Parse makes each of them restricted unless the ConfigMap names the path
// or one of its ancestors in a rule: a tenant may set them only where the
// admin shares them explicitly (issue 11, "Boundaries fail closed").
var SensitivePaths = []string{
	"spec.eks.configuration.bootstrapArguments",
	"spec.eks.configuration.bootstrapOptions",
	"spec.eks.configuration.clusterName",
	"spec.eks.configuration.image",
	"spec.eks.configuration.instanceProfileName",
	"spec.eks.configuration.keyPairName",
	"spec.eks.configuration.lifecycleHooks",
	"spec.eks.configuration.licenseSpecifications",
	"spec.eks.configuration.managedPolicies",
	"spec.eks.configuration.metadataOptions",
	"spec.eks.configuration.placement",
	"spec.eks.configuration.roleName",
	"spec.eks.configuration.securityGroups",
	"spec.eks.configuration.subnets",
	"spec.eks.configuration.userData",
	"spec.eks.configuration.volumes",
	"spec.eks-managed.configuration.amiType",
	"spec.eks-managed.configuration.clusterName",
	"spec.eks-managed.configuration.forceVersionUpdate",
	"spec.eks-managed.configuration.keyPairName",
	"spec.eks-managed.configuration.nodeRole",
	"spec.eks-managed.configuration.releaseVersion",
	"spec.eks-managed.configuration.securityGroups",
	"spec.eks-managed.configuration.subnets",
	"spec.eks-managed.configuration.version",
	"spec.eks-fargate.clusterName",
	"spec.eks-fargate.podExecutionRoleArn",
	"spec.eks-fargate.subnets",
}

// equivalent is one concept in the sections of the three provisioners:
// a rule written for any of its paths applies to the others as well, so
// that switching spec.provisioner does not escape it. copyDefault says
// whether the default of the named path is also the default of the others
// (same meaning and shape); it is false where the values differ in kind
// (a role name against a role ARN).
type equivalent struct {
	paths       []string
	copyDefault bool
}

var equivalents = []equivalent{
	{[]string{"spec.eks", "spec.eks-managed", "spec.eks-fargate"}, false},
	{[]string{"spec.eks.configuration", "spec.eks-managed.configuration"}, false},
	{[]string{"spec.eks.minSize", "spec.eks-managed.minSize"}, true},
	{[]string{"spec.eks.maxSize", "spec.eks-managed.maxSize"}, true},
	{[]string{"spec.eks.configuration.clusterName", "spec.eks-managed.configuration.clusterName", "spec.eks-fargate.clusterName"}, true},
	{[]string{"spec.eks.configuration.subnets", "spec.eks-managed.configuration.subnets", "spec.eks-fargate.subnets"}, true},
	// In a managed node group, securityGroups and keyPairName are SSH
	// remote access (sources and key): the rule follows, the nodes'
	// defaults do not (a key without sources opens SSH to the world).
	{[]string{"spec.eks.configuration.securityGroups", "spec.eks-managed.configuration.securityGroups"}, false},
	{[]string{"spec.eks.configuration.keyPairName", "spec.eks-managed.configuration.keyPairName"}, false},
	{[]string{"spec.eks.configuration.instanceType", "spec.eks-managed.configuration.instanceType"}, true},
	// A managed node group also takes a list of types, and the deprecated
	// nodeLabels beside labels (both applied): a rule follows to each
	// alias (review N30), a default does not (a list is not a type; labels
	// already gets the default).
	{[]string{"spec.eks.configuration.instanceType", "spec.eks-managed.configuration.instanceTypes"}, false},
	{[]string{"spec.eks.configuration.labels", "spec.eks-managed.configuration.nodeLabels"}, false},
	// A managed node group's image is its AMI type, Kubernetes version and
	// AMI release version: a rule on image governs each (one pair each, so
	// that a rule on one of them does not spread to the other two).
	{[]string{"spec.eks.configuration.image", "spec.eks-managed.configuration.amiType"}, false},
	{[]string{"spec.eks.configuration.image", "spec.eks-managed.configuration.version"}, false},
	{[]string{"spec.eks.configuration.image", "spec.eks-managed.configuration.releaseVersion"}, false},
	{[]string{"spec.eks.configuration.volSize", "spec.eks-managed.configuration.volSize"}, true},
	{[]string{"spec.eks.configuration.labels", "spec.eks-managed.configuration.labels"}, true},
	{[]string{"spec.eks.configuration.taints", "spec.eks-managed.configuration.taints"}, true},
	{[]string{"spec.eks.configuration.tags", "spec.eks-managed.configuration.tags"}, true},
	// Tags at launch (the launch template's tag specifications) are tags
	// too: a rule on tags governs them; the default does not follow.
	{[]string{"spec.eks.configuration.tags", "spec.eks.configuration.tagSpecifications"}, false},
	// Tags of a Fargate profile are a map, not a list: the rule follows,
	// the default does not.
	{[]string{"spec.eks.configuration.tags", "spec.eks-fargate.tags"}, false},
	{[]string{"spec.eks.configuration.roleName", "spec.eks-managed.configuration.nodeRole", "spec.eks-fargate.podExecutionRoleArn"}, false},
	{[]string{"spec.eks.configuration.instanceProfileName", "spec.eks-managed.configuration.nodeRole", "spec.eks-fargate.podExecutionRoleArn"}, false},
}

// derivedRule is a rule the ConfigMap implies for another provisioner's
// section.
type derivedRule struct {
	path        string
	kind        ruleKind
	defaultFrom string // path whose default is this path's default; "" for none
}

// deriveRules returns the rules implied by the named ones for the
// equivalent paths of the other provisioners, skipping paths the ConfigMap
// names itself. When two named paths imply one path, the first in rule
// order (restricted before shared) wins, so the stricter rule applies.
func deriveRules(named map[string]ruleKind, order []string) []derivedRule {
	var out []derivedRule
	seen := map[string]bool{}
	for _, p := range order {
		k := named[p]
		for _, eq := range equivalents {
			if !slices.Contains(eq.paths, p) {
				continue
			}
			for _, other := range eq.paths {
				if other == p || seen[other] {
					continue
				}
				if _, ok := named[other]; ok {
					continue
				}
				seen[other] = true
				d := derivedRule{path: other, kind: k}
				if eq.copyDefault {
					d.defaultFrom = p
				}
				out = append(out, d)
			}
		}
	}
	return out
}

// coveredBy reports whether path or one of its ancestors is in paths.
func coveredBy(path string, paths map[string]ruleKind) bool {
	for p := path; ; {
		if _, ok := paths[p]; ok {
			return true
		}
		i := strings.LastIndex(p, ".")
		if i < 0 {
			return false
		}
		p = p[:i]
	}
}

// BehaviourAnnotations are the InstanceGroup annotations that change what
// is built or rolled. A tenant may set them only where the ConfigMap lists
// them in sharedAnnotations.
var BehaviourAnnotations = []string{
	"instancemgr.keikoproj.io/arch",
	"instancemgr.keikoproj.io/cluster-autoscaler-enabled",
	"instancemgr.keikoproj.io/cluster-autoscaler-priority",
	"instancemgr.keikoproj.io/force-delete",
	"instancemgr.keikoproj.io/irsa-enabled",
	"instancemgr.keikoproj.io/lock-upgrades",
	"instancemgr.keikoproj.io/os-family",
}

// RestrictedAnnotations returns, sorted, the behaviour annotations whose
// value differs between old and incoming (added, changed or removed) and
// that the ConfigMap does not share. A nil Config shares none.
func (c *Config) RestrictedAnnotations(old, incoming map[string]string) []string {
	var out []string
	for _, k := range BehaviourAnnotations {
		ov, ook := old[k]
		nv, nok := incoming[k]
		if ook == nok && ov == nv {
			continue
		}
		if c != nil && slices.Contains(c.SharedAnnotations, k) {
			continue
		}
		out = append(out, k)
	}
	return out
}

// Excluded reports whether namespace is in the ConfigMap's
// excludedNamespaces: its groups are admitted as submitted. A nil Config
// excludes nothing.
func (c *Config) Excluded(namespace string) bool {
	return c != nil && slices.Contains(c.ExcludedNamespaces, namespace)
}
