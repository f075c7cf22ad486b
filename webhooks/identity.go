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

// IdentityChanges returns why changing old's spec to spec is refused: a
// change of provisioner or cluster name (v1alpha1.SpecIdentity) once old
// may have cloud resources. instance-manager does not move a group between
// clusters or provisioners: the new resources would be built and the old
// ones, with their running nodes, left behind.
//
// The controller records the identity in status.identity before its first
// cloud write (reconciler.recordIdentity), so the record is the proof that
// resources may exist, even when the status naming them never landed or
// the cloud write that followed it failed. A group stored before the
// record existed falls back to its status naming resources
// (status.activeScalingGroupName). A group with neither (nothing was
// built, e.g. held by a quota) may change freely: that is how a typo is
// fixed. Each message names the field path, the recorded value and what
// to do. Empty when the change is fine.
func IdentityChanges(old *v1alpha1.InstanceGroup, spec *v1alpha1.InstanceGroupSpec) []string {
	if old == nil {
		return nil
	}
	was := v1alpha1.SpecIdentity(&old.Spec)
	var where string
	switch {
	case old.Status.Identity != nil:
		was = *old.Status.Identity
		where = fmt.Sprintf("status.identity records that its cloud resources were built (or may have been, if the write that followed failed) by provisioner %s in cluster %q", was.Provisioner, was.ClusterName)
		if n := old.Status.ActiveScalingGroupName; n != "" {
			where += fmt.Sprintf(" (%s)", n)
		}
	case old.Status.ActiveScalingGroupName != "":
		where = fmt.Sprintf("it has resources (%s) built by provisioner %s in cluster %q", old.Status.ActiveScalingGroupName, was.Provisioner, was.ClusterName)
	default:
		return nil
	}
	now := v1alpha1.SpecIdentity(spec)
	const how = "instance-manager does not move a group: create a new InstanceGroup with the new value, move the workloads, then delete this one (its deletion removes what it built)"
	switch {
	case was.Provisioner != now.Provisioner:
		return []string{fmt.Sprintf("spec.provisioner: cannot change from %q to %q because %s; %s", was.Provisioner, now.Provisioner, where, how)}
	case was.ClusterName != now.ClusterName:
		return []string{fmt.Sprintf("%s: cannot change from %q to %q because %s; %s", v1alpha1.ClusterNamePath(now.Provisioner), was.ClusterName, now.ClusterName, where, how)}
	}
	return nil
}
