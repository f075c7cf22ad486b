package eksfargate

import (
	"strings"
	"testing"

	"github.com/instancemgr/instance-manager/providers/aws/ownership"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/instancemgr/instance-manager/api/v1alpha1"
)

func fargateGroup(f v1alpha1.EKSFargateSpec) *v1alpha1.InstanceGroup {
	if f.ClusterName == "" {
		f.ClusterName = "prod"
	}
	return &v1alpha1.InstanceGroup{
		ObjectMeta: metav1.ObjectMeta{Namespace: "team-a", Name: "batch"},
		Spec:       v1alpha1.InstanceGroupSpec{Provisioner: v1alpha1.ProvisionerEKSFargate, EKSFargate: &f},
	}
}

func TestProfileNameFollowsTheShape(t *testing.T) {
	const role = "arn:aws:iam::1:role/pods"
	sels := []v1alpha1.EKSFargateSelector{{Namespace: "jobs", Labels: map[string]string{"a": "1", "b": "2"}}, {Namespace: "cron"}}
	base := newShape(role, []string{"subnet-a", "subnet-b"}, sels)
	cases := []struct {
		name string
		s    shape
		same bool
	}{
		{"subnets in another order", newShape(role, []string{"subnet-b", "subnet-a"}, sels), true},
		{"selectors in another order", newShape(role, []string{"subnet-a", "subnet-b"},
			[]v1alpha1.EKSFargateSelector{{Namespace: "cron"}, {Namespace: "jobs", Labels: map[string]string{"b": "2", "a": "1"}}}), true},
		{"another subnet", newShape(role, []string{"subnet-a", "subnet-c"}, sels), false},
		{"another role", newShape("arn:aws:iam::1:role/other", []string{"subnet-a", "subnet-b"}, sels), false},
		{"another selector label", newShape(role, []string{"subnet-a", "subnet-b"},
			[]v1alpha1.EKSFargateSelector{{Namespace: "jobs", Labels: map[string]string{"a": "1", "b": "3"}}, {Namespace: "cron"}}), false},
		{"a selector less", newShape(role, []string{"subnet-a", "subnet-b"}, sels[:1]), false},
		{"a label moved to another selector", newShape(role, []string{"subnet-a", "subnet-b"},
			[]v1alpha1.EKSFargateSelector{{Namespace: "jobs", Labels: map[string]string{"a": "1"}}, {Namespace: "cron", Labels: map[string]string{"b": "2"}}}), false},
	}
	ig := fargateGroup(v1alpha1.EKSFargateSpec{})
	baseName := profileName(ig, base)
	prefix := ownership.Name(ownership.LimitFargateProfile-hashLen-1, "prod", "team-a", "batch") + "-"
	if !strings.HasPrefix(baseName, prefix) || len(baseName) != len(prefix)+hashLen {
		t.Fatalf("profile name %q", baseName)
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			if got := profileName(ig, tc.s); (got == baseName) != tc.same {
				t.Fatalf("name %q vs %q: same = %v, want %v", got, baseName, got == baseName, tc.same)
			}
		})
	}
}

func TestProfileNameFitsEKS(t *testing.T) {
	ig := fargateGroup(v1alpha1.EKSFargateSpec{ClusterName: "the-cluster-for-my-pods-in-a-region-far-away"})
	ig.Name = "batch.jobs.with-a-rather-long-name"
	s := newShape("arn:aws:iam::1:role/pods", []string{"subnet-a"}, []v1alpha1.EKSFargateSelector{{Namespace: "jobs"}})
	name := profileName(ig, s)
	if len(name) > 63 || strings.Contains(name, ".") || !strings.HasSuffix(name, "-"+s.hash()) {
		t.Fatalf("profile name %q: more than 63 characters, a '.', or no shape hash", name)
	}
}
