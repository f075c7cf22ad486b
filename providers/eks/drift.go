package eks

import (
	"context"
	"strings"

	awssdk "github.com/aws/aws-sdk-go-v2/aws"
	astypes "github.com/aws/aws-sdk-go-v2/service/autoscaling/types"

	"github.com/instancemgr/instance-manager/api/v1alpha1"
	awsp "github.com/instancemgr/instance-manager/providers/aws"
)

// judgement is what instanceDrift read and decided of a group's
// instances: the launch template version each was launched from, the
// content predicate of versions, and why each drifted one has drifted.
type judgement struct {
	launched map[string]string
	upToDate func(string) bool
	drift    map[string]string
}

// instanceDrift judges each of instances against what the group launches
// now: the launch template content of target, and g's subnets and ig's
// mixed instances policy (driftReasons). EC2 is read only for instances
// not read before (launchedVersions) and launch template versions not
// known yet (versionContents); errors come from those reads.
func (p *Provisioner) instanceDrift(ctx context.Context, ig *v1alpha1.InstanceGroup, g groupSpec, target templateState, instances []astypes.Instance) (judgement, error) {
	ids := instanceIDs(instances)
	launched, err := p.launched.lookup(ctx, ids)
	if err != nil {
		return judgement{}, err
	}
	upToDate, err := p.contents.upToDate(ctx, p.aws.EC2, g.name, target, launchVersions(instances, launched))
	if err != nil {
		return judgement{}, err
	}
	content := func(in astypes.Instance) string {
		return contentReason(upToDate, target.version, launchVersion(in, launched))
	}
	want := launchSpec{subnets: g.subnets, policy: mixedPolicyOf(ig, g)}
	drift := driftReasons(instances, content, want, p.launched.placements(ids), p.launched.launchTimes(ids), weightsOf(g.instanceTypes))
	return judgement{launched: launched, upToDate: upToDate, drift: drift}, nil
}

// suspendBeforeChange suspends AZRebalance before ensureScalingGroup
// writes new subnets or a new mixed instances policy that makes an
// instance drift, so Auto Scaling does not move instances out of a
// removed zone itself (launch first, terminate through the drain hook,
// outside the rotation's slots and windows) before the rotation does. It
// reports whether it wrote; idle groups (nothing to write) read nothing.
func (p *Provisioner) suspendBeforeChange(ctx context.Context, api awsp.AutoScalingAPI, ig *v1alpha1.InstanceGroup, g groupSpec, target templateState, current *astypes.AutoScalingGroup) (bool, error) {
	policy := mixedPolicyOf(ig, g)
	subnetsChange := !sameSet(strings.Split(awssdk.ToString(current.VPCZoneIdentifier), ","), g.subnets)
	if !subnetsChange && (policy == nil || tagValue(current.Tags, tagMixedHash) == policy.hash()) {
		return false, nil
	}
	j, err := p.instanceDrift(ctx, ig, g, target, current.Instances)
	if err != nil || !rotating(ig, current.Instances, j.drift) {
		return false, err
	}
	return ensureSuspended(ctx, api, current, suspendedFor(ig.Spec.EKS.Configuration, true))
}

func instanceIDs(instances []astypes.Instance) []string {
	ids := make([]string, 0, len(instances))
	for _, in := range instances {
		ids = append(ids, awssdk.ToString(in.InstanceId))
	}
	return ids
}
