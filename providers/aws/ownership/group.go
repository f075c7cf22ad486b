package ownership

import (
	"crypto/sha256"
	"encoding/hex"
	"strings"

	"github.com/instancemgr/instance-manager/api/v1alpha1"
)

// GroupTag is the TagInstanceGroup value of ig: "<namespace>/<name>".
func GroupTag(ig *v1alpha1.InstanceGroup) string { return ig.Namespace + "/" + ig.Name }

// OwnerOf is ig's ownership on cluster (the tags its resources carry).
func OwnerOf(ig *v1alpha1.InstanceGroup, cluster string) Owner {
	return Owner{Cluster: cluster, Namespace: ig.Namespace, Name: ig.Name, UID: ig.UID}
}

// EKSName is the name earlier versions gave node groups, Fargate profiles
// and their roles: parts joined with "-", made valid for EKS and IAM (at
// most n characters, letters, digits, '-' and '_'), ending in a hash only
// when it had to change. It is not collision-free across namespaces and
// names; it is kept so groups created with it keep their names.
func EKSName(n int, parts ...string) string {
	joined := strings.Join(parts, "-")
	safe := []byte(joined)
	for i, c := range safe {
		if !(c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' || c == '-' || c == '_') {
			safe[i] = '-'
		}
	}
	if len(safe) > 0 && (safe[0] == '-' || safe[0] == '_') {
		safe[0] = 'x'
	}
	if string(safe) == joined && len(joined) <= n {
		return joined
	}
	sum := sha256.Sum256([]byte(joined))
	suffix := hex.EncodeToString(sum[:])[:8]
	keep := min(len(safe), n-len(suffix)-1)
	return string(safe[:keep]) + "-" + suffix
}
