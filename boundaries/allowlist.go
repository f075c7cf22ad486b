package boundaries

import (
	"fmt"
	"maps"
	"regexp"
	"slices"
	"strings"
)

// KeyAllowlists is the boundary ConfigMap key holding the admin's lists of
// AWS identities and data tenants may name (a YAML object, see
// AllowlistKeys). It has its own key so that a ConfigMap without it keeps
// its meaning: every list then takes its secure default.
const KeyAllowlists = "allowlists"

// The lists of `allowlists`. Each entry is an exact value, a pattern where
// "*" matches any characters (also "/"), or, where the value is an ARN, an
// IAM path ("/team-a/", starts and ends with "/") matching every role of
// that path.
const (
	// AllowClusters are EKS clusters, besides the controller's own
	// (--cluster-name), that groups may name.
	AllowClusters = "clusters"
	// AllowRoles are IAM role names for spec.eks.configuration.roleName.
	AllowRoles = "roles"
	// AllowInstanceProfiles are instance profile names for
	// spec.eks.configuration.instanceProfileName.
	AllowInstanceProfiles = "instanceProfiles"
	// AllowManagedPolicies are policy ARNs for managedPolicies (a bare
	// name N stands for arn:aws:iam::aws:policy/N, as in the spec).
	AllowManagedPolicies = "managedPolicies"
	// AllowNodeRoles are role ARNs for spec.eks-managed.configuration.nodeRole.
	AllowNodeRoles = "nodeRoles"
	// AllowPodExecutionRoles are role ARNs for spec.eks-fargate.podExecutionRoleArn.
	AllowPodExecutionRoles = "podExecutionRoles"
	// AllowLifecycleHookRoles are role ARNs for lifecycleHooks[].roleArn.
	AllowLifecycleHookRoles = "lifecycleHookRoles"
	// AllowLifecycleHookTargets are SNS/SQS ARNs for lifecycleHooks[].notificationArn.
	AllowLifecycleHookTargets = "lifecycleHookTargets"
	// AllowSnapshots are EBS snapshot ids for volumes[].snapshotId.
	AllowSnapshots = "snapshots"
	// AllowSSMParameterPrefixes are SSM parameter name prefixes an image
	// "ssm://<name>" may read.
	AllowSSMParameterPrefixes = "ssmParameterPrefixes"
	// AllowImageOwners are AWS account ids (or "amazon") whose AMIs groups
	// may name by id; checked with EC2 DescribeImages at admission.
	AllowImageOwners = "imageOwners"
	// AllowSubnets and AllowSecurityGroups are ids or Name tags.
	AllowSubnets        = "subnets"
	AllowSecurityGroups = "securityGroups"
)

// AllowlistKeys lists the keys of `allowlists`, sorted, for messages.
var AllowlistKeys = []string{AllowClusters, AllowImageOwners, AllowInstanceProfiles, AllowLifecycleHookRoles, AllowLifecycleHookTargets,
	AllowManagedPolicies, AllowNodeRoles, AllowPodExecutionRoles, AllowRoles, AllowSSMParameterPrefixes, AllowSecurityGroups,
	AllowSnapshots, AllowSubnets}

// WorkerNodePolicies are the AWS managed policies a node role needs: the
// default of managedPolicies.
var WorkerNodePolicies = []string{
	"arn:aws:iam::aws:policy/AmazonEKSWorkerNodePolicy",
	"arn:aws:iam::aws:policy/AmazonEKS_CNI_Policy",
	"arn:aws:iam::aws:policy/AmazonEC2ContainerRegistryReadOnly",
	"arn:aws:iam::aws:policy/AmazonSSMManagedInstanceCore",
}

// PublicSSMPrefix holds AWS's public parameters (the EKS optimized AMIs):
// the default of ssmParameterPrefixes.
const PublicSSMPrefix = "/aws/service/"

// allowlistDefaults are the lists in force when a key is absent. A key
// missing here has no default: absent means the field is not checked
// (imageOwners, subnets, securityGroups: the IAM policy's ec2:Vpc
// condition is the backstop for the network) or, for clusters, only the
// controller's own cluster counts. Every other list defaults to empty:
// no bring-your-own identity or data.
var allowlistDefaults = map[string][]string{
	AllowRoles: {}, AllowInstanceProfiles: {}, AllowNodeRoles: {}, AllowPodExecutionRoles: {},
	AllowLifecycleHookRoles: {}, AllowLifecycleHookTargets: {}, AllowSnapshots: {},
	AllowManagedPolicies:      WorkerNodePolicies,
	AllowSSMParameterPrefixes: {PublicSSMPrefix},
}

