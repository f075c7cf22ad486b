package eks

import (
	"maps"
	"slices"
	"strings"

	awssdk "github.com/aws/aws-sdk-go-v2/aws"
	astypes "github.com/aws/aws-sdk-go-v2/service/autoscaling/types"
	"k8s.io/apimachinery/pkg/types"

	"github.com/instancemgr/instance-manager/providers"
	"github.com/instancemgr/instance-manager/providers/aws/ownership"
)

// listedOwner is the InstanceGroup that a listed Auto Scaling group's tags
// name (ownership.TagInstanceGroup "<namespace>/<name>"), unless the group carries
// no such tag or another installation's tag (ownership.TagInstallation).
// The listing is per cluster (its cluster tag), so the cluster matches.
func listedOwner(g astypes.AutoScalingGroup) (types.NamespacedName, bool) {
	tags := asgTagMap(g.Tags)
	ns, name, ok := strings.Cut(tags[ownership.TagInstanceGroup], "/")
	if !ok || ns == "" || name == "" {
		return types.NamespacedName{}, false
	}
	if id := tags[ownership.TagInstallation]; id != "" && ownership.Installation() != "" && id != ownership.Installation() {
		return types.NamespacedName{}, false
	}
	return types.NamespacedName{Namespace: ns, Name: name}, true
}

// listed returns every Auto Scaling group of every cluster's current
// listing (no AWS call).
func (p *Provisioner) listed() []astypes.AutoScalingGroup {
	p.mu.Lock()
	caches := slices.Collect(maps.Values(p.groups))
	p.mu.Unlock()
	var out []astypes.AutoScalingGroup
	for _, c := range caches {
		groups, _ := c.Listed()
		out = append(out, groups...)
	}
	return out
}

// ScalingGroupOwner implements providers.ScalingGroupOwners: the
// InstanceGroup owning the Auto Scaling group called name, from the last
// listings (no AWS call); false when no listing shows it owned.
func (p *Provisioner) ScalingGroupOwner(name string) (types.NamespacedName, bool) {
	for _, g := range p.listed() {
		if awssdk.ToString(g.AutoScalingGroupName) == name {
			return listedOwner(g)
		}
	}
	return types.NamespacedName{}, false
}

// InstanceOwner implements providers.ScalingGroupOwners: the InstanceGroup
// and Auto Scaling group holding EC2 instance id, from the last listings
// (no AWS call); false when no owned group lists it.
func (p *Provisioner) InstanceOwner(id string) (providers.TerminationWait, bool) {
	for _, g := range p.listed() {
		owner, ok := listedOwner(g)
		if !ok {
			continue
		}
		for _, in := range g.Instances {
			if awssdk.ToString(in.InstanceId) == id {
				return providers.TerminationWait{Group: owner, ScalingGroup: awssdk.ToString(g.AutoScalingGroupName),
					InstanceID: id, ProviderID: providerID(awssdk.ToString(in.AvailabilityZone), id), LifecycleState: string(in.LifecycleState)}, true
			}
		}
	}
	return providers.TerminationWait{}, false
}
