package eks

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"time"

	awssdk "github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/ssm"
	ssmtypes "github.com/aws/aws-sdk-go-v2/service/ssm/types"

	"github.com/instancemgr/instance-manager/api/v1alpha1"
	"github.com/instancemgr/instance-manager/providers"
	awsp "github.com/instancemgr/instance-manager/providers/aws"
)

// images resolves spec.eks.configuration.image. "latest" and "ssm://"
// references are read from SSM Parameter Store and re-read at most once
// per ttl, so a newly published AMI shows up as drift within ttl.
type images struct {
	api awsp.SSMAPI
	ttl time.Duration
	now func() time.Time

	mu    sync.Mutex
	cache map[string]imageEntry
}

type imageEntry struct {
	id string
	at time.Time
}

// resolve returns the AMI id for image: an ami- id as is, "latest" through
// v1alpha1.LatestImageParameter for the cluster version, "ssm://<name>" through that
// parameter. A parameter that does not exist is a *providers.SpecError.
func (im *images) resolve(ctx context.Context, ig *v1alpha1.InstanceGroup, clusterVersion string) (string, error) {
	image := ig.Spec.EKS.Configuration.Image
	param, ok := v1alpha1.ImageParameter(image, clusterVersion, ig.Annotations)
	if !ok {
		return image, nil
	}
	if param == "" {
		return "", fmt.Errorf("image %q: the cluster's Kubernetes version is not known", image)
	}
	im.mu.Lock()
	e, ok := im.cache[param]
	im.mu.Unlock()
	if ok && im.now().Sub(e.at) < im.ttl {
		return e.id, nil
	}
	out, err := im.api.GetParameter(ctx, &ssm.GetParameterInput{Name: awssdk.String(param)})
	if err != nil {
		var nf *ssmtypes.ParameterNotFound
		if errors.As(err, &nf) {
			return "", &providers.SpecError{Field: "spec.eks.configuration.image",
				Detail: fmt.Sprintf("SSM parameter %s does not exist (image %q)", param, image)}
		}
		return "", fmt.Errorf("ssm GetParameter %s: %w", param, err)
	}
	id := awssdk.ToString(out.Parameter.Value)
	im.mu.Lock()
	if im.cache == nil {
		im.cache = map[string]imageEntry{}
	}
	im.cache[param] = imageEntry{id: id, at: im.now()}
	im.mu.Unlock()
	return id, nil
}

// osFamily is the group's OS family annotation, amazonlinux2 by default.
func osFamily(ig *v1alpha1.InstanceGroup) string { return v1alpha1.OSFamilyOf(ig.Annotations) }
