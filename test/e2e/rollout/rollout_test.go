package rollout

import (
	"context"
	"fmt"
	"testing"
	"time"

	. "github.com/onsi/gomega"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/instancemgr/instance-manager/api/v1alpha1"
	"github.com/instancemgr/instance-manager/app"
	"github.com/instancemgr/instance-manager/boundaries"
	"github.com/instancemgr/instance-manager/boundaries/record"
	"github.com/instancemgr/instance-manager/boundaries/store"
	"github.com/instancemgr/instance-manager/reconciler/rollout"
	"github.com/instancemgr/instance-manager/test/harness"
)

// rolloutBoundaries is the fixture's ConfigMap with a rollout policy: a
// canary wave of the groups of namespace canary, then the rest.
func rolloutBoundaries(image, canary, soak, startupTimeout string) map[string]string {
	d := suite.Cloud.Boundaries(image, 5)
	d["rollout"] = fmt.Sprintf(`maxConcurrentUpgrades: 5
soak: %s
failure:
  startupTimeout: %s
waves:
- name: canary
  namespaces: [%s]
`, soak, startupTimeout, canary)
	return d
}

// waitRecord waits until the record rolls out revision target in phase.
func waitRecord(t *testing.T, target, phase string, timeout time.Duration) *record.Record {
	t.Helper()
	return harness.WaitRolloutRecord(t, suite.Admin, target, phase, timeout)
}

func image(ig *v1alpha1.InstanceGroup) string { return ig.Spec.EKS.Configuration.Image }

func boundariesStatus(ig *v1alpha1.InstanceGroup) v1alpha1.BoundariesStatus {
	if ig.Status.Boundaries == nil {
		return v1alpha1.BoundariesStatus{}
	}
	return *ig.Status.Boundaries
}

// startFrom makes image's revision the stable one: set without a policy
// (at once), then with the policy (the same revision: no rollout).
func startFrom(t *testing.T, image string, policy map[string]string) string {
	t.Helper()
	plain := suite.Cloud.Boundaries(image, 5)
	suite.SetBoundaries(t, plain)
	rev := boundaries.Revision(plain)
	waitRecord(t, rev, record.PhaseComplete, harness.ConvergeTimeout)
	suite.SetBoundaries(t, policy)
	if got := boundaries.Revision(policy); got != rev {
		t.Fatalf("the policy changed the revision: %s, %s", rev, got)
	}
	return rev
}

// rolloutGroups creates a Ready group in the canary namespace and in two
// others.
func rolloutGroups(t *testing.T, prefix string) (*v1alpha1.InstanceGroup, []*v1alpha1.InstanceGroup) {
	t.Helper()
	groups := suite.ReadyGroups(t, prefix+"-canary", prefix+"-b", prefix+"-c")
	return groups[0], groups[1:]
}

