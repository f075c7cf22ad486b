package eks

import "strings"

// authMapARN is roleARN as aws-auth's mapRoles must name it: without an
// IAM path. The authenticator compares against the path-less ARN of the
// assumed role, so "arn:aws:iam::1:role/instance-manager/r" would never
// match (access entries, on the other hand, take the full ARN). ARNs that
// are not role ARNs are returned unchanged.
func authMapARN(roleARN string) string {
	prefix, rest, ok := strings.Cut(roleARN, ":role/")
	if !ok {
		return roleARN
	}
	return prefix + ":role/" + rest[strings.LastIndex(rest, "/")+1:]
}
