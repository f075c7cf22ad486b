package eks

import (
	awssdk "github.com/aws/aws-sdk-go-v2/aws"
	ec2types "github.com/aws/aws-sdk-go-v2/service/ec2/types"

	"github.com/instancemgr/instance-manager/api/v1alpha1"
)

// Instance metadata defaults of every launch template: IMDSv2 only, and a
// PUT response hop limit of 1 so that the session token never reaches a
// pod behind the node's network namespace, hence pods cannot read the node
// role's credentials. Only the admin may loosen them (metadataOptions is
// one of boundaries.SensitivePaths: admin-only unless the ConfigMap shares it).
const (
	DefaultHTTPTokens   = "required"
	DefaultHTTPHopLimit = 1
	defaultHTTPEndpoint = "enabled"
)

// metadataOptions is the launch template's IMDS settings: m's fields where
// set, the secure defaults otherwise. It never returns nil: a template
// without MetadataOptions would get the account's defaults, which may
// allow IMDSv1.
func metadataOptions(m *v1alpha1.MetadataOptions) *ec2types.LaunchTemplateInstanceMetadataOptionsRequest {
	out := &ec2types.LaunchTemplateInstanceMetadataOptionsRequest{
		HttpEndpoint:            ec2types.LaunchTemplateInstanceMetadataEndpointState(defaultHTTPEndpoint),
		HttpTokens:              ec2types.LaunchTemplateHttpTokensState(DefaultHTTPTokens),
		HttpPutResponseHopLimit: awssdk.Int32(DefaultHTTPHopLimit),
	}
	if m == nil {
		return out
	}
	if m.HttpEndpoint != "" {
		out.HttpEndpoint = ec2types.LaunchTemplateInstanceMetadataEndpointState(m.HttpEndpoint)
	}
	if m.HttpTokens != "" {
		out.HttpTokens = ec2types.LaunchTemplateHttpTokensState(m.HttpTokens)
	}
	if m.HttpPutResponseHopLimit > 0 {
		out.HttpPutResponseHopLimit = awssdk.Int32(int32(m.HttpPutResponseHopLimit))
	}
	return out
}
