// Package launchtemplate holds what every provisioner that writes EC2
// launch templates (eks, eks-managed) shares: the instance metadata
// defaults, the GC's resource kind and EC2's not-found answer.
package launchtemplate

import (
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

// MetadataSettings is the launch template's IMDS settings (endpoint,
// tokens, hop limit): m's fields where set, the secure defaults otherwise.
// They are always sent: a template without MetadataOptions would get the
// account's defaults, which may allow IMDSv1.
func MetadataSettings(m *v1alpha1.MetadataOptions) (endpoint, tokens string, hops int32) {
	endpoint, tokens, hops = defaultHTTPEndpoint, DefaultHTTPTokens, DefaultHTTPHopLimit
	if m == nil {
		return
	}
	if m.HttpEndpoint != "" {
		endpoint = m.HttpEndpoint
	}
	if m.HttpTokens != "" {
		tokens = m.HttpTokens
	}
	if m.HttpPutResponseHopLimit > 0 {
		hops = int32(m.HttpPutResponseHopLimit)
	}
	return
}
