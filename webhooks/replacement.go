package webhooks

import (
	"github.com/instancemgr/instance-manager/api/v1alpha1"
	"github.com/instancemgr/instance-manager/providers/eksmanaged"
)

// replacementWarnings warns, on an update of an eks-managed group that has
// its node group (the status names it), that the change replaces the node
// group blue/green (eksmanaged.ReplacingFields). The change is admitted.
func replacementWarnings(old *v1alpha1.InstanceGroup, spec *v1alpha1.InstanceGroupSpec) []string {
	if old.Status.ActiveScalingGroupName == "" || old.Spec.Provisioner != v1alpha1.ProvisionerEKSManaged || spec.Provisioner != v1alpha1.ProvisionerEKSManaged ||
		old.Spec.EKSManaged == nil || spec.EKSManaged == nil {
		return nil
	}
	fields := eksmanaged.ReplacingFields(old.Spec.EKSManaged.Configuration, spec.EKSManaged.Configuration)
	if len(fields) == 0 {
		return nil
	}
	return []string{eksmanaged.ReplacementWarning(old.Status.ActiveScalingGroupName, fields)}
}
