package eksmanaged

import (
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
)

// shape is what a managed node group cannot change after creation (EKS
// UpdateNodegroupConfig changes scaling, labels, taints and the update
// configuration; UpdateNodegroupVersion the Kubernetes and AMI release
// versions; TagResource the tags; nothing changes the rest): a change needs
// a new node group. Fields the spec leaves empty are EKS's choice and are
// empty here. Its JSON, in this fixed field order, is hashed into
// replacement names, so it is this project's own description, never an
// SDK type that a library upgrade could change.
type shape struct {
	NodeRole      string   `json:"nodeRole"`
	Subnets       []string `json:"subnets"`                 // ids, sorted
	InstanceTypes []string `json:"instanceTypes,omitempty"` // sorted
	AmiType       string   `json:"amiType,omitempty"`
	DiskSize      int32    `json:"diskSize,omitempty"` // GiB
	CapacityType  string   `json:"capacityType"`
	KeyPair       string   `json:"keyPair,omitempty"`
	SourceSGs     []string `json:"sourceSecurityGroups,omitempty"` // ids, sorted
	// LaunchTemplate is the controller's launch template's name; a node
	// group keeps the template it was created with (its versions change
	// in place). With one, the disk size is the template's, not the
	// shape's.
	LaunchTemplate string `json:"launchTemplate,omitempty"`
}

// shape is the immutable part of ng.
func (ng nodegroup) shape() shape {
	s := shape{NodeRole: ng.roleARN, Subnets: sorted(ng.subnets), InstanceTypes: sorted(ng.instanceTypes), AmiType: ng.amiType,
		DiskSize: ng.diskSize, CapacityType: ng.capacityType, KeyPair: ng.keyPair, SourceSGs: sorted(ng.sourceSGs)}
	if ng.template != nil {
		s.LaunchTemplate, s.DiskSize = ng.template.name, 0
	}
	return s
}

// hash is the first shapeHashLen hex digits of the SHA-256 of the shape's
// JSON.
func (s shape) hash() string {
	b, _ := json.Marshal(s) // strings and ints only: cannot fail
	sum := sha256.Sum256(b)
	return hex.EncodeToString(sum[:])[:shapeHashLen]
}
