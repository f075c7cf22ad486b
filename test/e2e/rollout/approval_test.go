package rollout

import (
	"context"
	"testing"
	"time"

	. "github.com/onsi/gomega"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/instancemgr/instance-manager/boundaries"
	"github.com/instancemgr/instance-manager/boundaries/record"
	"github.com/instancemgr/instance-manager/test/harness"
)

// A wave with approval: manual waits for the admin's approve action on
// the rollout record: before it, the record says so, shows the plan (the
// wave's group, the image change, the estimate) and the wave's group
// keeps its AMI; the annotation starts the wave, is consumed, and the
// rollout completes with the planned group.
func TestWaveWaitsForTheAdminsApproval(t *testing.T) {
	suite.Require(t)
	g := NewWithT(t)
	ctx := context.Background()
	policy := "maxConcurrentUpgrades: 5\nsoak: 1s\nwaves:\n- {name: canary, namespaces: [e2e-approve-a], approval: manual}\n"
	start := suite.Cloud.Boundaries(suite.Cloud.AMIs[0], 5)
	start["rollout"] = policy
	startFrom(t, suite.Cloud.AMIs[0], start)
	ig := suite.ReadyGroups(t, "e2e-approve-a")[0]

	next := suite.Cloud.Boundaries(suite.Cloud.AMIs[1], 5)
	next["rollout"] = policy
	target := boundaries.Revision(next)
	suite.SetBoundaries(t, next)
	g.Eventually(func() string {
		r, err := harness.RolloutRecord(ctx, suite.Admin)
		if err != nil || r.Target != target {
			return "no record of the target yet"
		}
		return r.WaitingFor
	}, harness.ConvergeTimeout, time.Second).Should(ContainSubstring("wave canary waits for the admin's approval"))
	g.Consistently(func() string { return image(suite.Get(t, ig)) }, 5*time.Second, time.Second).Should(Equal(suite.Cloud.AMIs[0]), "nothing moves before the approval")

	// The plan, before anything moves.
	key := ig.Namespace + "/" + ig.Name
	plan, err := harness.RolloutRecord(ctx, suite.Admin)
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(plan.Waves[0].Planned).To(Equal([]string{key}), "the canary's plan names its group")
	g.Expect(plan.Waves[0].PlannedCount).To(Equal(1))
	g.Expect(plan.Waves[0].Estimate).NotTo(BeEmpty())
	g.Expect(plan.Changes).To(ContainElement(record.Change{Path: "spec.eks.configuration.image", Old: suite.Cloud.AMIs[0], New: suite.Cloud.AMIs[1]}), "the plan shows the image change")
	g.Expect(plan.Message).To(ContainSubstring("next wave 1/2 canary: 1 group(s)"))

	cm := &corev1.ConfigMap{}
	g.Expect(suite.Admin.Get(ctx, harness.RolloutRecordKey, cm)).To(Succeed())
	patch := client.MergeFrom(cm.DeepCopy())
	metav1.SetMetaDataAnnotation(&cm.ObjectMeta, record.AnnotationAction, record.ActionApprove)
	g.Expect(suite.Admin.Patch(ctx, cm, patch)).To(Succeed())
	rec := waitRecord(t, target, record.PhaseComplete, 6*time.Minute)
	g.Expect(rec.Waves[0].ApprovedAt).NotTo(BeNil())
	g.Expect(rec.Waves[0].Groups).To(HaveLen(1))
	g.Expect(rec.Waves[0].Groups[0].Group).To(Equal(key), "the wave took the group it planned")
	g.Expect(rec.LastAction).To(HavePrefix("approve of wave canary at "))
	g.Expect(image(suite.Get(t, ig))).To(Equal(suite.Cloud.AMIs[1]))
	g.Expect(suite.Admin.Get(ctx, harness.RolloutRecordKey, cm)).To(Succeed())
	g.Expect(cm.Annotations).NotTo(HaveKey(record.AnnotationAction), "the action is consumed")
}
