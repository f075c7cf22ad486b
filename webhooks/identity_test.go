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
		// The record alone (the status naming resources never landed, or
		// the cloud write after the record failed) refuses the switch.
		{"provisioner changed, recorded, status write never landed", recorded("eks", "prod"), eksSpec("prod"), managed,
			`spec.provisioner: cannot change from "eks" to "eks-managed" because status.identity records that its cloud resources were built (or may have been, if the write that followed failed) by provisioner eks in cluster "prod"`},
		{"cluster changed, recorded", recorded("eks", "prod"), eksSpec("prod"), eksSpec("dev"), `spec.eks.configuration.clusterName: cannot change from "prod" to "dev" because status.identity records`},
		{"recorded, same identity", recorded("eks", "prod"), eksSpec("prod"), eksSpec("prod"), ""},
		{"recorded eks, eks-cf spelling", recorded("eks", "prod"), eksSpec("prod"), cf, ""},
		// The record wins over a spec that diverged (a write that bypassed
		// the webhook): going back to the recorded identity is admitted.
		{"back to the recorded identity", recorded("eks-managed", "prod"), eksSpec("prod"), managed, ""},
		{"away from the recorded identity", recorded("eks-managed", "prod"), managed, eksSpec("prod"), `spec.provisioner: cannot change from "eks-managed" to "eks"`},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			old := &v1alpha1.InstanceGroup{Spec: c.old, Status: c.status}
			got := strings.Join(IdentityChanges(old, &c.new), "; ")
			if c.want == "" && got != "" || c.want != "" && !strings.Contains(got, c.want) {
				t.Fatalf("IdentityChanges = %q, want %q", got, c.want)
			}
			if c.want != "" && c.status.Identity == nil && !strings.Contains(got, "prod-a-web-1234567890") {
				t.Errorf("the message should name the resources that would be left: %q", got)
			}
			if c.want != "" && !strings.Contains(got, "create a new InstanceGroup with the new value") {
				t.Errorf("the message should say what to do: %q", got)
			}
		})
	}
}

func recorded(provisioner, cluster string) v1alpha1.InstanceGroupStatus {
	return v1alpha1.InstanceGroupStatus{Identity: &v1alpha1.GroupIdentity{Provisioner: provisioner, ClusterName: cluster}}
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
