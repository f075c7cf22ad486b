package install

import (
	"regexp"
	"slices"
	"strings"
	"testing"

	"sigs.k8s.io/yaml"

	"github.com/instancemgr/instance-manager/boundaries"
)

// TestBoundariesReplaceOnlyIDs checks that the adapted example differs
// from the example in the made-up ids only, and parses with the ids in
// place.
func TestBoundariesReplaceOnlyIDs(t *testing.T) {
	ids, err := readExampleIDs()
	if err != nil {
		t.Fatal(err)
	}
	if ids.cluster != "a-managed-cluster" || ids.image != "ami-1234" || len(ids.subnets) != 3 || len(ids.securityGroups) != 1 {
		t.Fatalf("example ids read as %+v", ids)
	}
	c := &Cloud{
		Cluster: ids.cluster, Subnets: []string{"subnet-0aaa", "subnet-0bbb", "subnet-0ccc"}, SecurityGroups: []string{"sg-0ddd"},
		example: ids,
	}
	data, err := c.Boundaries("ami-0eee")
	if err != nil {
		t.Fatal(err)
	}
	example, err := ExampleBoundaries()
	if err != nil {
		t.Fatal(err)
	}
	for k, v := range example.Data {
		if k != "defaults" && data[k] != v {
			t.Errorf("key %s changed:\n%s", k, data[k])
		}
	}
	// Putting the example's ids back gives the example, byte for byte.
	back := data["defaults"]
	for from, to := range map[string]string{
		"subnet-0aaa": ids.subnets[0], "subnet-0bbb": ids.subnets[1], "subnet-0ccc": ids.subnets[2],
		"sg-0ddd": ids.securityGroups[0], "ami-0eee": ids.image,
	} {
		back = regexp.MustCompile(regexp.QuoteMeta(from)).ReplaceAllString(back, to)
	}
	if back != example.Data["defaults"] {
		t.Errorf("the adapted defaults differ from the example beyond the ids:\n%s", data["defaults"])
	}
	for _, old := range append(append([]string{ids.image}, ids.subnets...), ids.securityGroups...) {
		if strings.Contains(data["defaults"], old) {
			t.Errorf("the adapted defaults still hold %s", old)
		}
	}
	if _, err := boundaries.Parse(data); err != nil {
		t.Errorf("the adapted ConfigMap does not parse: %v", err)
	}
	var d struct {
		Spec struct {
			EKS struct {
				Configuration struct {
					Image          string   `json:"image"`
					Subnets        []string `json:"subnets"`
					SecurityGroups []string `json:"securityGroups"`
				} `json:"configuration"`
			} `json:"eks"`
		} `json:"spec"`
	}
	if err := yaml.Unmarshal([]byte(data["defaults"]), &d); err != nil {
		t.Fatal(err)
	}
	got := d.Spec.EKS.Configuration
	if got.Image != "ami-0eee" || !slices.Equal(got.Subnets, c.Subnets) || !slices.Equal(got.SecurityGroups, c.SecurityGroups) {
		t.Errorf("adapted defaults: %+v", got)
	}
}

// TestChartValues checks that the boundary ConfigMap's keys become YAML
// objects under boundaryConfigMap, with the certificate rotation on.
func TestChartValues(t *testing.T) {
	values, err := ChartValues(map[string]string{"defaults": "spec:\n  provisioner: eks\n", "enforcement": "deny"}, "--poll-interval=2s")
	if err != nil {
		t.Fatal(err)
	}
	b, err := yaml.Marshal(values)
	if err != nil {
		t.Fatal(err)
	}
	want := `boundaryConfigMap:
  create: true
  defaults:
    spec:
      provisioner: eks
  enforcement: deny
certManager:
  enabled: false
extraArgs:
- --poll-interval=2s
networkPolicy:
  webhookFrom:
  - ipBlock:
      cidr: 127.0.0.1/32
nodeSelector:
  instancemgr.keikoproj.io/demo-runs-out-of-cluster: "true"
`
	if string(b) != want {
		t.Errorf("values:\n%s\nwant:\n%s", b, want)
	}
	if _, err := ChartValues(map[string]string{"defaults": "spec: [unclosed"}); err == nil {
		t.Error("a key that is not YAML was accepted")
	}
}
