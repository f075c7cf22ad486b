package eks

import (
	"context"
	"testing"

	awssdk "github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/autoscaling"
	astypes "github.com/aws/aws-sdk-go-v2/service/autoscaling/types"
	"k8s.io/apimachinery/pkg/types"

	awsp "github.com/instancemgr/instance-manager/providers/aws"
	"github.com/instancemgr/instance-manager/providers/aws/ownership"
)

// listing answers DescribeAutoScalingGroups with its groups.
type listing struct {
	awsp.AutoScalingAPI
	groups []astypes.AutoScalingGroup
}

func (l listing) DescribeAutoScalingGroups(context.Context, *autoscaling.DescribeAutoScalingGroupsInput, ...func(*autoscaling.Options)) (*autoscaling.DescribeAutoScalingGroupsOutput, error) {
	return &autoscaling.DescribeAutoScalingGroupsOutput{AutoScalingGroups: l.groups}, nil
}

func listedGroup(name string, tags map[string]string, instances ...astypes.Instance) astypes.AutoScalingGroup {
	g := astypes.AutoScalingGroup{AutoScalingGroupName: awssdk.String(name), Instances: instances,
		Tags: []astypes.TagDescription{{Key: awssdk.String(awsp.ClusterTagKey("prod")), Value: awssdk.String("owned")}}}
	for k, v := range tags {
		g.Tags = append(g.Tags, astypes.TagDescription{Key: awssdk.String(k), Value: awssdk.String(v)})
	}
	return g
}

func listedInstance(id string, state astypes.LifecycleState) astypes.Instance {
	return astypes.Instance{InstanceId: awssdk.String(id), AvailabilityZone: awssdk.String("us-west-2a"), LifecycleState: state}
}

// The interruption queue acts only on what the listings show an
// InstanceGroup owns: by the ownership tag, never another installation's.
func TestOwnersFromTheListing(t *testing.T) {
	ownership.SetInstallation("this-one")
	t.Cleanup(func() { ownership.SetInstallation("") })
	web := types.NamespacedName{Namespace: "team", Name: "web"}
	api := listing{groups: []astypes.AutoScalingGroup{
		listedGroup("prod-team-web", map[string]string{ownership.TagInstanceGroup: "team/web", ownership.TagInstallation: "this-one"},
			listedInstance("i-1", astypes.LifecycleStateInService), listedInstance("i-2", astypes.LifecycleStateTerminatingWait)),
		listedGroup("someone-elses", map[string]string{"team": "x"}, listedInstance("i-3", astypes.LifecycleStateTerminatingWait)),
		listedGroup("other-installation", map[string]string{ownership.TagInstanceGroup: "team/web", ownership.TagInstallation: "that-one"},
			listedInstance("i-4", astypes.LifecycleStateTerminatingWait)),
		listedGroup("bad-tag", map[string]string{ownership.TagInstanceGroup: "web"}, listedInstance("i-5", astypes.LifecycleStateInService)),
	}}
	p := &Provisioner{aws: &awsp.Clients{AutoScaling: api}, groups: map[string]*awsp.ScalingGroupCache{}}
	if _, err := p.groupCache("prod").List(context.Background()); err != nil {
		t.Fatal(err)
	}
	for name, want := range map[string]bool{"prod-team-web": true, "someone-elses": false, "other-installation": false, "bad-tag": false, "unlisted": false} {
		got, ok := p.ScalingGroupOwner(name)
		if ok != want || (ok && got != web) {
			t.Errorf("ScalingGroupOwner(%q) = %v, %v; want owned: %v", name, got, ok, want)
		}
	}
	for id, want := range map[string]bool{"i-1": true, "i-2": true, "i-3": false, "i-4": false, "i-5": false, "i-9": false} {
		w, ok := p.InstanceOwner(id)
		if ok != want {
			t.Errorf("InstanceOwner(%q) owned = %v, want %v", id, ok, want)
		}
		if ok && (w.Group != web || w.ScalingGroup != "prod-team-web" || w.InstanceID != id || w.ProviderID != "aws:///us-west-2a/"+id) {
			t.Errorf("InstanceOwner(%q) = %+v", id, w)
		}
	}
	waits := p.TerminationWaits()
	if len(waits) != 1 || waits[0].InstanceID != "i-2" || waits[0].Group != web {
		t.Errorf("TerminationWaits = %+v, want only i-2 of team/web", waits)
	}
}
