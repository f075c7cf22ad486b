package eks

import (
	"testing"

	awssdk "github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/ec2"
	. "github.com/onsi/gomega"
	"sigs.k8s.io/controller-runtime/pkg/client/fake"

	awsp "github.com/instancemgr/instance-manager/providers/aws"
)

// A subnet swapped for another in the same Availability Zone moves no
// instance in Auto Scaling: the instances still in the old subnet drift
// (the rotation replaces them), AZRebalance is suspended before the new
// subnets are written, and the judgement reads nothing more from EC2.
func testSubnetSwapDrifts(t *testing.T, cfg awssdk.Config) {
	g := NewWithT(t)
	w := newMotoWorld(t, cfg)
	clients := awsp.NewClients(cfg)
	p := New(clients, fake.NewClientBuilder().WithScheme(scheme(t)).Build(), Options{})
	ig := w.group()
	ig.Spec.EKS.MinSize = 2
	obs := mustApply(t, p, ig)
	g.Expect(obs.Instances).To(HaveLen(2))
	settle(ig, obs)
	mustApply(t, p, ig)

	ec2c := ec2.NewFromConfig(cfg)
	old, err := ec2c.DescribeSubnets(t.Context(), &ec2.DescribeSubnetsInput{SubnetIds: w.subnets[:1]})
	g.Expect(err).NotTo(HaveOccurred())
	sameZone, err := ec2c.CreateSubnet(t.Context(), &ec2.CreateSubnetInput{VpcId: old.Subnets[0].VpcId,
		AvailabilityZone: old.Subnets[0].AvailabilityZone, CidrBlock: awssdk.String("172.31.200.0/24")})
	g.Expect(err).NotTo(HaveOccurred())
	swapped := awssdk.ToString(sameZone.Subnet.SubnetId)

	ig.Spec.EKS.Configuration.Subnets, ig.Generation = []string{swapped, w.subnets[1]}, 2
	before := awsp.CallCounts()
	obs = mustApply(t, p, ig)
	calls := awsp.CallCounts().Since(before)
	g.Expect(calls["Auto Scaling SuspendProcesses"]).To(BeEquivalentTo(1))
	g.Expect(calls["Auto Scaling UpdateAutoScalingGroup"]).To(BeEquivalentTo(1))
	g.Expect(calls).NotTo(HaveKey("EC2 DescribeInstances"), "placements were read with the launch versions")
	g.Expect(suspendedIn(t, cfg, obs.GroupName)).To(Equal([]string{processAZRebalance}))
	drifted := map[string]string{}
	for _, in := range obs.Instances {
		g.Expect(in.UpToDate).To(Equal(in.Drift == ""))
		if !in.UpToDate {
			drifted[in.ID] = in.Drift
		}
	}
	g.Expect(drifted).To(HaveLen(1), "the instance in %s, and only it", w.subnets[0])
	for _, why := range drifted {
		g.Expect(why).To(Equal("subnet " + w.subnets[0] + " is no longer listed"))
	}

	before = awsp.CallCounts()
	obs = mustApply(t, p, ig)
	g.Expect(awsp.CallCounts().Since(before).Without("Auto Scaling DescribeAutoScalingGroups")).To(BeEmpty(), "judging drift again costs no call")
	g.Expect(obs.Instances).To(ContainElement(HaveField("Drift", "subnet "+w.subnets[0]+" is no longer listed")), "Auto Scaling moved nothing")
}
