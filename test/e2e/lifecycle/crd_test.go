package lifecycle

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/autoscaling"
	. "github.com/onsi/gomega"
	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/instancemgr/instance-manager/api/v1alpha1"
	"github.com/instancemgr/instance-manager/reconciler/upgrade"
	"github.com/instancemgr/instance-manager/test/harness"
)

var rollingUpgradeGVK = schema.GroupVersionKind{Group: "upgrademgr.keikoproj.io", Version: "v1alpha1", Kind: "RollingUpgrade"}

// installRollingUpgradeCRD installs a minimal RollingUpgrade CRD, the kind
// upgrade-manager serves, for the crd strategy to submit.
func installRollingUpgradeCRD(t *testing.T) {
	t.Helper()
	scheme := apiextensionsv1.AddToScheme
	c, err := client.New(suite.Env.Config, client.Options{})
	if err != nil {
		t.Fatal(err)
	}
	_ = scheme(c.Scheme())
	crd := &apiextensionsv1.CustomResourceDefinition{
		ObjectMeta: metav1.ObjectMeta{Name: "rollingupgrades.upgrademgr.keikoproj.io"},
		Spec: apiextensionsv1.CustomResourceDefinitionSpec{
			Group: "upgrademgr.keikoproj.io", Scope: apiextensionsv1.NamespaceScoped,
			Names: apiextensionsv1.CustomResourceDefinitionNames{Plural: "rollingupgrades", Singular: "rollingupgrade", Kind: "RollingUpgrade", ListKind: "RollingUpgradeList"},
			Versions: []apiextensionsv1.CustomResourceDefinitionVersion{{
				Name: "v1alpha1", Served: true, Storage: true,
				Schema: &apiextensionsv1.CustomResourceValidation{OpenAPIV3Schema: &apiextensionsv1.JSONSchemaProps{
					Type: "object", XPreserveUnknownFields: ptr.To(true)}},
			}},
		},
	}
	if err := c.Create(context.Background(), crd); err != nil && !apierrors.IsAlreadyExists(err) {
		t.Fatal(err)
	}
	NewWithT(t).Eventually(func() error {
		list := &unstructured.UnstructuredList{}
		list.SetGroupVersionKind(rollingUpgradeGVK.GroupVersion().WithKind("RollingUpgradeList"))
		return suite.Admin.List(context.Background(), list)
	}, harness.ConvergeTimeout, 200*time.Millisecond).Should(Succeed())
}

const rollingUpgradeTemplate = `apiVersion: upgrademgr.keikoproj.io/v1alpha1
kind: RollingUpgrade
metadata:
  name: rollup-nodes
  namespace: e2e-crd
spec:
  postDrainDelaySeconds: 30
  nodeIntervalSeconds: 30
  asgName: ${.status.activeScalingGroupName}
  strategy:
    mode: eager
    type: randomUpdate
    maxUnavailable: 30%
    drainTimeout: 120
`

// crdStrategyOptIn is the boundary ConfigMap's crdStrategy allowing
// rollingUpgradeTemplate.
const crdStrategyOptIn = `allowedKinds:
- group: upgrademgr.keikoproj.io
  kind: RollingUpgrade
  tenantFields: [spec.strategy, spec.nodeIntervalSeconds, spec.postDrainDelaySeconds]
`

// rollingUpgrades lists the RollingUpgrades submitted for the group.
func rollingUpgrades(t *testing.T, ns string) []unstructured.Unstructured {
	t.Helper()
	list := &unstructured.UnstructuredList{}
	list.SetGroupVersionKind(rollingUpgradeGVK.GroupVersion().WithKind("RollingUpgradeList"))
	if err := suite.Admin.List(context.Background(), list, client.InNamespace(ns)); err != nil {
		t.Fatal(err)
	}
	var out []unstructured.Unstructured
	for _, item := range list.Items {
		if item.GetDeletionTimestamp() == nil {
			out = append(out, item)
		}
	}
	return out
}

func setStatus(t *testing.T, ru *unstructured.Unstructured, status string) {
	t.Helper()
	cur := &unstructured.Unstructured{}
	cur.SetGroupVersionKind(rollingUpgradeGVK)
	g := NewWithT(t)
	g.Expect(suite.Admin.Get(context.Background(), client.ObjectKeyFromObject(ru), cur)).To(Succeed())
	g.Expect(unstructured.SetNestedField(cur.Object, status, "status", "currentStatus")).To(Succeed())
	g.Expect(suite.Admin.Update(context.Background(), cur)).To(Succeed())
}

