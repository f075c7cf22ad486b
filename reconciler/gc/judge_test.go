package gc

import (
	"strings"
	"testing"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/instancemgr/instance-manager/api/v1alpha1"
	"github.com/instancemgr/instance-manager/providers"
	"github.com/instancemgr/instance-manager/providers/aws/launchtemplate"
	"github.com/instancemgr/instance-manager/providers/aws/ownership"
	"github.com/instancemgr/instance-manager/providers/eks"
	"github.com/instancemgr/instance-manager/providers/eksmanaged"
)

func TestOrphaned(t *testing.T) {
	ownership.SetInstallation("inst-1")
	group := func(cluster, provisioner string) *v1alpha1.InstanceGroup {
		return &v1alpha1.InstanceGroup{ObjectMeta: metav1.ObjectMeta{Namespace: "acme", Name: "web", UID: "u1"},
			Spec: v1alpha1.InstanceGroupSpec{Provisioner: provisioner, EKS: &v1alpha1.EKSSpec{Configuration: &v1alpha1.EKSConfiguration{ClusterName: cluster}}}}
	}
	live := group("prod", v1alpha1.ProvisionerEKS)
	owner := ownership.Owner{Cluster: "prod", Namespace: "acme", Name: "web", UID: "u1"}
	res := providers.Owned{Kind: eks.KindScalingGroup, Name: eks.GroupName(live), Owner: owner, Tags: owner.Tags()}
	deleting := live.DeepCopy()
	deleting.DeletionTimestamp = &metav1.Time{}
	recreated := live.DeepCopy()
	recreated.UID = "u2"
	otherInstallation := res
	otherInstallation.Tags = owner.Tags()
	otherInstallation.Tags[ownership.TagInstallation] = "inst-2"
	renamed := res
	renamed.Name = "prod-acme-web"
	managed := &v1alpha1.InstanceGroup{ObjectMeta: live.ObjectMeta, Spec: v1alpha1.InstanceGroupSpec{Provisioner: v1alpha1.ProvisionerEKSManaged,
		EKSManaged: &v1alpha1.EKSManagedSpec{Configuration: &v1alpha1.EKSManagedConfiguration{ClusterName: "prod"}}}}
	managedTemplate := providers.Owned{Kind: launchtemplate.Kind, Name: eksmanaged.TemplateName(managed), Owner: owner, Tags: owner.Tags(), Dependent: true}
	eksTemplate := providers.Owned{Kind: launchtemplate.Kind, Name: eks.GroupName(live), Owner: owner, Tags: owner.Tags(), Dependent: true}
	untagged := providers.Owned{Kind: eks.KindScalingGroup, Name: "x", Owner: owner, Tags: map[string]string{"instancemgr.keikoproj.io/cluster/prod": "owned", ownership.TagInstallation: "inst-1"}}
	// The provisioner that lists each resource judges it.
	byEKS, byManaged := &eks.Provisioner{}, &eksmanaged.Provisioner{}
	recreatedElsewhere := group("dev", v1alpha1.ProvisionerEKS)
	recreatedElsewhere.UID = "u2"
	recreatedManaged := managed.DeepCopy()
	recreatedManaged.UID = "u2"
	cases := []struct {
		name string
		col  providers.Collector
		f    providers.Owned
		live *v1alpha1.InstanceGroup
		want string // "" = not an orphan
	}{
		{"the group uses it", byEKS, res, live, ""},
		{"the group is gone", byEKS, res, nil, "no longer exists"},
		{"the group is being deleted: its finalizer acts", byEKS, res, deleting, ""},
		{"same name, another object still building it: it adopts it, not swept", byEKS, res, recreated, ""},
		{"same name, another object, another cluster", byEKS, res, recreatedElsewhere, `now builds in cluster "dev"`},
		{"same name, another object on eks-managed: eks-managed does not adopt, swept", byManaged, managedTemplate, recreatedManaged, "deleted and created again"},
		{"the group moved to another cluster", byEKS, res, group("dev", v1alpha1.ProvisionerEKS), `now builds in cluster "dev"`},
		{"the group moved to another provisioner", byEKS, res, group("prod", v1alpha1.ProvisionerEKSManaged), `now uses provisioner "eks-managed"`},
		{"the group uses another name", byEKS, renamed, live, "now uses " + eks.GroupName(live)},
		{"a managed group's launch template is its own", byManaged, managedTemplate, managed, ""},
		{"an eks template of a group now managed is an orphan", byEKS, eksTemplate, managed, `now uses provisioner "eks-managed"`},
		{"a managed template of a group back on eks is an orphan", byManaged, managedTemplate, live, `now uses provisioner "eks"`},
		{"another installation's resource is never collected", byEKS, otherInstallation, nil, ""},
		{"no owner tag: never collected", byEKS, untagged, nil, ""},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			got := orphaned(c.col, c.f, c.live)
			if c.want == "" && got != "" || c.want != "" && !strings.Contains(got, c.want) {
				t.Fatalf("orphaned = %q, want %q", got, c.want)
			}
		})
	}
}
