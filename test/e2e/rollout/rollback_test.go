package rollout

import (
	"context"
	"fmt"
	"maps"
	"slices"
	"sort"
	"strings"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/autoscaling"
	"github.com/aws/aws-sdk-go-v2/service/ec2"
	. "github.com/onsi/gomega"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/instancemgr/instance-manager/api/v1alpha1"
	"github.com/instancemgr/instance-manager/boundaries"
	"github.com/instancemgr/instance-manager/boundaries/record"
	"github.com/instancemgr/instance-manager/test/harness"
)

// instanceImages returns the AMI each instance of ig's Auto Scaling group
// that is not leaving (lifecycle state Terminating*) was launched from,
// by instance id (Auto Scaling DescribeAutoScalingGroups, EC2
// DescribeInstances).
func instanceImages(ctx context.Context, ig *v1alpha1.InstanceGroup) (map[string]string, error) {
	name := ig.Status.ActiveScalingGroupName
	if name == "" {
		return nil, fmt.Errorf("%s/%s has no Auto Scaling group in its status", ig.Namespace, ig.Name)
	}
	out, err := autoscaling.NewFromConfig(suite.Env.AWS).DescribeAutoScalingGroups(ctx, &autoscaling.DescribeAutoScalingGroupsInput{AutoScalingGroupNames: []string{name}})
	if err != nil || len(out.AutoScalingGroups) != 1 {
		return nil, fmt.Errorf("DescribeAutoScalingGroups %s: %d group(s), %v", name, len(out.AutoScalingGroups), err)
	}
	var ids []string
	for _, in := range out.AutoScalingGroups[0].Instances {
		if !strings.HasPrefix(string(in.LifecycleState), "Terminating") {
			ids = append(ids, aws.ToString(in.InstanceId))
		}
	}
	images := map[string]string{}
	if len(ids) == 0 {
		return images, nil
	}
	desc, err := ec2.NewFromConfig(suite.Env.AWS).DescribeInstances(ctx, &ec2.DescribeInstancesInput{InstanceIds: ids})
	if err != nil {
		return nil, fmt.Errorf("DescribeInstances %v: %w", ids, err)
	}
	for _, r := range desc.Reservations {
		for _, in := range r.Instances {
			images[aws.ToString(in.InstanceId)] = aws.ToString(in.ImageId)
		}
	}
	return images, nil
}

// idsOn returns the ids of images' instances launched from ami, sorted.
func idsOn(images map[string]string, ami string) []string {
	var ids []string
	for id, im := range images {
		if im == ami {
			ids = append(ids, id)
		}
	}
	sort.Strings(ids)
	return ids
}

