package lifecycle

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/autoscaling"
	"github.com/aws/aws-sdk-go-v2/service/ec2"
	. "github.com/onsi/gomega"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/instancemgr/instance-manager/api/v1alpha1"
	awsp "github.com/instancemgr/instance-manager/providers/aws"
	"github.com/instancemgr/instance-manager/test/harness"
)

// The calls every group shares: one listing of the cluster's Auto Scaling
// groups per poll period, the cluster's description every 10 minutes.
const (
	opListing  = "Auto Scaling DescribeAutoScalingGroups"
	opDescribe = "EKS DescribeCluster"
)

// The failing group's launch template is refused: these are the calls it
// makes, its retries (the launch template) and, 5 minutes after they were
// read, the references it shares with the other groups (read again because
// it fails); an idle group makes none of them.
var failingOps = []string{"EC2 DescribeLaunchTemplateVersions", "EC2 CreateLaunchTemplate", "EC2 DescribeSubnets", "EC2 DescribeSecurityGroups"}

// budgetManager replaces the suite's manager with one whose clients refuse
// the failing group's launch template (an authorization failure whose text
// changes on every call, as AWS's does), which sweeps no orphans (its
// listings would blur the count) and which has the given resync interval
// and poll period. The suite's manager is back when the test ends.
func budgetManager(t *testing.T, resync, poll time.Duration) {
	t.Helper()
	faulty := harness.FailCalls(suite.Env.AWS, func(op string, in any) error {
		if lt, ok := in.(*ec2.CreateLaunchTemplateInput); ok && strings.Contains(aws.ToString(lt.LaunchTemplateName), "-e2e-budget-failing-") {
			return harness.AuthorizationFailure()
		}
		return nil
	})
	opts := suite.ManagerOptions()
	opts.AWS = &faulty
	opts.ResyncInterval, opts.CloudPollPeriod = resync, poll
	opts.GCPeriod = time.Hour
	suite.ReplaceManager(t, opts)
}