// Allowlists is the parsed `allowlists` key. The zero value (no key) gives
// every list its default.
type Allowlists struct {
	// Lists are the lists the admin wrote, by key; absent keys are missing.
	Lists map[string][]string
}

// List returns the list in force for key and whether the admin wrote it.
// checked is false when the key is absent and has no default (the field
// is then not checked).
func (a *Allowlists) List(key string) (entries []string, written, checked bool) {
	if a != nil {
		if l, ok := a.Lists[key]; ok {
			return l, true, true
		}
	}
	d, ok := allowlistDefaults[key]
	return d, false, ok
}

// allowlists parses the `allowlists` key: an object of the AllowlistKeys,
// each a list of strings, validated per key.
func (p *parser) allowlists(v any) *Allowlists {
	at := "data." + KeyAllowlists
	m, ok := p.object(v, at, "an object", AllowlistKeys...)
	if !ok {
		return nil
	}
	out := &Allowlists{Lists: map[string][]string{}}
	for _, k := range slices.Sorted(maps.Keys(m)) {
		if !slices.Contains(AllowlistKeys, k) {
			continue // reported by object
		}
		raw, ok := m[k].([]any)
		if !ok && m[k] != nil {
			p.addf("%s.%s: expected a list of strings, got %s", at, k, kindOf(m[k]))
			continue
		}
		list := []string{}
		for i, e := range raw {
			s, ok := e.(string)
			if !ok || strings.TrimSpace(s) == "" {
				p.addf("%s.%s[%d]: expected a non-empty string, got %s", at, k, i, kindOf(e))
				continue
			}
			if err := checkAllowEntry(k, s); err != nil {
				p.addf("%s.%s[%d]: %v", at, k, i, err)
				continue
			}
			list = append(list, s)
		}
		out.Lists[k] = list
	}
	return out
}

// checkAllowEntry rejects entries that could never match, or would match
// far more than an admin means.
func checkAllowEntry(key, s string) error {
	switch key {
	case AllowSSMParameterPrefixes:
		if !strings.HasPrefix(s, "/") || !strings.HasSuffix(s, "/") || strings.Contains(s, "*") {
			return fmt.Errorf("%q: a parameter path prefix starts and ends with \"/\", without \"*\" (e.g. /aws/service/, /platform/images/)", s)
		}
	case AllowRoles, AllowInstanceProfiles:
		if strings.HasPrefix(s, "/") || strings.HasPrefix(s, "arn:") {
			return fmt.Errorf("%q: roleName and instanceProfileName are names, so list names or name patterns (team-a-*); IAM paths and ARNs apply to the ARN lists (nodeRoles, podExecutionRoles, lifecycleHookRoles)", s)
		}
	case AllowImageOwners:
		if s != "amazon" && !regexp.MustCompile(`^[0-9]{12}$`).MatchString(s) {
			return fmt.Errorf("%q: an image owner is a 12-digit account id or amazon", s)
		}
	}
	if s == "*" || strings.Trim(s, "*/") == "" {
		return fmt.Errorf("%q matches everything; list what tenants may name", s)
	}
	return nil
}

// allowMatch reports whether value matches entry: equal, a "*" pattern,
// or, for an ARN, an IAM path entry ("/p/") matching resources of that path.
func allowMatch(entry, value string) bool {
	if entry == value {
		return true
	}
	if strings.HasPrefix(entry, "/") && strings.HasSuffix(entry, "/") && strings.HasPrefix(value, "arn:") {
		_, resource, ok := strings.Cut(value, ":role/")
		if !ok {
			return false
		}
		return strings.HasPrefix("/"+resource, entry)
	}
	if !strings.Contains(entry, "*") {
		return false
	}
	re := "^" + strings.ReplaceAll(regexp.QuoteMeta(entry), `\*`, ".*") + "$"
	ok, _ := regexp.MatchString(re, value)
	return ok
}
