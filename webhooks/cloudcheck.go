package webhooks

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"time"

	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/instancemgr/instance-manager/api/v1alpha1"
	"github.com/instancemgr/instance-manager/boundaries"
	"github.com/instancemgr/instance-manager/providers/aws/refcheck"
)

// CloudChecker checks that cloud references exist and fit together
// (refcheck.Checker, cached per distinct reference).
type CloudChecker interface {
	Check(ctx context.Context, refs refcheck.Refs) ([]refcheck.Problem, error)
}

// Budgets of the AWS calls of one admission's cloud check. They stay under
// the webhooks' timeouts (setup.go: 10s for InstanceGroups, 15s for the
// ConfigMap), at which the API server gives up and reports only "context
// deadline exceeded": a throttling or slow AWS (the SDK retries with
// backoff) then gets this webhook's own answer, that nothing was changed
// and the request can be retried.
var (
	instanceGroupCloudCheckTimeout = 6 * time.Second
	configMapCloudCheckTimeout     = 10 * time.Second
)

// withCloudDeadline runs check with budget and says so when AWS did not
// answer within it.
func withCloudDeadline(ctx context.Context, budget time.Duration, check func(context.Context) ([]string, error)) ([]string, error) {
	cctx, cancel := context.WithTimeout(ctx, budget)
	defer cancel()
	out, err := check(cctx)
	if err != nil && cctx.Err() != nil && ctx.Err() == nil {
		return out, fmt.Errorf("AWS did not answer within %s (throttled or unavailable): %w", budget, err)
	}
	return out, err
}

// maxCheckedInstanceTypes bounds the instance types whose architecture is
// checked against one image in one admission.
const maxCheckedInstanceTypes = 20

// refsOf returns the cloud references spec sets, under the section of its
// provisioner (every section when the provisioner is not set, as in
// defaults that leave it to the tenant).
func refsOf(spec *v1alpha1.InstanceGroupSpec) []refcheck.Refs {
	var out []refcheck.Refs
	p := spec.Provisioner
	if e := spec.EKS; e != nil && e.Configuration != nil && (p == "" || p == v1alpha1.ProvisionerEKS || p == v1alpha1.ProvisionerEKSCF) {
		c := e.Configuration
		r := refcheck.Refs{Field: "spec.eks.configuration", Cluster: c.ClusterName, Subnets: c.Subnets, SecurityGroups: c.SecurityGroups,
			Image: c.Image, Role: c.RoleName, Profile: c.InstanceProfileName}
		if c.InstanceType != "" {
			r.InstanceTypes = []string{c.InstanceType}
		}
		if m := c.MixedInstancesPolicy; m != nil {
			for _, t := range m.InstanceTypes {
				r.InstanceTypes = append(r.InstanceTypes, t.Type)
			}
		}
		out = append(out, r)
	}
	if m := spec.EKSManaged; m != nil && m.Configuration != nil && (p == "" || p == v1alpha1.ProvisionerEKSManaged) {
		out = append(out, refcheck.Refs{Field: "spec.eks-managed.configuration", Cluster: m.Configuration.ClusterName, Subnets: m.Configuration.Subnets})
	}
	if f := spec.EKSFargate; f != nil && (p == "" || p == v1alpha1.ProvisionerEKSFargate) {
		out = append(out, refcheck.Refs{Field: "spec.eks-fargate", Cluster: f.ClusterName, Subnets: f.Subnets})
	}
	return out
}

// only keeps the references of r that keep says are to be checked.
func only(r refcheck.Refs, keep func(field, value string) bool) refcheck.Refs {
	out := refcheck.Refs{Field: r.Field}
	if keep("clusterName", r.Cluster) {
		out.Cluster = r.Cluster
	}
	for _, s := range r.Subnets {
		if keep("subnets", s) {
			out.Subnets = append(out.Subnets, s)
		}
	}
	for _, s := range r.SecurityGroups {
		if keep("securityGroups", s) {
			out.SecurityGroups = append(out.SecurityGroups, s)
		}
	}
	// The image is checked against every instance type when either is new.
	newType := false
	for _, t := range r.InstanceTypes {
		newType = keep("instanceType", t) || newType
	}
	if keep("image", r.Image) || newType && r.Image != "" {
		out.Image, out.InstanceTypes = r.Image, r.InstanceTypes
	}
	if keep("roleName", r.Role) {
		out.Role = r.Role
	}
	if keep("instanceProfileName", r.Profile) {
		out.Profile = r.Profile
	}
	return out
}

// refKeys is the set "<field path>=<value>" of every reference in refs.
func refKeys(refs []refcheck.Refs) map[string]bool {
	out := map[string]bool{}
	for _, r := range refs {
		only(r, func(field, value string) bool {
			if value != "" {
				out[r.Field+"."+field+"="+value] = true
			}
			return false
		})
	}
	return out
}

// defaultsRefs decodes each defaults block of cfg (defaults, then each
// conditional's) and returns its references.
func defaultsRefs(cfg *boundaries.Config) []refcheck.Refs {
	if cfg == nil {
		return nil
	}
	blocks := []map[string]any{cfg.Defaults}
	for _, c := range cfg.Conditionals {
		blocks = append(blocks, c.Defaults)
	}
	var out []refcheck.Refs
	for _, b := range blocks {
		raw, _ := b["spec"].(map[string]any)
		if raw == nil {
			continue
		}
		spec, err := boundaries.DecodeSpec(raw)
		if err != nil {
			continue // reported by parsing already
		}
		out = append(out, refsOf(spec)...)
	}
	return out
}

