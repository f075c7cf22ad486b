package eksfargate

import (
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"sort"
	"strings"

	ekstypes "github.com/aws/aws-sdk-go-v2/service/eks/types"

	"github.com/instancemgr/instance-manager/api/v1alpha1"
	"github.com/instancemgr/instance-manager/providers/aws/ownership"
)

const specPath = "spec.eks-fargate"

// hashLen is the length of the spec hash ending a profile name.
const hashLen = 8

// profileName is the Fargate profile built from shape: the cluster,
// namespace and name (shortened to fit 63 characters) and a hash of the
// profile-shaping fields, so a changed spec gets a new name and the old
// profile can stay until the new one is ACTIVE.
func profileName(ig *v1alpha1.InstanceGroup, s shape) string {
	return profilePrefix(ig) + "-" + s.hash()
}

// profilePrefix is ownership.Name within what the shape hash leaves of
// EKS's 63 characters, or, for a group an earlier version created (its
// status records a profile of the earlier prefix), that prefix: an
// upgrade replaces no profile.
func profilePrefix(ig *v1alpha1.InstanceGroup) string {
	f := ig.Spec.EKSFargate
	limit := ownership.LimitFargateProfile - hashLen - 1
	legacy := ownership.EKSName(limit, f.ClusterName, ig.Namespace, ig.Name)
	if st := ig.Status; st.Provisioner == v1alpha1.ProvisionerEKSFargate && len(st.ActiveScalingGroupName) == len(legacy)+1+hashLen &&
		strings.HasPrefix(st.ActiveScalingGroupName, legacy+"-") {
		return legacy
	}
	return ownership.Name(limit, f.ClusterName, ig.Namespace, ig.Name)
}

// roleName is the pod execution role created when the spec names none.
func roleName(ig *v1alpha1.InstanceGroup) string {
	f := ig.Spec.EKSFargate
	if profilePrefix(ig) != ownership.Name(ownership.LimitFargateProfile-hashLen-1, f.ClusterName, ig.Namespace, ig.Name) {
		return ownership.EKSName(ownership.LimitIAMRole, f.ClusterName, ig.Namespace, ig.Name)
	}
	return ownership.Name(ownership.LimitIAMRole, f.ClusterName, ig.Namespace, ig.Name)
}

// shape is what a Fargate profile cannot change after creation (besides
// its cluster, which is part of the name): a change needs a new profile.
// Tags are not part of it: they can be changed without replacing pods.
type shape struct {
	RoleARN   string     `json:"role"`
	Subnets   []string   `json:"subnets"`   // ids, sorted
	Selectors []selector `json:"selectors"` // sorted
}

type selector struct {
	Namespace string            `json:"namespace"`
	Labels    map[string]string `json:"labels,omitempty"`
}

// newShape builds the canonical shape: subnets and selectors sorted, so
// the same profile written in another order has the same hash.
func newShape(roleARN string, subnets []string, sels []v1alpha1.EKSFargateSelector) shape {
	s := shape{RoleARN: roleARN, Subnets: append([]string(nil), subnets...)}
	sort.Strings(s.Subnets)
	for _, sel := range sels {
		s.Selectors = append(s.Selectors, selector{Namespace: sel.Namespace, Labels: sel.Labels})
	}
	sort.Slice(s.Selectors, func(i, j int) bool { return s.Selectors[i].key() < s.Selectors[j].key() })
	return s
}

func (s selector) key() string {
	b, _ := json.Marshal(s) // map keys are sorted
	return string(b)
}

// hash is the first 8 hex digits of the SHA-256 of the shape's JSON.
func (s shape) hash() string {
	b, _ := json.Marshal(s)
	sum := sha256.Sum256(b)
	return hex.EncodeToString(sum[:])[:hashLen]
}

// selectors are the shape's selectors as EKS takes them.
func (s shape) selectors() []ekstypes.FargateProfileSelector {
	out := make([]ekstypes.FargateProfileSelector, 0, len(s.Selectors))
	for _, sel := range s.Selectors {
		ns := sel.Namespace
		out = append(out, ekstypes.FargateProfileSelector{Namespace: &ns, Labels: sel.Labels})
	}
	return out
}

// ownName reports whether a Fargate profile name can be one of ig's: its
// prefix (of this version or an earlier one) and a shape hash. Only such
// profiles are described; their ownership tags decide.
func ownName(ig *v1alpha1.InstanceGroup) func(string) bool {
	f := ig.Spec.EKSFargate
	limit := ownership.LimitFargateProfile - hashLen - 1
	prefixes := []string{ownership.Name(limit, f.ClusterName, ig.Namespace, ig.Name), ownership.EKSName(limit, f.ClusterName, ig.Namespace, ig.Name)}
	return func(name string) bool {
		for _, p := range prefixes {
			if len(name) == len(p)+1+hashLen && strings.HasPrefix(name, p+"-") {
				return true
			}
		}
		return false
	}
}
