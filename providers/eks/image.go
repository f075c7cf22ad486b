package eks

import (
	"context"
	"time"

	"github.com/instancemgr/instance-manager/api/v1alpha1"
	awsp "github.com/instancemgr/instance-manager/providers/aws"
	"github.com/instancemgr/instance-manager/providers/aws/resolve"
)

// images resolves spec.eks.configuration.image through the shared
// resolver: "latest" and "ssm://" references are read from SSM Parameter
// Store at most once per ttl, so a newly published AMI shows up as drift
// within ttl.
type images struct {
	ssm  awsp.SSMAPI
	refs *resolve.Cache
	ttl  time.Duration
}

// resolve returns the AMI id for the group's image (resolve.Resolver.ImageID):
// an ami- id as is, "latest" or "ssm://<name>" through the parameter
// v1alpha1.ImageParameter names for clusterVersion. A parameter that does
// not exist is a *providers.SpecError.
func (im *images) resolve(ctx context.Context, ig *v1alpha1.InstanceGroup, clusterVersion string) (string, error) {
	return resolve.Resolver{SSM: im.ssm, Cache: im.refs}.ImageID(ctx, "spec.eks.configuration.image",
		ig.Spec.EKS.Configuration.Image, clusterVersion, ig.Annotations, resolve.Fresh{Found: im.ttl})
}

// osFamily is the group's OS family annotation, amazonlinux2 by default.
func osFamily(ig *v1alpha1.InstanceGroup) string { return v1alpha1.OSFamilyOf(ig.Annotations) }
