package eks

import (
	"context"
	"fmt"
	"strings"

	awssdk "github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/autoscaling"
	astypes "github.com/aws/aws-sdk-go-v2/service/autoscaling/types"

	"github.com/instancemgr/instance-manager/providers"
	awsp "github.com/instancemgr/instance-manager/providers/aws"
)

// activitiesRead is how many of a group's latest scaling activities
// launchFailure reads (one page, newest first).
const activitiesRead = 20

// launchFailure returns the StatusMessage of the group's latest launch
// activity when it Failed, "" when it did not (or there is none). On AWS a
// launch the Auto Scaling group cannot make (InsufficientInstanceCapacity,
// an instance profile not yet usable, a quota) is reported only as a
// scaling activity with StatusCode Failed; the API call that asked for the
// capacity succeeds (Amazon EC2 Auto Scaling User Guide, "Troubleshoot
// Amazon EC2 Auto Scaling: EC2 instance launch failures"). It is one
// DescribeScalingActivities call (MaxRecords activitiesRead), made only for
// a group whose counted instances (launching or in service) are below its
// desired capacity (short); an idle group costs nothing.
func launchFailure(ctx context.Context, api awsp.AutoScalingAPI, name string, desired int, instances []providers.Instance) (string, error) {
	if !short(desired, instances) {
		return "", nil
	}
	out, err := api.DescribeScalingActivities(ctx, &autoscaling.DescribeScalingActivitiesInput{
		AutoScalingGroupName: awssdk.String(name), MaxRecords: awssdk.Int32(activitiesRead)})
	if err != nil {
		return "", fmt.Errorf("autoscaling DescribeScalingActivities %s: %w", name, err)
	}
	for _, a := range out.Activities {
		if !strings.HasPrefix(awssdk.ToString(a.Description), "Launching a new EC2 instance") {
			continue // terminations, warm pool changes
		}
		if a.StatusCode != astypes.ScalingActivityStatusCodeFailed && a.StatusCode != astypes.ScalingActivityStatusCodeCancelled {
			return "", nil
		}
		if msg := awssdk.ToString(a.StatusMessage); msg != "" {
			return msg, nil
		}
		return awssdk.ToString(a.Description), nil
	}
	return "", nil
}

// short reports whether the capacity units of the instances counted toward
// the desired capacity (Pending*, InService) fall below desired: the Auto
// Scaling group has not (yet) launched what it was asked for.
func short(desired int, instances []providers.Instance) bool {
	counted := providers.Capacity(instances, func(in providers.Instance) bool {
		return in.InService() || strings.HasPrefix(in.LifecycleState, "Pending")
	})
	return counted < desired
}
