package eks

import (
	"context"
	"testing"
	"time"

	awssdk "github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/autoscaling"
	"github.com/aws/aws-sdk-go-v2/service/eks"
	ekstypes "github.com/aws/aws-sdk-go-v2/service/eks/types"
	"sigs.k8s.io/controller-runtime/pkg/client/fake"

	"github.com/instancemgr/instance-manager/api/v1alpha1"
	"github.com/instancemgr/instance-manager/providers"
	awsp "github.com/instancemgr/instance-manager/providers/aws"
)

// describeNone answers DescribeAutoScalingGroups with no group (a group
// just created that a read does not see yet).
type describeNone struct{ *capacityRecorder }

func (describeNone) DescribeAutoScalingGroups(context.Context, *autoscaling.DescribeAutoScalingGroupsInput, ...func(*autoscaling.Options)) (*autoscaling.DescribeAutoScalingGroupsOutput, error) {
	return &autoscaling.DescribeAutoScalingGroupsOutput{}, nil
}

// entryBeingDeleted answers CreateAccessEntry with ResourceInUse and
// DescribeAccessEntry with ResourceNotFound: an entry being deleted.
type entryBeingDeleted struct{ awsp.EKSAPI }

func (entryBeingDeleted) CreateAccessEntry(context.Context, *eks.CreateAccessEntryInput, ...func(*eks.Options)) (*eks.CreateAccessEntryOutput, error) {
	return nil, &ekstypes.ResourceInUseException{Message: awssdk.String("exists")}
}

func (entryBeingDeleted) DescribeAccessEntry(context.Context, *eks.DescribeAccessEntryInput, ...func(*eks.Options)) (*eks.DescribeAccessEntryOutput, error) {
	return nil, &ekstypes.ResourceNotFoundException{Message: awssdk.String("no entry")}
}

// Review 2026-11-29 N12: the errors the provisioner makes itself for
// states that end by themselves are transient (Degraded and retried, not
// Error and a halted rollout).
func TestOwnErrorsOfPassingStatesAreTransient(t *testing.T) {
	cases := []struct {
		name string
		run  func(t *testing.T) error
	}{
		{"AddCapacity to a group not listed", func(t *testing.T) error {
			p := &Provisioner{aws: &awsp.Clients{AutoScaling: describeNone{&capacityRecorder{}}}, groups: map[string]*awsp.ScalingGroupCache{}}
			_, err := p.AddCapacity(context.Background(), eksGroup(v1alpha1.EKSConfiguration{}), 1)
			return err
		}},
		{"an access entry in use that cannot be read", func(t *testing.T) error {
			ig := eksGroup(v1alpha1.EKSConfiguration{})
			kube := fake.NewClientBuilder().WithScheme(scheme(t)).WithObjects(ig).Build()
			roles := &roleIDs{ids: map[string]string{"web": "AROA1"}, created: map[string]time.Time{"web": time.Unix(0, 0)}}
			na := nodeAccess{kube: kube, eks: entryBeingDeleted{}, iam: roles}
			return na.grant(context.Background(), ig, ClusterInfo{Name: "prod", AuthenticationMode: "API"}, "arn:aws:iam::1:role/nodes/web")
		}},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			err := c.run(t)
			if err == nil || !providers.IsTransient(err) {
				t.Fatalf("error %v, want a transient one", err)
			}
		})
	}
}
