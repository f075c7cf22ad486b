package autoscalerpriority

import (
	"regexp"
	"testing"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/yaml"

	"github.com/instancemgr/instance-manager/api/v1alpha1"
)

func group(name, asg, priority string, enabled bool) v1alpha1.InstanceGroup {
	ig := v1alpha1.InstanceGroup{ObjectMeta: metav1.ObjectMeta{Name: name, Annotations: map[string]string{}}}
	ig.Status.ActiveScalingGroupName = asg
	if enabled {
		ig.Annotations[v1alpha1.AnnotationClusterAutoscalerEnabled] = "true"
	}
	if priority != "" {
		ig.Annotations[v1alpha1.AnnotationClusterAutoscalerPriority] = priority
	}
	return ig
}

func TestPrioritiesListTheGroupsByTheirPriority(t *testing.T) {
	managed := group("managed", "prod-a-mng", "20", true) // status: the node group's name
	managed.Spec.Provisioner = v1alpha1.ProvisionerEKSManaged
	got := Priorities([]v1alpha1.InstanceGroup{
		group("spot", "prod-a-spot", "50", true),
		group("spot-b", "prod-b.spot", "50", true),
		group("on-demand", "prod-a-od", "10", true),
		group("plain", "prod-a-plain", "", true),
		group("not-scaled", "prod-a-manual", "99", false),
		group("not-built", "", "70", true),
		managed,
	})
	var parsed map[int][]string
	if err := yaml.Unmarshal([]byte(got), &parsed); err != nil {
		t.Fatalf("the expander cannot read %q: %v", got, err)
	}
	want := map[int][]string{
		50: {`^prod-a-spot$`, `^prod-b\.spot$`},
		20: {`^eks-prod-a-mng-[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$`},
		10: {`^prod-a-od$`},
		0:  {`.*`, `^prod-a-plain$`},
	}
	if len(parsed) != len(want) {
		t.Fatalf("priorities %v, want %v", parsed, want)
	}
	for p, exprs := range want {
		if len(parsed[p]) != len(exprs) {
			t.Fatalf("priority %d: %v, want %v", p, parsed[p], exprs)
		}
		for i := range exprs {
			if parsed[p][i] != exprs[i] {
				t.Errorf("priority %d: %v, want %v", p, parsed[p], exprs)
			}
		}
	}
}

// Review 2026-11-29 L6: an eks-managed group's expression matches the
// Auto Scaling group EKS names for its node group, not the node group.
func TestManagedGroupExpressionMatchesItsAutoScalingGroup(t *testing.T) {
	ig := group("managed", "prod-a-mng", "20", true)
	ig.Spec.Provisioner = v1alpha1.ProvisionerEKSManaged
	re := regexp.MustCompile(scalingGroupExpr(&ig, ig.Status.ActiveScalingGroupName))
	for name, want := range map[string]bool{
		"eks-prod-a-mng-40c6b7e1-8679-eb64-d33a-4ba475413529": true,
		"prod-a-mng": false,
		"eks-prod-a-mng-2-40c6b7e1-8679-eb64-d33a-4ba475413529": false,
	} {
		if re.MatchString(name) != want {
			t.Errorf("%s matches %v, want %v", name, !want, want)
		}
	}
}
