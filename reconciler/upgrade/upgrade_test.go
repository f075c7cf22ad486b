package upgrade

import (
	"testing"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/utils/ptr"

	"github.com/instancemgr/instance-manager/api/v1alpha1"
)

func TestMaxUnavailable(t *testing.T) {
	cases := []struct {
		value   *intstr.IntOrString
		desired int
		want    int
	}{
		{nil, 10, 1},
		{ptr.To(intstr.FromInt32(2)), 10, 2},
		{ptr.To(intstr.FromString("30%")), 10, 3},
		{ptr.To(intstr.FromString("30%")), 3, 1}, // rounded down, at least 1
		{ptr.To(intstr.FromString("100%")), 4, 4},
	}
	for _, tc := range cases {
		ig := &v1alpha1.InstanceGroup{}
		if tc.value != nil {
			ig.Spec.Strategy.RollingUpdate = &v1alpha1.RollingUpdateStrategy{MaxUnavailable: tc.value}
		}
		if got := MaxUnavailable(ig, tc.desired); got != tc.want {
			t.Errorf("MaxUnavailable(%v, %d) = %d, want %d", tc.value, tc.desired, got, tc.want)
		}
	}
}

func TestCRDStatus(t *testing.T) {
	c := &v1alpha1.CRDUpgradeStrategy{StatusJSONPath: ".status.currentStatus", StatusSuccessString: "completed", StatusFailureString: "error"}
	for status, want := range map[string]string{"": "", "running": "", "Completed": "success", "ERROR": "failure"} {
		u := &unstructured.Unstructured{Object: map[string]any{"status": map[string]any{"currentStatus": status}}}
		if got := statusOf(u, c); got != want {
			t.Errorf("statusOf(%q) = %q, want %q", status, got, want)
		}
	}
}
