package eks

import (
	"context"
	"fmt"
	"strconv"
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

// pruneRecorder answers DescribeLaunchTemplateVersions with versions
// 1..n (default 5, the newest the default), pageSize a page (0: all),
// and records the options and versions of DeleteLaunchTemplateVersions,
// answering fail's versions as UnsuccessfullyDeleted with their code.
type pruneRecorder struct {
	awsp.EC2API
	n, pageSize int
	fail        map[string]ec2types.LaunchTemplateErrorCode
	opts        ec2.Options
	del         []string
	deletes     int
}

func (r *pruneRecorder) DescribeLaunchTemplateVersions(_ context.Context, in *ec2.DescribeLaunchTemplateVersionsInput, _ ...func(*ec2.Options)) (*ec2.DescribeLaunchTemplateVersionsOutput, error) {
	n := r.n
	if n == 0 {
		n = 5
	}
	from := int64(1)
	if in.NextToken != nil {
		from, _ = strconv.ParseInt(*in.NextToken, 10, 64)
	}
	out := &ec2.DescribeLaunchTemplateVersionsOutput{}
	for v := from; v <= int64(n); v++ {
		if r.pageSize > 0 && len(out.LaunchTemplateVersions) == r.pageSize {
			out.NextToken = awssdk.String(strconv.FormatInt(v, 10))
			break
		}
		out.LaunchTemplateVersions = append(out.LaunchTemplateVersions, ec2types.LaunchTemplateVersion{VersionNumber: awssdk.Int64(v), DefaultVersion: awssdk.Bool(v == int64(n))})
	}
	return out, nil
}

func (r *pruneRecorder) DeleteLaunchTemplateVersions(_ context.Context, in *ec2.DeleteLaunchTemplateVersionsInput, optFns ...func(*ec2.Options)) (*ec2.DeleteLaunchTemplateVersionsOutput, error) {
	for _, fn := range optFns {
		fn(&r.opts)
	}
	r.deletes++
	r.del = append(r.del, in.Versions...)
	out := &ec2.DeleteLaunchTemplateVersionsOutput{}
	for _, v := range in.Versions {
		if code, ok := r.fail[v]; ok {
			n, _ := strconv.ParseInt(v, 10, 64)
			out.UnsuccessfullyDeletedLaunchTemplateVersions = append(out.UnsuccessfullyDeletedLaunchTemplateVersions, ec2types.DeleteLaunchTemplateVersionsResponseErrorItem{
				VersionNumber: awssdk.Int64(n), ResponseError: &ec2types.ResponseError{Code: code, Message: awssdk.String("answered " + string(code))}})
		}
	}
	return out, nil
}

// Review 2026-11-29 L10: every page of versions is read, at most 200
// versions are named per call, and a version EC2 did not delete is an
// error (the prune is not recorded done), unless it is gone already.
func TestPruneVersionsPagesAndPartialFailures(t *testing.T) {
	cases := []struct {
		name        string
		n, pageSize int
		fail        map[string]ec2types.LaunchTemplateErrorCode
		wantDeleted int // versions asked
		wantCalls   int
		wantErr     string
	}{
		{name: "versions on later pages are pruned", n: 7, pageSize: 2, wantDeleted: 5, wantCalls: 1},
		{name: "more than 200 versions: two calls", n: 260, pageSize: 200, wantDeleted: 258, wantCalls: 2},
		{name: "a version not deleted is an error naming it", n: 5, fail: map[string]ec2types.LaunchTemplateErrorCode{"2": ec2types.LaunchTemplateErrorCodeUnexpectedError},
			wantDeleted: 3, wantCalls: 1, wantErr: "not deleted: version 2 (unexpectedError"},
		{name: "a version gone already is not an error", n: 5, fail: map[string]ec2types.LaunchTemplateErrorCode{"2": ec2types.LaunchTemplateErrorCodeLaunchTemplateVersionDoesNotExist},
			wantDeleted: 3, wantCalls: 1},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			r := &pruneRecorder{n: tc.n, pageSize: tc.pageSize, fail: tc.fail}
			err := pruneVersions(context.Background(), r, "lt", 2, map[string]bool{})
			if tc.wantErr == "" && err != nil || tc.wantErr != "" && (err == nil || !strings.Contains(err.Error(), tc.wantErr)) {
				t.Fatalf("error %v, want %q", err, tc.wantErr)
			}
			if len(r.del) != tc.wantDeleted || r.deletes != tc.wantCalls {
				t.Errorf("asked to delete %d versions in %d calls, want %d in %d", len(r.del), r.deletes, tc.wantDeleted, tc.wantCalls)
			}
		})
	}
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
