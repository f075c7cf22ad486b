package eks

import (
	"context"
	"strings"
	"testing"
	"time"

	awssdk "github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/autoscaling"
	astypes "github.com/aws/aws-sdk-go-v2/service/autoscaling/types"
	"github.com/aws/aws-sdk-go-v2/service/ec2"
	ec2types "github.com/aws/aws-sdk-go-v2/service/ec2/types"

	"github.com/instancemgr/instance-manager/api/v1alpha1"
	awsp "github.com/instancemgr/instance-manager/providers/aws"
)

// fakeWarmPool is a warm pool's instances by launch template version
// ("" when Auto Scaling reports none); it records deletes. (moto 5.2.5
// never puts instances in a warm pool, so this is the narrowest fake.)
type fakeWarmPool struct {
	awsp.AutoScalingAPI
	versions  map[string]string // instance id -> version
	describes int
	deleted   bool
}

func (f *fakeWarmPool) DescribeWarmPool(context.Context, *autoscaling.DescribeWarmPoolInput, ...func(*autoscaling.Options)) (*autoscaling.DescribeWarmPoolOutput, error) {
	f.describes++
	out := &autoscaling.DescribeWarmPoolOutput{WarmPoolConfiguration: &astypes.WarmPoolConfiguration{}}
	for id, v := range f.versions {
		in := astypes.Instance{InstanceId: awssdk.String(id), LifecycleState: astypes.LifecycleStateWarmedStopped}
		if v != "" {
			in.LaunchTemplate = &astypes.LaunchTemplateSpecification{Version: awssdk.String(v)}
		}
		out.Instances = append(out.Instances, in)
	}
	return out, nil
}

func (f *fakeWarmPool) DeleteWarmPool(_ context.Context, in *autoscaling.DeleteWarmPoolInput, _ ...func(*autoscaling.Options)) (*autoscaling.DeleteWarmPoolOutput, error) {
	f.deleted = awssdk.ToBool(in.ForceDelete)
	return &autoscaling.DeleteWarmPoolOutput{}, nil
}

func noTags(context.Context, []string) (map[string]string, error) { return nil, nil }

// A warm pool holding instances of an older launch template version is
// deleted with them (and put back later from the new version) before the
// rotation goes on, so no replacement joins from it drifted and rotates a
// second time; a clean warm pool is read once per version.
func TestWarmPoolOfAnOlderVersionIsReplacedBeforeTheRotation(t *testing.T) {
	ig := eksGroup(v1alpha1.EKSConfiguration{})
	ig.Spec.EKS.WarmPool = &v1alpha1.WarmPoolSpec{MinSize: 1, MaxSize: -1}
	group := &astypes.AutoScalingGroup{AutoScalingGroupName: awssdk.String("g"), WarmPoolConfiguration: &astypes.WarmPoolConfiguration{}}
	ctx := context.Background()

	var w warmPools
	f := &fakeWarmPool{versions: map[string]string{"i-warm1": "1", "i-warm2": "2"}}
	hold, wrote, err := w.hold(ctx, f, ig, group, 2, is("2"), noTags)
	if err != nil || !wrote || !f.deleted || !strings.Contains(hold, "1 warm instance(s) of older launch template versions") {
		t.Fatalf("hold = %q, wrote %v, deleted %v, err %v; want the pool deleted and the rotation held", hold, wrote, f.deleted, err)
	}
	group.WarmPoolConfiguration.Status = astypes.WarmPoolStatusPendingDelete
	if hold, _, _ := w.hold(ctx, f, ig, group, 2, is("2"), noTags); !strings.Contains(hold, "waiting for the warm pool") {
		t.Errorf("while the pool is deleted: hold = %q", hold)
	}
	group.WarmPoolConfiguration = nil
	if hold, _, _ := w.hold(ctx, f, ig, group, 2, is("2"), noTags); hold != "" {
		t.Errorf("once deleted (being put back from the new version): hold = %q", hold)
	}

	group.WarmPoolConfiguration = &astypes.WarmPoolConfiguration{}
	f = &fakeWarmPool{versions: map[string]string{"i-warm3": "2", "i-warm4": ""}}
	for range 2 {
		if hold, wrote, err := w.hold(ctx, f, ig, group, 2, is("2"), noTags); hold != "" || wrote || err != nil {
			t.Errorf("a pool of the current version: hold %q, wrote %v, err %v", hold, wrote, err)
		}
	}
	if f.describes != 1 || f.deleted {
		t.Errorf("a clean pool: %d describes (want 1 per version), deleted %v", f.describes, f.deleted)
	}
	// The version an instance does not report comes from its EC2 tag.
	f = &fakeWarmPool{versions: map[string]string{"i-warm5": ""}}
	tags := func(context.Context, []string) (map[string]string, error) {
		return map[string]string{"i-warm5": "2"}, nil
	}
	if _, wrote, _ := w.hold(ctx, f, ig, group, 3, is("3"), tags); !wrote {
		t.Error("a warm instance tagged with version 2 is kept at version 3")
	}
	// No warm pool in the spec: nothing read.
	ig.Spec.EKS.WarmPool = nil
	f = &fakeWarmPool{}
	if hold, _, _ := w.hold(ctx, f, ig, group, 4, is("4"), noTags); hold != "" || f.describes != 0 {
		t.Errorf("without a warm pool: hold %q, %d describes", hold, f.describes)
	}
}

// fakeStarts answers DescribeInstances with each instance's current EC2
// LaunchTime (its last start) and counts the calls.
type fakeStarts struct {
	awsp.EC2API
	started map[string]time.Time
	calls   int
}

func (f *fakeStarts) DescribeInstances(_ context.Context, in *ec2.DescribeInstancesInput, _ ...func(*ec2.Options)) (*ec2.DescribeInstancesOutput, error) {
	f.calls++
	var r ec2types.Reservation
	for _, id := range in.InstanceIds {
		r.Instances = append(r.Instances, ec2types.Instance{InstanceId: awssdk.String(id), LaunchTime: awssdk.Time(f.started[id])})
	}
	return &ec2.DescribeInstancesOutput{Reservations: []ec2types.Reservation{r}}, nil
}

// An instance read while it sat stopped in the warm pool is read again
// once it is InService: Auto Scaling started it then, and node health's
// startup timeout must run from that start, not from the launch into the
// pool days before. Each instance is read again once.
func TestLaunchTimeOfAWarmInstanceIsItsStartInService(t *testing.T) {
	warmed, started := time.Date(2026, 11, 20, 0, 0, 0, 0, time.UTC), time.Date(2026, 11, 26, 9, 0, 0, 0, time.UTC)
	api := &fakeStarts{started: map[string]time.Time{"i-warm": warmed}}
	l := &launchedVersions{api: api}
	if _, err := l.lookup(t.Context(), []string{"i-warm"}); err != nil { // warmPools.hold, while warm
		t.Fatal(err)
	}
	api.started["i-warm"] = started // Auto Scaling puts it in service
	for range 2 {
		if err := l.startedInService(t.Context(), []string{"i-warm"}); err != nil {
			t.Fatal(err)
		}
	}
	if got := l.launchTimes([]string{"i-warm"})["i-warm"]; !got.Equal(started) {
		t.Fatalf("launch time %s, want the start into service %s", got, started)
	}
	if api.calls != 2 {
		t.Fatalf("%d DescribeInstances calls, want 2 (the lookup, then one read once InService)", api.calls)
	}
}
