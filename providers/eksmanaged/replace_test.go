package eksmanaged

import (
	"context"
	"fmt"
	"reflect"
	"slices"
	"strings"
	"testing"

	awssdk "github.com/aws/aws-sdk-go-v2/aws"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/instancemgr/instance-manager/api/v1alpha1"
	"github.com/instancemgr/instance-manager/providers"
	"github.com/instancemgr/instance-manager/providers/aws/ownership"
)

// record stores what the reconciler would: the observed node group names.
func record(ig *v1alpha1.InstanceGroup, obs *providers.Observation) {
	ig.Status.Provisioner = v1alpha1.ProvisionerEKSManaged
	ig.Status.ActiveScalingGroupName = obs.GroupName
	ig.Status.RetiringScalingGroupNames = obs.Retiring
	ig.Status.CreateFailure = obs.CreateFailure
}

// step applies, records the status and returns the observation and the
// mutating calls made.
func (e *env) step(t *testing.T, ig *v1alpha1.InstanceGroup) (*providers.Observation, []string) {
	t.Helper()
	obs := e.apply(t, ig)
	record(ig, obs)
	return obs, e.eks.takeCalls()
}

// activeGroup is a group whose first node group (m5.large) is ACTIVE with
// a desired size of 4 (the cluster autoscaler's).
func activeGroup(t *testing.T, e *env) *v1alpha1.InstanceGroup {
	t.Helper()
	ig := managedGroup(v1alpha1.EKSManagedConfiguration{Subnets: []string{"subnet-a"}, InstanceType: "m5.large",
		Tags: []map[string]string{{"key": "team", "value": "a"}}})
	e.step(t, ig)
	e.eks.settle()
	e.eks.groups[ngName].ScalingConfig.DesiredSize = awssdk.Int32(4)
	if obs, calls := e.step(t, ig); !obs.Active || obs.Updating || calls != nil {
		t.Fatalf("first node group not settled: %+v, calls %v", obs, calls)
	}
	return ig
}

func withInstanceType(ig *v1alpha1.InstanceGroup, it string) string {
	ig.Spec.EKSManaged.Configuration.InstanceType = it
	want, err := desiredNodegroup(ig, refs{subnets: []string{"subnet-a"}, roleARN: "arn:aws:iam::123456789012:role/" + ngName})
	if err != nil {
		panic(err)
	}
	want.template = &templateRef{name: templateName(ig)} // the controller's launch template
	return replacementName(ig, want.shape())
}

func addNodes(t *testing.T, e *env, nodegroup, prefix string, n int, ready bool) {
	t.Helper()
	status := map[bool]corev1.ConditionStatus{true: corev1.ConditionTrue, false: corev1.ConditionFalse}[ready]
	for i := range n {
		node := &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: fmt.Sprintf("%s-%d", prefix, i), Labels: map[string]string{LabelNodegroup: nodegroup}},
			Status: corev1.NodeStatus{Conditions: []corev1.NodeCondition{{Type: corev1.NodeReady, Status: status}}}}
		if err := e.nodes.Create(context.Background(), node); err != nil {
			t.Fatal(err)
		}
	}
}

