package eksmanaged

import (
	"context"
	"reflect"
	"strings"
	"testing"

	"github.com/instancemgr/instance-manager/providers/aws/iamrole"
	"github.com/instancemgr/instance-manager/providers/aws/ownership"

	awssdk "github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/eks"
	iamtypes "github.com/aws/aws-sdk-go-v2/service/iam/types"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/fake"

	"github.com/instancemgr/instance-manager/api/v1alpha1"
	"github.com/instancemgr/instance-manager/providers"
	awsp "github.com/instancemgr/instance-manager/providers/aws"
)

type env struct {
	eks   *fakeEKS
	iam   *fakeIAM
	nodes client.Client // the Kubernetes Nodes the provisioner reads
	p     *Provisioner
}

func newEnv() *env {
	e := &env{eks: newFakeEKS(), iam: &fakeIAM{roles: map[string]*fakeRole{}}, nodes: fake.NewClientBuilder().Build()}
	ec2 := &fakeEC2{subnets: map[string]string{"subnet-a": "private-a", "subnet-b": "private-b"}, groups: map[string]string{"sg-1": "ops"}}
	e.p = New(&awsp.Clients{EKS: e.eks, IAM: e.iam, EC2: ec2}, nil, e.nodes, Options{})
	return e
}

func (e *env) apply(t *testing.T, ig *v1alpha1.InstanceGroup) *providers.Observation {
	t.Helper()
	obs, err := e.p.Apply(context.Background(), ig)
	if err != nil {
		t.Fatalf("Apply: %v", err)
	}
	return obs
}

func TestApplyCreatesThenWaitsForActive(t *testing.T) {
	e := newEnv()
	ig := managedGroup(v1alpha1.EKSManagedConfiguration{Subnets: []string{"private-a", "subnet-b"}, InstanceType: "m5.large", CapacityType: "SPOT"})
	obs := e.apply(t, ig)
	if calls := e.eks.takeCalls(); !reflect.DeepEqual(calls, []string{"CreateNodegroup " + ngName}) {
		t.Fatalf("calls %v", calls)
	}
	if !obs.Managed || obs.Active || !obs.Updating || obs.GroupName != ngName || obs.Lifecycle != v1alpha1.LifecycleSpot ||
		obs.Min != 2 || obs.Max != 5 || obs.Desired != 2 || !strings.Contains(obs.Message, "CREATING") {
		t.Fatalf("observation while creating %+v", obs)
	}
	ng := e.eks.groups[ngName]
	if !reflect.DeepEqual(ng.Subnets, []string{"subnet-a", "subnet-b"}) || ng.Tags[ownership.TagInstanceGroup] != "team-a/web" {
		t.Fatalf("node group subnets %v tags %v", ng.Subnets, ng.Tags)
	}
	// The created role: EC2 trust, owner tag, worker/ECR policies; no CNI
	// policy without --node-role-cni-policy (issue 25, N4).
	role := e.iam.roles[ngName]
	if role == nil || *ng.NodeRole != "arn:aws:iam::123456789012:role/"+ngName || obs.RoleARN != *ng.NodeRole {
		t.Fatalf("node role %v, node group role %s", role, *ng.NodeRole)
	}
	if want := map[string]bool{iamrole.PolicyWorkerNode: true, iamrole.PolicyECR: true}; !reflect.DeepEqual(role.policies, want) {
		t.Errorf("policies %v, want %v", role.policies, want)
	}

	e.apply(t, ig) // still CREATING: nothing sent
	if calls := e.eks.takeCalls(); calls != nil {
		t.Fatalf("calls while CREATING: %v", calls)
	}
	e.eks.settle()
	obs = e.apply(t, ig)
	if !obs.Active || obs.Updating || obs.Message != "" || e.eks.takeCalls() != nil {
		t.Fatalf("observation once ACTIVE %+v", obs)
	}

	// --node-role-cni-policy attaches it; irsa-enabled then drops it.
	e.p.opts.NodeRoleCNIPolicy = true
	e.apply(t, ig)
	if !role.policies[iamrole.PolicyCNI] {
		t.Errorf("CNI policy not attached with --node-role-cni-policy: %v", role.policies)
	}
	ig.Annotations = map[string]string{v1alpha1.AnnotationIRSAEnabled: "true"}
	e.apply(t, ig)
	if role.policies[iamrole.PolicyCNI] {
		t.Errorf("CNI policy still attached with irsa-enabled: %v", role.policies)
	}
}

