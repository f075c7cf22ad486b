package eks

import (
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"strings"

	"github.com/instancemgr/instance-manager/api/v1alpha1"
)

// Tags that mark what the eks provisioner created, and for whom.
const (
	// TagInstanceGroup ("<namespace>/<name>") is on every resource an
	// InstanceGroup created; Delete only removes resources carrying it.
	TagInstanceGroup = "instancemgr.keikoproj.io/instancegroup"
	// tagVersionHash is the launch template data hash, kept in the launch
	// template version description so drift is one string compare.
	versionDescriptionPrefix = "instance-manager:"
)

// Owner is the TagInstanceGroup value of ig: "<namespace>/<name>".
func Owner(ig *v1alpha1.InstanceGroup) string { return ig.Namespace + "/" + ig.Name }

// groupName is the Auto Scaling group and launch template name: unique per
// cluster, namespace and name, within the 128 characters a launch template
// name allows.
func groupName(ig *v1alpha1.InstanceGroup) string {
	return bounded(fmt.Sprintf("%s-%s-%s", ig.Spec.EKS.Configuration.ClusterName, ig.Namespace, ig.Name), 128)
}

// roleName is the IAM role and instance profile created for ig (64
// characters at most).
func roleName(ig *v1alpha1.InstanceGroup) string {
	return bounded(fmt.Sprintf("%s-%s-%s", ig.Spec.EKS.Configuration.ClusterName, ig.Namespace, ig.Name), 64)
}

// bounded shortens s to n characters, keeping it unique with a hash suffix.
func bounded(s string, n int) string {
	if len(s) <= n {
		return s
	}
	sum := sha256.Sum256([]byte(s))
	suffix := hex.EncodeToString(sum[:])[:8]
	return s[:n-len(suffix)-1] + "-" + suffix
}

// EKSName joins parts with "-" into a name EKS accepts for node groups and
// Fargate profiles (and IAM for roles): at most n characters, each a
// letter, digit, '-' or '_', starting with a letter or digit. A joined name
// that had to change to fit (a '.' from a Kubernetes name, a leading '-',
// or more than n characters) ends in a hash of the original instead, so
// distinct inputs keep distinct names. n must be at least 10.
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