func TestApplyReplacesAShapeChangeBlueGreen(t *testing.T) {
	e := newEnv()
	ig := activeGroup(t, e)
	next := withInstanceType(ig, "m5.xlarge")
	if next == ngName || len(next) > 63 {
		t.Fatalf("replacement name %q", next)
	}

	// A new node group of the new shape, as large as the one it replaces.
	obs, calls := e.step(t, ig)
	if !reflect.DeepEqual(calls, []string{"CreateNodegroup " + next}) {
		t.Fatalf("calls %v, want the replacement created", calls)
	}
	ng := e.eks.groups[next]
	if !reflect.DeepEqual(ng.InstanceTypes, []string{"m5.xlarge"}) || awssdk.ToInt32(ng.ScalingConfig.DesiredSize) != 4 ||
		ng.Tags[ownership.TagInstanceGroup] != "team-a/web" || *ng.NodeRole != *e.eks.groups[ngName].NodeRole {
		t.Fatalf("replacement: types %v desired %d tags %v role %s", ng.InstanceTypes, *ng.ScalingConfig.DesiredSize, ng.Tags, *ng.NodeRole)
	}
	if obs.GroupName != next || !slices.Equal(obs.Retiring, []string{ngName}) || !obs.Updating || obs.Active ||
		!strings.Contains(obs.Message, "replacing EKS node group "+ngName+" with "+next+" (instanceType [m5.large] -> [m5.xlarge])") {
		t.Fatalf("observation while creating the replacement %+v", obs)
	}

	// CREATING: nothing is deleted.
	if obs, calls = e.step(t, ig); calls != nil || !strings.Contains(obs.Message, "waiting for "+next+" to be ACTIVE (it is CREATING)") {
		t.Fatalf("while CREATING: calls %v, observation %+v", calls, obs)
	}

	// ACTIVE, but some of its nodes are not Ready yet.
	e.eks.settle()
	addNodes(t, e, next, "ready", 2, true)
	addNodes(t, e, next, "late", 1, false)
	addNodes(t, e, ngName, "old", 4, true) // the old node group's do not count
	if obs, calls = e.step(t, ig); calls != nil || !obs.Updating || !strings.Contains(obs.Message, "2 of 4 desired Ready") {
		t.Fatalf("with 2 of 4 nodes Ready: calls %v, observation %+v", calls, obs)
	}
	addNodes(t, e, next, "joined", 2, true)

	// Every node Ready: the old node group is deleted (no Disruptions in the context: nothing to drain first).
	obs, calls = e.step(t, ig)
	if !reflect.DeepEqual(calls, []string{"UpdateNodegroupConfig", "DeleteNodegroup " + ngName}) || !obs.Updating || !slices.Equal(obs.Retiring, []string{ngName}) ||
		!strings.Contains(obs.Message, "deleting "+ngName) {
		t.Fatalf("calls %v, observation %+v", calls, obs)
	}
	if obs, calls = e.step(t, ig); calls != nil || !obs.Updating {
		t.Fatalf("while the old node group is DELETING: calls %v, observation %+v", calls, obs)
	}

	// Gone: the group is the new node group alone.
	e.eks.settle()
	obs, calls = e.step(t, ig)
	if calls != nil || obs.Updating || !obs.Active || obs.Retiring != nil || obs.GroupName != next || obs.Message != "" {
		t.Fatalf("after the replacement: calls %v, observation %+v", calls, obs)
	}
	if _, ok := e.eks.groups[ngName]; ok || len(e.eks.groups) != 1 {
		t.Fatalf("node groups left: %v", slices.Sorted(func(yield func(string) bool) {
			for k := range e.eks.groups {
				yield(k)
			}
		}))
	}
}

func TestApplyReplacementContinuesAfterARestart(t *testing.T) {
	e := newEnv()
	ig := activeGroup(t, e)
	next := withInstanceType(ig, "m5.xlarge")
	stale := ig.DeepCopy() // the status as stored before the replacement began
	if _, calls := e.step(t, ig); !reflect.DeepEqual(calls, []string{"CreateNodegroup " + next}) {
		t.Fatalf("calls %v", calls)
	}
	e.eks.settle()

	// A new process (nothing kept in memory) with the stale status: the
	// replacement is found, not created again, and the old node group goes.
	restarted := func() *Provisioner { return New(e.p.aws, nil, e.nodes, Options{}) }
	e.p = restarted()
	obs, calls := e.step(t, stale)
	if !reflect.DeepEqual(calls, []string{"UpdateNodegroupConfig", "DeleteNodegroup " + ngName}) || obs.GroupName != next || !slices.Equal(obs.Retiring, []string{ngName}) {
		t.Fatalf("after a restart: calls %v, observation %+v", calls, obs)
	}

	// Another restart while EKS deletes it: nothing more is sent.
	e.p = restarted()
	if obs, calls = e.step(t, stale); calls != nil || !obs.Updating || obs.GroupName != next {
		t.Fatalf("after a restart during the delete: calls %v, observation %+v", calls, obs)
	}
	e.eks.settle()
	if obs, calls = e.step(t, stale); calls != nil || obs.Updating || obs.Retiring != nil || !obs.Active {
		t.Fatalf("after the old node group is gone: calls %v, observation %+v", calls, obs)
	}
}

