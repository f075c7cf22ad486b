package eksmanaged

import (
	"fmt"
	"slices"
	"sort"
	"strings"

	awssdk "github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/eks"
	ekstypes "github.com/aws/aws-sdk-go-v2/service/eks/types"

	"github.com/instancemgr/instance-manager/api/v1alpha1"
)

// labelsUpdate is what turns the node group's labels into want: new and
// changed labels to add, absent ones to remove (sorted); nil when equal.
func labelsUpdate(have, want map[string]string) *ekstypes.UpdateLabelsPayload {
	var add map[string]string
	var remove []string
	for k, v := range want {
		if hv, ok := have[k]; !ok || hv != v {
			if add == nil {
				add = map[string]string{}
			}
			add[k] = v
		}
	}
	for k := range have {
		if _, ok := want[k]; !ok {
			remove = append(remove, k)
		}
	}
	if add == nil && remove == nil {
		return nil
	}
	sort.Strings(remove)
	return &ekstypes.UpdateLabelsPayload{AddOrUpdateLabels: add, RemoveLabels: remove}
}

// taintsUpdate is what turns the node group's taints into want. A taint
// is identified by key and effect (as EKS does): one in want that is
// missing or has another value is added (replacing it), one in have whose
// key and effect are not in want is removed. Nil when equal.
func taintsUpdate(have, want []ekstypes.Taint) *ekstypes.UpdateTaintsPayload {
	id := func(t ekstypes.Taint) string { return awssdk.ToString(t.Key) + ":" + string(t.Effect) }
	haveByID := map[string]ekstypes.Taint{}
	for _, t := range have {
		haveByID[id(t)] = t
	}
	wantIDs := map[string]bool{}
	var add, remove []ekstypes.Taint
	for _, t := range want {
		wantIDs[id(t)] = true
		if h, ok := haveByID[id(t)]; !ok || awssdk.ToString(h.Value) != awssdk.ToString(t.Value) {
			add = append(add, t)
		}
	}
	for _, t := range have {
		if !wantIDs[id(t)] {
			remove = append(remove, t)
		}
	}
	if add == nil && remove == nil {
		return nil
	}
	sort.Slice(remove, func(i, j int) bool { return id(remove[i]) < id(remove[j]) })
	return &ekstypes.UpdateTaintsPayload{AddOrUpdateTaints: add, RemoveTaints: remove}
}

// scalingUpdate is the scaling config to send when the node group's min
// or max size differ from want's, or its desired size lies outside them:
// the desired size is kept (the cluster autoscaler owns it) but clamped
// into [min, max]. Nil when nothing changes.
func scalingUpdate(have *ekstypes.NodegroupScalingConfig, lo, hi int32) *ekstypes.NodegroupScalingConfig {
	var hmin, hmax, hdesired int32
	if have != nil {
		hmin, hmax, hdesired = awssdk.ToInt32(have.MinSize), awssdk.ToInt32(have.MaxSize), awssdk.ToInt32(have.DesiredSize)
	}
	desired := min(max(hdesired, lo), hi)
	if hmin == lo && hmax == hi && hdesired == desired {
		return nil
	}
	return &ekstypes.NodegroupScalingConfig{MinSize: awssdk.Int32(lo), MaxSize: awssdk.Int32(hi), DesiredSize: awssdk.Int32(desired)}
}

// configUpdate is the EKS UpdateNodegroupConfig request that brings the
// node group's scaling, labels and taints to want, or nil when they match.
// It also names what changes, for messages.
func configUpdate(have *ekstypes.Nodegroup, want nodegroup) (*eks.UpdateNodegroupConfigInput, []string) {
	in := &eks.UpdateNodegroupConfigInput{ClusterName: awssdk.String(want.cluster), NodegroupName: awssdk.String(want.name)}
	var what []string
	if s := scalingUpdate(have.ScalingConfig, want.min, want.max); s != nil {
		in.ScalingConfig, what = s, append(what, fmt.Sprintf("scaling (min %d, max %d, desired %d)", *s.MinSize, *s.MaxSize, *s.DesiredSize))
	}
	if l := labelsUpdate(have.Labels, want.labels); l != nil {
		in.Labels, what = l, append(what, "labels")
	}
	if t := taintsUpdate(have.Taints, want.taints); t != nil {
		in.Taints, what = t, append(what, "taints")
	}
	if what == nil {
		return nil, nil
	}
	return in, what
}

