package ownership

import (
	"crypto/sha256"
	"encoding/hex"
	"strings"
)

// AWS name limits (characters) of the resources the controller names.
const (
	LimitAutoScalingGroup = 255
	LimitLaunchTemplate   = 128
	LimitIAMRole          = 64
	LimitInstanceProfile  = 128
	LimitNodegroup        = 63
	LimitFargateProfile   = 63
)

// hashLen is the number of hex digits of the identity hash ending a name
// (40 bits).
const hashLen = 10

// Name is the AWS name of a resource of (cluster, namespace, name), at most
// limit characters (limit >= 2*hashLen): a readable prefix
// "<cluster>-<namespace>-<name>" (characters other than letters, digits,
// '-' and '_' become '-', truncated to fit) followed by "-" and a hash of
// the unambiguous tuple. Distinct tuples whose readable parts join to the
// same string (acme/web-blue and acme-web/blue) differ in the hash; the
// result is valid for Auto Scaling groups, launch templates, IAM roles and
// instance profiles, EKS node groups and Fargate profiles.
func Name(limit int, cluster, namespace, name string) string {
	sum := sha256.Sum256([]byte("v1\x00" + cluster + "\x00" + namespace + "\x00" + name))
	suffix := hex.EncodeToString(sum[:])[:hashLen]
	readable := []byte(cluster + "-" + namespace + "-" + name)
	for i, c := range readable {
		if !(c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' || c == '-' || c == '_') {
			readable[i] = '-'
		}
	}
	keep := min(len(readable), limit-hashLen-1)
	prefix := strings.TrimRight(string(readable[:keep]), "-_")
	if prefix == "" || prefix[0] == '-' || prefix[0] == '_' {
		prefix = "im" + prefix
		if len(prefix) > keep {
			prefix = prefix[:keep]
		}
	}
	return prefix + "-" + suffix
}