func TestApplyShapeChangedAgainDuringAReplacement(t *testing.T) {
	e := newEnv()
	ig := activeGroup(t, e)
	second := withInstanceType(ig, "m5.xlarge")
	e.step(t, ig) // creates second

	// Changed again before second is ACTIVE: a third, and both others retire.
	third := withInstanceType(ig, "m5.2xlarge")
	obs, calls := e.step(t, ig)
	if !reflect.DeepEqual(calls, []string{"CreateNodegroup " + third}) || !slices.Equal(obs.Retiring, []string{ngName, second}) {
		t.Fatalf("calls %v, observation %+v", calls, obs)
	}
	e.eks.settle()
	obs, calls = e.step(t, ig)
	slices.Sort(calls)
	if want := []string{"DeleteNodegroup " + ngName, "DeleteNodegroup " + second, "UpdateNodegroupConfig", "UpdateNodegroupConfig"}; !slices.Equal(calls, want) || obs.GroupName != third {
		t.Fatalf("calls %v, want %v; observation %+v", calls, want, obs)
	}

	// Changed back to the first shape while a replacement is underway: the
	// first node group, still ACTIVE, is kept and the replacement deleted.
	e2 := newEnv()
	ig = activeGroup(t, e2)
	second = withInstanceType(ig, "m5.xlarge")
	e2.step(t, ig)
	withInstanceType(ig, "m5.large")
	obs, calls = e2.step(t, ig)
	if !reflect.DeepEqual(calls, []string{"DeleteNodegroup " + second}) || obs.GroupName != ngName || !slices.Equal(obs.Retiring, []string{second}) {
		t.Fatalf("reverted: calls %v, observation %+v", calls, obs)
	}
}

func TestApplyUpdatesTagsInPlace(t *testing.T) {
	e := newEnv()
	ig := activeGroup(t, e)
	e.eks.groups[ngName].Tags["added-by-hand"] = "yes"
	ig.Spec.EKSManaged.Configuration.Tags = []map[string]string{{"key": "team", "value": "b"}, {"key": "cost-center", "value": "42"}}
	obs, calls := e.step(t, ig)
	if want := []string{"TagResource cost-center,instancemgr.keikoproj.io/managed-tags,team"}; !slices.Equal(calls, want) {
		t.Fatalf("calls %v, want %v", calls, want)
	}
	if obs.GroupName != ngName || obs.Retiring != nil || !obs.Active || obs.Updating || !strings.Contains(obs.Message, "tags (set cost-center") {
		t.Fatalf("observation %+v", obs)
	}

	ig.Spec.EKSManaged.Configuration.Tags = []map[string]string{{"key": "cost-center", "value": "42"}}
	_, calls = e.step(t, ig)
	if want := []string{"TagResource instancemgr.keikoproj.io/managed-tags", "UntagResource team"}; !slices.Equal(calls, want) {
		t.Fatalf("calls %v, want %v", calls, want)
	}
	tags := e.eks.groups[ngName].Tags
	if tags["added-by-hand"] != "yes" || tags["cost-center"] != "42" || tags["team"] != "" || tags[ownership.TagInstanceGroup] != "team-a/web" {
		t.Fatalf("tags %v: a tag added by hand or an ownership tag removed, or the spec's not applied", tags)
	}
	if _, calls = e.step(t, ig); calls != nil {
		t.Fatalf("calls %v with the tags in step", calls)
	}
}

func TestDeleteDuringAReplacementDeletesEveryNodeGroup(t *testing.T) {
	e := newEnv()
	ig := activeGroup(t, e)
	next := withInstanceType(ig, "m5.xlarge")
	e.step(t, ig)
	ctx := context.Background()
	done, err := e.p.Delete(ctx, ig)
	calls := e.eks.takeCalls()
	slices.Sort(calls)
	if done || err != nil || !slices.Equal(calls, []string{"DeleteNodegroup " + ngName, "DeleteNodegroup " + next}) {
		t.Fatalf("Delete: %v, %v, calls %v", done, err, calls)
	}
	e.eks.settle()
	if done, err = e.p.Delete(ctx, ig); !done || err != nil || len(e.eks.groups) != 0 || len(e.iam.roles) != 0 {
		t.Fatalf("Delete once gone: %v, %v, node groups %d, roles %v", done, err, len(e.eks.groups), e.iam.roles)
	}
}

func TestApplyNeverTakesAForeignReplacementName(t *testing.T) {
	e := newEnv()
	ig := activeGroup(t, e)
	next := withInstanceType(ig, "m5.xlarge")
	foreign := *e.eks.groups[ngName]
	foreign.NodegroupName, foreign.Tags = awssdk.String(next), map[string]string{ownership.TagInstanceGroup: "team-b/web"}
	e.eks.groups[next] = &foreign
	_, err := e.p.Apply(context.Background(), ig)
	if err == nil || !strings.Contains(err.Error(), "team-b/web") {
		t.Fatalf("error %v, want the foreign owner named", err)
	}
	if calls := e.eks.takeCalls(); calls != nil {
		t.Fatalf("calls %v", calls)
	}
}

