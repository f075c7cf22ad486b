package gc

import (
	"context"
	"slices"
	"strings"
	"testing"
	"time"

	awssdk "github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/autoscaling"
	astypes "github.com/aws/aws-sdk-go-v2/service/autoscaling/types"
	"github.com/aws/aws-sdk-go-v2/service/ec2"
	ec2types "github.com/aws/aws-sdk-go-v2/service/ec2/types"
	"github.com/aws/aws-sdk-go-v2/service/iam"
	iamtypes "github.com/aws/aws-sdk-go-v2/service/iam/types"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	clientgoscheme "k8s.io/client-go/kubernetes/scheme"
	"sigs.k8s.io/controller-runtime/pkg/client/fake"

	"github.com/instancemgr/instance-manager/api/v1alpha1"
	awsp "github.com/instancemgr/instance-manager/providers/aws"
	"github.com/instancemgr/instance-manager/providers/aws/ownership"
)

// fakeAWS holds Auto Scaling groups and launch templates by name (with
// tags) and records deletions and listings.
type fakeAWS struct {
	awsp.AutoScalingAPI
	awsp.EC2API
	awsp.IAMAPI
	groups, templates map[string]map[string]string
	deleted           []string // "asg <name>", "lt <name>", and "freeze <name>" for a SuspendProcesses
	listings          int
}

func (f *fakeAWS) SuspendProcesses(_ context.Context, in *autoscaling.SuspendProcessesInput, _ ...func(*autoscaling.Options)) (*autoscaling.SuspendProcessesOutput, error) {
	f.deleted = append(f.deleted, "freeze "+*in.AutoScalingGroupName)
	return &autoscaling.SuspendProcessesOutput{}, nil
}

func (f *fakeAWS) DescribeAutoScalingGroups(_ context.Context, in *autoscaling.DescribeAutoScalingGroupsInput, _ ...func(*autoscaling.Options)) (*autoscaling.DescribeAutoScalingGroupsOutput, error) {
	out := &autoscaling.DescribeAutoScalingGroupsOutput{}
	if len(in.Filters) > 0 {
		f.listings++
	}
	for name, tags := range f.groups {
		if len(in.AutoScalingGroupNames) > 0 && in.AutoScalingGroupNames[0] != name {
			continue
		}
		g := astypes.AutoScalingGroup{AutoScalingGroupName: awssdk.String(name)}
		for k, v := range tags {
			g.Tags = append(g.Tags, astypes.TagDescription{Key: awssdk.String(k), Value: awssdk.String(v)})
		}
		out.AutoScalingGroups = append(out.AutoScalingGroups, g)
	}
	return out, nil
}

func (f *fakeAWS) DeleteAutoScalingGroup(_ context.Context, in *autoscaling.DeleteAutoScalingGroupInput, _ ...func(*autoscaling.Options)) (*autoscaling.DeleteAutoScalingGroupOutput, error) {
	delete(f.groups, *in.AutoScalingGroupName)
	f.deleted = append(f.deleted, "asg "+*in.AutoScalingGroupName)
	return &autoscaling.DeleteAutoScalingGroupOutput{}, nil
}

func (f *fakeAWS) DescribeLaunchTemplates(context.Context, *ec2.DescribeLaunchTemplatesInput, ...func(*ec2.Options)) (*ec2.DescribeLaunchTemplatesOutput, error) {
	f.listings++
	out := &ec2.DescribeLaunchTemplatesOutput{}
	for name, tags := range f.templates {
		lt := ec2types.LaunchTemplate{LaunchTemplateName: awssdk.String(name), LaunchTemplateId: awssdk.String(name)}
		for k, v := range tags {
			lt.Tags = append(lt.Tags, ec2types.Tag{Key: awssdk.String(k), Value: awssdk.String(v)})
		}
		out.LaunchTemplates = append(out.LaunchTemplates, lt)
	}
	return out, nil
}

func (f *fakeAWS) DeleteLaunchTemplate(_ context.Context, in *ec2.DeleteLaunchTemplateInput, _ ...func(*ec2.Options)) (*ec2.DeleteLaunchTemplateOutput, error) {
	delete(f.templates, *in.LaunchTemplateId)
	f.deleted = append(f.deleted, "lt "+*in.LaunchTemplateId)
	return &ec2.DeleteLaunchTemplateOutput{}, nil
}

func (f *fakeAWS) GetRole(context.Context, *iam.GetRoleInput, ...func(*iam.Options)) (*iam.GetRoleOutput, error) {
	return nil, &iamtypes.NoSuchEntityException{Message: awssdk.String("no")}
}

