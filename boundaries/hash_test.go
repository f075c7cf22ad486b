package boundaries

import (
	"encoding/hex"
	"testing"
)

func TestHash(t *testing.T) {
	base := mustParse(t, exampleData)
	h := base.Hash(false)
	if b, err := hex.DecodeString(h); err != nil || len(b) != 32 {
		t.Fatalf("hash %q is not hex SHA-256", h)
	}

	// The same ConfigMap written differently: keys, lists and YAML style
	// reordered, comments added, flow style, quoting.
	reordered := map[string]string{
		"defaults": `# admin defaults
spec:
  eks:
    configuration:
      securityGroups: ["sg-1234"]
      tags: [{value: a-default-value, key: a-default-tag}]
      instanceProfileName: a-managed-profile
      roleName: a-managed-role
      taints: [{effect: NoSchedule, key: default-taint, value: a-taint}]
      labels: {"a-default-label": "true"}
      image: 'ami-1234'
      keyPairName: a-managed-keypair
      subnets: [subnet-1234, subnet-2345, subnet-3456]
      clusterName: a-managed-cluster
  strategy: {rollingUpdate: {maxUnavailable: 1.0}, type: rollingUpdate}
  provisioner: eks
`,
		"boundaries": `restricted: [spec.eks.configuration.taints, spec.eks.configuration.subnets, spec.eks.configuration.securityGroups,
  spec.eks.configuration.keyPairName, spec.eks.configuration.instanceProfileName, spec.eks.configuration.roleName,
  spec.eks.configuration.image, spec.eks.configuration.clusterName]
shared: {replace: [spec.strategy], mergeOverride: [spec.eks.configuration.tags], merge: [spec.eks.configuration.labels]}
`,
		"enforcement": "warn",
		"rollout":     "maxConcurrentUpgrades: 4", // rollout changes no spec
	}
	for name, got := range map[string]string{
		"reordered YAML":              mustParse(t, reordered).Hash(false),
		"hashed twice":                base.Hash(false),
		"explicit empty conditionals": mustParse(t, with(exampleData, "conditionals", "[]")).Hash(false),
	} {
		if got != h {
			t.Errorf("%s: hash %s, want %s", name, got, h)
		}
	}
	if (&Config{}).Hash(false) != (&Config{Enforcement: EnforcementWarn}).Hash(false) {
		t.Error("empty enforcement hashes differently from warn")
	}

	different := map[string]*Config{
		"changed default":   mustParse(t, with(exampleData, "defaults", exampleData["defaults"]+"      volSize: 30\n")),
		"changed image":     mustParse(t, with(exampleData, "defaults", replaceOnce(exampleData["defaults"], "ami-1234", "ami-5678"))),
		"path moved":        mustParse(t, with(exampleData, "boundaries", replaceOnce(exampleData["boundaries"], "merge:\n  - spec.eks.configuration.labels\n  mergeOverride:\n", "mergeOverride:\n  - spec.eks.configuration.labels\n"))),
		"deny":              mustParse(t, with(exampleData, "enforcement", "deny")),
		"conditional added": mustParse(t, with(exampleData, "conditionals", "- annotationSelector: a=b\n  defaults: {spec: {provisioner: eks}}")),
		"no rules":          mustParse(t, nil),
	}
	seen := map[string]string{h: "base"}
	for name, c := range different {
		got := c.Hash(false)
		if prev, dup := seen[got]; dup {
			t.Errorf("%s hashes like %s", name, prev)
		}
		seen[got] = name
	}
	if base.Hash(true) == h {
		t.Error("the namespace-excluded flag does not change the hash")
	}

	// Conditionals: order matters (later wins); selector spelling does not.
	c1 := mustParse(t, map[string]string{"conditionals": "- annotationSelector: 'a=b,c=d'\n  defaults: {spec: {provisioner: eks}}\n- annotationSelector: x\n  defaults: {spec: {provisioner: eks-managed}}"})
	c2 := mustParse(t, map[string]string{"conditionals": "- annotationSelector: 'c = d, a==b'\n  defaults: {spec: {provisioner: eks}}\n- annotationSelector: x\n  defaults: {spec: {provisioner: eks-managed}}"})
	c3 := mustParse(t, map[string]string{"conditionals": "- annotationSelector: x\n  defaults: {spec: {provisioner: eks-managed}}\n- annotationSelector: 'a=b,c=d'\n  defaults: {spec: {provisioner: eks}}"})
	if c1.Hash(false) != c2.Hash(false) {
		t.Error("equivalent selectors hash differently")
	}
	selHash := func(sel string) string {
		return mustParse(t, map[string]string{"conditionals": "- annotationSelector: '" + sel + "'"}).Hash(false)
	}
	for _, pair := range [][2]string{{"a=b", "a in (b)"}, {"a!=b", "a notin (b)"}, {"a in (c, b)", "a in (b,c)"}, {"x, !y", "!y,x"}} {
		if selHash(pair[0]) != selHash(pair[1]) {
			t.Errorf("%q and %q hash differently", pair[0], pair[1])
		}
	}
	for _, pair := range [][2]string{{"a=b", "a!=b"}, {"a", "!a"}, {"a=b", "b=a"}, {"a in (b,c)", "a in (b)"}} {
		if selHash(pair[0]) == selHash(pair[1]) {
			t.Errorf("%q and %q hash alike", pair[0], pair[1])
		}
	}
	if c1.Hash(false) == c3.Hash(false) {
		t.Error("reordered conditionals hash alike")
	}

	// No ConfigMap: one stable value, not that of an empty ConfigMap.
	var none *Config
	if none.Hash(false) == "" || none.Hash(false) != none.Hash(true) || none.Hash(false) == mustParse(t, nil).Hash(false) {
		t.Errorf("nil config hash: %q %q", none.Hash(false), none.Hash(true))
	}
}

// The hashes are pinned: a change of the canonical form changes every
// group's boundaries-hash and re-admits every InstanceGroup in every
// cluster on upgrade. Change these only on purpose, with hashVersion
// (v2: restricted-without-default removes, sensitive paths, issue 11;
// the example changes with the sensitive paths, issue 25: new ones
// re-admit every group, which is the point; forceVersionUpdate, issue 26).
// "node isolation" changed (from c39eb33a…) with the NoExecute isolation
// taint (N24), which re-admits isolated groups only.
func TestHashPinned(t *testing.T) {
	for name, tc := range map[string]struct {
		c    *Config
		want string
	}{
		"no config":      {nil, "9434fc5ad0004b5cf0a3ef9874dd9c8de0d913d09db7b27ce89c1688fce7bf1f"},
		"example":        {mustParse(t, exampleData), "bb24f945c06d45750a20c097e05af7b3c54a8672899a1583bf09b1ad742f3d8c"},
		"node isolation": {mustParse(t, with(exampleData, KeyNodeIsolation, NodeIsolationPerNamespace)), "31952849bad1d2eca250734be880cf5c7197bace0c3e40b0cb402c97048406e9"},
	} {
		if got := tc.c.Hash(false); got != tc.want {
			t.Errorf("%s: hash = %s, want %s", name, got, tc.want)
		}
	}
}

func with(data map[string]string, key, value string) map[string]string {
	out := map[string]string{}
	for k, v := range data {
		out[k] = v
	}
	out[key] = value
	return out
}

func replaceOnce(s, old, new string) string {
	for i := 0; i+len(old) <= len(s); i++ {
		if s[i:i+len(old)] == old {
			return s[:i] + new + s[i+len(old):]
		}
	}
	panic("test: " + old + " not found")
}
