package harness

import (
	"context"
	"testing"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/autoscaling"
	astypes "github.com/aws/aws-sdk-go-v2/service/autoscaling/types"
)

// ASGTags reads the Auto Scaling group name: its tags by key and the group,
// nil and nil when it does not exist.
func (s *Suite) ASGTags(t testing.TB, name string) (map[string]string, *astypes.AutoScalingGroup) {
	t.Helper()
	out, err := autoscaling.NewFromConfig(s.Env.AWS).DescribeAutoScalingGroups(context.Background(), &autoscaling.DescribeAutoScalingGroupsInput{AutoScalingGroupNames: []string{name}})
	if err != nil {
		t.Fatalf("DescribeAutoScalingGroups %s: %v", name, err)
	}
	if len(out.AutoScalingGroups) == 0 {
		return nil, nil
	}
	tags := map[string]string{}
	for _, tg := range out.AutoScalingGroups[0].Tags {
		tags[aws.ToString(tg.Key)] = aws.ToString(tg.Value)
	}
	return tags, &out.AutoScalingGroups[0]
}
