package eks

import (
	"context"
	"fmt"
	"strings"
	"testing"

	awssdk "github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/autoscaling"
	"github.com/aws/aws-sdk-go-v2/service/ec2"
	ec2types "github.com/aws/aws-sdk-go-v2/service/ec2/types"

	"github.com/instancemgr/instance-manager/api/v1alpha1"
	awsp "github.com/instancemgr/instance-manager/providers/aws"
	"github.com/instancemgr/instance-manager/providers/aws/ownership"
)

// createRecorder is an Auto Scaling API where no group exists; it records
// the CreateAutoScalingGroup input.
type createRecorder struct {
	awsp.AutoScalingAPI
	in *autoscaling.CreateAutoScalingGroupInput
}

func (r *createRecorder) DescribeAutoScalingGroups(context.Context, *autoscaling.DescribeAutoScalingGroupsInput, ...func(*autoscaling.Options)) (*autoscaling.DescribeAutoScalingGroupsOutput, error) {
	return &autoscaling.DescribeAutoScalingGroupsOutput{}, nil
}

func (r *createRecorder) CreateAutoScalingGroup(_ context.Context, in *autoscaling.CreateAutoScalingGroupInput, _ ...func(*autoscaling.Options)) (*autoscaling.CreateAutoScalingGroupOutput, error) {
	r.in = in
	return &autoscaling.CreateAutoScalingGroupOutput{}, nil
}

// ScalingGroupTags counts what ensureScalingGroup creates the group with,
// whatever the spec's tags and the cluster-autoscaler's.
func TestScalingGroupTagsCountsWhatIsCreated(t *testing.T) {
	ownership.SetInstallation("installation-uid")
	defer ownership.SetInstallation("")
	for _, n := range []int{0, 1, 20, 41, 60} {
		for _, autoscaler := range []bool{false, true} {
			ig := &v1alpha1.InstanceGroup{}
			ig.Namespace, ig.Name, ig.UID = "team", "web", "uid-1"
			ig.Spec.EKS = &v1alpha1.EKSSpec{MinSize: 1, MaxSize: 2, Configuration: &v1alpha1.EKSConfiguration{
				ClusterName: "prod", Labels: map[string]string{"a": "b"}}}
			for i := 0; i < n; i++ {
				ig.Spec.EKS.Configuration.Tags = append(ig.Spec.EKS.Configuration.Tags, map[string]string{"key": fmt.Sprintf("tag-with-a-longer-key-%03d", i), "value": "v"})
			}
			if autoscaler {
				ig.Annotations = map[string]string{v1alpha1.AnnotationClusterAutoscalerEnabled: "true"}
			}
			rec := &createRecorder{}
			if _, err := ensureScalingGroup(context.Background(), rec, ig, groupSpec{name: GroupName(ig), template: "t", version: 1, subnets: []string{"s"}, min: 1, max: 2}, nil); err != nil {
				t.Fatal(err)
			}
			total, added := ScalingGroupTags(ig)
			if total != len(rec.in.Tags) || added != total-n {
				t.Errorf("%d spec tags, autoscaler %v: ScalingGroupTags = %d (%d added), the group was created with %d", n, autoscaler, total, added, len(rec.in.Tags))
			}
		}
	}
}

// UserDataSize is the size of the user data Apply renders, for a cluster
// of typical size, and grows with the stages.
func TestUserDataSize(t *testing.T) {
	ig := &v1alpha1.InstanceGroup{}
	ig.Namespace, ig.Name = "team", "web"
	ig.Spec.EKS = &v1alpha1.EKSSpec{Configuration: &v1alpha1.EKSConfiguration{ClusterName: "prod", Labels: map[string]string{"a": "b"}}}
	base := UserDataSize(ig)
	cluster := sizingCluster
	cluster.Name = "prod"
	if want := len(groupBootstrap(ig, cluster).UserData()); base != want || base < 1500 {
		t.Fatalf("UserDataSize = %d, want %d (with the certificate authority's 1,500 bytes)", base, want)
	}
	ig.Spec.EKS.Configuration.UserData = []v1alpha1.UserDataStage{{Name: "s", Stage: "PreBootstrap", Data: strings.Repeat("#", 4096)}}
	if got := UserDataSize(ig); got < base+4096 {
		t.Errorf("with a 4 KB stage UserDataSize = %d, want at least %d", got, base+4096)
	}
}

// pruneRecorder answers DescribeLaunchTemplateVersions with versions 1..5
// and records the options of DeleteLaunchTemplateVersions.
type pruneRecorder struct {
	awsp.EC2API
	opts ec2.Options
	del  []string
}

func (r *pruneRecorder) DescribeLaunchTemplateVersions(context.Context, *ec2.DescribeLaunchTemplateVersionsInput, ...func(*ec2.Options)) (*ec2.DescribeLaunchTemplateVersionsOutput, error) {
	out := &ec2.DescribeLaunchTemplateVersionsOutput{}
	for v := int64(1); v <= 5; v++ {
		out.LaunchTemplateVersions = append(out.LaunchTemplateVersions, ec2types.LaunchTemplateVersion{VersionNumber: awssdk.Int64(v), DefaultVersion: awssdk.Bool(v == 5)})
	}
	return out, nil
}

func (r *pruneRecorder) DeleteLaunchTemplateVersions(_ context.Context, in *ec2.DeleteLaunchTemplateVersionsInput, optFns ...func(*ec2.Options)) (*ec2.DeleteLaunchTemplateVersionsOutput, error) {
	for _, fn := range optFns {
		fn(&r.opts)
	}
	r.del = in.Versions
	return &ec2.DeleteLaunchTemplateVersionsOutput{}, nil
}

// Pruning old launch template versions is housekeeping: one attempt, no
// retries that would hold the reconcile (on moto, which does not
// implement it, the SDK's retries took a minute per reconcile).
func TestPruneVersionsTriesOnce(t *testing.T) {
	r := &pruneRecorder{}
	if err := pruneVersions(context.Background(), r, "lt", 2, map[string]bool{}); err != nil {
		t.Fatal(err)
	}
	if r.opts.RetryMaxAttempts != 1 {
		t.Errorf("DeleteLaunchTemplateVersions with RetryMaxAttempts %d, want 1", r.opts.RetryMaxAttempts)
	}
	if strings.Join(r.del, ",") != "3,2,1" {
		t.Errorf("deleted versions %v, want 3,2,1 (keep 2: the default 5 and the newest other, 4)", r.del)
	}
}
