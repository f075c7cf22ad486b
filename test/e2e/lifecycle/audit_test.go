package lifecycle

import (
	"context"
	"slices"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/service/ec2"
	. "github.com/onsi/gomega"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/instancemgr/instance-manager/test/env"
	"github.com/instancemgr/instance-manager/test/harness"
)

// The audit that every test runs under (suite.Require) catches an instance
// taken away the old way: EC2 TerminateInstances, which passes no
// lifecycle hook and no drain, under a running pod. The loss is then
// forgiven, so this test's own audit passes.
func TestAuditCatchesAnInstanceTerminatedUndrained(t *testing.T) {
	suite.Require(t)
	g := NewWithT(t)
	ctx := context.Background()
	suite.SetBoundaries(t, suite.Cloud.Boundaries(suite.Cloud.AMIs[0], 5))
	suite.Namespace(t, "e2e-audit")
	ig := harness.ShortGroup("e2e-audit", "audited", 1, 1)
	suite.Create(t, ig)
	suite.WaitReady(t, ig, 3*time.Minute)
	node := suite.GroupNodes(t, ig)[0]
	id := node.Annotations[env.BridgeInstanceAnnotation]
	g.Expect(id).NotTo(BeEmpty())

	pod := &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Namespace: "e2e-audit", Name: "victim"},
		Spec:       corev1.PodSpec{NodeName: node.Name, Containers: []corev1.Container{{Name: "app", Image: "registry.example/app:1"}}},
	}
	g.Expect(suite.Admin.Create(ctx, pod)).To(Succeed())
	t.Cleanup(func() { _ = client.IgnoreNotFound(suite.Admin.Delete(context.Background(), pod)) })
	g.Eventually(func() corev1.PodPhase {
		cur := &corev1.Pod{}
		_ = suite.Admin.Get(ctx, client.ObjectKeyFromObject(pod), cur)
		return cur.Status.Phase
	}, time.Minute, 200*time.Millisecond).Should(Equal(corev1.PodRunning))

	_, err := ec2.NewFromConfig(suite.Env.AWS).TerminateInstances(ctx, &ec2.TerminateInstancesInput{InstanceIds: []string{id}})
	g.Expect(err).NotTo(HaveOccurred())
	g.Eventually(func() []string {
		for _, l := range suite.Env.Bridge.Losses() {
			if l.Instance == id {
				return l.Pods
			}
		}
		return nil
	}, time.Minute, 500*time.Millisecond).Should(ContainElement("e2e-audit/victim"), "the audit records the undrained pod")
	suite.Env.Bridge.Forgive(id)
	g.Expect(slices.ContainsFunc(suite.Env.Bridge.Losses(), func(l env.Loss) bool { return l.Instance == id })).To(BeFalse())
}