// An AMI change with a canary wave reaches the canary first, and the other
// groups only after the canary is Ready on it and has soaked.
func TestBoundaryRolloutReachesEveryGroupInWaveOrder(t *testing.T) {
	suite.Require(t)
	g := NewWithT(t)
	ctx := context.Background()
	startFrom(t, suite.Cloud.AMIs[0], rolloutBoundaries(suite.Cloud.AMIs[0], "e2e-wave-canary", "10s", "5m"))
	canary, others := rolloutGroups(t, "e2e-wave")

	next := rolloutBoundaries(suite.Cloud.AMIs[1], "e2e-wave-canary", "10s", "5m")
	target := boundaries.Revision(next)
	suite.SetBoundaries(t, next)
	canaryDone := false
	g.Eventually(func() error {
		byKey, err := suite.GroupsByKey(ctx)
		if err != nil {
			return err
		}
		c := byKey[canary.Namespace+"/"+canary.Name]
		if image(c) == suite.Cloud.AMIs[1] && c.Status.CurrentState == v1alpha1.StateReady && c.Status.ObservedGeneration == c.Generation &&
			c.Status.NodesUpdated == c.Status.NodesTotal {
			canaryDone = true
		}
		waiting := 0
		for _, o := range others {
			cur := byKey[o.Namespace+"/"+o.Name]
			if image(cur) == suite.Cloud.AMIs[1] {
				if !canaryDone {
					return StopTrying(fmt.Sprintf("%s/%s got the new image before the canary was Ready on it", o.Namespace, o.Name))
				}
				if cur.Status.CurrentState == v1alpha1.StateReady && cur.Status.ObservedGeneration == cur.Generation && boundariesStatus(cur).Revision == target {
					continue
				}
			} else if st := boundariesStatus(cur); st.PendingRevision == target && st.Revision == target {
				return StopTrying("a held group reports the target as both its revision and pending")
			}
			waiting++
		}
		if !canaryDone || waiting > 0 {
			return fmt.Errorf("canary done %v, %d other group(s) not on the new image and Ready", canaryDone, waiting)
		}
		return nil
	}, 8*time.Minute, 200*time.Millisecond).Should(Succeed())

	rec := waitRecord(t, target, record.PhaseComplete, harness.ConvergeTimeout)
	g.Expect(rec.Stable).To(Equal(target), "the completed revision is the last good one")
	g.Expect(rec.Waves).To(HaveLen(2))
	g.Expect(rec.Waves[0].Groups).To(HaveLen(1))
	g.Expect(rec.Waves[0].Groups[0].Group).To(Equal(canary.Namespace + "/" + canary.Name))
	for _, reason := range []string{rollout.ReasonWaveStarted, rollout.ReasonWaveCompleted, rollout.ReasonComplete} {
		_, err := harness.WaitForEvent(ctx, suite.Admin, harness.ConfigNamespace, app.ConfigMapName, reason, target, harness.BoundariesLoadTimeout)
		g.Expect(err).NotTo(HaveOccurred())
	}
}

