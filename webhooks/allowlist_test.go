package webhooks

import (
	"context"
	"errors"
	"strings"
	"testing"

	awssdk "github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/ec2"
	ec2types "github.com/aws/aws-sdk-go-v2/service/ec2/types"

	"github.com/instancemgr/instance-manager/api/v1alpha1"
	"github.com/instancemgr/instance-manager/boundaries"
	"github.com/instancemgr/instance-manager/boundaries/store"
)

// fakeImages answers DescribeImages from a map of id -> owner id.
type fakeImages map[string]string

func (f fakeImages) DescribeImages(_ context.Context, in *ec2.DescribeImagesInput, _ ...func(*ec2.Options)) (*ec2.DescribeImagesOutput, error) {
	owner, ok := f[in.ImageIds[0]]
	if !ok {
		return nil, errors.New("InvalidAMIID.NotFound")
	}
	return &ec2.DescribeImagesOutput{Images: []ec2types.Image{{ImageId: awssdk.String(in.ImageIds[0]), OwnerId: awssdk.String(owner)}}}, nil
}

func TestAllowlistsCheck(t *testing.T) {
	cfg, err := boundaries.Parse(map[string]string{boundaries.KeyAllowlists: "imageOwners: ['602401143452']\n"})
	if err != nil {
		t.Fatal(err)
	}
	st := &store.Store{}
	st.SetValid(cfg, "1")
	a := &Allowlists{Boundaries: st, ConfigNamespace: "instance-manager", Clusters: []string{"prod"},
		Images: fakeImages{"ami-eks": "602401143452", "ami-other": "999999999999"}}
	group := func(ns, cluster, image, role string) *v1alpha1.InstanceGroup {
		ig := &v1alpha1.InstanceGroup{}
		ig.Namespace, ig.Name = ns, "g"
		ig.Spec.EKS = &v1alpha1.EKSSpec{Configuration: &v1alpha1.EKSConfiguration{ClusterName: cluster, Image: image, RoleName: role}}
		return ig
	}
	for _, tc := range []struct {
		name string
		ig   *v1alpha1.InstanceGroup
		want []string
	}{
		{"allowed image of the own cluster", group("team-a", "prod", "ami-eks", ""), nil},
		{"image of another owner", group("team-a", "prod", "ami-other", ""), []string{`image "ami-other" is owned by 999999999999`}},
		{"unknown image", group("team-a", "prod", "ami-gone", ""), []string{`its owner could not be checked`}},
		{"another cluster and a role", group("team-a", "dev", "ami-eks", "admin"), []string{`"dev" is not allowed`, `data.allowlists.roles`}},
		{"the admin's namespace: only the cluster", group("instance-manager", "dev", "ami-other", "admin"), []string{`"dev" is not allowed`}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			errs := a.Check(context.Background(), tc.ig)
			if len(errs) != len(tc.want) {
				t.Fatalf("got %v, want %d errors containing %q", errs, len(tc.want), tc.want)
			}
			for i, w := range tc.want {
				if !strings.Contains(errs[i].Error(), w) {
					t.Errorf("error %q does not contain %q", errs[i].Error(), w)
				}
			}
		})
	}
}