// TestAWSCallBudget: idle Ready groups make no AWS call of their own,
// however often they are resynced; a group whose calls keep failing stays
// under 4 calls a minute; changes made by hand in AWS are noticed from the
// shared listing within its poll period and undone.
func TestAWSCallBudget(t *testing.T) {
	suite.Require(t)
	g := NewWithT(t)
	ctx := context.Background()
	// Resynced every 5 s: 20 resyncs of each group a minute.
	budgetManager(t, 5*time.Second, 15*time.Second)
	// Nothing else reconciling: groups of earlier tests are deleted first.
	g.Eventually(func() ([]string, error) {
		list := &v1alpha1.InstanceGroupList{}
		err := suite.Admin.List(ctx, list)
		var left []string
		for _, ig := range list.Items {
			left = append(left, ig.Namespace+"/"+ig.Name)
		}
		return left, err
	}, 5*time.Minute, time.Second).Should(BeEmpty(), "groups of earlier tests still being deleted")

	suite.SetBoundaries(t, suite.Cloud.Boundaries(suite.Cloud.AMIs[0], 5))
	suite.Namespace(t, "e2e-budget")
	var idle []*v1alpha1.InstanceGroup
	for i := range 3 {
		ig := harness.ShortGroup("e2e-budget", fmt.Sprintf("idle-%d", i), 1, 2)
		suite.Create(t, ig)
		idle = append(idle, ig)
	}
	for _, ig := range idle {
		suite.WaitReady(t, ig, 3*time.Minute)
	}
	failing := harness.ShortGroup("e2e-budget", "failing", 1, 2)
	suite.Create(t, failing)
	created := time.Now()
	g.Eventually(func() string {
		for _, c := range suite.Get(t, failing).Status.Conditions {
			if c.Type == v1alpha1.ConditionReady {
				return c.Reason
			}
		}
		return ""
	}, harness.ConvergeTimeout, harness.PollInterval).Should(Equal("CloudError"))

	// The window: from a minute after the failing group was created (its
	// first retries, 1 s, 2 s, 4 s … apart, are behind it), for 150 s,
	// before the failing group reads its role and references again (5
	// minutes after it read them).
	time.Sleep(time.Until(created.Add(time.Minute)))
	before := awsp.CallCounts()
	const window = 150 * time.Second
	time.Sleep(window)
	calls := awsp.CallCounts().Since(before)
	t.Logf("AWS calls in %s: %v", window, calls)
	g.Expect(calls.Without(append(failingOps, opListing, opDescribe)...)).To(BeEmpty(),
		"3 Ready groups resynced every 5s and a failing group: calls other than the shared ones and the failing group's retries")
	g.Expect(calls[opListing]).To(BeNumerically("<=", float64(window/(15*time.Second))+2), "one shared listing per poll period")
	g.Expect(calls[opDescribe]).To(BeNumerically("<=", 1), "the cluster is described every 10 minutes")
	var failed float64
	for _, op := range failingOps {
		failed += calls[op]
	}
	g.Expect(failed).To(BeNumerically(">", 0), "the failing group kept retrying")
	g.Expect(failed/window.Minutes()).To(BeNumerically("<", 4), "AWS calls a minute of a group failing persistently")

	// Changes made by hand, noticed from the shared listing alone: the
	// groups are no longer resynced.
	budgetManager(t, time.Hour, 10*time.Second)
	listings := func() float64 { return awsp.CallCounts()[opListing] }
	baseline := listings()
	g.Eventually(listings, 2*time.Minute, time.Second).Should(BeNumerically(">=", baseline+2),
		"two listings, so the changes below are compared with one made before them")
	asg := autoscaling.NewFromConfig(suite.Env.AWS)
	names := make([]string, len(idle))
	for i, ig := range idle {
		names[i] = suite.Get(t, ig).Status.ActiveScalingGroupName
	}
	// idle-0: its desired capacity raised (as a person or an autoscaler
	// would); the group reports the second instance.
	_, err := asg.SetDesiredCapacity(ctx, &autoscaling.SetDesiredCapacityInput{AutoScalingGroupName: aws.String(names[0]), DesiredCapacity: aws.Int32(2)})
	g.Expect(err).NotTo(HaveOccurred())
	// idle-1: its max size changed; set back to the spec's.
	_, err = asg.UpdateAutoScalingGroup(ctx, &autoscaling.UpdateAutoScalingGroupInput{AutoScalingGroupName: aws.String(names[1]), MaxSize: aws.Int32(4)})
	g.Expect(err).NotTo(HaveOccurred())
	// idle-2: deleted; created again.
	_, err = asg.DeleteAutoScalingGroup(ctx, &autoscaling.DeleteAutoScalingGroupInput{AutoScalingGroupName: aws.String(names[2]), ForceDelete: aws.Bool(true)})
	g.Expect(err).NotTo(HaveOccurred())
	changed := time.Now()

	describeGroup := func(name string) (int32, int, error) {
		out, err := asg.DescribeAutoScalingGroups(ctx, &autoscaling.DescribeAutoScalingGroupsInput{AutoScalingGroupNames: []string{name}})
		if err != nil || len(out.AutoScalingGroups) == 0 {
			return 0, 0, err
		}
		return aws.ToInt32(out.AutoScalingGroups[0].MaxSize), len(out.AutoScalingGroups[0].Instances), nil
	}
	// 10 s poll period; the bound allows for a loaded machine.
	const noticed = 90 * time.Second
	g.Eventually(func() int { return suite.Get(t, idle[0]).Status.NodesTotal }, noticed, time.Second).Should(Equal(2),
		"the instance added by hand is in the status")
	g.Eventually(func() (int32, error) { m, _, err := describeGroup(names[1]); return m, err }, noticed, time.Second).Should(Equal(int32(2)),
		"max size set back to the spec's")
	g.Eventually(func() (int, error) { _, n, err := describeGroup(names[2]); return n, err }, noticed, time.Second).Should(Equal(1),
		"the deleted group created again, with its instance")
	t.Logf("changes made by hand undone %s after they were made", time.Since(changed).Round(time.Second))
	suite.WaitReady(t, idle[2], 3*time.Minute)
	g.Expect(harness.Condition(suite.Get(t, idle[0]), v1alpha1.ConditionReady)).To(Equal(metav1.ConditionTrue))
}
