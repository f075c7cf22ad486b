package aws

import (
	"context"
	"errors"
	"net/http"
	"strings"
	"testing"

	awssdk "github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/autoscaling"
	"github.com/aws/aws-sdk-go-v2/service/eks"
	"github.com/aws/smithy-go/middleware"
)

// reached is what the fake transport answers: the request got past the guard.
var errReached = errors.New("reached the network")

type noNetwork struct{}

func (noNetwork) Do(*http.Request) (*http.Response, error) { return nil, errReached }

func TestClusterGuard(t *testing.T) {
	cfg := awssdk.Config{Region: "us-west-2", HTTPClient: noNetwork{}, Credentials: awssdk.AnonymousCredentials{},
		RetryMaxAttempts: 1, APIOptions: []func(*middleware.Stack) error{ClusterGuard(func(c string) bool { return c == "prod" })}}
	e := eks.NewFromConfig(cfg)
	ctx := context.Background()
	for _, tc := range []struct {
		name    string
		call    func() error
		refused bool
	}{
		{"DescribeCluster of the own cluster", func() error {
			_, err := e.DescribeCluster(ctx, &eks.DescribeClusterInput{Name: awssdk.String("prod")})
			return err
		}, false},
		{"DescribeCluster of another", func() error {
			_, err := e.DescribeCluster(ctx, &eks.DescribeClusterInput{Name: awssdk.String("dev")})
			return err
		}, true},
		{"CreateNodegroup on another", func() error {
			_, err := e.CreateNodegroup(ctx, &eks.CreateNodegroupInput{ClusterName: awssdk.String("dev"), NodegroupName: awssdk.String("n"), NodeRole: awssdk.String("r"), Subnets: []string{"s"}})
			return err
		}, true},
		{"CreateAccessEntry on another", func() error {
			_, err := e.CreateAccessEntry(ctx, &eks.CreateAccessEntryInput{ClusterName: awssdk.String("dev"), PrincipalArn: awssdk.String("arn")})
			return err
		}, true},
		{"other services pass", func() error {
			_, err := autoscaling.NewFromConfig(cfg).DescribeAutoScalingGroups(ctx, &autoscaling.DescribeAutoScalingGroupsInput{})
			return err
		}, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			err := tc.call()
			if tc.refused {
				if err == nil || !strings.Contains(err.Error(), `on cluster "dev" refused`) {
					t.Errorf("want the guard's refusal, got %v", err)
				}
				return
			}
			if !errors.Is(err, errReached) {
				t.Errorf("want the call to reach the network, got %v", err)
			}
		})
	}
}
