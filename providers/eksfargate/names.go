package eksfargate

import (
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"sort"

	ekstypes "github.com/aws/aws-sdk-go-v2/service/eks/types"

	"github.com/instancemgr/instance-manager/api/v1alpha1"
	"github.com/instancemgr/instance-manager/providers/eks"
)

const specPath = "spec.eks-fargate"

// hashLen is the length of the spec hash ending a profile name.
const hashLen = 8

// profileName is the Fargate profile built from shape: the cluster,
// namespace and name (shortened to fit 63 characters) and a hash of the
// profile-shaping fields, so a changed spec gets a new name and the old
// profile can stay until the new one is ACTIVE.
func profileName(ig *v1alpha1.InstanceGroup, s shape) string {
	return eks.EKSName(63-hashLen-1, ig.Spec.EKSFargate.ClusterName, ig.Namespace, ig.Name) + "-" + s.hash()
}

// roleName is the pod execution role created when the spec names none.
func roleName(ig *v1alpha1.InstanceGroup) string {
	return eks.EKSName(64, ig.Spec.EKSFargate.ClusterName, ig.Namespace, ig.Name)
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
