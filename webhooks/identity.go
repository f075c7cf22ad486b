package webhooks

import (
	"fmt"
	"maps"
	"slices"
	"strings"

	"k8s.io/apimachinery/pkg/util/validation/field"

	"github.com/instancemgr/instance-manager/api/v1alpha1"
	"github.com/instancemgr/instance-manager/providers/aws/ownership"
)

// validateReservedTags refuses spec tags whose keys are the controller's
// ownership tags (ownership.Reserved: instancemgr.keikoproj.io/*,
// kubernetes.io/cluster/*): a tenant could otherwise claim another group's
// resources, or hand its own to someone else. aws:* keys are reported by
// validateTags.
func validateReservedTags(spec *v1alpha1.InstanceGroupSpec, path *field.Path) field.ErrorList {
	var errs field.ErrorList
	check := func(key string, p *field.Path) {
		if ownership.Reserved(key) && !strings.HasPrefix(strings.ToLower(key), "aws:") {
			errs = append(errs, field.Invalid(p, key,
				"keys under instancemgr.keikoproj.io/ and kubernetes.io/cluster/ are instance-manager's ownership tags and are set by the controller; choose another key"))
		}
	}
	if e := spec.EKS; e != nil && e.Configuration != nil {
		for i, t := range e.Configuration.Tags {
			check(t["key"], path.Child("eks", "configuration", "tags").Index(i).Child("key"))
		}
	}
	if m := spec.EKSManaged; m != nil && m.Configuration != nil {
		for i, t := range m.Configuration.Tags {
			check(t["key"], path.Child("eks-managed", "configuration", "tags").Index(i).Child("key"))
		}
	}
	if f := spec.EKSFargate; f != nil {
		for _, k := range slices.Sorted(maps.Keys(f.Tags)) {
			check(k, path.Child("eks-fargate", "tags").Key(k))
		}
	}
	return errs
}

// identity is what decides where a group's cloud resources live: the
// provisioner and the cluster. Resource names derive from the cluster,
// namespace and name, which cannot change otherwise.
type identity struct {
	provisioner, cluster string
	clusterPath          *field.Path
}

func identityOf(spec *v1alpha1.InstanceGroupSpec) identity {
	p := spec.Provisioner
	if p == v1alpha1.ProvisionerEKSCF {
		p = v1alpha1.ProvisionerEKS
	}
	id := identity{provisioner: p}
	switch p {
	case v1alpha1.ProvisionerEKS:
		id.clusterPath = field.NewPath("spec", "eks", "configuration", "clusterName")
		if spec.EKS != nil && spec.EKS.Configuration != nil {
			id.cluster = spec.EKS.Configuration.ClusterName
		}
	case v1alpha1.ProvisionerEKSManaged:
		id.clusterPath = field.NewPath("spec", "eks-managed", "configuration", "clusterName")
		if spec.EKSManaged != nil && spec.EKSManaged.Configuration != nil {
			id.cluster = spec.EKSManaged.Configuration.ClusterName
		}
	case v1alpha1.ProvisionerEKSFargate:
		id.clusterPath = field.NewPath("spec", "eks-fargate", "clusterName")
		if spec.EKSFargate != nil {
			id.cluster = spec.EKSFargate.ClusterName
		}
	}
	return id
}

// IdentityChanges returns why changing old's spec to spec is refused: a
// change of provisioner or cluster name while old has cloud resources
// (its status names them). instance-manager does not move a group between
// clusters or provisioners: the new resources would be built and the old
// ones, with their running nodes, left behind. A group that never got its
// resources (e.g. in Error because the cluster name was wrong) may change
// freely. Empty when the change is fine.
func IdentityChanges(old *v1alpha1.InstanceGroup, spec *v1alpha1.InstanceGroupSpec) []string {
	if old == nil || old.Status.ActiveScalingGroupName == "" {
		return nil
	}
	was, now := identityOf(&old.Spec), identityOf(spec)
	where := fmt.Sprintf("it has resources (%s) built by provisioner %s in cluster %q", old.Status.ActiveScalingGroupName, was.provisioner, was.cluster)
	const how = "instance-manager does not move a group: create a new InstanceGroup with the new value, move the workloads, then delete this one"
	switch {
	case was.provisioner != now.provisioner:
		return []string{fmt.Sprintf("spec.provisioner: cannot change from %q to %q because %s; %s", was.provisioner, now.provisioner, where, how)}
	case was.cluster != now.cluster:
		return []string{fmt.Sprintf("%s: cannot change from %q to %q because %s; %s", now.clusterPath, was.cluster, now.cluster, where, how)}
	}
	return nil
}
