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
