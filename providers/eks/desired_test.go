package eks

import (
	"context"
	"errors"
	"testing"

	awssdk "github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/autoscaling"
	astypes "github.com/aws/aws-sdk-go-v2/service/autoscaling/types"

	"github.com/instancemgr/instance-manager/api/v1alpha1"
	"github.com/instancemgr/instance-manager/providers"
	awsp "github.com/instancemgr/instance-manager/providers/aws"
)

// capacityRecorder is an Auto Scaling API that records the writes that
// could change a group's desired capacity.
type capacityRecorder struct {
	awsp.AutoScalingAPI
	updates []*autoscaling.UpdateAutoScalingGroupInput
	sets    int
}

func (c *capacityRecorder) UpdateAutoScalingGroup(_ context.Context, in *autoscaling.UpdateAutoScalingGroupInput, _ ...func(*autoscaling.Options)) (*autoscaling.UpdateAutoScalingGroupOutput, error) {
	c.updates = append(c.updates, in)
	return &autoscaling.UpdateAutoScalingGroupOutput{}, nil
}

func (c *capacityRecorder) SetDesiredCapacity(context.Context, *autoscaling.SetDesiredCapacityInput, ...func(*autoscaling.Options)) (*autoscaling.SetDesiredCapacityOutput, error) {
	c.sets++
	return &autoscaling.SetDesiredCapacityOutput{}, nil
}

func (c *capacityRecorder) CreateOrUpdateTags(context.Context, *autoscaling.CreateOrUpdateTagsInput, ...func(*autoscaling.Options)) (*autoscaling.CreateOrUpdateTagsOutput, error) {
	return &autoscaling.CreateOrUpdateTagsOutput{}, nil
}

func (c *capacityRecorder) DeleteTags(context.Context, *autoscaling.DeleteTagsInput, ...func(*autoscaling.Options)) (*autoscaling.DeleteTagsOutput, error) {
	return &autoscaling.DeleteTagsOutput{}, nil
}

// The desired capacity is the cluster-autoscaler's (or the user's) in
// steady state: the controller never resets it, whatever else changes;
// only a new minSize or maxSize it falls outside clamps it into them.
func TestSteadyStateNeverResetsDesiredCapacity(t *testing.T) {
	ig := eksGroup(v1alpha1.EKSConfiguration{InstanceType: "t3.medium"})
	ig.Annotations = map[string]string{v1alpha1.AnnotationClusterAutoscalerEnabled: "true"}
	spec := groupSpec{name: "g", template: "g", version: 1, subnets: []string{"subnet-1"}, min: 1, max: 5}
	current := func(desired int32) *astypes.AutoScalingGroup {
		return &astypes.AutoScalingGroup{
			AutoScalingGroupName: awssdk.String("g"), MinSize: awssdk.Int32(1), MaxSize: awssdk.Int32(5), DesiredCapacity: awssdk.Int32(desired),
			VPCZoneIdentifier: awssdk.String("subnet-1"),
			LaunchTemplate:    &astypes.LaunchTemplateSpecification{LaunchTemplateName: awssdk.String("g"), Version: awssdk.String("1")},
		}
	}
	cases := []struct {
		name        string
		desired     int32 // set by the autoscaler
		edit        func(*groupSpec)
		wantDesired *int32 // nil: not written
	}{
		{"nothing changed", 4, func(*groupSpec) {}, nil},
		{"a new launch template version and subnets", 4, func(g *groupSpec) { g.version, g.subnets = 2, []string{"subnet-1", "subnet-2"} }, nil},
		{"new bounds it is within", 4, func(g *groupSpec) { g.min, g.max = 2, 6 }, nil},
		{"a minSize above it", 4, func(g *groupSpec) { g.min = 5 }, awssdk.Int32(5)},
		{"a maxSize below it", 4, func(g *groupSpec) { g.max = 3 }, awssdk.Int32(3)},
		{"at zero, minSize 0", 0, func(g *groupSpec) { g.min = 0 }, nil},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			api := &capacityRecorder{}
			g := spec
			c.edit(&g)
			if _, err := ensureScalingGroup(context.Background(), api, ig, g, current(c.desired)); err != nil {
				t.Fatal(err)
			}
			if api.sets > 0 {
				t.Errorf("SetDesiredCapacity called %d times", api.sets)
			}
			var got *int32
			for _, u := range api.updates {
				if u.DesiredCapacity != nil {
					got = u.DesiredCapacity
				}
			}
			switch {
			case c.wantDesired == nil && got != nil:
				t.Errorf("desired capacity %d (set by the autoscaler) reset to %d", c.desired, *got)
			case c.wantDesired != nil && (got == nil || *got != *c.wantDesired):
				t.Errorf("desired capacity written %v, want clamped to %d", got, *c.wantDesired)
			}
		})
	}
}

// describeOne answers DescribeAutoScalingGroups with one group.
type describeOne struct {
	*capacityRecorder
	group astypes.AutoScalingGroup
}

func (d describeOne) DescribeAutoScalingGroups(context.Context, *autoscaling.DescribeAutoScalingGroupsInput, ...func(*autoscaling.Options)) (*autoscaling.DescribeAutoScalingGroupsOutput, error) {
	return &autoscaling.DescribeAutoScalingGroupsOutput{AutoScalingGroups: []astypes.AutoScalingGroup{d.group}}, nil
}

// AddCapacity only ever raises the desired capacity: a negative delta
// (which would let Auto Scaling pick instances to terminate, undrained)
// is refused with providers.ErrScaleIn before any call.
func TestAddCapacityRefusesToLowerTheDesiredCapacity(t *testing.T) {
	cases := []struct {
		name     string
		delta    int
		wantErr  bool
		wantSets int
		wantAdd  int
	}{
		{"a surge", 2, false, 1, 2},
		{"capped at maxSize", 9, false, 1, 2},
		{"nothing", 0, false, 0, 0},
		{"a give-back by scale-in", -1, true, 0, 0},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			rec := &capacityRecorder{}
			api := describeOne{rec, astypes.AutoScalingGroup{MinSize: awssdk.Int32(1), MaxSize: awssdk.Int32(5), DesiredCapacity: awssdk.Int32(3)}}
			p := &Provisioner{aws: &awsp.Clients{AutoScaling: api}, groups: map[string]*awsp.ScalingGroupCache{}}
			added, err := p.AddCapacity(context.Background(), eksGroup(v1alpha1.EKSConfiguration{}), c.delta)
			if (err != nil) != c.wantErr || (err != nil && !errors.Is(err, providers.ErrScaleIn)) {
				t.Fatalf("error %v, want an ErrScaleIn error: %v", err, c.wantErr)
			}
			if rec.sets != c.wantSets || added != c.wantAdd {
				t.Errorf("SetDesiredCapacity called %d time(s), added %d; want %d, %d", rec.sets, added, c.wantSets, c.wantAdd)
			}
		})
	}
}