func TestApplyUpdatesConfigThenVersionOneAtATime(t *testing.T) {
	e := newEnv()
	ig := managedGroup(v1alpha1.EKSManagedConfiguration{Subnets: []string{"subnet-a"}, Version: "1.29", Labels: map[string]string{"a": "1"}})
	e.apply(t, ig)
	e.eks.settle()
	e.eks.takeCalls()

	// Labels, taints, sizes and version all change.
	ig.Spec.EKSManaged.MinSize, ig.Spec.EKSManaged.MaxSize = 3, 6
	c := ig.Spec.EKSManaged.Configuration
	c.Labels = map[string]string{"b": "2"}
	c.Version = "1.30"
	obs := e.apply(t, ig)
	if calls := e.eks.takeCalls(); !reflect.DeepEqual(calls, []string{"UpdateNodegroupConfig"}) {
		t.Fatalf("first pass calls %v, want the config update only", calls)
	}
	if !obs.Updating || !strings.Contains(obs.Message, "labels") || !strings.Contains(obs.Message, "scaling") {
		t.Fatalf("observation after the config update %+v", obs)
	}
	ng := e.eks.groups[ngName]
	if ng.Labels["b"] != "2" || ng.Labels["a"] != "" || *ng.ScalingConfig.MinSize != 3 || *ng.ScalingConfig.DesiredSize != 3 {
		t.Fatalf("node group after the config update: labels %v scaling %+v", ng.Labels, *ng.ScalingConfig)
	}

	// UPDATING: nothing more is sent, the group reports Updating.
	obs = e.apply(t, ig)
	if calls := e.eks.takeCalls(); calls != nil || !obs.Updating || obs.Active {
		t.Fatalf("while UPDATING: calls %v, observation %+v", calls, obs)
	}

	e.eks.settle()
	obs = e.apply(t, ig)
	if calls := e.eks.takeCalls(); !reflect.DeepEqual(calls, []string{"UpdateNodegroupVersion 1.30 "}) {
		t.Fatalf("second pass calls %v, want the version update", calls)
	}
	if !obs.Updating || !strings.Contains(obs.Message, "version 1.29 -> 1.30") {
		t.Fatalf("observation after the version update %+v", obs)
	}
	e.eks.settle()
	obs = e.apply(t, ig)
	if calls := e.eks.takeCalls(); calls != nil || !obs.Active || obs.Updating {
		t.Fatalf("converged: calls %v, observation %+v", calls, obs)
	}

	// A release version alone keeps the node group's Kubernetes version.
	c.ReleaseVersion = "1.30.7-20250101"
	e.apply(t, ig)
	if calls := e.eks.takeCalls(); !reflect.DeepEqual(calls, []string{"UpdateNodegroupVersion 1.30 1.30.7-20250101"}) {
		t.Fatalf("release update calls %v", calls)
	}
}

func TestApplyVersionRefusedIsASpecError(t *testing.T) {
	e := newEnv()
	ig := managedGroup(v1alpha1.EKSManagedConfiguration{Subnets: []string{"subnet-a"}})
	e.apply(t, ig)
	e.eks.settle()
	ig.Spec.EKSManaged.Configuration.Version = "9.99"
	_, err := e.p.Apply(context.Background(), ig)
	if !providers.IsSpecError(err) || !strings.Contains(err.Error(), "spec.eks-managed.configuration.version") || !strings.Contains(err.Error(), "9.99") {
		t.Fatalf("error %v, want a SpecError on version", err)
	}
}

func TestApplyUpdateInProgressElsewhereIsUpdating(t *testing.T) {
	e := newEnv()
	ig := managedGroup(v1alpha1.EKSManagedConfiguration{Subnets: []string{"subnet-a"}})
	e.apply(t, ig)
	e.eks.settle()
	// DescribeNodegroup said ACTIVE, but another update started before
	// ours: EKS refuses it as in progress.
	busy := &busyEKS{fakeEKS: e.eks}
	e.p.aws.EKS = busy
	ig.Spec.EKSManaged.MaxSize = 9
	obs := e.apply(t, ig)
	if !obs.Updating || busy.refused != 1 {
		t.Fatalf("observation %+v after a refused update (refused %d)", obs, busy.refused)
	}
}

// busyEKS refuses every configuration update as in progress.
type busyEKS struct {
	*fakeEKS
	refused int
}

func (b *busyEKS) UpdateNodegroupConfig(context.Context, *eks.UpdateNodegroupConfigInput, ...func(*eks.Options)) (*eks.UpdateNodegroupConfigOutput, error) {
	b.refused++
	return nil, inUse()
}

