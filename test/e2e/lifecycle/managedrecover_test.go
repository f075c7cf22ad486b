package lifecycle

import (
	"context"
	"testing"
	"time"

	ekstypes "github.com/aws/aws-sdk-go-v2/service/eks/types"
	. "github.com/onsi/gomega"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/instancemgr/instance-manager/api/v1alpha1"
	"github.com/instancemgr/instance-manager/providers"
	"github.com/instancemgr/instance-manager/providers/aws/ownership"
	"github.com/instancemgr/instance-manager/test/harness"
)

// A managed node group that ends in CREATE_FAILED (the emulator's
// create-failures tag, test/env/motoserver.py: EKS leaves one whose
// instances cannot launch there and never retries it) is reported with
// EKS's health issue in a CreateFailed Event, deleted after the backoff
// (30 s, counted in status.createFailure) and created again: the group
// becomes Ready and the record is cleared (review 2026-11-26 M10).
func TestManagedNodeGroupCreateFailedIsCreatedAgain(t *testing.T) {
	suite.Require(t)
	g := NewWithT(t)
	ctx := context.Background()
	suite.SetBoundaries(t, suite.Cloud.Boundaries(suite.Cloud.AMIs[0], 5))
	const ns = "e2e-managed-recover"
	suite.Namespace(t, ns)
	ig := &v1alpha1.InstanceGroup{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "workers"},
		Spec: v1alpha1.InstanceGroupSpec{
			Provisioner: v1alpha1.ProvisionerEKSManaged,
			Strategy:    v1alpha1.AwsUpgradeStrategy{Type: v1alpha1.StrategyManaged},
			EKSManaged: &v1alpha1.EKSManagedSpec{MinSize: 1, MaxSize: 2, Configuration: &v1alpha1.EKSManagedConfiguration{
				ClusterName:  suite.Cloud.Cluster,
				Subnets:      []string{suite.Cloud.Subnets[0]},
				InstanceType: "m5.large",
				Tags:         []map[string]string{{"key": "emulator.instancemgr/create-failures", "value": "1"}},
			}},
		},
	}
	suite.Create(t, ig)
	_, err := harness.WaitForEvent(ctx, suite.Admin, ns, "workers", providers.ReasonCreateFailed, "AsgInstanceLaunchFailures: Could not launch On-Demand Instances", time.Minute)
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(harness.Condition(suite.Get(t, ig), v1alpha1.ConditionReady)).NotTo(Equal(metav1.ConditionTrue))
	// The backoff is counted in the status (a restart continues it).
	g.Eventually(func() *v1alpha1.CreateFailure { return suite.Get(t, ig).Status.CreateFailure }, 30*time.Second, time.Second).
		Should(And(Not(BeNil()), HaveField("Attempts", 1)))

	ready := suite.WaitReady(t, ig, 3*time.Minute)
	name := ownership.Name(ownership.LimitNodegroup, suite.Cloud.Cluster, ns, "workers")
	g.Expect(ready.Status.ActiveScalingGroupName).To(Equal(name))
	g.Expect(ready.Status.CreateFailure).To(BeNil(), "the record is cleared once the node group is ACTIVE")
	ng, err := describeNodegroup(t, suite.Cloud.Cluster, name)
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(ng.Status).To(Equal(ekstypes.NodegroupStatusActive))

	g.Expect(suite.Admin.Delete(ctx, ig.DeepCopy())).To(Succeed())
	harness.WaitGone(t, suite.Admin, []*v1alpha1.InstanceGroup{ig}, 2*time.Minute)
	_, err = describeNodegroup(t, suite.Cloud.Cluster, name)
	g.Expect(err).To(MatchError(ContainSubstring("ResourceNotFound")), "node group %s is deleted", name)
}
