package eks

import (
	"context"
	"slices"
	"strings"
	"testing"

	awssdk "github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/autoscaling"
	astypes "github.com/aws/aws-sdk-go-v2/service/autoscaling/types"
	"github.com/aws/aws-sdk-go-v2/service/ec2"
	ec2types "github.com/aws/aws-sdk-go-v2/service/ec2/types"
	"github.com/aws/aws-sdk-go-v2/service/iam"
	iamtypes "github.com/aws/aws-sdk-go-v2/service/iam/types"
	"k8s.io/apimachinery/pkg/types"

	"github.com/instancemgr/instance-manager/providers"
	awsp "github.com/instancemgr/instance-manager/providers/aws"
	"github.com/instancemgr/instance-manager/providers/aws/launchtemplate"
	"github.com/instancemgr/instance-manager/providers/aws/ownership"
)

// orphanAWS holds Auto Scaling groups (with their instances) and launch
// templates by name, with tags, and records what is called.
type orphanAWS struct {
	awsp.AutoScalingAPI
	awsp.EC2API
	awsp.IAMAPI
	groups, templates map[string]map[string]string
	instances         map[string][]string
	calls             []string // "freeze <name>", "asg <name>", "lt <id>"
	listings          int
}

func (f *orphanAWS) SuspendProcesses(_ context.Context, in *autoscaling.SuspendProcessesInput, _ ...func(*autoscaling.Options)) (*autoscaling.SuspendProcessesOutput, error) {
	f.calls = append(f.calls, "freeze "+*in.AutoScalingGroupName)
	return &autoscaling.SuspendProcessesOutput{}, nil
}

func (f *orphanAWS) DescribeAutoScalingGroups(_ context.Context, in *autoscaling.DescribeAutoScalingGroupsInput, _ ...func(*autoscaling.Options)) (*autoscaling.DescribeAutoScalingGroupsOutput, error) {
	out := &autoscaling.DescribeAutoScalingGroupsOutput{}
	if len(in.Filters) > 0 {
		f.listings++
	}
	for name, tags := range f.groups {
		if len(in.AutoScalingGroupNames) > 0 && in.AutoScalingGroupNames[0] != name {
			continue
		}
		if len(in.Filters) > 0 && tags[ownership.TagInstallation] != in.Filters[0].Values[0] {
			continue
		}
		g := astypes.AutoScalingGroup{AutoScalingGroupName: awssdk.String(name), MaxSize: awssdk.Int32(0)}
		for k, v := range tags {
			g.Tags = append(g.Tags, astypes.TagDescription{Key: awssdk.String(k), Value: awssdk.String(v)})
		}
		for _, id := range f.instances[name] {
			g.Instances = append(g.Instances, astypes.Instance{InstanceId: awssdk.String(id)})
		}
		out.AutoScalingGroups = append(out.AutoScalingGroups, g)
	}
	return out, nil
}

func (f *orphanAWS) DeleteAutoScalingGroup(_ context.Context, in *autoscaling.DeleteAutoScalingGroupInput, _ ...func(*autoscaling.Options)) (*autoscaling.DeleteAutoScalingGroupOutput, error) {
	delete(f.groups, *in.AutoScalingGroupName)
	f.calls = append(f.calls, "asg "+*in.AutoScalingGroupName)
	return &autoscaling.DeleteAutoScalingGroupOutput{}, nil
}

func (f *orphanAWS) DescribeLaunchTemplates(_ context.Context, in *ec2.DescribeLaunchTemplatesInput, _ ...func(*ec2.Options)) (*ec2.DescribeLaunchTemplatesOutput, error) {
	f.listings++
	out := &ec2.DescribeLaunchTemplatesOutput{}
	for name, tags := range f.templates {
		if tags[ownership.TagInstallation] != in.Filters[0].Values[0] {
			continue
		}
		lt := ec2types.LaunchTemplate{LaunchTemplateName: awssdk.String(name), LaunchTemplateId: awssdk.String("id-" + name), Tags: ownership.EC2Tags(tags)}
		out.LaunchTemplates = append(out.LaunchTemplates, lt)
	}
	return out, nil
}

func (f *orphanAWS) DeleteLaunchTemplate(_ context.Context, in *ec2.DeleteLaunchTemplateInput, _ ...func(*ec2.Options)) (*ec2.DeleteLaunchTemplateOutput, error) {
	delete(f.templates, strings.TrimPrefix(*in.LaunchTemplateId, "id-"))
	f.calls = append(f.calls, "lt "+*in.LaunchTemplateId)
	return &ec2.DeleteLaunchTemplateOutput{}, nil
}

