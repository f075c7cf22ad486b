package boundaries

import (
	"maps"
	"strings"
	"testing"

	"github.com/instancemgr/instance-manager/api/v1alpha1"
)

// pinnedData is exampleData with image ref as the default and pins.
func pinnedData(ref, pins string) map[string]string {
	data := maps.Clone(exampleData)
	data[KeyDefaults] = strings.Replace(data[KeyDefaults], "image: ami-1234", "image: "+ref, 1)
	return WithPins(data, pins)
}

const pinsV1 = `{"clusterVersions":{"a-managed-cluster":"1.30"},"images":{` +
	`"/aws/service/eks/optimized-ami/1.30/amazon-linux-2/recommended/image_id":"ami-al2",` +
	`"/aws/service/eks/optimized-ami/1.30/amazon-linux-2-arm64/recommended/image_id":"ami-al2arm",` +
	`"/platform/images/base":"ami-base1"}}`

func TestEffectivePinsTheResolvedImage(t *testing.T) {
	for _, c := range []struct {
		name, ref, pins string
		annotations     map[string]string
		tenant          string // the tenant's resolvedImage
		want            string // "" for none
	}{
		{"latest for the cluster's pinned version", "latest", pinsV1, nil, "", "ami-al2"},
		{"latest for the group's architecture", "latest", pinsV1, map[string]string{v1alpha1.AnnotationArchitecture: "arm64"}, "", "ami-al2arm"},
		{"an SSM parameter", "ssm:///platform/images/base", pinsV1, nil, "", "ami-base1"},
		{"a parameter the revision does not pin", "ssm:///platform/images/other", pinsV1, nil, "", ""},
		{"an OS family the revision does not pin", "latest", pinsV1, map[string]string{v1alpha1.AnnotationOSFamily: v1alpha1.OSFamilyBottlerocket}, "", ""},
		{"an AMI id", "ami-0abc", pinsV1, nil, "", ""},
		{"no pins", "latest", "", nil, "", ""},
		{"a tenant's value is replaced", "latest", pinsV1, nil, "ami-evil", "ami-al2"},
		{"a tenant's value is removed where nothing is pinned", "ami-0abc", pinsV1, nil, "ami-evil", ""},
	} {
		t.Run(c.name, func(t *testing.T) {
			cfg, err := ParseRevision(pinnedData(c.ref, c.pins))
			if err != nil {
				t.Fatal(err)
			}
			spec := map[string]any{"eks": map[string]any{"minSize": 1, "maxSize": 2, "configuration": map[string]any{"instanceType": "t3.medium"}}}
			if c.tenant != "" {
				spec["eks"].(map[string]any)["configuration"].(map[string]any)["resolvedImage"] = c.tenant
			}
			res, err := cfg.Effective(Input{Spec: spec, Annotations: c.annotations, Namespace: "team-a"})
			if err != nil {
				t.Fatal(err)
			}
			got, _ := getPath(map[string]any{"spec": res.Spec}, splitPath(PathResolvedImage))
			if got == nil {
				got = ""
			}
			if got != c.want {
				t.Errorf("resolvedImage = %v, want %q", got, c.want)
			}
		})
	}
}

func TestPinsAreRevisionDataOnly(t *testing.T) {
	_, err := Parse(pinnedData("latest", pinsV1))
	if err == nil || !strings.Contains(err.Error(), "data.pins: written by instance-manager") {
		t.Errorf("Parse of a ConfigMap with pins: %v", err)
	}
	if _, err := ParseRevision(pinnedData("latest", `{"images":{"a":"b"},"other":1}`)); err == nil || !strings.Contains(err.Error(), "data.pins: expected") {
		t.Errorf("ParseRevision of unknown pins fields: %v", err)
	}
	data := maps.Clone(exampleData)
	data[KeyDefaults] = strings.Replace(data[KeyDefaults], "image: ami-1234", "image: ami-1234\n      resolvedImage: ami-9", 1)
	if _, err := Parse(data); err == nil || !strings.Contains(err.Error(), PathResolvedImage+" is written by instance-manager") {
		t.Errorf("Parse of defaults setting resolvedImage: %v", err)
	}
	if err := ValidatePath(PathResolvedImage); err == nil {
		t.Error("ValidatePath accepts the resolved image path")
	}
}

func TestPinsMakeARevisionAndAHash(t *testing.T) {
	plain := pinnedData("latest", "")
	v1 := pinnedData("latest", pinsV1)
	v2 := pinnedData("latest", strings.Replace(pinsV1, "ami-al2\"", "ami-al2-new\"", 1))
	if Revision(plain) == Revision(v1) || Revision(v1) == Revision(v2) {
		t.Errorf("revisions do not follow the pins: %s %s %s", Revision(plain), Revision(v1), Revision(v2))
	}
	c0, c1, c2 := mustParseRevision(t, plain), mustParseRevision(t, v1), mustParseRevision(t, v2)
	if c0.Hash(false) == c1.Hash(false) || c1.Hash(false) == c2.Hash(false) {
		t.Error("the boundaries hash does not follow the pins")
	}
	if c1.Hash(true) != c2.Hash(true) || c0.Hash(true) != c1.Hash(true) {
		t.Error("the pins change the hash of excluded namespaces, which they do not apply to")
	}
	if c0.Hash(false) != mustParse(t, plain).Hash(false) {
		t.Error("a revision without pins hashes unlike the ConfigMap it is")
	}
	changes := DefaultsDiff(c1, c2)
	if len(changes) != 1 || changes[0].Path != "pins.images[/aws/service/eks/optimized-ami/1.30/amazon-linux-2/recommended/image_id]" ||
		changes[0].Old != "ami-al2" || changes[0].New != "ami-al2-new" {
		t.Errorf("DefaultsDiff = %v", changes)
	}
}

func mustParseRevision(t *testing.T, data map[string]string) *Config {
	t.Helper()
	c, err := ParseRevision(data)
	if err != nil {
		t.Fatal(err)
	}
	return c
}