// affected is, per "<field path>=<value>", the groups whose effective spec
// uses that reference, and the instance types of the groups using each image.
type affected struct {
	groups map[string][]string
	types  map[string][]string // "<field path>.image=<id>" -> instance types
}

func (a *affected) add(ig *v1alpha1.InstanceGroup, spec *v1alpha1.InstanceGroupSpec) {
	for _, r := range refsOf(spec) {
		for key := range refKeys([]refcheck.Refs{r}) {
			a.groups[key] = append(a.groups[key], ig.Namespace+"/"+ig.Name)
		}
		if r.Image != "" {
			key := r.Field + ".image=" + r.Image
			for _, t := range r.InstanceTypes {
				if !slices.Contains(a.types[key], t) && len(a.types[key]) < maxCheckedInstanceTypes {
					a.types[key] = append(a.types[key], t)
				}
			}
		}
	}
}

// checkIntroducedRefs checks the references cfg's defaults introduce (not
// in current's) with cloud: one check per distinct reference, whatever the
// number of groups. It returns one line per problem naming up to 10 groups
// it would affect, or an error when the cloud could not be asked.
func checkIntroducedRefs(ctx context.Context, cloud CloudChecker, cfg, current *boundaries.Config, groups *affected) ([]string, error) {
	before := refKeys(defaultsRefs(current))
	var lines []string
	seen := map[string]bool{}
	for _, r := range defaultsRefs(cfg) {
		introduced := only(r, func(field, value string) bool {
			key := r.Field + "." + field + "=" + value
			return value != "" && !before[key] && !seen[key]
		})
		for key := range refKeys([]refcheck.Refs{introduced}) {
			seen[key] = true
		}
		if introduced.Image != "" {
			for _, t := range groups.types[r.Field+".image="+introduced.Image] {
				if !slices.Contains(introduced.InstanceTypes, t) {
					introduced.InstanceTypes = append(introduced.InstanceTypes, t)
				}
			}
		}
		if introduced.Cluster == "" && (len(introduced.Subnets) > 0 || len(introduced.SecurityGroups) > 0) {
			introduced.Cluster = r.Cluster // only for its VPC; an unchanged cluster is cached
		}
		problems, err := cloud.Check(ctx, introduced)
		if err != nil {
			return nil, err
		}
		for _, p := range problems {
			line := p.String()
			if names := groups.groups[p.Field+"="+p.Ref]; len(names) > 0 {
				shown := names[:min(len(names), maxReportedGroups)]
				line += fmt.Sprintf(" (affects %d InstanceGroup(s): %s)", len(names), strings.Join(shown, ", "))
			}
			lines = append(lines, line)
		}
	}
	return lines, nil
}

// collectAffected computes every existing group's effective spec under cfg
// (no cloud call) and indexes the references they use; groups in
// adminNamespace (the ConfigMap's) get its rules as written, as in DryRun.
func collectAffected(ctx context.Context, c client.Reader, cfg *boundaries.Config, adminNamespace string) (*affected, error) {
	a := &affected{groups: map[string][]string{}, types: map[string][]string{}}
	igs := &v1alpha1.InstanceGroupList{}
	if err := c.List(ctx, igs); err != nil {
		return nil, err
	}
	for i := range igs.Items {
		ig := &igs.Items[i]
		if ig.DeletionTimestamp != nil {
			continue
		}
		effective, err := boundaries.Recompute(cfg, ig, adminNamespace)
		if err != nil {
			continue
		}
		spec, err := boundaries.DecodeSpec(effective)
		if err != nil {
			continue
		}
		a.add(ig, spec)
	}
	return a, nil
}

// tenantRefProblems checks the references a tenant sets in ig (its kept
// submission) that are new in this request (not in old's submission), with
// the effective spec's cluster, image and instance types for the checks
// that relate them. Lines name the field, the value and why.
func tenantRefProblems(ctx context.Context, cloud CloudChecker, ig, old *v1alpha1.InstanceGroup) ([]string, error) {
	set := func(g *v1alpha1.InstanceGroup) map[string]bool {
		if g == nil {
			return map[string]bool{}
		}
		raw, err := boundaries.Submitted(g)
		if err != nil {
			return map[string]bool{}
		}
		spec, err := boundaries.DecodeSpec(raw)
		if err != nil {
			return map[string]bool{}
		}
		spec.Provisioner = g.Spec.Provisioner // the section that is built
		return refKeys(refsOf(spec))
	}
	mine, before := set(ig), set(old)
	var lines []string
	for _, r := range refsOf(&ig.Spec) {
		refs := only(r, func(field, value string) bool {
			key := r.Field + "." + field + "=" + value
			return value != "" && mine[key] && !before[key]
		})
		if refs.Cluster == "" && (len(refs.Subnets) > 0 || len(refs.SecurityGroups) > 0) {
			refs.Cluster = r.Cluster
		}
		problems, err := cloud.Check(ctx, refs)
		if err != nil {
			return nil, err
		}
		for _, p := range problems {
			lines = append(lines, p.String())
		}
	}
	return lines, nil
}