// An AMI whose nodes never join halts the rollout after the canary wave
// with every other group untouched; a tenant's edit meanwhile is admitted
// against its group's revision; rollback returns the canary to the last
// good AMI with a rolling update.
func TestBoundaryRolloutHaltsOnABrokenImageAndRollsBack(t *testing.T) {
	suite.Require(t)
	g := NewWithT(t)
	ctx := context.Background()
	stable := startFrom(t, suite.Cloud.AMIs[0], rolloutBoundaries(suite.Cloud.AMIs[0], "e2e-halt-canary", "5s", "45s"))
	canary, others := rolloutGroups(t, "e2e-halt")
	before := map[string]*v1alpha1.InstanceGroup{}
	for _, o := range others {
		before[o.Namespace] = suite.Get(t, o)
	}

	suite.Env.Bridge.SetNeverJoinImages(suite.Cloud.AMIs[2])
	t.Cleanup(func() { suite.Env.Bridge.SetNeverJoinImages() })
	broken := rolloutBoundaries(suite.Cloud.AMIs[2], "e2e-halt-canary", "5s", "45s")
	target := boundaries.Revision(broken)
	suite.SetBoundaries(t, broken)

	rec := waitRecord(t, target, record.PhaseHalted, 5*time.Minute)
	t.Logf("halted: %s; canary moved at %s, clock from %s, halted at %s", rec.Halt.Reason,
		rec.Waves[0].Groups[0].MovedAt, rec.Waves[0].Groups[0].Since, rec.Halt.At)
	g.Expect(rec.Halt.Wave).To(Equal("canary"))
	g.Expect(rec.Halt.Groups).To(Equal([]string{canary.Namespace + "/" + canary.Name}))
	g.Expect(rec.Halt.Criterion).To(Equal(record.CriterionStartupTimeout))
	g.Expect(rec.Wave).To(Equal(0), "no wave after the canary started")
	_, err := harness.WaitForEvent(ctx, suite.Admin, harness.ConfigNamespace, app.ConfigMapName, rollout.ReasonHalted, target, harness.BoundariesLoadTimeout)
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(image(suite.Get(t, canary))).To(Equal(suite.Cloud.AMIs[2]))

	// Every other group is untouched: same spec, same generation, held
	// on the last good revision with the target pending.
	for _, o := range others {
		g.Eventually(func() string {
			cur := suite.Get(t, o)
			c := meta.FindStatusCondition(cur.Status.Conditions, v1alpha1.ConditionBoundariesApplied)
			if c == nil {
				return "no BoundariesApplied"
			}
			return fmt.Sprintf("%+v %s", boundariesStatus(cur), c.Reason)
		}, harness.ConvergeTimeout, 500*time.Millisecond).Should(Equal(fmt.Sprintf("%+v %s",
			v1alpha1.BoundariesStatus{Revision: stable, PendingRevision: target}, store.RolloutHalted)))
		cur := suite.Get(t, o)
		g.Expect(cur.Generation).To(Equal(before[o.Namespace].Generation), "%s/%s changed", o.Namespace, o.Name)
		g.Expect(image(cur)).To(Equal(suite.Cloud.AMIs[0]))
		g.Expect(cur.Status.LatestTemplateVersion).To(Equal(before[o.Namespace].Status.LatestTemplateVersion))
	}

	// A tenant's edit during the halted rollout is admitted, merged with
	// the revision its group runs.
	edited := suite.Get(t, others[0])
	edited.Spec.EKS.MaxSize = 3
	g.Expect(suite.Admin.Update(ctx, edited)).To(Succeed())
	edited = suite.Get(t, others[0])
	g.Expect(edited.Spec.EKS.MaxSize).To(Equal(int64(3)))
	g.Expect(image(edited)).To(Equal(suite.Cloud.AMIs[0]), "the edit keeps the last good AMI")
	canaryEdit := suite.Get(t, canary)
	canaryEdit.Spec.EKS.MaxSize = 3
	g.Expect(suite.Admin.Update(ctx, canaryEdit)).To(Succeed())
	g.Expect(image(suite.Get(t, canary))).To(Equal(suite.Cloud.AMIs[2]), "the canary's edit keeps the revision it runs")

	// Rollback: the canary returns to the last good AMI as a normal
	// rolling update; the rest stays as it is.
	cm := &corev1.ConfigMap{}
	g.Expect(suite.Admin.Get(ctx, harness.RolloutRecordKey, cm)).To(Succeed())
	patch := client.MergeFrom(cm.DeepCopy())
	metav1.SetMetaDataAnnotation(&cm.ObjectMeta, record.AnnotationAction, record.ActionRollback)
	g.Expect(suite.Admin.Patch(ctx, cm, patch)).To(Succeed())
	rec = waitRecord(t, target, record.PhaseRolledBack, harness.ConvergeTimeout)
	g.Expect(rec.RolledBack).To(Equal([]string{canary.Namespace + "/" + canary.Name}))
	g.Eventually(func() string { return image(suite.Get(t, canary)) }, 2*harness.ConvergeTimeout, 500*time.Millisecond).Should(Equal(suite.Cloud.AMIs[0]))
	back := suite.WaitReady(t, canary, 5*time.Minute)
	g.Expect(back.Status.NodesUpdated).To(Equal(back.Status.NodesTotal))
	g.Expect(harness.Available(suite.GroupNodes(t, canary))).To(BeNumerically(">=", 1))
	g.Eventually(func() v1alpha1.BoundariesStatus { return boundariesStatus(suite.Get(t, canary)) }, harness.ConvergeTimeout, 500*time.Millisecond).
		Should(Equal(v1alpha1.BoundariesStatus{Revision: stable, PendingRevision: target, Wave: "canary"}))
	g.Expect(suite.Admin.Get(ctx, harness.RolloutRecordKey, cm)).To(Succeed())
	g.Expect(cm.Annotations).NotTo(HaveKey(record.AnnotationAction), "the action is consumed")
	for _, o := range others {
		g.Expect(image(suite.Get(t, o))).To(Equal(suite.Cloud.AMIs[0]))
	}
}
