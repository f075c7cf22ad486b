package providers

import "strings"

// Zone is the instance's Availability Zone, read from its ProviderID
// (aws:///<zone>/<id>); "" when the ProviderID has another shape.
func (i Instance) Zone() string {
	rest, ok := strings.CutPrefix(i.ProviderID, "aws:///")
	if !ok {
		return ""
	}
	zone, _, ok := strings.Cut(rest, "/")
	if !ok {
		return ""
	}
	return zone
}

// InstanceID is the EC2 instance id ending a Node's spec.providerID
// (aws:///<zone>/<id>), or "" for another cloud's or a malformed one.
func InstanceID(providerID string) string {
	rest, ok := strings.CutPrefix(providerID, "aws://")
	if !ok {
		return ""
	}
	id := rest[strings.LastIndex(rest, "/")+1:]
	if !strings.HasPrefix(id, "i-") {
		return ""
	}
	return id
}
