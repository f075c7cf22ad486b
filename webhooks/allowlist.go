package webhooks

import (
	"context"
	"errors"
	"fmt"
	"time"

	awssdk "github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/ec2"
	"k8s.io/apimachinery/pkg/util/validation/field"

	"github.com/instancemgr/instance-manager/api/v1alpha1"
	"github.com/instancemgr/instance-manager/boundaries"
	"github.com/instancemgr/instance-manager/boundaries/store"
)

// imageLookupTimeout bounds the one DescribeImages call of an admission;
// the webhook itself times out after 10 s.
const imageLookupTimeout = 4 * time.Second

// ImageDescriber is the EC2 call the image owner check makes.
type ImageDescriber interface {
	DescribeImages(ctx context.Context, params *ec2.DescribeImagesInput, optFns ...func(*ec2.Options)) (*ec2.DescribeImagesOutput, error)
}

// Allowlists refuses InstanceGroups that name an AWS identity or data the
// admin has not allowed (boundaries.Config.CheckAllowlists): the boundary
// ConfigMap's allowlists, the controller's own clusters, and admin-only
// metadataOptions.
type Allowlists struct {
	// Boundaries holds the ConfigMap in force (nil Config: none, every
	// list at its secure default).
	Boundaries *store.Store
	// ConfigNamespace is the ConfigMap's namespace: groups there are the
	// admin's own, and only their cluster is checked.
	ConfigNamespace string
	// Clusters are --cluster-name and --additional-cluster-names; empty:
	// any cluster, unless the ConfigMap lists some.
	Clusters []string
	// Images answers the image owner check (EC2 DescribeImages); nil: an
	// imageOwners list refuses AMI ids.
	Images ImageDescriber
}

// Check returns why ig may not be admitted, one error per reference.
func (a *Allowlists) Check(ctx context.Context, ig *v1alpha1.InstanceGroup) field.ErrorList {
	actx := boundaries.AllowContext{Clusters: a.Clusters, AdminNamespace: ig.Namespace == a.ConfigNamespace, Annotations: ig.Annotations}
	if a.Images != nil {
		actx.ImageOwner = func(id string) ([]string, error) { return a.imageOwners(ctx, id) }
	}
	state := a.Boundaries.Get()
	if rev, ok := state.Running(ig.Annotations[v1alpha1.AnnotationBoundariesHash], ig.Namespace); ok && rev.Config != state.Config {
		// A group held on an older boundaries revision keeps the values
		// that revision's admin wrote (its image, its subnets).
		actx.AdminConfigs = append(actx.AdminConfigs, rev.Config)
	}
	return state.Config.CheckAllowlists(&ig.Spec, actx)
}

// imageOwners returns the owner account id of an AMI, and its alias
// ("amazon") when it has one (EC2 DescribeImages).
func (a *Allowlists) imageOwners(ctx context.Context, id string) ([]string, error) {
	ctx, cancel := context.WithTimeout(ctx, imageLookupTimeout)
	defer cancel()
	out, err := a.Images.DescribeImages(ctx, &ec2.DescribeImagesInput{ImageIds: []string{id}})
	if err != nil {
		return nil, fmt.Errorf("ec2 DescribeImages: %w", err)
	}
	if len(out.Images) == 0 {
		return nil, errors.New("no such image")
	}
	owners := []string{awssdk.ToString(out.Images[0].OwnerId)}
	if alias := awssdk.ToString(out.Images[0].ImageOwnerAlias); alias != "" {
		owners = append(owners, alias)
	}
	return owners, nil
}
