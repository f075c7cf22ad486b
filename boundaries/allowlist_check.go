package boundaries

import (
	"fmt"
	"slices"
	"strings"

	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/util/validation/field"

	"github.com/instancemgr/instance-manager/api/v1alpha1"
)

// Ref is one value of a spec that names an AWS identity or data.
type Ref struct {
	// List is the allowlist key that governs it (AllowRoles, ...).
	List string
	// Field is where the spec sets it.
	Field *field.Path
	// Value as compared: managed policy names as ARNs, an "ssm://<name>"
	// image as <name>.
	Value string
}

// Refs returns every reference to an AWS identity or data in spec, in
// every provisioner section (a section switched to later is checked then
// too, but checking it now costs nothing and keeps admission simple).
func Refs(spec *v1alpha1.InstanceGroupSpec) []Ref {
	var out []Ref
	add := func(list string, p *field.Path, v string) {
		if v != "" {
			out = append(out, Ref{List: list, Field: p, Value: v})
		}
	}
	if spec.EKS != nil && spec.EKS.Configuration != nil {
		c, p := spec.EKS.Configuration, field.NewPath("spec", "eks", "configuration")
		add(AllowClusters, p.Child("clusterName"), c.ClusterName)
		add(AllowRoles, p.Child("roleName"), c.RoleName)
		add(AllowInstanceProfiles, p.Child("instanceProfileName"), c.InstanceProfileName)
		for i, pol := range c.ManagedPolicies {
			if !strings.HasPrefix(pol, "arn:") {
				pol = "arn:aws:iam::aws:policy/" + pol
			}
			add(AllowManagedPolicies, p.Child("managedPolicies").Index(i), pol)
		}
		for i, v := range c.Volumes {
			add(AllowSnapshots, p.Child("volumes").Index(i).Child("snapshotId"), v.SnapshotID)
		}
		for i, h := range c.LifecycleHooks {
			add(AllowLifecycleHookRoles, p.Child("lifecycleHooks").Index(i).Child("roleArn"), h.RoleArn)
			add(AllowLifecycleHookTargets, p.Child("lifecycleHooks").Index(i).Child("notificationArn"), h.NotificationArn)
		}
		switch image := c.Image; {
		case strings.HasPrefix(image, "ssm://"):
			add(AllowSSMParameterPrefixes, p.Child("image"), strings.TrimPrefix(image, "ssm://"))
		case strings.HasPrefix(image, "ami-"):
			add(AllowImageOwners, p.Child("image"), image)
		}
		addAll(&out, AllowSubnets, p.Child("subnets"), c.Subnets)
		addAll(&out, AllowSecurityGroups, p.Child("securityGroups"), c.SecurityGroups)
	}
	if spec.EKSManaged != nil && spec.EKSManaged.Configuration != nil {
		c, p := spec.EKSManaged.Configuration, field.NewPath("spec", "eks-managed", "configuration")
		add(AllowClusters, p.Child("clusterName"), c.ClusterName)
		add(AllowNodeRoles, p.Child("nodeRole"), c.NodeRole)
		addAll(&out, AllowSubnets, p.Child("subnets"), c.Subnets)
		addAll(&out, AllowSecurityGroups, p.Child("securityGroups"), c.SecurityGroups)
	}
	if f := spec.EKSFargate; f != nil {
		p := field.NewPath("spec", "eks-fargate")
		add(AllowClusters, p.Child("clusterName"), f.ClusterName)
		add(AllowPodExecutionRoles, p.Child("podExecutionRoleArn"), f.PodExecutionRoleArn)
		addAll(&out, AllowSubnets, p.Child("subnets"), f.Subnets)
	}
	return out
}

func addAll(out *[]Ref, list string, p *field.Path, values []string) {
	for i, v := range values {
		if v != "" {
			*out = append(*out, Ref{List: list, Field: p.Index(i), Value: v})
		}
	}
}

// AllowContext is what CheckAllowlists needs besides the ConfigMap.
type AllowContext struct {
	// Clusters are the controller's own clusters (--cluster-name and
	// --additional-cluster-names). Empty: the flag is not set, and only an
	// allowlists.clusters written by the admin restricts clusterName.
	Clusters []string
	// ImageOwner returns the owner (account id, and alias such as
	// "amazon" when it has one) of an AMI id, as EC2 DescribeImages
	// reports it; nil when no AWS client is at hand, and then an
	// imageOwners list refuses every AMI id it cannot check.
	ImageOwner func(imageID string) (owners []string, err error)
	// AdminNamespace: the group is in the boundary ConfigMap's namespace,
	// the admin's own (the seed examples live there); only clusterName is
	// checked.
	AdminNamespace bool
	// AdminConfigs are other boundaries whose defaults and conditionals
	// count as the admin's too: the older revision a group runs during a
	// progressive rollout.
	AdminConfigs []*Config
	// Annotations are the group's: a conditional's values count as the
	// admin's only for the groups it matches.
	Annotations map[string]string
}

