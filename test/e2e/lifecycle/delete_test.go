package lifecycle

import (
	"context"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/service/autoscaling"
	. "github.com/onsi/gomega"
	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/client-go/rest"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/instancemgr/instance-manager/api/v1alpha1"
	"github.com/instancemgr/instance-manager/reconciler/instancegroup"
	"github.com/instancemgr/instance-manager/test/harness"
)

func scalingGroupExists(t *testing.T, name string) bool {
	t.Helper()
	out, err := autoscaling.NewFromConfig(suite.Env.AWS).DescribeAutoScalingGroups(context.Background(),
		&autoscaling.DescribeAutoScalingGroupsInput{AutoScalingGroupNames: []string{name}})
	if err != nil {
		t.Fatalf("DescribeAutoScalingGroups %s: %v", name, err)
	}
	return len(out.AutoScalingGroups) > 0
}

// Deleting a group drains its nodes through the Eviction API before its
// Auto Scaling group goes: an app of 4 replicas under a budget of
// minAvailable 3 moves to the team's other group with never fewer than 3
// pods available (issue 15: the force-delete took it to 0).
func TestDeleteDrainsWithinThePodDisruptionBudget(t *testing.T) {
	suite.Require(t)
	g := NewWithT(t)
	ctx := context.Background()
	suite.SetBoundaries(t, suite.Cloud.Boundaries(suite.Cloud.AMIs[0], 5))
	suite.Namespace(t, "e2e-delete")
	old := harness.ShortGroup("e2e-delete", "old", 2, 2)
	suite.Create(t, old)
	oldReady := suite.WaitReady(t, old, 3*time.Minute)
	d := suite.TeamApp(t, "e2e-delete", 4, intstr.FromInt32(3))
	next := harness.ShortGroup("e2e-delete", "next", 2, 2)
	suite.Create(t, next)
	suite.WaitReady(t, next, 3*time.Minute)
	// Every replica starts on the old group's nodes (the next group came later).
	var oldNodes []string
	for _, n := range suite.GroupNodes(t, old) {
		oldNodes = append(oldNodes, n.Name)
	}
	g.Expect(suite.PodNodes(t, "e2e-delete")).To(HaveEach(BeElementOf(oldNodes)))

	stop, done := make(chan struct{}), make(chan struct{})
	minPods, samples := int32(1<<30), 0
	go func() {
		defer close(done)
		for {
			select {
			case <-stop:
				return
			case <-time.After(100 * time.Millisecond):
			}
			if n := suite.AvailableReplicas(d); n >= 0 {
				minPods, samples = min(minPods, n), samples+1
			}
		}
	}()
	g.Expect(suite.Admin.Delete(ctx, old)).To(Succeed())
	harness.WaitGone(t, suite.Admin, []*v1alpha1.InstanceGroup{old}, 4*time.Minute)
	g.Expect(scalingGroupExists(t, oldReady.Status.ActiveScalingGroupName)).To(BeFalse(), "the old group's Auto Scaling group is deleted")
	// Sampling goes on until the app runs in full on the next group's
	// nodes: pods killed with their nodes (no drain) would count as
	// available until the pod garbage collector removes them, then all at
	// once not.
	var nextNodes []string
	for _, n := range suite.GroupNodes(t, next) {
		nextNodes = append(nextNodes, n.Name)
	}
	g.Eventually(func(g Gomega) {
		nodes := suite.PodNodes(t, "e2e-delete")
		g.Expect(nodes).To(HaveLen(4))
		g.Expect(nodes).To(HaveEach(BeElementOf(nextNodes)))
		g.Expect(suite.AvailableReplicas(d)).To(BeEquivalentTo(4))
	}, 2*time.Minute, 500*time.Millisecond).Should(Succeed(), "the app moved to the next group")
	close(stop)
	<-done
	g.Expect(samples).To(BeNumerically(">", 10))
	g.Expect(minPods).To(BeNumerically(">=", 3), "the PodDisruptionBudget (minAvailable 3 of 4) held at every sample")
}

