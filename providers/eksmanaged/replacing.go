package eksmanaged

import (
	"slices"
	"strings"

	ekstypes "github.com/aws/aws-sdk-go-v2/service/eks/types"

	"github.com/instancemgr/instance-manager/api/v1alpha1"
)

// ReplacingFields returns the paths (below spec.eks-managed.configuration)
// of the fields whose change from was to now EKS cannot make on an
// existing managed node group, so the provisioner replaces the node group
// blue/green: nodeRole, subnets, instanceType(s), amiType, volSize,
// capacityType, keyPairName and (with a key pair) securityGroups. It
// compares the spec as written (references, not the ids they resolve to);
// a field now leaves empty is EKS's choice and never replaces. Nil when
// either is nil or nothing replaces.
func ReplacingFields(was, now *v1alpha1.EKSManagedConfiguration) []string {
	if was == nil || now == nil {
		return nil
	}
	var out []string
	if was.NodeRole != now.NodeRole {
		out = append(out, "nodeRole")
	}
	if !sameSet(was.Subnets, now.Subnets) {
		out = append(out, "subnets")
	}
	if types := specTypes(now); types != nil && !sameSet(specTypes(was), types) {
		out = append(out, "instanceType"+map[bool]string{true: "s"}[len(now.InstanceTypes) > 0])
	}
	if now.AmiType != "" && now.AmiType != was.AmiType {
		out = append(out, "amiType")
	}
	if now.VolSize > 0 && now.VolSize != was.VolSize {
		out = append(out, "volSize")
	}
	if capacity(now) != capacity(was) {
		out = append(out, "capacityType")
	}
	if now.KeyPairName != "" && now.KeyPairName != was.KeyPairName {
		out = append(out, "keyPairName")
	}
	if now.KeyPairName != "" && !sameSet(was.SecurityGroups, now.SecurityGroups) {
		out = append(out, "securityGroups")
	}
	return out
}

func specTypes(c *v1alpha1.EKSManagedConfiguration) []string {
	switch {
	case len(c.InstanceTypes) > 0:
		return c.InstanceTypes
	case c.InstanceType != "":
		return []string{c.InstanceType}
	}
	return nil
}

func capacity(c *v1alpha1.EKSManagedConfiguration) string {
	if c.CapacityType == "" {
		return string(ekstypes.CapacityTypesOnDemand)
	}
	return strings.ToUpper(c.CapacityType)
}

// ReplacementWarning is the admission warning for a change of fields
// (ReplacingFields) on the group whose node group is named nodegroup.
func ReplacementWarning(nodegroup string, fields []string) string {
	paths := slices.Clone(fields)
	for i, f := range paths {
		paths[i] = configPath + "." + f
	}
	return strings.Join(paths, ", ") + ": EKS cannot change this on the existing managed node group " + nodegroup +
		"; instance-manager replaces it blue/green: a new node group is created and, once it is ACTIVE with its nodes Ready, " +
		nodegroup + "'s nodes are drained by instance-manager (Eviction API, PodDisruptionBudgets, maxUnavailable at once) and it is deleted; the replacement waits for an upgrade slot (maxConcurrentUpgrades)"
}
