package lifecycle

// The original project's shapes (issue 27 item 4): each group written as
// keikoproj instance-manager's end-to-end manifests write it
// (test-bdd/templates) is created, becomes Ready, rotates once, and,
// deleted, finishes within 2 minutes with nothing left in AWS. eks-managed,
// eks-fargate and the crd strategy have their own tests (managed_test.go,
// compat_test.go, crd_test.go).

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/autoscaling"
	"github.com/aws/aws-sdk-go-v2/service/ec2"
	"github.com/aws/aws-sdk-go-v2/service/eks"
	"github.com/aws/aws-sdk-go-v2/service/ssm"
	. "github.com/onsi/gomega"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/instancemgr/instance-manager/api/v1alpha1"
	"github.com/instancemgr/instance-manager/providers/aws/ownership"
	"github.com/instancemgr/instance-manager/test/harness"
)

// originalShape is an InstanceGroup as the original project's end-to-end
// manifests write one: an explicit rolling update of one at a time, taints,
// an extra volume with mount options, every metric collected; edit adds
// the shape's own fields to spec.eks. Cluster, image, subnets and security
// groups come from the boundaries, as for every tenant.
func originalShape(namespace, name string, edit func(eks map[string]any)) *unstructured.Unstructured {
	spec := map[string]any{
		"minSize": int64(1),
		"maxSize": int64(2),
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
	if edit != nil {
		edit(spec)
	}
	return &unstructured.Unstructured{Object: map[string]any{
		"apiVersion": v1alpha1.GroupVersion.String(),
		"kind":       "InstanceGroup",
		"metadata":   map[string]any{"namespace": namespace, "name": name, "labels": map[string]any{"controller-tools.k8s.io": "1.0"}},
		"spec": map[string]any{
			"provisioner": "eks",
			"strategy":    map[string]any{"type": "rollingUpdate", "rollingUpdate": map[string]any{"maxUnavailable": int64(1)}},
			"eks":         spec,
		},
	}}
}

// publishedImage is the EKS-optimized Amazon Linux 2 x86_64 AMI that AWS
// recommends for the suite cluster's Kubernetes version (what `image:
// latest` resolves to).
func publishedImage(t *testing.T) string {
	t.Helper()
	ctx := context.Background()
	cluster, err := eks.NewFromConfig(suite.Env.AWS).DescribeCluster(ctx, &eks.DescribeClusterInput{Name: aws.String(suite.Cloud.Cluster)})
	if err != nil {
		t.Fatalf("DescribeCluster %s: %v", suite.Cloud.Cluster, err)
	}
	param := v1alpha1.LatestImageParameter(aws.ToString(cluster.Cluster.Version), "", "")
	out, err := ssm.NewFromConfig(suite.Env.AWS).GetParameter(ctx, &ssm.GetParameterInput{Name: aws.String(param)})
	if err != nil {
		t.Fatalf("GetParameter %s: %v", param, err)
	}
	return aws.ToString(out.Parameter.Value)
}

// groupImages is the set of AMIs the group's in-service instances run.
func groupImages(t *testing.T, namespace, name string) map[string]int {
	t.Helper()
	g := NewWithT(t)
	ctx := context.Background()
	asgName := ownership.Name(ownership.LimitLaunchTemplate, suite.Cloud.Cluster, namespace, name)
	out, err := autoscaling.NewFromConfig(suite.Env.AWS).DescribeAutoScalingGroups(ctx,
		&autoscaling.DescribeAutoScalingGroupsInput{AutoScalingGroupNames: []string{asgName}})
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(out.AutoScalingGroups).To(HaveLen(1), "Auto Scaling group %s", asgName)
	var ids []string
	for _, i := range out.AutoScalingGroups[0].Instances {
		ids = append(ids, aws.ToString(i.InstanceId))
	}
	images := map[string]int{}
	if len(ids) == 0 {
		return images
	}
	res, err := ec2.NewFromConfig(suite.Env.AWS).DescribeInstances(ctx, &ec2.DescribeInstancesInput{InstanceIds: ids})
	g.Expect(err).NotTo(HaveOccurred())
	for _, r := range res.Reservations {
		for _, i := range r.Instances {
			images[aws.ToString(i.ImageId)]++
		}
	}
	return images
}

// The original project's shapes live and die: the launch-template group
// (with tagSpecifications, tagging what its instances' launch creates),
// the warm-pool group (maxSize -1, minSize 0: the zero value used to be
// dropped by the Go types), the mixed instances group with
// SubFamilyFlexible, and the locked `latest` group (image: latest resolved
// from AWS's published parameter, lock-upgrades set) each become Ready,
// rotate once (a label change: every node replaced, drained, the label on
// the new nodes), and, deleted, finish within 2 minutes with nothing left
// in AWS.
func TestOriginalShapesLiveAndDie(t *testing.T) {
	suite.Require(t)
	g := NewWithT(t)
	ctx := context.Background()
	// The admin's image is `latest`, and tenants may lock upgrades.
	data := suite.Cloud.Boundaries("latest", 5)
	data["sharedAnnotations"] += "- " + v1alpha1.AnnotationLockUpgrades + "\n"
	suite.SetBoundaries(t, data)
	published := publishedImage(t)
	const ns = "e2e-original-shapes"
	suite.Namespace(t, ns)

	locked := originalShape(ns, "locked-latest", nil)
	locked.SetAnnotations(map[string]string{v1alpha1.AnnotationLockUpgrades: "true"})
	shapes := []*unstructured.Unstructured{
		originalShape(ns, "launchtemplate", func(eks map[string]any) {
			eks["type"] = "LaunchTemplate"
			eks["configuration"].(map[string]any)["tagSpecifications"] = []any{
				map[string]any{"resourceType": "instance", "tags": []any{map[string]any{"key": "shape", "value": "launchtemplate"}}},
				map[string]any{"resourceType": "volume", "tags": []any{map[string]any{"key": "backup", "value": "daily"}}},
			}
		}),
		originalShape(ns, "rolling-wp", func(eks map[string]any) {
			eks["warmPool"] = map[string]any{"maxSize": int64(-1), "minSize": int64(0)}
		}),
		originalShape(ns, "mixed-subfamily", func(eks map[string]any) {
			conf := eks["configuration"].(map[string]any)
			conf["instanceType"] = "c5.xlarge"
			conf["mixedInstancesPolicy"] = map[string]any{
				"strategy": "CapacityOptimized", "instancePool": "SubFamilyFlexible", "baseCapacity": int64(1), "spotRatio": "50%",
			}
		}),
		locked,
	}
	var groups []*v1alpha1.InstanceGroup
	for _, u := range shapes {
		g.Expect(suite.Admin.Create(ctx, u)).To(Succeed(), "creating %s", u.GetName())
		ig := &v1alpha1.InstanceGroup{}
		ig.Namespace, ig.Name = ns, u.GetName()
		groups = append(groups, ig)
	}
	t.Cleanup(func() {
		for _, ig := range groups {
			_ = client.IgnoreNotFound(suite.Admin.Delete(context.Background(), ig))
		}
	})
	for _, ig := range groups {
		suite.WaitReady(t, ig, 3*time.Minute)
		g.Expect(groupImages(t, ns, ig.Name)).To(HaveKey(published), "%s runs the AMI AWS recommends (image: latest)", ig.Name)
	}
	// The launch-template shape's tagSpecifications are its launch
	// template's.
	lt := ownership.Name(ownership.LimitLaunchTemplate, suite.Cloud.Cluster, ns, "launchtemplate")
	versions, err := ec2.NewFromConfig(suite.Env.AWS).DescribeLaunchTemplateVersions(ctx, &ec2.DescribeLaunchTemplateVersionsInput{
		LaunchTemplateName: aws.String(lt), Versions: []string{"$Latest"}})
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(versions.LaunchTemplateVersions).To(HaveLen(1))
	var tagged []string
	for _, ts := range versions.LaunchTemplateVersions[0].LaunchTemplateData.TagSpecifications {
		for _, tag := range ts.Tags {
			tagged = append(tagged, fmt.Sprintf("%s %s=%s", ts.ResourceType, aws.ToString(tag.Key), aws.ToString(tag.Value)))
		}
	}
	g.Expect(tagged).To(ContainElements("instance shape=launchtemplate", "volume backup=daily"))

	stored := &unstructured.Unstructured{}
	stored.SetGroupVersionKind(v1alpha1.GroupVersion.WithKind("InstanceGroup"))
	g.Expect(suite.Admin.Get(ctx, client.ObjectKey{Namespace: ns, Name: "rolling-wp"}, stored)).To(Succeed())
	_, found, _ := unstructured.NestedInt64(stored.Object, "spec", "eks", "warmPool", "minSize")
	g.Expect(found).To(BeTrue(), "rolling-wp is stored with spec.eks.warmPool.minSize: 0 (the premise)")

	// Rotate each once: a label changes the nodes' user data.
	before := map[string][]string{}
	for _, ig := range groups {
		for _, n := range suite.GroupNodes(t, ig) {
			before[ig.Name] = append(before[ig.Name], n.Name)
		}
		cur := suite.Get(t, ig)
		patch := client.MergeFrom(cur.DeepCopy())
		cur.Spec.EKS.Configuration.Labels["rotation"] = "2"
		g.Expect(suite.Admin.Patch(ctx, cur, patch)).To(Succeed(), "rotating %s", ig.Name)
	}
	for _, ig := range groups {
		g.Eventually(func() string {
			cur := suite.Get(t, ig)
			nodes := suite.GroupNodes(t, ig)
			if cur.Status.ObservedGeneration != cur.Generation || cur.Status.CurrentState != v1alpha1.StateReady {
				return fmt.Sprintf("state %s, generation %d observed %d", cur.Status.CurrentState, cur.Generation, cur.Status.ObservedGeneration)
			}
			for _, n := range nodes {
				if n.Labels["rotation"] != "2" || n.Spec.Unschedulable {
					return fmt.Sprintf("node %s: rotation label %q, unschedulable %t", n.Name, n.Labels["rotation"], n.Spec.Unschedulable)
				}
			}
			if len(nodes) == 0 {
				return "no nodes"
			}
			return "rotated"
		}, 6*time.Minute, time.Second).Should(Equal("rotated"), "%s/%s rotates once", ns, ig.Name)
		for _, n := range suite.GroupNodes(t, ig) {
			g.Expect(before[ig.Name]).NotTo(ContainElement(n.Name), "%s: node %s was replaced", ig.Name, n.Name)
		}
	}
	g.Expect(groupImages(t, ns, "locked-latest")).To(Equal(map[string]int{published: len(suite.GroupNodes(t, groups[3]))}),
		"the locked group stays on the AMI it resolved")

	deleted := time.Now()
	for _, ig := range groups {
		g.Expect(suite.Admin.Delete(ctx, ig)).To(Succeed())
	}
	harness.WaitGone(t, suite.Admin, groups, harness.DeleteWithin)
	t.Logf("%d groups deleted in %s", len(groups), time.Since(deleted).Round(time.Second))
	for _, ig := range groups {
		suite.NothingInAWS(t, ig.Namespace, ig.Name)
	}
}
