package resolve

import (
	"context"
	"fmt"

	awssdk "github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/ec2"
	ec2types "github.com/aws/aws-sdk-go-v2/service/ec2/types"
)

// Images answers EC2 DescribeImages by image id from the resolver
// (Resolver.Image, as fresh as Fresh), for a caller written against the
// EC2 call's shape: the admission allowlists' image owner check
// (webhooks.ImageDescriber). Each image carries ImageId, Architecture,
// OwnerId and ImageOwnerAlias only. An id that names no image is an error
// wrapping ErrNotFound, as is a request with no ids; filters and owners
// are refused, since the cache holds answers by id alone.
type Images struct {
	Resolver Resolver
	Fresh    Fresh
}

// DescribeImages implements the EC2 call for in.ImageIds (see Images).
func (im Images) DescribeImages(ctx context.Context, in *ec2.DescribeImagesInput, _ ...func(*ec2.Options)) (*ec2.DescribeImagesOutput, error) {
	if len(in.Filters) > 0 || len(in.Owners) > 0 || len(in.ExecutableUsers) > 0 {
		return nil, fmt.Errorf("resolve.Images answers DescribeImages by ImageIds only, not by filters, owners or executable users")
	}
	if len(in.ImageIds) == 0 {
		return nil, fmt.Errorf("DescribeImages with no ImageIds: %w", ErrNotFound)
	}
	out := &ec2.DescribeImagesOutput{}
	for _, id := range in.ImageIds {
		got, err := im.Resolver.Image(ctx, id, im.Fresh)
		if err != nil {
			return nil, err
		}
		image := ec2types.Image{ImageId: awssdk.String(got.ID), Architecture: ec2types.ArchitectureValues(got.Architecture),
			OwnerId: awssdk.String(got.OwnerID)}
		if got.OwnerAlias != "" {
			image.ImageOwnerAlias = awssdk.String(got.OwnerAlias)
		}
		out.Images = append(out.Images, image)
	}
	return out, nil
}
