package eks

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	awssdk "github.com/aws/aws-sdk-go-v2/aws"
	astypes "github.com/aws/aws-sdk-go-v2/service/autoscaling/types"
	"github.com/aws/aws-sdk-go-v2/service/ec2"
	ec2types "github.com/aws/aws-sdk-go-v2/service/ec2/types"
	"github.com/aws/smithy-go"

	awsp "github.com/instancemgr/instance-manager/providers/aws"
)

// eventualEC2 answers DescribeInstances as EC2 does while some ids are not
// visible yet: InvalidInstanceID.NotFound naming them, for the whole call.
type eventualEC2 struct {
	awsp.EC2API
	known     []string
	invisible []string
	calls     [][]string
}

func (e *eventualEC2) DescribeInstances(_ context.Context, in *ec2.DescribeInstancesInput, _ ...func(*ec2.Options)) (*ec2.DescribeInstancesOutput, error) {
	e.calls = append(e.calls, in.InstanceIds)
	var missing []string
	var out []ec2types.Instance
	for _, id := range in.InstanceIds {
		if slices.Contains(e.invisible, id) || !slices.Contains(e.known, id) {
			missing = append(missing, id)
			continue
		}
		out = append(out, ec2types.Instance{InstanceId: awssdk.String(id), LaunchTime: awssdk.Time(time.Unix(1, 0)),
			Tags: []ec2types.Tag{{Key: awssdk.String(tagLaunchVersion), Value: awssdk.String("3")}}})
	}
	if len(missing) == 1 {
		return nil, &smithy.GenericAPIError{Code: "InvalidInstanceID.NotFound", Message: fmt.Sprintf("The instance ID '%s' does not exist", missing[0])}
	}
	if len(missing) > 1 {
		return nil, &smithy.GenericAPIError{Code: "InvalidInstanceID.NotFound", Message: fmt.Sprintf("The instance IDs '%s' do not exist", strings.Join(missing, ", "))}
	}
	return &ec2.DescribeInstancesOutput{Reservations: []ec2types.Reservation{{Instances: out}}}, nil
}

// EC2 API Reference, "Eventual consistency in the Amazon EC2 API": an
// instance just launched may answer InvalidInstanceID.NotFound, which fails
// the whole batched DescribeInstances; it is "not visible yet" for a
// minute after the controller first sees it, not an error.
func TestLookupEC2EventualConsistencyFreshInstanceNotFound(t *testing.T) {
	now := time.Unix(1000, 0)
	for _, tc := range []struct {
		name      string
		invisible []string
		age       time.Duration // since the ids were first looked up
		want      map[string]string
		wantErr   string
	}{
		{name: "all visible", want: map[string]string{"i-0a": "3", "i-0b": "3", "i-0c": "3"}},
		{name: "one fresh id not visible", invisible: []string{"i-0c"}, want: map[string]string{"i-0a": "3", "i-0b": "3"}},
		{name: "two fresh ids not visible", invisible: []string{"i-0b", "i-0c"}, want: map[string]string{"i-0a": "3"}},
		{name: "every id fresh", invisible: []string{"i-0a", "i-0b", "i-0c"}, want: map[string]string{}},
		{name: "not visible after a minute is an error", invisible: []string{"i-0c"}, age: time.Minute, wantErr: "InvalidInstanceID.NotFound"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			api := &eventualEC2{known: []string{"i-0a", "i-0b", "i-0c"}, invisible: tc.invisible}
			clock := now
			l := &launchedVersions{api: api, now: func() time.Time { return clock }}
			ids := []string{"i-0a", "i-0b", "i-0c"}
			if tc.age > 0 {
				l.firstAsked = map[string]time.Time{}
				for _, id := range ids {
					l.firstAsked[id] = now.Add(-tc.age)
				}
			}
			got, err := l.lookup(t.Context(), ids)
			if tc.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tc.wantErr) {
					t.Fatalf("lookup: err %v, want %q", err, tc.wantErr)
				}
				return
			}
			if err != nil {
				t.Fatalf("lookup: %v", err)
			}
			if fmt.Sprint(got) != fmt.Sprint(tc.want) {
				t.Fatalf("lookup = %v, want %v (calls %v)", got, tc.want, api.calls)
			}
			if len(api.calls) > 1+min(1, len(tc.invisible)) {
				t.Errorf("%d DescribeInstances calls, want at most one retry without the ids not visible: %v", len(api.calls), api.calls)
			}
			// Visible later: looked up again, once.
			api.invisible, api.calls = nil, nil
			clock = clock.Add(10 * time.Second)
			if got, err = l.lookup(t.Context(), ids); err != nil || len(got) != 3 {
				t.Fatalf("lookup once visible = %v, %v", got, err)
			}
			if len(tc.invisible) == 0 && len(api.calls) != 0 || len(tc.invisible) > 0 && (len(api.calls) != 1 || len(api.calls[0]) != len(tc.invisible)) {
				t.Errorf("calls once visible %v, want only the ids not seen before", api.calls)
			}
		})
	}
}