func (f *orphanAWS) GetRole(context.Context, *iam.GetRoleInput, ...func(*iam.Options)) (*iam.GetRoleOutput, error) {
	return nil, &iamtypes.NoSuchEntityException{Message: awssdk.String("no")}
}

// instanceDrains drains by instance id, done or not; it records the ids.
type instanceDrains struct {
	providers.Disruptions
	done  bool
	asked [][]string
}

func (d *instanceDrains) DrainInstances(_ context.Context, ids []string) (providers.Retirement, error) {
	d.asked = append(d.asked, ids)
	return providers.Retirement{Done: d.done, Message: "draining"}, nil
}

// The eks collector lists this installation's groups and templates in two
// listings (a managed group's template is not its own), freezes a group
// and drains its instances' nodes before deleting it.
func TestCollectorListsFreezesDrainsAndDeletes(t *testing.T) {
	ownership.SetInstallation("inst-1")
	defer ownership.SetInstallation("")
	o := ownership.Owner{Cluster: "prod", Namespace: "team", Name: "a", UID: types.UID("u-a")}
	name := ownership.Name(ownership.LimitLaunchTemplate, "prod", "team", "a")
	other := o.Tags()
	other[ownership.TagInstallation] = "inst-2"
	f := &orphanAWS{
		groups:    map[string]map[string]string{name: o.Tags(), "foreign": other, "hand-made": {"Name": "x"}},
		templates: map[string]map[string]string{name: o.Tags(), "mng-" + name: o.Tags()},
		instances: map[string][]string{name: {"i-1", "i-2"}},
	}
	p := &Provisioner{aws: &awsp.Clients{AutoScaling: f, EC2: f, IAM: f}}
	list, err := p.Owned(context.Background(), nil)
	if err != nil {
		t.Fatal(err)
	}
	if f.listings != 2 || len(list) != 2 {
		t.Fatalf("%d listings found %+v, want 2 finding the group and its template", f.listings, list)
	}
	var group, template providers.Owned
	for _, r := range list {
		if r.Owner != o || r.Name != name {
			t.Fatalf("listed %+v", r)
		}
		if r.Kind == KindScalingGroup {
			group = r
		} else {
			template = r
		}
	}
	if group.Dependent || !template.Dependent || template.Kind != launchtemplate.Kind {
		t.Fatalf("group %+v template %+v", group, template)
	}

	d := &instanceDrains{}
	ctx := providers.WithDisruptions(context.Background(), d)
	del, err := p.DeleteOrphan(ctx, group)
	if err != nil || del.Deleting || del.Waiting == "" {
		t.Fatalf("while draining: %+v, %v", del, err)
	}
	if !slices.Equal(f.calls, []string{"freeze " + name}) || len(d.asked) != 1 || !slices.Equal(d.asked[0], []string{"i-1", "i-2"}) {
		t.Fatalf("calls %v, drains asked %v", f.calls, d.asked)
	}
	d.done = true
	if del, err = p.DeleteOrphan(ctx, group); err != nil || !del.Deleting {
		t.Fatalf("once drained: %+v, %v", del, err)
	}
	if f.calls[len(f.calls)-1] != "asg "+name {
		t.Fatalf("calls %v", f.calls)
	}
	if del, err = p.DeleteOrphan(ctx, template); err != nil || !del.Gone || f.calls[len(f.calls)-1] != "lt id-"+name {
		t.Fatalf("template: %+v, %v, calls %v", del, err, f.calls)
	}
	if f.groups["foreign"] == nil || f.groups["hand-made"] == nil || f.templates["mng-"+name] == nil {
		t.Fatal("a resource of another installation, without ownership tags, or of another provisioner was deleted")
	}
	if done, err := p.FinishOrphan(context.Background(), o); err != nil || len(done) != 0 {
		t.Fatalf("FinishOrphan without roles = %v, %v", done, err)
	}
}

// A group whose tags, read again, no longer name the owner is neither
// frozen nor deleted.
func TestCollectorLeavesAGroupRetagged(t *testing.T) {
	ownership.SetInstallation("inst-1")
	defer ownership.SetInstallation("")
	o := ownership.Owner{Cluster: "prod", Namespace: "team", Name: "a", UID: types.UID("u-a")}
	now := o.Tags()
	now[ownership.TagUID] = "u-b"
	f := &orphanAWS{groups: map[string]map[string]string{"g": now}}
	p := &Provisioner{aws: &awsp.Clients{AutoScaling: f, EC2: f, IAM: f}}
	if _, err := p.DeleteOrphan(context.Background(), providers.Owned{Kind: KindScalingGroup, Name: "g", Owner: o, Tags: o.Tags()}); err == nil {
		t.Fatal("no error for a group no longer tagged for the owner")
	}
	if len(f.calls) != 0 {
		t.Fatalf("calls %v", f.calls)
	}
}
