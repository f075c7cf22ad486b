package gc

import (
	"strings"
	"testing"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/instancemgr/instance-manager/api/v1alpha1"
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
	res := found{kind: resourceASG, name: eks.GroupName(live), cluster: "prod", tags: owner.Tags()}
	deleting := live.DeepCopy()
	deleting.DeletionTimestamp = &metav1.Time{}
	recreated := live.DeepCopy()
	recreated.UID = "u2"
	otherInstallation := res
	otherInstallation.tags = map[string]string{}
	for k, v := range res.tags {
		otherInstallation.tags[k] = v
	}
	otherInstallation.tags[ownership.TagInstallation] = "inst-2"
	renamed := res
	renamed.name = "prod-acme-web"
	managed := &v1alpha1.InstanceGroup{ObjectMeta: live.ObjectMeta, Spec: v1alpha1.InstanceGroupSpec{Provisioner: v1alpha1.ProvisionerEKSManaged,
		EKSManaged: &v1alpha1.EKSManagedSpec{Configuration: &v1alpha1.EKSManagedConfiguration{ClusterName: "prod"}}}}
	managedTemplate := found{kind: resourceLaunchTemplate, name: eksmanaged.TemplateName(managed), cluster: "prod", tags: owner.Tags()}
	eksTemplate := found{kind: resourceLaunchTemplate, name: eks.GroupName(live), cluster: "prod", tags: owner.Tags()}
	recreatedElsewhere := group("dev", v1alpha1.ProvisionerEKS)
	recreatedElsewhere.UID = "u2"
	recreatedManaged := managed.DeepCopy()
	recreatedManaged.UID = "u2"
	cases := []struct {
		name string
		f    found
		live *v1alpha1.InstanceGroup
		want string // "" = not an orphan
	}{
		{"the group uses it", res, live, ""},
		{"the group is gone", res, nil, "no longer exists"},
		{"the group is being deleted: its finalizer acts", res, deleting, ""},
		{"same name, another object still building it: it adopts it, not swept", res, recreated, ""},
		{"same name, another object, another cluster", res, recreatedElsewhere, `now builds in cluster "dev"`},
		{"same name, another object on eks-managed: eks-managed does not adopt, swept", managedTemplate, recreatedManaged, "deleted and created again"},
		{"the group moved to another cluster", res, group("dev", v1alpha1.ProvisionerEKS), `now builds in cluster "dev"`},
		{"the group moved to another provisioner", res, group("prod", v1alpha1.ProvisionerEKSManaged), `now uses provisioner "eks-managed"`},
		{"the group uses another name", renamed, live, "now uses " + eks.GroupName(live)},
		{"a managed group's launch template is its own", managedTemplate, managed, ""},
		{"an eks template of a group now managed is an orphan", eksTemplate, managed, `now uses provisioner "eks-managed"`},
		{"a managed template of a group back on eks is an orphan", managedTemplate, live, "now uses " + eks.GroupName(live)},
		{"another installation's resource is never collected", otherInstallation, nil, ""},
		{"no owner tag: never collected", found{kind: resourceASG, name: "x", cluster: "prod", tags: map[string]string{"instancemgr.keikoproj.io/cluster/prod": "owned", ownership.TagInstallation: "inst-1"}}, nil, ""},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			got := orphaned(c.f, c.live)
			if c.want == "" && got != "" || c.want != "" && !strings.Contains(got, c.want) {
				t.Fatalf("orphaned = %q, want %q", got, c.want)
			}
		})
	}
}
