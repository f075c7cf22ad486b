package webhooks

import (
	"strings"
	"testing"

	"k8s.io/apimachinery/pkg/util/validation/field"

	"github.com/instancemgr/instance-manager/api/v1alpha1"
)

func eksSpec(cluster string) v1alpha1.InstanceGroupSpec {
	return v1alpha1.InstanceGroupSpec{Provisioner: v1alpha1.ProvisionerEKS,
		EKS: &v1alpha1.EKSSpec{Configuration: &v1alpha1.EKSConfiguration{ClusterName: cluster}}}
}

func TestIdentityChanges(t *testing.T) {
	built := v1alpha1.InstanceGroupStatus{ActiveScalingGroupName: "prod-a-web-1234567890"}
	managed := v1alpha1.InstanceGroupSpec{Provisioner: v1alpha1.ProvisionerEKSManaged,
		EKSManaged: &v1alpha1.EKSManagedSpec{Configuration: &v1alpha1.EKSManagedConfiguration{ClusterName: "prod"}}}
	cf := eksSpec("prod")
	cf.Provisioner = v1alpha1.ProvisionerEKSCF
	cases := []struct {
		name   string
		status v1alpha1.InstanceGroupStatus
		old    v1alpha1.InstanceGroupSpec
		new    v1alpha1.InstanceGroupSpec
		want   string // "" = allowed
	}{
		{"same cluster", built, eksSpec("prod"), eksSpec("prod"), ""},
		{"cluster changed with resources", built, eksSpec("prod"), eksSpec("dev"), `spec.eks.configuration.clusterName: cannot change from "prod" to "dev"`},
		{"cluster changed before anything was built", v1alpha1.InstanceGroupStatus{}, eksSpec("typo"), eksSpec("prod"), ""},
		{"provisioner changed", built, eksSpec("prod"), managed, `spec.provisioner: cannot change from "eks" to "eks-managed"`},
		{"eks-cf is eks", built, cf, eksSpec("prod"), ""},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			old := &v1alpha1.InstanceGroup{Spec: c.old, Status: c.status}
			got := strings.Join(IdentityChanges(old, &c.new), "; ")
			if c.want == "" && got != "" || c.want != "" && !strings.Contains(got, c.want) {
				t.Fatalf("IdentityChanges = %q, want %q", got, c.want)
			}
			if c.want != "" && !strings.Contains(got, "prod-a-web-1234567890") {
				t.Errorf("the message should name the resources that would be left: %q", got)
			}
		})
	}
}

func TestReservedTagsRefused(t *testing.T) {
	spec := eksSpec("prod")
	spec.EKS.Configuration.Tags = []map[string]string{{"key": "instancemgr.keikoproj.io/instancegroup", "value": "victim/web"}, {"key": "team", "value": "a"}, {"key": "kubernetes.io/cluster/prod", "value": "owned"}}
	errs := validateReservedTags(&spec, field.NewPath("spec"))
	if len(errs) != 2 || errs[0].Field != "spec.eks.configuration.tags[0].key" || errs[1].Field != "spec.eks.configuration.tags[2].key" {
		t.Fatalf("errors %v, want tags[0] and tags[2] refused", errs)
	}
	fargate := v1alpha1.InstanceGroupSpec{EKSFargate: &v1alpha1.EKSFargateSpec{Tags: map[string]string{"instancemgr.keikoproj.io/uid": "x", "ok": "y"}}}
	if errs := validateReservedTags(&fargate, field.NewPath("spec")); len(errs) != 1 {
		t.Fatalf("errors %v, want the fargate uid tag refused", errs)
	}
}
