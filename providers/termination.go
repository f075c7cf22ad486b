package providers

import "k8s.io/apimachinery/pkg/types"

// TerminationWait is an instance that Auto Scaling is terminating and
// that waits in Terminating:Wait on a termination lifecycle hook.
type TerminationWait struct {
	// Group is the InstanceGroup that owns the Auto Scaling group (its
	// ownership tag).
	Group types.NamespacedName
	// ScalingGroup is the Auto Scaling group's name.
	ScalingGroup string
	// InstanceID is the EC2 instance id; ProviderID its Node's
	// spec.providerID, aws:///<zone>/<id>.
	InstanceID, ProviderID string
	// LifecycleState is the instance's Auto Scaling lifecycle state in the
	// listing it was found in (ScalingGroupOwners.InstanceOwner), such as
	// InService or Terminating:Wait; "" when not known.
	LifecycleState string
	// Token is the LifecycleActionToken when the wait came from an
	// EventBridge event (reconciler/interruption), else "". For logs: the
	// action is completed by instance id, which names it as well.
	Token string
}

// TerminationWaits lists the instances waiting in Terminating:Wait, from
// what the provisioner last read (no cloud call).
type TerminationWaits interface {
	TerminationWaits() []TerminationWait
}

// ScalingGroupOwners tells, from what the provisioner last read (no cloud
// call), which InstanceGroup owns an Auto Scaling group or an EC2
// instance, by the ownership tag of the Auto Scaling group. false: no
// listing shows it owned (someone else's, or made after the last listing).
type ScalingGroupOwners interface {
	ScalingGroupOwner(name string) (types.NamespacedName, bool)
	// InstanceOwner returns the instance's group, Auto Scaling group and
	// provider id (InstanceID set, as in a TerminationWait).
	InstanceOwner(instanceID string) (TerminationWait, bool)
}