// versionUpdate is the EKS UpdateNodegroupVersion request when the spec
// sets a Kubernetes version or AMI release version the node group does
// not have, or the controller's launch template has a version the node
// group does not use (its IMDS settings or disk size changed), or nil. The version is always sent (the spec's, else the node
// group's own) because EKS reads a missing version as "the cluster's".
// It also describes the change, for messages.
func versionUpdate(have *ekstypes.Nodegroup, want nodegroup) (*eks.UpdateNodegroupVersionInput, string) {
	hv, hr := awssdk.ToString(have.Version), awssdk.ToString(have.ReleaseVersion)
	versionChanged := want.version != "" && want.version != hv
	releaseChanged := want.release != "" && want.release != hr
	var templateChanged bool
	if t, h := want.template, have.LaunchTemplate; t != nil && h != nil && awssdk.ToString(h.Id) == t.id {
		templateChanged = awssdk.ToString(h.Version) != t.version
	}
	if !versionChanged && !releaseChanged && !templateChanged {
		return nil, ""
	}
	in := &eks.UpdateNodegroupVersionInput{ClusterName: awssdk.String(want.cluster), NodegroupName: awssdk.String(want.name), Version: awssdk.String(hv)}
	var what []string
	if templateChanged {
		in.LaunchTemplate = &ekstypes.LaunchTemplateSpecification{Id: awssdk.String(want.template.id), Version: awssdk.String(want.template.version)}
		what = append(what, fmt.Sprintf("launch template %s version %s -> %s", want.template.name, awssdk.ToString(have.LaunchTemplate.Version), want.template.version))
	}
	if versionChanged {
		in.Version = awssdk.String(want.version)
		what = append(what, fmt.Sprintf("version %s -> %s", hv, want.version))
	}
	if want.release != "" {
		in.ReleaseVersion = awssdk.String(want.release)
	}
	if want.force {
		in.Force = true
		what = append(what, "forced (PodDisruptionBudgets do not hold it)")
	}
	if releaseChanged {
		what = append(what, fmt.Sprintf("releaseVersion %s -> %s", hr, want.release))
	}
	return in, strings.Join(what, ", ")
}

// immutableChange is one field a node group cannot change.
type immutableChange struct {
	field      string // below spec.eks-managed.configuration
	have, want string
}

// immutableChanges lists the fields of want that differ from the existing
// node group but cannot be changed on it (its shape): node role, subnets,
// instance types, AMI type, launch template (whether it has the
// controller's, and which), disk size (without a launch template; with
// one it is the template's), remote access and capacity type. A
// field the spec leaves empty (instance types, AMI type, disk size, key
// pair) is not compared: EKS chose its value. A node group with any
// change is replaced.
func immutableChanges(have *ekstypes.Nodegroup, want nodegroup, c *v1alpha1.EKSManagedConfiguration) []immutableChange {
	var out []immutableChange
	add := func(field string, h, w any) { out = append(out, immutableChange{field, fmt.Sprint(h), fmt.Sprint(w)}) }
	if awssdk.ToString(have.NodeRole) != want.roleARN {
		add("nodeRole", awssdk.ToString(have.NodeRole), want.roleARN)
	}
	if !sameSet(have.Subnets, want.subnets) {
		add("subnets", sorted(have.Subnets), want.subnets)
	}
	if want.instanceTypes != nil && !sameSet(have.InstanceTypes, want.instanceTypes) {
		field := "instanceType"
		if len(c.InstanceTypes) > 0 {
			field = "instanceTypes"
		}
		add(field, have.InstanceTypes, want.instanceTypes)
	}
	if want.amiType != "" && string(have.AmiType) != want.amiType {
		add("amiType", have.AmiType, want.amiType)
	}
	haveTemplate, wantTemplate := "none (EKS's)", "none (EKS's)"
	if have.LaunchTemplate != nil {
		haveTemplate = awssdk.ToString(have.LaunchTemplate.Name)
		if haveTemplate == "" {
			haveTemplate = awssdk.ToString(have.LaunchTemplate.Id)
		}
	}
	if want.template != nil {
		wantTemplate = want.template.name
	}
	switch {
	case have.LaunchTemplate == nil && want.template == nil:
	case have.LaunchTemplate == nil || want.template == nil || awssdk.ToString(have.LaunchTemplate.Id) != want.template.id:
		// EKS keeps a node group on the template it was created with.
		add("launchTemplate", haveTemplate, wantTemplate)
	}
	if want.template == nil && want.diskSize > 0 && awssdk.ToInt32(have.DiskSize) != want.diskSize {
		add("volSize", awssdk.ToInt32(have.DiskSize), want.diskSize)
	}
	if want.keyPair != "" {
		var key string
		var sgs []string
		if have.RemoteAccess != nil {
			key, sgs = awssdk.ToString(have.RemoteAccess.Ec2SshKey), have.RemoteAccess.SourceSecurityGroups
		}
		if key != want.keyPair {
			add("keyPairName", key, want.keyPair)
		}
		if !sameSet(sgs, want.sourceSGs) {
			add("securityGroups", sorted(sgs), want.sourceSGs)
		}
	}
	if string(have.CapacityType) != want.capacityType {
		add("capacityType", have.CapacityType, want.capacityType)
	}
	return out
}

func sameSet(a, b []string) bool {
	return slices.Equal(sorted(a), sorted(b))
}