func TestApplyRefusesForeignGroups(t *testing.T) {
	e := newEnv()
	ig := managedGroup(v1alpha1.EKSManagedConfiguration{Subnets: []string{"subnet-a"}, InstanceType: "m5.large"})
	e.apply(t, ig)
	e.eks.settle()
	e.apply(t, ig) // ACTIVE alone: kept in Reads
	e.eks.takeCalls()

	e.eks.groups[ngName].Tags[ownership.TagInstanceGroup] = "team-b/web"
	_, err := e.p.Apply(context.Background(), ig)
	if !ownership.IsForeign(err) || !strings.Contains(err.Error(), "belongs to InstanceGroup team-b/web") {
		t.Fatalf("error %v, want a ForeignError naming the owner found", err)
	}
	e.eks.takeCalls()
	if _, err := e.p.Delete(context.Background(), ig); err != nil {
		t.Fatalf("Delete with a foreign node group of the same name: %v", err)
	}
	for _, c := range e.eks.takeCalls() {
		if strings.HasPrefix(c, "DeleteNodegroup") {
			t.Fatalf("Delete deleted a node group it does not own: calls %v", c)
		}
	}
	if e.eks.groups[ngName] == nil {
		t.Fatal("the foreign node group is gone")
	}
}

func TestApplyReportsMissingReferences(t *testing.T) {
	cases := []struct {
		name  string
		c     v1alpha1.EKSManagedConfiguration
		field string
	}{
		{"unknown subnet", v1alpha1.EKSManagedConfiguration{Subnets: []string{"subnet-a", "nope"}}, "spec.eks-managed.configuration.subnets"},
		{"unknown security group", v1alpha1.EKSManagedConfiguration{Subnets: []string{"subnet-a"}, KeyPairName: "k", SecurityGroups: []string{"sg-9"}}, "spec.eks-managed.configuration.securityGroups"},
		{"missing node role", v1alpha1.EKSManagedConfiguration{Subnets: []string{"subnet-a"}, NodeRole: "arn:aws:iam::1:role/missing"}, "spec.eks-managed.configuration.nodeRole"},
		{"malformed node role", v1alpha1.EKSManagedConfiguration{Subnets: []string{"subnet-a"}, NodeRole: "arn:aws:s3:::bucket"}, "spec.eks-managed.configuration.nodeRole"},
		{"missing cluster", v1alpha1.EKSManagedConfiguration{ClusterName: "staging", Subnets: []string{"subnet-a"}}, "spec.eks-managed.configuration.clusterName"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			_, err := newEnv().p.Apply(context.Background(), managedGroup(tc.c))
			if !providers.IsSpecError(err) || !strings.HasPrefix(err.Error(), tc.field+": ") {
				t.Fatalf("error %v, want a SpecError on %s", err, tc.field)
			}
		})
	}
}

func TestDeleteWaitsForTheNodeGroupThenDeletesTheOwnedRole(t *testing.T) {
	e := newEnv()
	ig := managedGroup(v1alpha1.EKSManagedConfiguration{Subnets: []string{"subnet-a"}})
	e.apply(t, ig)
	e.eks.settle()
	e.eks.takeCalls()
	ctx := context.Background()
	for i := 0; i < 2; i++ { // DELETING: asked once, then waited for
		if done, err := e.p.Delete(ctx, ig); done || err != nil {
			t.Fatalf("Delete while the node group exists: %v, %v", done, err)
		}
	}
	if calls := e.eks.takeCalls(); !reflect.DeepEqual(calls, []string{"DeleteNodegroup " + ngName}) {
		t.Fatalf("calls %v", calls)
	}
	if e.iam.roles[ngName] == nil {
		t.Fatal("the role was deleted before the node group was gone")
	}
	e.eks.settle()
	if done, err := e.p.Delete(ctx, ig); !done || err != nil {
		t.Fatalf("Delete once gone: %v, %v", done, err)
	}
	if e.iam.roles[ngName] != nil {
		t.Fatal("the created role is left")
	}
	if done, err := e.p.Delete(ctx, ig); !done || err != nil { // idempotent
		t.Fatalf("Delete again: %v, %v", done, err)
	}
}

func TestDeleteLeavesRolesItDidNotCreate(t *testing.T) {
	e := newEnv()
	e.iam.roles["byo"] = &fakeRole{policies: map[string]bool{}}
	e.iam.roles[ngName] = &fakeRole{policies: map[string]bool{}, // same name, someone else's
		tags: []iamtypes.Tag{{Key: awssdk.String(ownership.TagInstanceGroup), Value: awssdk.String("other/web")}}}
	ig := managedGroup(v1alpha1.EKSManagedConfiguration{Subnets: []string{"subnet-a"}, NodeRole: "arn:aws:iam::123456789012:role/byo"})
	e.apply(t, ig)
	e.eks.settle()
	ctx := context.Background()
	for done := false; !done; e.eks.settle() {
		var err error
		if done, err = e.p.Delete(ctx, ig); err != nil {
			t.Fatal(err)
		}
	}
	if e.iam.roles["byo"] == nil || e.iam.roles[ngName] == nil {
		t.Fatalf("Delete removed a role the group did not create: %v", e.iam.roles)
	}
}

// ngName is the node group (and created role) name of the test group.
var ngName = ownership.Name(ownership.LimitNodegroup, "prod", "team-a", "web")
