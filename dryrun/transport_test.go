package dryrun

import (
	"context"
	"errors"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/credentials"
	"github.com/aws/aws-sdk-go-v2/service/autoscaling"
	"github.com/aws/aws-sdk-go-v2/service/ec2"
	ec2types "github.com/aws/aws-sdk-go-v2/service/ec2/types"
	"github.com/aws/aws-sdk-go-v2/service/iam"
	"github.com/aws/smithy-go"
)

// Through the real SDK clients: reads reach the server, writes never do;
// a write nobody reads the answer of succeeds, one whose answer is needed
// fails with DryRunOperation; each write is recorded.
func TestTransportAnswersWritesAndPassesReads(t *testing.T) {
	var mu sync.Mutex
	var reached []string
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		_ = r.ParseForm()
		mu.Lock()
		reached = append(reached, r.Form.Get("Action"))
		mu.Unlock()
		w.Header().Set("Content-Type", "text/xml")
		_, _ = w.Write([]byte(`<DescribeAutoScalingGroupsResponse><DescribeAutoScalingGroupsResult><AutoScalingGroups/></DescribeAutoScalingGroupsResult></DescribeAutoScalingGroupsResponse>`))
	}))
	defer srv.Close()
	var calls []string
	cfg := aws.Config{Region: "us-west-2", BaseEndpoint: aws.String(srv.URL), RetryMaxAttempts: 1,
		Credentials: credentials.NewStaticCredentialsProvider("k", "s", ""),
		HTTPClient:  &http.Client{Transport: &Transport{Recorder: &Recorder{Observe: func(c string) { calls = append(calls, c) }}}}}
	ctx := context.Background()

	if _, err := autoscaling.NewFromConfig(cfg).DescribeAutoScalingGroups(ctx, &autoscaling.DescribeAutoScalingGroupsInput{}); err != nil {
		t.Fatalf("a read: %v", err)
	}
	if _, err := autoscaling.NewFromConfig(cfg).UpdateAutoScalingGroup(ctx, &autoscaling.UpdateAutoScalingGroupInput{
		AutoScalingGroupName: aws.String("g"), MaxSize: aws.Int32(3)}); err != nil {
		t.Fatalf("a write whose answer nobody reads: %v", err)
	}
	if _, err := ec2.NewFromConfig(cfg).CreateTags(ctx, &ec2.CreateTagsInput{Resources: []string{"lt-1"}, Tags: []ec2types.Tag{{Key: aws.String("k"), Value: aws.String("v")}}}); err != nil {
		t.Fatalf("an EC2 write whose answer nobody reads: %v", err)
	}
	_, err := iam.NewFromConfig(cfg).CreateRole(ctx, &iam.CreateRoleInput{RoleName: aws.String("r"), AssumeRolePolicyDocument: aws.String("{}")})
	var ae smithy.APIError
	if !errors.As(err, &ae) || ae.ErrorCode() != ErrorCode {
		t.Fatalf("a write whose answer is needed: err %v, want %s", err, ErrorCode)
	}
	_, err = ec2.NewFromConfig(cfg).CreateLaunchTemplateVersion(ctx, &ec2.CreateLaunchTemplateVersionInput{LaunchTemplateName: aws.String("lt"), LaunchTemplateData: &ec2types.RequestLaunchTemplateData{ImageId: aws.String("ami-1")}})
	if !errors.As(err, &ae) || ae.ErrorCode() != ErrorCode {
		t.Fatalf("an EC2 write whose answer is needed: err %v, want %s", err, ErrorCode)
	}
	if len(reached) != 1 || reached[0] != "DescribeAutoScalingGroups" {
		t.Errorf("the server got %v, want the read alone", reached)
	}
	want := []string{"autoscaling UpdateAutoScalingGroup", "ec2 CreateTags", "iam CreateRole", "ec2 CreateLaunchTemplateVersion"}
	if len(calls) != len(want) {
		t.Fatalf("recorded %v, want %v", calls, want)
	}
	for i, w := range want {
		if !strings.HasPrefix(calls[i], w) {
			t.Errorf("recorded %q, want %q…", calls[i], w)
		}
	}
	if !strings.Contains(calls[0], "AutoScalingGroupName=g") || !strings.Contains(calls[0], "MaxSize=3") {
		t.Errorf("the record %q does not say what would change", calls[0])
	}
}
