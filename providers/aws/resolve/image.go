package resolve

import (
	"context"
	"errors"
	"fmt"

	awssdk "github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/ec2"
	"github.com/aws/aws-sdk-go-v2/service/ssm"
	ssmtypes "github.com/aws/aws-sdk-go-v2/service/ssm/types"

	"github.com/instancemgr/instance-manager/api/v1alpha1"
	"github.com/instancemgr/instance-manager/providers"
	awsp "github.com/instancemgr/instance-manager/providers/aws"
)

// Image is what EC2 says of an AMI.
type Image struct {
	ID           string
	Architecture string // EC2's ArchitectureValues: "x86_64", "arm64", ...
	OwnerID      string // the owner's account id
	OwnerAlias   string // "amazon", "aws-marketplace" or ""
}

// Image returns the AMI id names (EC2 DescribeImages, one call per
// distinct id while fresh accepts it). An image this account cannot see
// in this region (EC2 answers InvalidAMIID.NotFound, InvalidAMIID.Malformed
// or no image) is an error wrapping ErrNotFound.
func (r Resolver) Image(ctx context.Context, id string, fresh Fresh) (Image, error) {
	v, err := r.Cache.Do(ctx, "image/"+id, fresh, func(ctx context.Context) (any, error) {
		out, err := r.EC2.DescribeImages(ctx, &ec2.DescribeImagesInput{ImageIds: []string{id}})
		if awsp.HasErrorCode(err, "InvalidAMIID.NotFound", "InvalidAMIID.Malformed") || err == nil && len(out.Images) == 0 {
			return nil, fmt.Errorf("image %s: %w", id, ErrNotFound)
		}
		if err != nil {
			return nil, fmt.Errorf("ec2 DescribeImages %s: %w", id, err)
		}
		im := out.Images[0]
		return Image{ID: id, Architecture: string(im.Architecture), OwnerID: awssdk.ToString(im.OwnerId),
			OwnerAlias: awssdk.ToString(im.ImageOwnerAlias)}, nil
	})
	if err != nil {
		return Image{}, err
	}
	return v.(Image), nil
}

// Parameter returns the value of the SSM Parameter Store parameter name
// (SSM GetParameter, one call per distinct name while fresh accepts it).
// A parameter that does not exist is an error wrapping ErrNotFound.
func (r Resolver) Parameter(ctx context.Context, name string, fresh Fresh) (string, error) {
	v, err := r.Cache.Do(ctx, "ssm/"+name, fresh, func(ctx context.Context) (any, error) {
		out, err := r.SSM.GetParameter(ctx, &ssm.GetParameterInput{Name: awssdk.String(name)})
		var nf *ssmtypes.ParameterNotFound
		if errors.As(err, &nf) {
			return nil, fmt.Errorf("SSM parameter %s: %w", name, ErrNotFound)
		}
		if err != nil {
			return nil, fmt.Errorf("ssm GetParameter %s: %w", name, err)
		}
		return awssdk.ToString(out.Parameter.Value), nil
	})
	if err != nil {
		return "", err
	}
	return v.(string), nil
}

// ImageID returns the AMI id image (the value of the spec path field)
// stands for: an AMI id as is; "latest" and "ssm://<name>" through the
// SSM parameter v1alpha1.ImageParameter names for clusterVersion and the
// group's annotations (see Parameter). A parameter that does not exist is
// a *providers.SpecError on field; "latest" with no clusterVersion (not
// known yet) and failed calls are plain errors.
func (r Resolver) ImageID(ctx context.Context, field, image, clusterVersion string, annotations map[string]string, fresh Fresh) (string, error) {
	param, ok := v1alpha1.ImageParameter(image, clusterVersion, annotations)
	if !ok {
		return image, nil
	}
	if param == "" {
		return "", fmt.Errorf("image %q: the cluster's Kubernetes version is not known", image)
	}
	id, err := r.Parameter(ctx, param, fresh)
	if errors.Is(err, ErrNotFound) {
		return "", &providers.SpecError{Field: field,
			Detail: fmt.Sprintf("SSM parameter %s does not exist (image %q; valid: an AMI id, %q, or %s<parameter name>)", param, image, v1alpha1.ImageLatest, v1alpha1.ImageSSMPrefix)}
	}
	return id, err
}
