package rotation

// Deletion always ends (issue 26 item 2, issue 27): groups written in the
// original project's shapes, a namespace deleted after a boundary change
// during an admission outage, and groups deleted during a halted rollout
// all finish deleting within 2 minutes, leaving nothing in AWS.

import (
	"context"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/autoscaling"
	"github.com/aws/aws-sdk-go-v2/service/ec2"
	"github.com/aws/aws-sdk-go-v2/service/iam"
	. "github.com/onsi/gomega"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/instancemgr/instance-manager/api/v1alpha1"
	"github.com/instancemgr/instance-manager/boundaries"
	"github.com/instancemgr/instance-manager/boundaries/record"
	"github.com/instancemgr/instance-manager/providers/aws/ownership"
	"github.com/instancemgr/instance-manager/test/harness"
)

// originalShape is an InstanceGroup as the original project's end-to-end
// manifests write one (keikoproj instance-manager, test-bdd/templates):
// an explicit rolling update of one at a time, a warm pool of
// maxSize -1 (the group's max) and minSize 0, taints, an extra volume
// with mount options, every metric collected; launchTemplate sets
// spec.eks.type: LaunchTemplate. Cluster, image, subnets and security
// groups come from the boundaries, as for every tenant.
func originalShape(namespace, name string, launchTemplate bool) *unstructured.Unstructured {
	eks := map[string]any{
		"minSize":  int64(1),
		"maxSize":  int64(2),
		"warmPool": map[string]any{"maxSize": int64(-1), "minSize": int64(0)},
		"configuration": map[string]any{
			"instanceType": "t3.medium",
			"labels":       map[string]any{"team": namespace, "test": name},
			"taints": []any{map[string]any{
				"key": "node-role.kubernetes.io/" + name, "value": name, "effect": "NoSchedule",
			}},
			"volumes": []any{map[string]any{
				"name": "/dev/xvdb", "type": "gp2", "size": int64(30),
				"mountOptions": map[string]any{"fileSystem": "xfs", "mount": "/data"},
			}},
			"metricsCollection": []any{"all"},
		},
	}
	if launchTemplate {
		eks["type"] = "LaunchTemplate"
	}
	return &unstructured.Unstructured{Object: map[string]any{
		"apiVersion": v1alpha1.GroupVersion.String(),
		"kind":       "InstanceGroup",
		"metadata":   map[string]any{"namespace": namespace, "name": name, "labels": map[string]any{"controller-tools.k8s.io": "1.0"}},
		"spec": map[string]any{
			"provisioner": "eks",
			"strategy":    map[string]any{"type": "rollingUpdate", "rollingUpdate": map[string]any{"maxUnavailable": int64(1)}},
			"eks":         eks,
		},
	}}
}

// nothingInAWS checks that the group's Auto Scaling group (with its warm
// pool), launch template, role and instance profile are gone.
func nothingInAWS(t *testing.T, namespace, name string) {
	t.Helper()
	g := NewWithT(t)
	ctx := context.Background()
	asgName := ownership.Name(ownership.LimitLaunchTemplate, suite.Cloud.Cluster, namespace, name)
	roleName := ownership.Name(ownership.LimitIAMRole, suite.Cloud.Cluster, namespace, name)
	out, err := autoscaling.NewFromConfig(suite.Env.AWS).DescribeAutoScalingGroups(ctx,
		&autoscaling.DescribeAutoScalingGroupsInput{AutoScalingGroupNames: []string{asgName}})
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(out.AutoScalingGroups).To(BeEmpty(), "Auto Scaling group %s is deleted", asgName)
	_, err = ec2.NewFromConfig(suite.Env.AWS).DescribeLaunchTemplates(ctx, &ec2.DescribeLaunchTemplatesInput{LaunchTemplateNames: []string{asgName}})
	g.Expect(err).To(HaveOccurred(), "launch template %s is deleted", asgName)
	_, err = iam.NewFromConfig(suite.Env.AWS).GetRole(ctx, &iam.GetRoleInput{RoleName: aws.String(roleName)})
	g.Expect(err).To(MatchError(ContainSubstring("NoSuchEntity")), "role %s is deleted", roleName)
	_, err = iam.NewFromConfig(suite.Env.AWS).GetInstanceProfile(ctx, &iam.GetInstanceProfileInput{InstanceProfileName: aws.String(roleName)})
	g.Expect(err).To(MatchError(ContainSubstring("NoSuchEntity")), "instance profile %s is deleted", roleName)
}

