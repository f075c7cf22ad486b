package ownership

import (
	"regexp"
	"strings"
	"testing"
)

func TestNameIsCollisionFreeAndFits(t *testing.T) {
	valid := regexp.MustCompile(`^[0-9A-Za-z][A-Za-z0-9_-]*$`)
	long := strings.Repeat("x", 63)
	cases := []struct{ cluster, ns, name string }{
		{"prod", "acme", "web-blue"},
		{"prod", "acme-web", "blue"},
		{"prod-acme", "web", "blue"},
		{"prod", "team", "a.b"},
		{"prod", "team", "a-b"},
		{long, long, long + ".tail"},
		{long, long, long + ".tall"},
	}
	for _, limit := range []int{LimitNodegroup, LimitIAMRole, LimitLaunchTemplate, LimitAutoScalingGroup} {
		seen := map[string]string{}
		for _, c := range cases {
			n := Name(limit, c.cluster, c.ns, c.name)
			if len(n) > limit {
				t.Errorf("Name(%d, %q, %q, %q) = %q: %d characters, over the limit", limit, c.cluster, c.ns, c.name, n, len(n))
			}
			if !valid.MatchString(n) {
				t.Errorf("Name(%d, %q, %q, %q) = %q: not a valid AWS name", limit, c.cluster, c.ns, c.name, n)
			}
			key := c.cluster + "/" + c.ns + "/" + c.name
			if other, ok := seen[n]; ok {
				t.Errorf("Name(%d) gives %q for both %s and %s", limit, n, other, key)
			}
			seen[n] = key
			if Name(limit, c.cluster, c.ns, c.name) != n {
				t.Errorf("Name is not deterministic for %s", key)
			}
		}
	}
	if got := Name(128, "prod", "acme", "web"); !strings.HasPrefix(got, "prod-acme-web-") {
		t.Errorf("Name keeps a readable prefix: got %q", got)
	}
}

func TestCheck(t *testing.T) {
	me := Owner{Cluster: "prod", Namespace: "acme", Name: "web", UID: "u1"}
	cases := []struct {
		name  string
		tags  map[string]string
		owned bool
		found string
	}{
		{"all tags match", me.Tags(), true, ""},
		{"legacy: owner tag only", map[string]string{TagInstanceGroup: "acme/web"}, true, ""},
		{"no tags: hand-made", map[string]string{"Name": "x"}, false, "no instance-manager ownership tags"},
		{"another group", Owner{Cluster: "prod", Namespace: "acme-web", Name: "blue", UID: "u2"}.Tags(), false, "InstanceGroup acme-web/blue (uid u2) of cluster prod"},
		{"same name, another cluster", Owner{Cluster: "dev", Namespace: "acme", Name: "web", UID: "u1"}.Tags(), false, "of cluster dev"},
		{"same name, earlier object", Owner{Cluster: "prod", Namespace: "acme", Name: "web", UID: "u0"}.Tags(), false, "(uid u0)"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			err := me.Check("Auto Scaling group", "g", c.tags)
			if c.owned != (err == nil) {
				t.Fatalf("Check = %v, want owned=%v", err, c.owned)
			}
			if err != nil {
				if !IsForeign(err) || !strings.Contains(err.Error(), c.found) || !strings.Contains(err.Error(), `Auto Scaling group "g"`) {
					t.Errorf("error %q should be a ForeignError naming the resource and %q", err, c.found)
				}
			}
		})
	}
	if m := me.Missing(map[string]string{TagInstanceGroup: "acme/web"}); len(m) != 2 || m[TagUID] != "u1" || m["instancemgr.keikoproj.io/cluster/prod"] != "owned" {
		t.Errorf("Missing = %v, want the uid and cluster tags", m)
	}
}

func TestReserved(t *testing.T) {
	for key, want := range map[string]bool{
		"instancemgr.keikoproj.io/instancegroup": true, "Instancemgr.Keikoproj.io/uid": true,
		"kubernetes.io/cluster/prod": true, "aws:cloudformation:stack-name": true,
		"team": false, "k8s.io/cluster-autoscaler/enabled": false, "kubernetes.io/role": false,
	} {
		if Reserved(key) != want {
			t.Errorf("Reserved(%q) = %v, want %v", key, !want, want)
		}
	}
}
