package e2e

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
)

// The audit that every test runs under (requireEnv) catches an instance
// taken away the old way: EC2 TerminateInstances, which passes no
// lifecycle hook and no drain, under a running pod. The loss is then
// forgiven, so this test's own audit passes.
func TestAuditCatchesAnInstanceTerminatedUndrained(t *testing.T) {
	requireEnv(t)
	g := NewWithT(t)
	ctx := context.Background()
	setBoundaries(t, cloud.boundaries(cloud.amis[0], 5))
	namespace(t, "e2e-audit")
	ig := shortGroup("e2e-audit", "audited", 1, 1)
	create(t, ig)
	waitReady(t, ig, 3*time.Minute)
	node := groupNodes(t, ig)[0]
	id := node.Annotations[env.BridgeInstanceAnnotation]
	g.Expect(id).NotTo(BeEmpty())

	pod := &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Namespace: "e2e-audit", Name: "victim"},
		Spec:       corev1.PodSpec{NodeName: node.Name, Containers: []corev1.Container{{Name: "app", Image: "registry.example/app:1"}}},
	}
	g.Expect(admin.Create(ctx, pod)).To(Succeed())
	t.Cleanup(func() { _ = client.IgnoreNotFound(admin.Delete(context.Background(), pod)) })
	g.Eventually(func() corev1.PodPhase {
		cur := &corev1.Pod{}
		_ = admin.Get(ctx, client.ObjectKeyFromObject(pod), cur)
		return cur.Status.Phase
	}, time.Minute, 200*time.Millisecond).Should(Equal(corev1.PodRunning))

	_, err := ec2.NewFromConfig(environment.AWS).TerminateInstances(ctx, &ec2.TerminateInstancesInput{InstanceIds: []string{id}})
	g.Expect(err).NotTo(HaveOccurred())
	g.Eventually(func() []string {
		for _, l := range environment.Bridge.Losses() {
			if l.Instance == id {
				return l.Pods
			}
		}
		return nil
	}, time.Minute, 500*time.Millisecond).Should(ContainElement("e2e-audit/victim"), "the audit records the undrained pod")
	environment.Bridge.Forgive(id)
	g.Expect(slices.ContainsFunc(environment.Bridge.Losses(), func(l env.Loss) bool { return l.Instance == id })).To(BeFalse())
}
