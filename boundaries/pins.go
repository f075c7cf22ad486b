package boundaries

import (
	"bytes"
	"encoding/json"
	"fmt"
	"maps"
	"slices"

	"github.com/instancemgr/instance-manager/api/v1alpha1"
)

// KeyPins is the data key of a boundaries revision (never of the admin's
// ConfigMap) holding its Pins as JSON. The image pin controller
// (reconciler/imagepins) writes the current pins into the rollout record;
// the boundary ConfigMap controller adds them to the ConfigMap's data, so
// that a resolved value changing (AWS publishes a new AMI under an SSM
// parameter, the control plane is upgraded) is a new revision, rolled out
// in the policy's waves like an admin's change (issue 29, item 1).
const KeyPins = "pins"

// PathResolvedImage is the field the effective spec pins the image to.
// Only admission writes it (Config.Effective): a tenant's or the
// ConfigMap's value is refused or replaced.
const PathResolvedImage = "spec.eks.configuration.resolvedImage"

// Pins are the values a boundaries revision resolved from AWS for the
// image references of its groups ("latest", "ssm://<name>").
type Pins struct {
	// ClusterVersions are the EKS clusters' Kubernetes versions ("1.30"),
	// by cluster name (EKS DescribeCluster cluster.version): what
	// "latest" is resolved for.
	ClusterVersions map[string]string `json:"clusterVersions,omitempty"`
	// Images are AMI ids by SSM parameter name (SSM GetParameters):
	// v1alpha1.ImageParameter's names.
	Images map[string]string `json:"images,omitempty"`
}

// Empty reports whether p pins nothing.
func (p *Pins) Empty() bool {
	return p == nil || len(p.ClusterVersions) == 0 && len(p.Images) == 0
}

// Encode is p as compact JSON with sorted keys ("" when p is empty): the
// value of KeyPins, equal for equal pins.
func (p *Pins) Encode() string {
	if p.Empty() {
		return ""
	}
	raw, _ := json.Marshal(p) // maps of strings: cannot fail; keys sorted
	return string(raw)
}

// DecodePins parses a KeyPins value: a JSON object with clusterVersions
// and images, each a map of strings; unknown fields are refused. "" is no
// pins (nil).
func DecodePins(s string) (*Pins, error) {
	if s == "" {
		return nil, nil
	}
	dec := json.NewDecoder(bytes.NewReader([]byte(s)))
	dec.DisallowUnknownFields()
	p := &Pins{}
	if err := dec.Decode(p); err != nil {
		return nil, fmt.Errorf("data.%s: expected {clusterVersions: {name: version}, images: {parameter: ami-id}}: %v", KeyPins, err)
	}
	if p.Empty() {
		return nil, nil
	}
	return p, nil
}

// WithPins returns a copy of data with KeyPins set to pins, or without
// it when pins is "": the data of the revision the ConfigMap's data makes
// with those pins.
func WithPins(data map[string]string, pins string) map[string]string {
	out := maps.Clone(data)
	if out == nil {
		out = map[string]string{}
	}
	delete(out, KeyPins)
	if pins != "" {
		out[KeyPins] = pins
	}
	return out
}

// ParseRevision parses a boundaries revision's data: the ConfigMap's keys
// as Parse does, and KeyPins (DecodePins), which only a revision may
// hold. Errors are Parse's *ConfigError, with a KeyPins problem among
// them.
func ParseRevision(data map[string]string) (*Config, error) {
	return parse(data, true)
}

// pin sets the effective spec's (rooted at spec, as Effective builds it) resolved image (PathResolvedImage) to the
// AMI id the revision pins for its image reference (v1alpha1.ImageParameter
// with the cluster's pinned version and the group's OS family and
// architecture annotations), and removes any other value: with no pin the
// provisioner resolves the reference itself.
func (c *Config) pin(spec map[string]any, annotations map[string]string) {
	conf, ok := getPath(spec, []string{"eks", "configuration"})
	if !ok {
		return
	}
	m, ok := conf.(map[string]any)
	if !ok {
		return
	}
	delete(m, "resolvedImage")
	if c.Pins.Empty() {
		return
	}
	image, _ := m["image"].(string)
	cluster, _ := m["clusterName"].(string)
	param, ok := v1alpha1.ImageParameter(image, c.Pins.ClusterVersions[cluster], annotations)
	if !ok || param == "" {
		return
	}
	if id := c.Pins.Images[param]; id != "" {
		m["resolvedImage"] = id
	}
}

// flattenPins adds the pins' values under "pins.clusterVersions[name]"
// and "pins.images[parameter]", for DefaultsDiff.
func flattenPins(p *Pins, into map[string]string) {
	if p == nil {
		return
	}
	for _, k := range slices.Sorted(maps.Keys(p.ClusterVersions)) {
		into["pins.clusterVersions["+k+"]"] = p.ClusterVersions[k]
	}
	for _, k := range slices.Sorted(maps.Keys(p.Images)) {
		into["pins.images["+k+"]"] = p.Images[k]
	}
}