// untaggedEC2 answers DescribeInstances for every id asked, tagging only
// those in tagged with version 3, and counts the ids asked.
type untaggedEC2 struct {
	awsp.EC2API
	tagged map[string]bool
	asked  map[string]int
}

func (e *untaggedEC2) DescribeInstances(_ context.Context, in *ec2.DescribeInstancesInput, _ ...func(*ec2.Options)) (*ec2.DescribeInstancesOutput, error) {
	var out []ec2types.Instance
	for _, id := range in.InstanceIds {
		e.asked[id]++
		i := ec2types.Instance{InstanceId: awssdk.String(id)}
		if e.tagged[id] {
			i.Tags = []ec2types.Tag{{Key: awssdk.String(tagLaunchVersion), Value: awssdk.String("3")}}
		}
		out = append(out, i)
	}
	return &ec2.DescribeInstancesOutput{Reservations: []ec2types.Reservation{{Instances: out}}}, nil
}

// Review 2026-11-29 L2: an instance without the launch version tag (one
// attached to the group) is read once, not at every pass; instances no
// listing shows any more are forgotten (and read again if they return).
func TestLaunchedVersionsRemembersUntaggedAndForgetsGone(t *testing.T) {
	ec2api := &untaggedEC2{tagged: map[string]bool{"i-1": true, "i-2": true}, asked: map[string]int{}}
	asg := &listing{groups: []astypes.AutoScalingGroup{listedGroup("g", nil,
		listedInstance("i-1", astypes.LifecycleStateInService), listedInstance("i-attached", astypes.LifecycleStateInService))}}
	p := &Provisioner{aws: &awsp.Clients{AutoScaling: asg}, groups: map[string]*awsp.ScalingGroupCache{}, launched: &launchedVersions{api: ec2api}}
	ctx := context.Background()
	for range 3 {
		got, err := p.launched.lookup(ctx, []string{"i-1", "i-2", "i-attached"})
		if err != nil || len(got) != 2 || got["i-1"] != "3" {
			t.Fatalf("lookup = %v (%v), want i-1 and i-2 at version 3, i-attached untold", got, err)
		}
	}
	if ec2api.asked["i-attached"] != 1 {
		t.Fatalf("the untagged instance was read %d times in 3 passes, want once", ec2api.asked["i-attached"])
	}
	if _, err := p.groupCache("prod").List(ctx); err != nil {
		t.Fatal(err)
	}
	p.forgetGone() // i-2 is in no listing
	if _, err := p.launched.lookup(ctx, []string{"i-1", "i-2", "i-attached"}); err != nil {
		t.Fatal(err)
	}
	if ec2api.asked["i-1"] != 1 || ec2api.asked["i-attached"] != 1 || ec2api.asked["i-2"] != 2 {
		t.Fatalf("reads after forgetting what no listing shows: %v, want i-2 read again only", ec2api.asked)
	}
}