func TestReplacementNamesAndShapeHash(t *testing.T) {
	s := shape{NodeRole: "arn:aws:iam::1:role/nodes", Subnets: []string{"subnet-a", "subnet-b"}, InstanceTypes: []string{"m5.large"},
		AmiType: "AL2_x86_64", DiskSize: 20, CapacityType: "ON_DEMAND", KeyPair: "ops", SourceSGs: []string{"sg-1"}}
	// Pinned: a change of this hash replaces every node group whose spec
	// sets these fields. Change it only on purpose.
	if got := s.hash(); got != "98fbf7f2" {
		t.Fatalf("shape hash %s changed", got)
	}
	ig := managedGroup(v1alpha1.EKSManagedConfiguration{ClusterName: "a-very-long-cluster-name-used-by-the-platform-team"})
	ig.Name = "web.frontend.workers-with-a-long-name"
	name := replacementName(ig, s)
	own := ownName(ig)
	if len(name) > 63 || !own(name) || !own(nodegroupName(ig)) || own(name+"0") || own(nodegroupName(ig)+"-x") {
		t.Fatalf("replacement %q (%d characters), base %q", name, len(name), nodegroupName(ig))
	}
	other := managedGroup(v1alpha1.EKSManagedConfiguration{ClusterName: ig.Spec.EKSManaged.Configuration.ClusterName})
	other.Name = "web-frontend-workers-with-a-long-name"
	if ownName(other)(name) {
		t.Errorf("another group's name pattern accepts %q", name)
	}
}

func TestLegacyGroupKeepsItsRoleAcrossAReplacement(t *testing.T) {
	ig := managedGroup(v1alpha1.EKSManagedConfiguration{})
	ig.Status.Provisioner = v1alpha1.ProvisionerEKSManaged
	ig.Status.ActiveScalingGroupName = ownership.EKSName(63, "prod", "team-a", "web")
	role := roleName(ig)
	if role != ownership.EKSName(64, "prod", "team-a", "web") {
		t.Fatalf("legacy role %q", role)
	}
	ig.Status.ActiveScalingGroupName = replacementName(ig, shape{CapacityType: "SPOT"})
	if !strings.HasPrefix(ig.Status.ActiveScalingGroupName, "prod-team-a-web-") || roleName(ig) != role || !ownName(ig)(ig.Status.ActiveScalingGroupName) {
		t.Fatalf("after a replacement (%s): role %q, want %q", ig.Status.ActiveScalingGroupName, roleName(ig), role)
	}
}

func TestReplacingFields(t *testing.T) {
	base := v1alpha1.EKSManagedConfiguration{InstanceType: "m5.large", Subnets: []string{"a", "b"}, KeyPairName: "k", SecurityGroups: []string{"sg"}}
	cases := []struct {
		name string
		edit func(*v1alpha1.EKSManagedConfiguration)
		want []string
	}{
		{"mutable fields only", func(c *v1alpha1.EKSManagedConfiguration) {
			c.Labels, c.Tags, c.Version, c.ReleaseVersion = map[string]string{"a": "b"}, []map[string]string{{"key": "k", "value": "v"}}, "1.30", "x"
		}, nil},
		{"subnet order", func(c *v1alpha1.EKSManagedConfiguration) { c.Subnets = []string{"b", "a"} }, nil},
		{"capacity type spelled out as the default", func(c *v1alpha1.EKSManagedConfiguration) { c.CapacityType = "on_demand" }, nil},
		{"instance type left to EKS", func(c *v1alpha1.EKSManagedConfiguration) { c.InstanceType = "" }, nil},
		{"instance type", func(c *v1alpha1.EKSManagedConfiguration) { c.InstanceType = "m5.xlarge" }, []string{"instanceType"}},
		{"instance types", func(c *v1alpha1.EKSManagedConfiguration) { c.InstanceTypes = []string{"m5.large", "m6i.large"} }, []string{"instanceTypes"}},
		{"several", func(c *v1alpha1.EKSManagedConfiguration) {
			c.NodeRole, c.Subnets, c.AmiType, c.VolSize, c.CapacityType, c.KeyPairName, c.SecurityGroups = "arn", []string{"c"}, "AL2_ARM_64", 50, "SPOT", "k2", nil
		}, []string{"nodeRole", "subnets", "amiType", "volSize", "capacityType", "keyPairName", "securityGroups"}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			now := base
			tc.edit(&now)
			if got := ReplacingFields(&base, &now); !slices.Equal(got, tc.want) {
				t.Fatalf("fields %v, want %v", got, tc.want)
			}
		})
	}
}