// The original project's launch-template and warm-pool groups (issue 27:
// their finalizer's release was refused as a spec change, the zero-valued
// warmPool.minSize dropped by the Go types) become Ready and, deleted,
// finish within 2 minutes with nothing left in AWS.
func TestOriginalShapesDeleteToNothingInAWS(t *testing.T) {
	suite.Require(t)
	g := NewWithT(t)
	ctx := context.Background()
	suite.SetBoundaries(t, suite.Cloud.Boundaries(suite.Cloud.AMIs[0], 5))
	const ns = "e2e-original-shapes"
	suite.Namespace(t, ns)
	shapes := []*unstructured.Unstructured{originalShape(ns, "launchtemplate", true), originalShape(ns, "rolling-wp", false)}
	var groups []*v1alpha1.InstanceGroup
	for _, u := range shapes {
		g.Expect(suite.Admin.Create(ctx, u)).To(Succeed())
		ig := &v1alpha1.InstanceGroup{}
		ig.Namespace, ig.Name = ns, u.GetName()
		groups = append(groups, ig)
	}
	for _, ig := range groups {
		suite.WaitReady(t, ig, 3*time.Minute)
		stored := &unstructured.Unstructured{}
		stored.SetGroupVersionKind(v1alpha1.GroupVersion.WithKind("InstanceGroup"))
		g.Expect(suite.Admin.Get(ctx, client.ObjectKeyFromObject(ig), stored)).To(Succeed())
		_, found, _ := unstructured.NestedInt64(stored.Object, "spec", "eks", "warmPool", "minSize")
		g.Expect(found).To(BeTrue(), "%s/%s is stored with spec.eks.warmPool.minSize: 0 (the premise)", ig.Namespace, ig.Name)
	}

	deleted := time.Now()
	for _, ig := range groups {
		g.Expect(suite.Admin.Delete(ctx, ig)).To(Succeed())
	}
	harness.WaitGone(t, suite.Admin, groups, harness.DeleteWithin)
	t.Logf("both groups deleted in %s", time.Since(deleted).Round(time.Second))
	for _, ig := range groups {
		nothingInAWS(t, ig.Namespace, ig.Name)
	}
}

// The admin changes the default image and adds a quota, then a tenant's
// namespace of three groups (minSize 0) is deleted while no webhook
// replica answers: the groups and the namespace finish deleting within 2
// minutes (issue 26's report: the groups stayed Deleting and the
// namespace Terminating for good).
func TestNamespaceDeletedAfterABoundaryChangeDuringAnAdmissionOutage(t *testing.T) {
	suite.Require(t)
	g := NewWithT(t)
	ctx := context.Background()
	suite.SetBoundaries(t, suite.Cloud.Boundaries(suite.Cloud.AMIs[0], 5))
	const ns = "e2e-delete-outage"
	suite.Namespace(t, ns)
	var groups []*v1alpha1.InstanceGroup
	for _, name := range []string{"a", "b", "c"} {
		ig := harness.ShortGroup(ns, name, 0, 2)
		suite.Create(t, ig)
		groups = append(groups, ig)
	}
	for _, ig := range groups {
		suite.WaitReady(t, ig, 3*time.Minute)
	}

	// A new default image (the fan-out recomputes every group's spec) and
	// a quota for the namespace.
	changed := suite.Cloud.Boundaries(suite.Cloud.AMIs[1], 5)
	changed["quotas"] = "perNamespace: {maxGroups: 100}\nnamespaces:\n  " + ns + ": {maxGroups: 3, maxSize: 2}\n"
	suite.SetBoundaries(t, changed)
	harness.WebhooksUnreachable(t, suite.Admin)
	g.Eventually(func() error {
		return suite.Admin.Create(ctx, harness.ShortGroup(ns, "while-down", 0, 1), client.DryRunAll)
	}, 30*time.Second, 250*time.Millisecond).Should(MatchError(ContainSubstring("failed calling webhook")), "the outage is real")

	deleted := time.Now()
	g.Expect(suite.Admin.Delete(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}})).To(Succeed())
	harness.WaitGone(t, suite.Admin, groups, harness.DeleteWithin)
	g.Eventually(func() bool {
		return apierrors.IsNotFound(suite.Admin.Get(ctx, client.ObjectKey{Name: ns}, &corev1.Namespace{}))
	}, harness.DeleteWithin-time.Since(deleted), time.Second).Should(BeTrue(), "namespace %s is deleted", ns)
	t.Logf("namespace and groups deleted in %s", time.Since(deleted).Round(time.Second))
	for _, ig := range groups {
		nothingInAWS(t, ig.Namespace, ig.Name)
	}
}

// During a halted boundary rollout (the canary's new image never joins),
// the canary, mid-rotation on the failed revision, and a group held on the
// last good revision are deleted: both finish within 2 minutes.
func TestGroupsDeletedDuringAHaltedRolloutFinishDeleting(t *testing.T) {
	suite.Require(t)
	g := NewWithT(t)
	ctx := context.Background()
	startFrom(t, suite.Cloud.AMIs[0], rolloutBoundaries(suite.Cloud.AMIs[0], "e2e-delhalt-canary", "5s", "45s"))
	canary, others := rolloutGroups(t, "e2e-delhalt")

	suite.Env.Bridge.SetNeverJoinImages(suite.Cloud.AMIs[2])
	t.Cleanup(func() { suite.Env.Bridge.SetNeverJoinImages() })
	broken := rolloutBoundaries(suite.Cloud.AMIs[2], "e2e-delhalt-canary", "5s", "45s")
	target := boundaries.Revision(broken)
	suite.SetBoundaries(t, broken)
	waitRecord(t, target, record.PhaseHalted, 5*time.Minute)

	gone := []*v1alpha1.InstanceGroup{canary, others[0]}
	deleted := time.Now()
	for _, ig := range gone {
		g.Expect(suite.Admin.Delete(ctx, ig)).To(Succeed())
	}
	harness.WaitGone(t, suite.Admin, gone, harness.DeleteWithin)
	t.Logf("deleted in %s during the halted rollout", time.Since(deleted).Round(time.Second))
	for _, ig := range gone {
		nothingInAWS(t, ig.Namespace, ig.Name)
	}
}
