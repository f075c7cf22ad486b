package webhooks

import (
	"strings"
	"testing"

	"github.com/instancemgr/instance-manager/api/v1alpha1"
)

func TestReplacementWarnings(t *testing.T) {
	managed := func(it string) v1alpha1.InstanceGroupSpec {
		return v1alpha1.InstanceGroupSpec{Provisioner: v1alpha1.ProvisionerEKSManaged,
			EKSManaged: &v1alpha1.EKSManagedSpec{MaxSize: 3, Configuration: &v1alpha1.EKSManagedConfiguration{ClusterName: "prod", InstanceType: it}}}
	}
	built := v1alpha1.InstanceGroupStatus{ActiveScalingGroupName: "prod-a-web-1234567890"}
	scaled := managed("m5.large")
	scaled.EKSManaged.MaxSize = 9
	cases := []struct {
		name     string
		status   v1alpha1.InstanceGroupStatus
		old, new v1alpha1.InstanceGroupSpec
		want     string // "" = no warning
	}{
		{"instance type of a built group", built, managed("m5.large"), managed("m5.xlarge"),
			"spec.eks-managed.configuration.instanceType: EKS cannot change this on the existing managed node group prod-a-web-1234567890; instance-manager replaces it blue/green"},
		{"a mutable change", built, managed("m5.large"), scaled, ""},
		{"no node group yet", v1alpha1.InstanceGroupStatus{}, managed("m5.large"), managed("m5.xlarge"), ""},
		{"another provisioner", built, eksSpec("prod"), eksSpec("prod"), ""},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			old := &v1alpha1.InstanceGroup{Spec: tc.old, Status: tc.status}
			got := replacementWarnings(old, &tc.new)
			switch {
			case tc.want == "" && got != nil:
				t.Fatalf("warnings %q, want none", got)
			case tc.want != "" && (len(got) != 1 || !strings.HasPrefix(got[0], tc.want)):
				t.Fatalf("warnings %q, want one starting %q", got, tc.want)
			}
		})
	}
}
