package lifecycle

import (
	"context"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	. "github.com/onsi/gomega"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/metrics"

	"github.com/instancemgr/instance-manager/api/v1alpha1"
	"github.com/instancemgr/instance-manager/reconciler/nodehealth"
	"github.com/instancemgr/instance-manager/test/harness"
)

// replacementsMetric reads instance_manager_node_health_replacements_total
// for the group and reason from the in-process manager's registry.
func replacementsMetric(t *testing.T, ig *v1alpha1.InstanceGroup, reason string) float64 {
	t.Helper()
	families, err := metrics.Registry.Gather()
	if err != nil {
		t.Fatal(err)
	}
	for _, f := range families {
		if f.GetName() != "instance_manager_node_health_replacements_total" {
			continue
		}
		for _, m := range f.GetMetric() {
			labels := map[string]string{}
			for _, l := range m.GetLabel() {
				labels[l.GetName()] = l.GetValue()
			}
			if labels["namespace"] == ig.Namespace && labels["name"] == ig.Name && labels["reason"] == reason {
				return m.GetCounter().GetValue()
			}
		}
	}
	return 0
}

// An instance whose node never joins is replaced after the group's startup
// timeout, and one whose node stops being Ready after its unhealthy
// timeout: terminated without a decrement (the desired capacity stays),
// with an Event and a metric. With two of five nodes NotReady (more than
// 20%), replacement halts and the NodesHealthy condition says so.
func TestUnhealthyInstancesAreReplacedAndReplacementHaltsAbove20Percent(t *testing.T) {
	suite.Require(t)
	g := NewWithT(t)
	ctx := context.Background()
	suite.SetBoundaries(t, suite.Cloud.Boundaries(suite.Cloud.AMIs[0], 5))
	suite.Namespace(t, "e2e-health")

	// The first instance of the group never joins: a kubelet that does
	// not start.
	var mu sync.Mutex
	broken := ""
	suite.Env.Bridge.SetNeverJoin(func(group, id string) bool {
		if !strings.Contains(group, "e2e-health") {
			return false
		}
		mu.Lock()
		defer mu.Unlock()
		if broken == "" {
			broken = id
		}
		return id == broken
	})
	t.Cleanup(func() { suite.Env.Bridge.SetNeverJoin(nil) })

	ig := harness.ShortGroup("e2e-health", "nodes", 5, 6)
	ig.Spec.EKS.NodeHealth = &v1alpha1.NodeHealthSpec{
		StartupTimeout:   &metav1.Duration{Duration: 20 * time.Second},
		UnhealthyTimeout: &metav1.Duration{Duration: 10 * time.Second},
	}
	suite.Create(t, ig)

	// 1. The instance that never joined is replaced.
	g.Eventually(func() []string { return suite.EventNotes(t, ig, nodehealth.EventNodeUnhealthy) }, 3*time.Minute, time.Second).
		Should(ContainElement(And(ContainSubstring(nodehealth.ReasonStartupTimeout), ContainSubstring(broken))),
			"the instance without a node is replaced after the startup timeout")
	ready := suite.WaitReady(t, ig, 3*time.Minute)
	name := ready.Status.ActiveScalingGroupName
	g.Expect(replacementsMetric(t, ig, nodehealth.ReasonStartupTimeout)).To(BeNumerically(">=", 1))
	_, group := suite.ASGTags(t, name)
	g.Expect(aws.ToInt32(group.DesiredCapacity)).To(BeEquivalentTo(5), "terminated without a decrement")
	// The instance waits in Terminating:Wait on the drain hook until the
	// termination controller completes it (it has no node: at once).
	g.Eventually(func(g Gomega) {
		_, group := suite.ASGTags(t, name)
		for _, in := range group.Instances {
			g.Expect(aws.ToString(in.InstanceId)).NotTo(Equal(broken))
		}
	}, time.Minute, time.Second).Should(Succeed())
	g.Eventually(func() int { return harness.Available(suite.GroupNodes(t, ig)) }, 2*time.Minute, time.Second).Should(Equal(5))

	// 2. A node that stops being Ready is replaced.
	nodes := suite.GroupNodes(t, ig)
	g.Expect(suite.Env.Bridge.StopKubelet(ctx, nodes[0].Name)).To(Succeed())
	g.Eventually(func() []string { return suite.EventNotes(t, ig, nodehealth.EventNodeUnhealthy) }, 3*time.Minute, time.Second).
		Should(ContainElement(And(ContainSubstring(nodehealth.ReasonNotReady), ContainSubstring(nodes[0].Name))),
			"the NotReady node's instance is replaced after the unhealthy timeout")
	g.Eventually(func() bool {
		for _, n := range suite.GroupNodes(t, ig) {
			if n.Name == nodes[0].Name {
				return false
			}
		}
		return harness.Available(suite.GroupNodes(t, ig)) == 5
	}, 3*time.Minute, time.Second).Should(BeTrue(), "the replacement joined")
	g.Expect(replacementsMetric(t, ig, nodehealth.ReasonNotReady)).To(BeNumerically(">=", 1))

	// 3. Two of five NotReady (more than 20%): halted at once. Two nodes
	// past the startup timeout are stopped (a younger one would still be
	// starting).
	g.Eventually(func() int {
		nodes = nil
		for _, n := range suite.GroupNodes(t, ig) {
			if time.Since(n.CreationTimestamp.Time) > 25*time.Second {
				nodes = append(nodes, n)
			}
		}
		return len(nodes)
	}, time.Minute, time.Second).Should(BeNumerically(">=", 2))
	replaced := len(suite.EventNotes(t, ig, nodehealth.EventNodeUnhealthy))
	for _, n := range nodes[:2] {
		g.Expect(suite.Env.Bridge.StopKubelet(ctx, n.Name)).To(Succeed())
	}
	g.Eventually(func() string {
		c := meta.FindStatusCondition(suite.Get(t, ig).Status.Conditions, v1alpha1.ConditionNodesHealthy)
		if c == nil {
			return "no condition"
		}
		seen := ""
		for _, n := range suite.GroupNodes(t, ig) {
			for _, nc := range n.Status.Conditions {
				if nc.Type == "Ready" {
					seen += fmt.Sprintf(" [%s Ready=%s since %s, annotations %v]", n.Name, nc.Status, nc.LastTransitionTime.Format("15:04:05"), n.Annotations)
				}
			}
		}
		if c.Reason != nodehealth.ConditionReasonHalted {
			return c.Reason + ": " + c.Message + seen
		}
		return c.Reason + ": " + c.Message
	}, 2*time.Minute, time.Second).Should(HavePrefix(nodehealth.ConditionReasonHalted + ": 2 of 5"))
	g.Consistently(func() int { return len(suite.EventNotes(t, ig, nodehealth.EventNodeUnhealthy)) }, 20*time.Second, time.Second).
		Should(Equal(replaced), "nothing is replaced while halted")
	g.Expect(suite.EventNotes(t, ig, nodehealth.EventRepairHalted)).To(HaveLen(1))
	g.Expect(suite.GroupNodes(t, ig)).To(ContainElement(HaveField("Name", nodes[0].Name)), "the NotReady nodes stay")
}
