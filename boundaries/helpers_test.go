package boundaries

import (
	"encoding/json"
	"os"
	"path/filepath"
	"testing"

	"github.com/google/go-cmp/cmp"
	"sigs.k8s.io/yaml"
)

// exampleData is the data of examples/boundaries-configmap.yaml,
// copied so that the tests stand alone; TestExampleConfigMapFile checks that
// the copy matches the file.
var exampleData = map[string]string{
	"boundaries": `shared:
  merge:
  - spec.eks.configuration.labels
  mergeOverride:
  - spec.eks.configuration.tags
  replace:
  - spec.strategy
restricted:
- spec.eks.configuration.clusterName
- spec.eks.configuration.image
- spec.eks.configuration.roleName
- spec.eks.configuration.instanceProfileName
- spec.eks.configuration.keyPairName
- spec.eks.configuration.securityGroups
- spec.eks.configuration.subnets
- spec.eks.configuration.taints
`,
	"defaults": `spec:
  provisioner: eks
  strategy:
    type: rollingUpdate
    rollingUpdate:
      maxUnavailable: 1
  eks:
    configuration:
      clusterName: a-managed-cluster
      subnets:
      - subnet-1234
      - subnet-2345
      - subnet-3456
      keyPairName: a-managed-keypair
      image: ami-1234
      labels:
        a-default-label: "true"
      taints:
      - key: default-taint
        value: a-taint
        effect: NoSchedule
      roleName: a-managed-role
      instanceProfileName: a-managed-profile
      tags:
      - key: a-default-tag
        value: a-default-value
      securityGroups:
      - sg-1234
`,
	"quotas": `# The default quotas (docs/boundaries.md, "Quotas"), written out, and the instance
# types tenants may ask for.
perNamespace:
  maxGroups: 10
  maxSize: 50
  maxTotalVCPU: 512
  maxVolumeSize: 1024
  maxWarmPoolSize: 50
  instanceTypes: ["m5*.*", "c5*.*", "r5*.*", "t3.*", "t2.*"]
total: {maxGroups: 200, maxTotalVCPU: 4096}
`,
}

// tenantShortSpec is the spec of examples/tenant-short.yaml.
const tenantShortSpec = `eks:
  minSize: 2
  maxSize: 4
  configuration:
    labels:
      test-label: "true"
    instanceType: t2.small
    tags:
    - key: tag-key
      value: tag-value
`

// specOf decodes YAML (or JSON) into an object as encoding/json would, as the webhooks
// will hand specs in.
func specOf(t testing.TB, y string) map[string]any {
	t.Helper()
	raw, err := yaml.YAMLToJSON([]byte(y))
	if err != nil {
		t.Fatalf("bad test YAML: %v\n%s", err, y)
	}
	var g any
	if err := json.Unmarshal(raw, &g); err != nil {
		t.Fatalf("bad test YAML: %v", err)
	}
	if g == nil {
		return nil
	}
	m, ok := g.(map[string]any)
	if !ok {
		t.Fatalf("test YAML is not an object: %s", y)
	}
	return m
}

// canon normalizes a test value so it compares with Effective's output.
func canon(t testing.TB, v any) any {
	t.Helper()
	n, err := normalize(v, "test")
	if err != nil {
		t.Fatal(err)
	}
	return n
}

func mustParse(t testing.TB, data map[string]string) *Config {
	t.Helper()
	c, err := Parse(data)
	if err != nil {
		t.Fatalf("Parse: %v", err)
	}
	return c
}

// diff compares two values in canonical form.
func diff(t testing.TB, want, got any) string {
	t.Helper()
	return cmp.Diff(canon(t, want), canon(t, got))
}

// exampleFile reads a file of the project's examples/ directory.
func exampleFile(t *testing.T, name string) []byte {
	t.Helper()
	b, err := os.ReadFile(filepath.Join("..", "examples", name))
	if err != nil {
		t.Fatalf("reading the example manifest: %v", err)
	}
	return b
}