func TestSweep(t *testing.T) {
	ownership.SetInstallation("inst-1")
	tags := func(ns, name string) map[string]string {
		return ownership.Owner{Cluster: "prod", Namespace: ns, Name: name, UID: types.UID("u-" + name)}.Tags()
	}
	scheme := runtime.NewScheme()
	_ = clientgoscheme.AddToScheme(scheme)
	_ = v1alpha1.AddToScheme(scheme)
	cases := []struct {
		name   string
		opts   Options
		sweeps []time.Duration // clock offsets of the sweeps
		want   []string        // deletions, in order
	}{
		{"nothing before the grace period", Options{Grace: 10 * time.Minute}, []time.Duration{0, 5 * time.Minute}, nil},
		{"groups first, then their templates", Options{Grace: 10 * time.Minute}, []time.Duration{0, 11 * time.Minute, 12 * time.Minute},
			[]string{"asg a", "asg b", "lt a"}},
		{"bounded per sweep", Options{Grace: 0, MaxDeletions: 1}, []time.Duration{0, time.Minute}, []string{"asg a", "asg b"}},
		{"dry run deletes nothing", Options{Grace: 0, DryRun: true}, []time.Duration{0, time.Minute, 2 * time.Minute}, nil},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			other := tags("team", "other")
			other[ownership.TagInstallation] = "inst-2"
			f := &fakeAWS{
				groups:    map[string]map[string]string{"a": tags("team", "a"), "b": tags("team", "b"), "foreign": other, "hand-made": {"Name": "x"}},
				templates: map[string]map[string]string{"a": tags("team", "a")},
			}
			now := time.Unix(0, 0)
			col := &Collector{Client: fake.NewClientBuilder().WithScheme(scheme).Build(), AWS: &awsp.Clients{AutoScaling: f, EC2: f, IAM: f},
				Opts: c.opts, Now: func() time.Time { return now }}
			for _, at := range c.sweeps {
				now = time.Unix(0, 0).Add(at)
				rep, err := col.Sweep(context.Background())
				if err != nil {
					t.Fatal(err)
				}
				if len(rep.Orphans) == 0 && len(f.groups)+len(f.templates) > 2 {
					t.Fatalf("no orphans found among %v", f.groups)
				}
			}
			// Each group is frozen before it is deleted.
			var deleted []string
			for _, d := range f.deleted {
				if name, ok := strings.CutPrefix(d, "asg "); ok && !slices.Contains(f.deleted[:slices.Index(f.deleted, d)], "freeze "+name) {
					t.Errorf("group %s deleted without being frozen first: %v", name, f.deleted)
				}
				if !strings.HasPrefix(d, "freeze ") {
					deleted = append(deleted, d)
				}
			}
			f.deleted = deleted
			if len(f.deleted) != len(c.want) {
				t.Fatalf("deleted %v, want %v", f.deleted, c.want)
			}
			for i := range c.want {
				// groups of one sweep may come in any order
				if c.want[i][:3] != f.deleted[i][:3] {
					t.Fatalf("deleted %v, want %v", f.deleted, c.want)
				}
			}
			if f.groups["foreign"] == nil || f.groups["hand-made"] == nil {
				t.Fatal("a resource of another installation, or without ownership tags, was deleted")
			}
			if f.listings != 2*len(c.sweeps) {
				t.Errorf("%d listings for %d sweeps, want 2 per sweep", f.listings, len(c.sweeps))
			}
		})
	}
}

// Review 2026-11-26 N12 (attack 18): two releases installed with one
// --installation-id in one account and region find each other's groups
// tagged with "their" installation; each judges only its own clusters'.
func TestSweepJudgesOnlyItsClusters(t *testing.T) {
	ownership.SetInstallation("inst-1")
	scheme := runtime.NewScheme()
	_ = clientgoscheme.AddToScheme(scheme)
	_ = v1alpha1.AddToScheme(scheme)
	tags := func(cluster, name string) map[string]string {
		return ownership.Owner{Cluster: cluster, Namespace: "team", Name: name, UID: types.UID("u-" + name)}.Tags()
	}
	f := &fakeAWS{
		groups:    map[string]map[string]string{"blue-a": tags("blue", "a"), "green-a": tags("green", "a")},
		templates: map[string]map[string]string{},
	}
	col := &Collector{Client: fake.NewClientBuilder().WithScheme(scheme).Build(), AWS: &awsp.Clients{AutoScaling: f, EC2: f, IAM: f},
		Opts: Options{Grace: 0, Clusters: []string{"blue"}}, Now: time.Now}
	for i := 0; i < 2; i++ {
		rep, err := col.Sweep(context.Background())
		if err != nil {
			t.Fatal(err)
		}
		for _, o := range rep.Orphans {
			if strings.Contains(o, "green") {
				t.Errorf("another cluster's resource judged: %s", o)
			}
		}
	}
	if !slices.Contains(f.deleted, "asg blue-a") || slices.Contains(f.deleted, "asg green-a") {
		t.Errorf("deleted %v, want blue-a only", f.deleted)
	}
}
