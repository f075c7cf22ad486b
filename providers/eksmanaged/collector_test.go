package eksmanaged

import (
	"context"
	"reflect"
	"slices"
	"testing"

	ekstypes "github.com/aws/aws-sdk-go-v2/service/eks/types"
	"k8s.io/apimachinery/pkg/types"

	"github.com/instancemgr/instance-manager/api/v1alpha1"
	"github.com/instancemgr/instance-manager/providers"
	"github.com/instancemgr/instance-manager/providers/aws/launchtemplate"
	"github.com/instancemgr/instance-manager/providers/aws/ownership"
)

// An orphaned node group is listed by its tags, drained through the
// Disruptions before EKS DeleteNodegroup is sent, and its role goes once
// it is gone; its launch template waits for it (Dependent).
func TestCollectorDeletesAnOrphanedNodegroupDrainedFirst(t *testing.T) {
	ownership.SetInstallation("inst-1")
	defer ownership.SetInstallation("")
	e := newEnv()
	ig := managedGroup(v1alpha1.EKSManagedConfiguration{Subnets: []string{"subnet-a"}, InstanceType: "m5.large"})
	ig.UID = types.UID("u-1")
	e.apply(t, ig)
	e.eks.settle()
	e.eks.takeCalls()
	// A node group of another installation, and one without tags, in the same cluster.
	foreign := ownership.Owner{Cluster: "prod", Namespace: "team-a", Name: "other"}.Tags()
	foreign[ownership.TagInstallation] = "inst-2"
	e.eks.groups["foreign"] = &ekstypes.Nodegroup{ClusterName: strp("prod"), NodegroupName: strp("foreign"), Tags: foreign, Status: ekstypes.NodegroupStatusActive, ScalingConfig: &ekstypes.NodegroupScalingConfig{}}
	e.eks.groups["hand-made"] = &ekstypes.Nodegroup{ClusterName: strp("prod"), NodegroupName: strp("hand-made"), Status: ekstypes.NodegroupStatusActive, ScalingConfig: &ekstypes.NodegroupScalingConfig{}}

	owned, err := e.p.Owned(context.Background(), []string{"prod", "no-such-cluster"})
	if err != nil {
		t.Fatal(err)
	}
	var ng providers.Owned
	for _, r := range owned {
		if r.Owner != ownership.OwnerOf(ig, "prod") {
			t.Fatalf("listed %+v: not this installation's group", r)
		}
		if r.Kind == KindNodegroup {
			ng = r
		} else if r.Kind != launchtemplate.Kind || !r.Dependent || r.Name != templateName(ig) {
			t.Fatalf("listed %+v", r)
		}
	}
	if ng.Name != ngName || ng.Dependent || ng.Deleting {
		t.Fatalf("node group listed as %+v (all: %+v)", ng, owned)
	}

	d := &fakeDisruptions{drained: map[string]providers.Retirement{ngName: {Message: "draining node ng-0"}}}
	ctx := providers.WithDisruptions(context.Background(), d)
	del, err := e.p.DeleteOrphan(ctx, ng)
	if err != nil || del.Deleting || del.Gone || del.Waiting == "" {
		t.Fatalf("while draining: %+v, %v", del, err)
	}
	if calls := e.eks.takeCalls(); len(calls) != 0 {
		t.Fatalf("EKS calls before the nodes were drained: %v", calls)
	}
	d.drained[ngName] = providers.Retirement{Done: true}
	if del, err = e.p.DeleteOrphan(ctx, ng); err != nil || !del.Deleting || del.Gone {
		t.Fatalf("once drained: %+v, %v", del, err)
	}
	if calls := e.eks.takeCalls(); !reflect.DeepEqual(calls, []string{"DeleteNodegroup " + ngName}) {
		t.Fatalf("calls %v", calls)
	}
	if !reflect.DeepEqual(d.asked, []string{"DrainNodes " + LabelNodegroup + "=" + ngName, "DrainNodes " + LabelNodegroup + "=" + ngName}) {
		t.Fatalf("asked %v", d.asked)
	}
	e.eks.settle()
	if _, ok := e.eks.groups["foreign"]; !ok {
		t.Fatal("another installation's node group was deleted")
	}
	done, err := e.p.FinishOrphan(context.Background(), ng.Owner)
	if err != nil || !slices.Contains(done, "iam-role "+roleName(ig)) {
		t.Fatalf("FinishOrphan = %v, %v", done, err)
	}
	if _, ok := e.iam.roles[roleName(ig)]; ok {
		t.Fatal("the node role is left")
	}
}

// A node group whose tags no longer name the owner listed (re-tagged
// meanwhile) is not deleted.
func TestCollectorLeavesANodegroupNoLongerTaggedForTheOwner(t *testing.T) {
	ownership.SetInstallation("inst-1")
	defer ownership.SetInstallation("")
	e := newEnv()
	o := ownership.Owner{Cluster: "prod", Namespace: "team-a", Name: "web", UID: "u-1"}
	tags := o.Tags()
	tags[ownership.TagUID] = "u-2"
	e.eks.groups[ngName] = &ekstypes.Nodegroup{ClusterName: strp("prod"), NodegroupName: strp(ngName), Tags: tags, Status: ekstypes.NodegroupStatusActive, ScalingConfig: &ekstypes.NodegroupScalingConfig{}}
	if _, err := e.p.DeleteOrphan(context.Background(), providers.Owned{Kind: KindNodegroup, Name: ngName, Owner: o, Tags: o.Tags()}); err == nil {
		t.Fatal("no error deleting a node group tagged for another owner")
	}
	if calls := e.eks.takeCalls(); len(calls) != 0 {
		t.Fatalf("calls %v", calls)
	}
}

func TestCollectorBuilds(t *testing.T) {
	o := ownership.Owner{Cluster: "prod", Namespace: "team-a", Name: "web", UID: "u-1"}
	r := providers.Owned{Kind: KindNodegroup, Name: ngName, Owner: o}
	live := func(edit func(*v1alpha1.InstanceGroup)) *v1alpha1.InstanceGroup {
		ig := managedGroup(v1alpha1.EKSManagedConfiguration{})
		ig.UID = "u-1"
		edit(ig)
		return ig
	}
	cases := []struct {
		name   string
		live   *v1alpha1.InstanceGroup
		orphan bool
	}{
		{"builds it", live(func(*v1alpha1.InstanceGroup) {}), false},
		{"another provisioner", live(func(ig *v1alpha1.InstanceGroup) { ig.Spec.Provisioner = v1alpha1.ProvisionerEKS }), true},
		{"another cluster", live(func(ig *v1alpha1.InstanceGroup) { ig.Spec.EKSManaged.Configuration.ClusterName = "dev" }), true},
		{"re-created", live(func(ig *v1alpha1.InstanceGroup) { ig.UID = "u-2" }), true},
	}
	p := &Provisioner{}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			if why := p.Builds(c.live, r); (why != "") != c.orphan {
				t.Errorf("Builds = %q, orphan want %v", why, c.orphan)
			}
		})
	}
}

func strp(s string) *string { return &s }