func TestCRDStrategySubmitsFollowsAndRetries(t *testing.T) {
	suite.Require(t)
	g := NewWithT(t)
	ctx := context.Background()
	installRollingUpgradeCRD(t)
	// The admin opts in to RollingUpgrade (no kind is allowed by default),
	// sharing the fields the template sets.
	b := suite.Cloud.Boundaries(suite.Cloud.AMIs[0], 5)
	b["crdStrategy"] = crdStrategyOptIn
	suite.SetBoundaries(t, b)
	suite.Namespace(t, "e2e-crd")
	ig := harness.ShortGroup("e2e-crd", "crd-group", 2, 3)
	ig.Spec.Strategy = v1alpha1.AwsUpgradeStrategy{Type: v1alpha1.StrategyCRD, CRD: &v1alpha1.CRDUpgradeStrategy{
		CRDName: "rollingupgrades", StatusJSONPath: ".status.currentStatus",
		StatusSuccessString: "completed", StatusFailureString: "error", MaxRetries: ptr.To(1),
		Spec: rollingUpgradeTemplate,
	}}
	suite.Create(t, ig)
	ready := suite.WaitReady(t, ig, 3*time.Minute)
	g.Expect(rollingUpgrades(t, "e2e-crd")).To(BeEmpty(), "nothing to rotate yet")

	patch := client.MergeFrom(ready.DeepCopy())
	ready.Spec.EKS.Configuration.InstanceType = "m5.xlarge"
	g.Expect(suite.Admin.Patch(ctx, ready, patch)).To(Succeed())

	// The rendered RollingUpgrade names the group's Auto Scaling group.
	var first unstructured.Unstructured
	g.Eventually(func() int {
		items := rollingUpgrades(t, "e2e-crd")
		if len(items) == 1 {
			first = items[0]
		}
		return len(items)
	}, harness.ConvergeTimeout, 200*time.Millisecond).Should(Equal(1))
	asgName, _, _ := unstructured.NestedString(first.Object, "spec", "asgName")
	g.Expect(asgName).To(Equal(ready.Status.ActiveScalingGroupName))
	g.Expect(first.GetLabels()).To(HaveKeyWithValue(upgrade.LabelTemplateVersion, "2"))
	g.Eventually(func() string { return suite.Get(t, ig).Status.CurrentState }, harness.ConvergeTimeout, 200*time.Millisecond).Should(Equal(v1alpha1.StateUpgrading))

	// It fails once: the controller deletes it and submits it again.
	setStatus(t, &first, "error")
	var second unstructured.Unstructured
	g.Eventually(func() bool {
		items := rollingUpgrades(t, "e2e-crd")
		if len(items) == 1 && items[0].GetUID() != first.GetUID() {
			second = items[0]
			return true
		}
		return false
	}, harness.ConvergeTimeout, 200*time.Millisecond).Should(BeTrue(), "resubmitted after a failure")
	g.Eventually(func() int { return suite.Get(t, ig).Status.StrategyRetryCount }, harness.ConvergeTimeout, 200*time.Millisecond).Should(Equal(1))

	// Playing upgrade-manager: replace the old instances, then report success.
	asg := autoscaling.NewFromConfig(suite.Env.AWS)
	out, err := asg.DescribeAutoScalingGroups(ctx, &autoscaling.DescribeAutoScalingGroupsInput{AutoScalingGroupNames: []string{asgName}})
	g.Expect(err).NotTo(HaveOccurred())
	for _, in := range out.AutoScalingGroups[0].Instances {
		_, err := asg.TerminateInstanceInAutoScalingGroup(ctx, &autoscaling.TerminateInstanceInAutoScalingGroupInput{
			InstanceId: in.InstanceId, ShouldDecrementDesiredCapacity: aws.Bool(false)})
		g.Expect(err).NotTo(HaveOccurred())
	}
	setStatus(t, &second, "completed")
	last := ""
	g.Eventually(func() string {
		cur := suite.Get(t, ig)
		up := meta.FindStatusCondition(cur.Status.Conditions, v1alpha1.ConditionUpgrading)
		msg := ""
		if up != nil {
			msg = string(up.Status) + " " + up.Message
		}
		seen := ""
		if out, err := asg.DescribeAutoScalingGroups(ctx, &autoscaling.DescribeAutoScalingGroupsInput{AutoScalingGroupNames: []string{asgName}}); err == nil && len(out.AutoScalingGroups) == 1 {
			g := out.AutoScalingGroups[0]
			seen = " (Auto Scaling group:"
			for _, in := range g.Instances {
				seen += fmt.Sprintf(" %s %s;", aws.ToString(in.InstanceId), in.LifecycleState)
			}
			seen += ")"
		}
		line := fmt.Sprintf("%s, %d of %d updated, Upgrading %s%s", cur.Status.CurrentState, cur.Status.NodesUpdated, cur.Status.NodesTotal, msg, seen)
		if line != last {
			t.Logf("%s group: %s", time.Now().Format("15:04:05.000"), line)
			last = line
		}
		return line
	}, 2*time.Minute, 500*time.Millisecond).Should(HavePrefix(v1alpha1.StateReady + ", 2 of 2 updated, Upgrading False"))
	g.Eventually(func() string { return suite.Get(t, ig).Status.StrategyResourceName }, harness.ConvergeTimeout, 200*time.Millisecond).Should(Equal("rollup-nodes"))
	g.Expect(suite.Admin.Delete(ctx, ig)).To(Succeed())
}
