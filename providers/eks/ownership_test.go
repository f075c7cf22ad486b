package eks

import (
	"context"
	"testing"

	awssdk "github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/ec2"
	ec2types "github.com/aws/aws-sdk-go-v2/service/ec2/types"

	"github.com/instancemgr/instance-manager/api/v1alpha1"
	awsp "github.com/instancemgr/instance-manager/providers/aws"
	"github.com/instancemgr/instance-manager/providers/aws/ownership"
)

// fakeTemplates is one launch template with tags; it counts describes and
// records tags added.
type fakeTemplates struct {
	awsp.EC2API
	tags      map[string]string
	describes int
	added     map[string]string
	deleted   bool
}

func (f *fakeTemplates) DescribeLaunchTemplates(context.Context, *ec2.DescribeLaunchTemplatesInput, ...func(*ec2.Options)) (*ec2.DescribeLaunchTemplatesOutput, error) {
	f.describes++
	return &ec2.DescribeLaunchTemplatesOutput{LaunchTemplates: []ec2types.LaunchTemplate{{LaunchTemplateId: awssdk.String("lt-1"), Tags: ownership.EC2Tags(f.tags)}}}, nil
}

func (f *fakeTemplates) CreateTags(_ context.Context, in *ec2.CreateTagsInput, _ ...func(*ec2.Options)) (*ec2.CreateTagsOutput, error) {
	f.added = ownership.EC2TagMap(in.Tags)
	return &ec2.CreateTagsOutput{}, nil
}

func (f *fakeTemplates) DeleteLaunchTemplate(context.Context, *ec2.DeleteLaunchTemplateInput, ...func(*ec2.Options)) (*ec2.DeleteLaunchTemplateOutput, error) {
	f.deleted = true
	return &ec2.DeleteLaunchTemplateOutput{}, nil
}

func TestLaunchTemplateOwnership(t *testing.T) {
	ig := eksGroup(v1alpha1.EKSConfiguration{})
	ig.UID = "u1"
	st := templateState{exists: true, id: "lt-1"}
	cases := []struct {
		name      string
		tags      map[string]string
		foreign   bool
		wantAdded int // ownership tags added to a template of an earlier version
	}{
		{"ours", ownerOf(ig).Tags(), false, 0},
		{"ours, from an earlier version", map[string]string{ownership.TagInstanceGroup: "team-a/web"}, false, len(ownerOf(ig).Tags()) - 1},
		{"hand-made", map[string]string{"Name": "x"}, true, 0},
		{"another group's", ownership.Owner{Cluster: "prod", Namespace: "team", Name: "a-web", UID: "u2"}.Tags(), true, 0},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			f := &fakeTemplates{tags: c.tags}
			var o ownedTemplates
			err := o.check(context.Background(), f, nil, ig, "lt", st)
			if c.foreign != ownership.IsForeign(err) || !c.foreign && err != nil {
				t.Fatalf("check = %v, want foreign=%v", err, c.foreign)
			}
			if len(f.added) != c.wantAdded {
				t.Errorf("tags added %v, want %d", f.added, c.wantAdded)
			}
			if !c.foreign {
				_ = o.check(context.Background(), f, nil, ig, "lt", st)
				if f.describes != 1 {
					t.Errorf("%d describes for two checks of the same template, want 1 (cached by id)", f.describes)
				}
			}
			f.deleted = false
			if err := deleteLaunchTemplate(context.Background(), f, ig, "lt"); err != nil {
				t.Fatal(err)
			}
			if f.deleted == c.foreign {
				t.Errorf("deleted = %v for a template that is foreign = %v", f.deleted, c.foreign)
			}
		})
	}
}