// CheckAllowlists returns a Forbidden error for every reference in spec
// (Refs) that is neither in its allowlist (written by the admin, or the
// default when absent, see Allowlists.List) nor a value the admin wrote in
// defaults or conditionals (the admin chose those, so tenants getting them
// is no escalation). Whether a tenant may set such a field at all is the
// sensitive paths' business (sensitive.go; metadataOptions is one). c may
// be nil (no
// ConfigMap: every list at its default). Each error names the field, the
// value, the list (data.allowlists.<key>) and what it allows.
func (c *Config) CheckAllowlists(spec *v1alpha1.InstanceGroupSpec, ctx AllowContext) field.ErrorList {
	var lists *Allowlists
	if c != nil {
		lists = c.Allowlists
	}
	admin := c.adminSpecs(ctx.Annotations)
	for _, other := range ctx.AdminConfigs {
		admin = append(admin, other.adminSpecs(ctx.Annotations)...)
	}
	adminValues := map[string]bool{}
	for _, s := range admin {
		for _, r := range Refs(s) {
			adminValues[r.List+"\x00"+r.Value] = true
		}
	}
	var errs field.ErrorList
	for _, r := range Refs(spec) {
		if adminValues[r.List+"\x00"+r.Value] || (ctx.AdminNamespace && r.List != AllowClusters) {
			continue
		}
		entries, written, checked := lists.List(r.List)
		if r.List == AllowClusters {
			if len(ctx.Clusters) == 0 && !written {
				continue // --cluster-name not set: today's behaviour
			}
			entries, checked = append(slices.Clone(ctx.Clusters), entries...), true
		}
		if !checked {
			continue
		}
		if r.List == AllowImageOwners {
			errs = append(errs, checkImageOwner(r, entries, ctx.ImageOwner)...)
			continue
		}
		if !allowed(r.List, entries, r.Value) {
			errs = append(errs, field.Forbidden(r.Field, fmt.Sprintf("%q is not allowed by the boundary ConfigMap's data.%s.%s (%s); the cluster admin may add it there, or leave the field to the admin's defaults",
				r.Value, KeyAllowlists, r.List, describeList(r.List, entries, written, ctx.Clusters))))
		}
	}
	return errs
}

// allowed reports whether value matches an entry of the list.
func allowed(list string, entries []string, value string) bool {
	for _, e := range entries {
		if list == AllowSSMParameterPrefixes {
			if strings.HasPrefix(value, e) {
				return true
			}
			continue
		}
		if list == AllowManagedPolicies && !strings.HasPrefix(e, "arn:") {
			e = "arn:aws:iam::aws:policy/" + e
		}
		if allowMatch(e, value) {
			return true
		}
	}
	return false
}

func checkImageOwner(r Ref, entries []string, lookup func(string) ([]string, error)) field.ErrorList {
	if lookup == nil {
		return field.ErrorList{field.Forbidden(r.Field, fmt.Sprintf("image %q: data.%s.%s is set but the owner of an AMI cannot be checked here (no AWS client); name the image through an allowed ssm:// parameter", r.Value, KeyAllowlists, AllowImageOwners))}
	}
	owners, err := lookup(r.Value)
	if err != nil {
		return field.ErrorList{field.Forbidden(r.Field, fmt.Sprintf("image %q: its owner could not be checked against data.%s.%s: %v", r.Value, KeyAllowlists, AllowImageOwners, err))}
	}
	for _, o := range owners {
		if slices.Contains(entries, o) {
			return nil
		}
	}
	return field.ErrorList{field.Forbidden(r.Field, fmt.Sprintf("image %q is owned by %s, which is not in the boundary ConfigMap's data.%s.%s (%s)",
		r.Value, strings.Join(owners, "/"), KeyAllowlists, AllowImageOwners, describeList(AllowImageOwners, entries, true, nil)))}
}

// describeList says what a list allows, for messages.
func describeList(list string, entries []string, written bool, clusters []string) string {
	switch {
	case list == AllowClusters && !written:
		return "the controller's own clusters: " + strings.Join(entries, ", ")
	case written && len(entries) == 0:
		return "the list is empty"
	case written:
		return "allowed: " + strings.Join(entries, ", ")
	case len(entries) == 0:
		return "the list is absent, so none is allowed"
	default:
		return "the list is absent, so only the default applies: " + strings.Join(entries, ", ")
	}
}

// adminSpecs decodes defaults and the defaults of every conditional that
// matches annotations (a value the admin grants to some groups is not
// granted to all); those that do not decode or parse (Parse has refused
// them already) are skipped.
func (c *Config) adminSpecs(annotations map[string]string) []*v1alpha1.InstanceGroupSpec {
	if c == nil {
		return nil
	}
	docs := []map[string]any{c.Defaults}
	set := labels.Set(annotations)
	for _, cond := range c.Conditionals {
		sel := cond.Selector
		if sel == nil {
			var err error
			if sel, err = labels.Parse(cond.AnnotationSelector); err != nil {
				continue
			}
		}
		if sel.Matches(set) {
			docs = append(docs, cond.Defaults)
		}
	}
	var out []*v1alpha1.InstanceGroupSpec
	for _, d := range docs {
		spec, ok := d["spec"].(map[string]any)
		if !ok {
			continue
		}
		if s, err := DecodeSpec(spec); err == nil {
			out = append(out, s)
		}
	}
	return out
}