// A delete whose drain a budget never allows is reported (Warning Event
// and Deleting condition DrainBlocked naming the node and the pod) and
// retried, not forced; the force-delete annotation, once the admin shares
// it with tenants, deletes the group without the drain.
func TestDeleteBlockedDrainIsReportedThenForceDeleted(t *testing.T) {
	suite.Require(t)
	g := NewWithT(t)
	ctx := context.Background()
	suite.SetBoundaries(t, boundariesSharingForceDelete())
	suite.Namespace(t, "e2e-delete-blocked")
	ig := harness.ShortGroup("e2e-delete-blocked", "pinned", 1, 1)
	suite.Create(t, ig)
	ready := suite.WaitReady(t, ig, 3*time.Minute)
	d := suite.TeamApp(t, "e2e-delete-blocked", 1, intstr.FromInt32(1)) // never allows an eviction

	g.Expect(suite.Admin.Delete(ctx, ig)).To(Succeed())
	// --drain-timeout is 15s in this suite.
	event, err := harness.WaitForEvent(ctx, suite.Admin, ig.Namespace, ig.Name, instancegroup.ReasonDrainBlocked, "could not be drained", 2*time.Minute)
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(event.Type).To(Equal(corev1.EventTypeWarning))
	g.Expect(event.Note).To(ContainSubstring("e2e-delete-blocked/team-app-"))
	// The Event is recorded before the status that says the same is
	// written: the condition is waited for, not read once.
	var cur *v1alpha1.InstanceGroup
	var c *metav1.Condition
	g.Eventually(func() string {
		cur = suite.Get(t, ig)
		if c = meta.FindStatusCondition(cur.Status.Conditions, v1alpha1.ConditionDeleting); c == nil {
			return "no Deleting condition"
		}
		return c.Reason
	}, harness.ConvergeTimeout, harness.PollInterval).Should(Equal(instancegroup.ReasonDrainBlocked))
	node := suite.GroupNodes(t, ig)[0]
	g.Expect(c.Message).To(And(ContainSubstring("node "+node.Name), ContainSubstring("e2e-delete-blocked/team-app-"), ContainSubstring(v1alpha1.AnnotationForceDelete)))
	g.Expect(cur.Status.CurrentState).To(Equal(v1alpha1.StateDeleting))
	g.Expect(node.Spec.Unschedulable).To(BeTrue(), "the node stays cordoned while its drain is retried")

	// Retried, not forced: a while later the pod still runs and the group
	// and its Auto Scaling group are still there.
	g.Consistently(func() int32 { return suite.AvailableReplicas(d) }, 20*time.Second, time.Second).Should(BeEquivalentTo(1))
	g.Expect(scalingGroupExists(t, ready.Status.ActiveScalingGroupName)).To(BeTrue())
	g.Expect(suite.Get(t, ig).DeletionTimestamp).NotTo(BeNil())

	// The tenant forces it: its pods are killed without eviction, as the
	// annotation says, which the audit is told.
	suite.ExpectUndrained(t, ig)
	cur = suite.Get(t, ig)
	patch := client.MergeFrom(cur.DeepCopy())
	cur.Annotations[v1alpha1.AnnotationForceDelete] = "true"
	g.Expect(tenantClient(t, ig.Namespace).Patch(ctx, cur, patch)).To(Succeed())
	_, err = harness.WaitForEvent(ctx, suite.Admin, ig.Namespace, ig.Name, instancegroup.ReasonForceDelete, "without draining", time.Minute)
	g.Expect(err).NotTo(HaveOccurred())
	harness.WaitGone(t, suite.Admin, []*v1alpha1.InstanceGroup{ig}, 3*time.Minute)
	g.Expect(scalingGroupExists(t, ready.Status.ActiveScalingGroupName)).To(BeFalse())
}

// tenantClient returns a client acting as a tenant of namespace: a user
// who may manage InstanceGroups there and nothing else.
func tenantClient(t *testing.T, namespace string) client.Client {
	t.Helper()
	ctx := context.Background()
	user := "tenant-of-" + namespace
	role := &rbacv1.Role{ObjectMeta: metav1.ObjectMeta{Namespace: namespace, Name: "instancegroups"},
		Rules: []rbacv1.PolicyRule{{APIGroups: []string{v1alpha1.GroupVersion.Group}, Resources: []string{"instancegroups"},
			Verbs: []string{"get", "list", "watch", "create", "update", "patch", "delete"}}}}
	binding := &rbacv1.RoleBinding{ObjectMeta: metav1.ObjectMeta{Namespace: namespace, Name: "instancegroups"},
		RoleRef:  rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "Role", Name: role.Name},
		Subjects: []rbacv1.Subject{{Kind: rbacv1.UserKind, APIGroup: rbacv1.GroupName, Name: user}}}
	for _, o := range []client.Object{role, binding} {
		if err := suite.Admin.Create(ctx, o); err != nil && !apierrors.IsAlreadyExists(err) {
			t.Fatal(err)
		}
	}
	cfg := rest.CopyConfig(suite.Env.Config)
	cfg.Impersonate = rest.ImpersonationConfig{UserName: user, Groups: []string{"system:authenticated"}}
	c, err := client.New(cfg, client.Options{Scheme: suite.Admin.Scheme()})
	if err != nil {
		t.Fatal(err)
	}
	return c
}

// boundariesSharingForceDelete is the test cloud's boundaries (first AMI,
// 5 concurrent upgrades) with the force-delete annotation shared with
// tenants, so that a tenant can force the delete of a blocked group.
func boundariesSharingForceDelete() map[string]string {
	data := suite.Cloud.Boundaries(suite.Cloud.AMIs[0], 5)
	data["sharedAnnotations"] = "- " + v1alpha1.AnnotationForceDelete + "\n"
	return data
}