// A rollback of a halted wave replaces only the nodes launched for the
// failed revision: the canary's instances still on the last good AMI
// keep their instance ids (drift is judged by the launch template
// version's content, and the rollback makes the version of the last good
// content the default again), and only the instances of the broken AMI
// are replaced.
func TestRollbackOfAHaltedWaveReplacesOnlyTheFailedRevisionsNodes(t *testing.T) {
	suite.Require(t)
	g := NewWithT(t)
	ctx := context.Background()
	const canaryNS = "e2e-rollback-canary"
	startFrom(t, suite.Cloud.AMIs[0], rolloutBoundaries(suite.Cloud.AMIs[0], canaryNS, "5s", "45s"))
	suite.Namespace(t, canaryNS)
	canary := harness.ShortGroup(canaryNS, "nodes", 3, 4)
	suite.Create(t, canary)
	ready := suite.WaitReady(t, canary, 5*time.Minute)
	g.Eventually(func() (int, error) {
		images, err := instanceImages(ctx, suite.Get(t, canary))
		return len(idsOn(images, suite.Cloud.AMIs[0])), err
	}, harness.ConvergeTimeout, 500*time.Millisecond).Should(Equal(3))
	startVersion := ready.Status.LatestTemplateVersion

	suite.Env.Bridge.SetNeverJoinImages(suite.Cloud.AMIs[2])
	t.Cleanup(func() { suite.Env.Bridge.SetNeverJoinImages() })
	broken := rolloutBoundaries(suite.Cloud.AMIs[2], canaryNS, "5s", "45s")
	target := boundaries.Revision(broken)
	suite.SetBoundaries(t, broken)
	rec := waitRecord(t, target, record.PhaseHalted, 5*time.Minute)
	g.Expect(rec.Halt.Groups).To(Equal([]string{canaryNS + "/nodes"}))

	// What the canary runs at the halt: instances of the last good AMI the
	// rotation has not reached (maxUnavailable 1: the first batch waits
	// for replacements that never join), and the broken AMI's.
	var atHalt map[string]string
	g.Eventually(func() error {
		var err error
		if atHalt, err = instanceImages(ctx, suite.Get(t, canary)); err != nil {
			return err
		}
		if len(idsOn(atHalt, suite.Cloud.AMIs[2])) == 0 {
			return fmt.Errorf("no instance of the broken AMI yet: %v", atHalt)
		}
		return nil
	}, harness.ConvergeTimeout, 500*time.Millisecond).Should(Succeed())
	kept, failed := idsOn(atHalt, suite.Cloud.AMIs[0]), idsOn(atHalt, suite.Cloud.AMIs[2])
	g.Expect(kept).NotTo(BeEmpty(), "the halt left no instance of the last good AMI: %v", atHalt)
	t.Logf("at the halt the canary runs %d instance(s) of the last good AMI %v and %d of the broken one %v (launch template version %s, was %s)",
		len(kept), kept, len(failed), failed, suite.Get(t, canary).Status.LatestTemplateVersion, startVersion)

	cm := &corev1.ConfigMap{}
	g.Expect(suite.Admin.Get(ctx, harness.RolloutRecordKey, cm)).To(Succeed())
	patch := client.MergeFrom(cm.DeepCopy())
	metav1.SetMetaDataAnnotation(&cm.ObjectMeta, record.AnnotationAction, record.ActionRollback)
	g.Expect(suite.Admin.Patch(ctx, cm, patch)).To(Succeed())
	waitRecord(t, target, record.PhaseRolledBack, harness.ConvergeTimeout)

	// The canary converges back: every instance on the last good AMI,
	// Ready, nothing left to rotate.
	var after map[string]string
	g.Eventually(func() error {
		cur := suite.Get(t, canary)
		if image(cur) != suite.Cloud.AMIs[0] || cur.Status.CurrentState != v1alpha1.StateReady || cur.Status.ObservedGeneration != cur.Generation ||
			cur.Status.NodesUpdated != cur.Status.NodesTotal {
			return fmt.Errorf("image %s, state %s, %d of %d updated", image(cur), cur.Status.CurrentState, cur.Status.NodesUpdated, cur.Status.NodesTotal)
		}
		var err error
		if after, err = instanceImages(ctx, cur); err != nil {
			return err
		}
		if len(after) != 3 || len(idsOn(after, suite.Cloud.AMIs[0])) != 3 {
			return fmt.Errorf("instances %v", after)
		}
		return nil
	}, 2*harness.ConvergeTimeout, time.Second).Should(Succeed())
	var replaced []string
	for id := range maps.Keys(after) {
		if !slices.Contains(kept, id) {
			replaced = append(replaced, id)
		}
	}
	sort.Strings(replaced)
	still := 0
	for _, id := range kept {
		if _, ok := after[id]; ok {
			still++
		}
	}
	t.Logf("FIGURE rollback_replaced_instances=%d (instances of the broken AMI %d; of the last good AMI's %d, %d kept their ids)",
		len(replaced), len(failed), len(kept), still)
	back := suite.Get(t, canary)
	g.Expect(back.Status.LatestTemplateVersion).To(Equal(startVersion), "the rollback makes the last good version the default again")
	for _, id := range kept {
		g.Expect(after).To(HaveKey(id), "instance %s of the last good AMI was replaced by the rollback: after it %v", id, after)
	}
	g.Expect(replaced).To(HaveLen(len(failed)), "the rollback replaced only the broken AMI's %d instance(s): kept %v, after %v", len(failed), kept, after)
	g.Expect(harness.Available(suite.GroupNodes(t, canary))).To(BeNumerically(">=", 3))
}
