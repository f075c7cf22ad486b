package eks

import (
	"context"
	"testing"
	"time"

	awssdk "github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/autoscaling"
	astypes "github.com/aws/aws-sdk-go-v2/service/autoscaling/types"

	"github.com/instancemgr/instance-manager/providers"
	awsp "github.com/instancemgr/instance-manager/providers/aws"
)

// failedLaunches answers DescribeScalingActivities with one failed launch
// and counts the calls.
type failedLaunches struct {
	awsp.AutoScalingAPI
	calls int
}

func (f *failedLaunches) DescribeScalingActivities(context.Context, *autoscaling.DescribeScalingActivitiesInput, ...func(*autoscaling.Options)) (*autoscaling.DescribeScalingActivitiesOutput, error) {
	f.calls++
	return &autoscaling.DescribeScalingActivitiesOutput{Activities: []astypes.Activity{{
		Description: awssdk.String("Launching a new EC2 instance. Status Reason: no capacity"), StatusCode: astypes.ScalingActivityStatusCodeFailed,
		StatusMessage: awssdk.String("InsufficientInstanceCapacity")}}}, nil
}

// Review 2026-11-29 N7: a group short of capacity, reconciled every poll
// interval, reads its scaling activities at most every launchFailureTTL
// while it stays short by the same amount; a change reads again at once.
func TestLaunchFailureReadIsReusedWhileTheGroupStaysShort(t *testing.T) {
	api := &failedLaunches{}
	now := time.Unix(0, 0)
	l := &launchFailures{now: func() time.Time { return now }}
	one := []providers.Instance{{ID: "i-1", LifecycleState: "InService"}}
	two := append(one, providers.Instance{ID: "i-2", LifecycleState: "InService"})
	steps := []struct {
		after     time.Duration
		desired   int
		instances []providers.Instance
		wantCalls int
		wantMsg   string
	}{
		{0, 3, one, 1, "InsufficientInstanceCapacity"},
		{5 * time.Second, 3, one, 1, "InsufficientInstanceCapacity"},
		{20 * time.Second, 3, one, 1, "InsufficientInstanceCapacity"},
		{10 * time.Second, 3, one, 2, "InsufficientInstanceCapacity"}, // 35 s after the read
		{time.Second, 3, two, 3, "InsufficientInstanceCapacity"},      // an instance launched: read again
		{time.Second, 2, two, 3, ""},                                  // not short: nothing read
		{time.Second, 3, two, 4, "InsufficientInstanceCapacity"},      // short again: its answer was forgotten
	}
	for i, s := range steps {
		now = now.Add(s.after)
		msg, err := l.read(context.Background(), api, "g", s.desired, s.instances)
		if err != nil || msg != s.wantMsg || api.calls != s.wantCalls {
			t.Fatalf("step %d: %q (%v) after %d call(s), want %q after %d", i, msg, err, api.calls, s.wantMsg, s.wantCalls)
		}
	}
}
