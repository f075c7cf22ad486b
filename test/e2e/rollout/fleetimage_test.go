package rollout

import (
	"context"
	"fmt"
	"maps"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/eks"
	"github.com/aws/aws-sdk-go-v2/service/ssm"
	ssmtypes "github.com/aws/aws-sdk-go-v2/service/ssm/types"
	. "github.com/onsi/gomega"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/instancemgr/instance-manager/api/v1alpha1"
	"github.com/instancemgr/instance-manager/boundaries"
	"github.com/instancemgr/instance-manager/boundaries/record"
	"github.com/instancemgr/instance-manager/test/harness"
)

// publishImage sets the SSM parameter name to ami, as a platform team's
// image pipeline (or AWS, for its public parameters) publishes a new AMI.
func publishImage(t *testing.T, name, ami string) {
	t.Helper()
	_, err := ssm.NewFromConfig(suite.Env.AWS).PutParameter(context.Background(), &ssm.PutParameterInput{
		Name: aws.String(name), Value: aws.String(ami), Type: ssmtypes.ParameterTypeString, Overwrite: aws.Bool(true)})
	if err != nil {
		t.Fatalf("PutParameter %s=%s: %v", name, ami, err)
	}
}

// recordPins is the rollout record's pins key ("" for none).
func recordPins(ctx context.Context) (string, error) {
	cm := &corev1.ConfigMap{}
	if err := suite.Admin.Get(ctx, harness.RolloutRecordKey, cm); err != nil {
		return "", client.IgnoreNotFound(err)
	}
	return cm.Data[boundaries.KeyPins], nil
}

// waitPinnedRollout waits until the record rolls out, in phase, the
// revision data makes with the record's pins holding ami, and returns
// the record.
func waitPinnedRollout(t *testing.T, data map[string]string, ami, phase string, timeout time.Duration) *record.Record {
	t.Helper()
	var rec *record.Record
	NewWithT(t).Eventually(func() error {
		ctx := context.Background()
		pins, err := recordPins(ctx)
		if err != nil {
			return err
		}
		p, err := boundaries.DecodePins(pins)
		if err != nil || p == nil || !slices.Contains(slices.Collect(maps.Values(p.Images)), ami) {
			return fmt.Errorf("the record pins %q, not yet %s (%v)", pins, ami, err)
		}
		target := boundaries.Revision(boundaries.WithPins(data, pins))
		if rec, err = harness.RolloutRecord(ctx, suite.Admin); err != nil {
			return err
		}
		if rec.Target != target || rec.Phase != phase {
			return fmt.Errorf("the record rolls out %s in phase %s (%s), want %s in %s", rec.Target, rec.Phase, rec.Message, target, phase)
		}
		return nil
	}, timeout, time.Second).Should(Succeed())
	return rec
}

// deleteAndUnpin deletes groups when the test ends and waits until the
// record pins nothing: later tests compute revisions from the ConfigMap
// alone, and the pins go once no group uses a reference.
func deleteAndUnpin(t *testing.T, groups ...*v1alpha1.InstanceGroup) {
	t.Cleanup(func() {
		for _, ig := range groups {
			_ = client.IgnoreNotFound(suite.Admin.Delete(context.Background(), ig))
		}
		NewWithT(t).Eventually(func() (string, error) { return recordPins(context.Background()) }, 3*harness.ConvergeTimeout, time.Second).
			Should(BeEmpty(), "the pins are cleared once no group uses a reference")
	})
}

// An AMI published under the SSM parameter that the groups' image
// (ssm://...) names is a new boundaries revision, rolled out in the
// policy's waves: the canary moves first; a broken AMI (its instances
// never join) halts the rollout after the canary with the other group
// untouched; rollback returns the canary to the last good AMI; a good AMI
// then reaches every group. Without the pins, every group would follow
// the parameter within the provisioner's 10-minute cache, at once.
func TestAPublishedImageRollsOutInWaves(t *testing.T) {
	suite.Require(t)
	g := NewWithT(t)
	ctx := context.Background()
	const param, canaryNS = "/e2e/fleet/ami", "e2e-pin-canary"
	publishImage(t, param, suite.Cloud.AMIs[0])
	t.Cleanup(func() {
		_, _ = ssm.NewFromConfig(suite.Env.AWS).DeleteParameter(context.Background(), &ssm.DeleteParameterInput{Name: aws.String(param)})
	})
	const allow = "ssmParameterPrefixes: [/aws/service/, /e2e/]\n"
	plain := suite.Cloud.Boundaries("ssm://"+param, 5)
	plain["allowlists"] = allow
	suite.SetBoundaries(t, plain)
	waitRecord(t, boundaries.Revision(plain), record.PhaseComplete, harness.ConvergeTimeout)
	data := rolloutBoundaries("ssm://"+param, canaryNS, "5s", "45s")
	data["allowlists"] = allow
	suite.SetBoundaries(t, data)
	canary, others := rolloutGroups(t, "e2e-pin")
	g.Expect(canary.Namespace).To(Equal(canaryNS))
	other := others[0]
	deleteAndUnpin(t, append(others, canary)...)

	// Pinning the parameter the groups started using moves no AMI.
	waitPinnedRollout(t, data, suite.Cloud.AMIs[0], record.PhaseComplete, harness.ConvergeTimeout)
	for _, ig := range []*v1alpha1.InstanceGroup{canary, other} {
		cur := suite.Get(t, ig)
		g.Expect(cur.Spec.EKS.Configuration.ResolvedImage).To(Equal(suite.Cloud.AMIs[0]), "%s/%s pins the parameter's AMI", ig.Namespace, ig.Name)
	}
	otherBefore, err := instanceImages(ctx, suite.Get(t, other))
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(idsOn(otherBefore, suite.Cloud.AMIs[0])).To(HaveLen(len(otherBefore)))

	// A broken AMI is published: the canary takes it and fails; the rest
	// never sees it.
	suite.Env.Bridge.SetNeverJoinImages(suite.Cloud.AMIs[2])
	t.Cleanup(func() { suite.Env.Bridge.SetNeverJoinImages() })
	publishImage(t, param, suite.Cloud.AMIs[2])
	rec := waitPinnedRollout(t, data, suite.Cloud.AMIs[2], record.PhaseHalted, 5*time.Minute)
	g.Expect(rec.Halt.Groups).To(Equal([]string{canaryNS + "/nodes"}))
	g.Expect(rec.Changes).To(ContainElement(record.Change{Path: "pins.images[" + param + "]", Old: suite.Cloud.AMIs[0], New: suite.Cloud.AMIs[2]}),
		"the record shows the AMI change")
	otherNow := suite.Get(t, other)
	g.Expect(otherNow.Spec.EKS.Configuration.ResolvedImage).To(Equal(suite.Cloud.AMIs[0]), "the other wave's group keeps its AMI")
	otherAfter, err := instanceImages(ctx, otherNow)
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(otherAfter).To(Equal(otherBefore), "no instance of the other wave's group was replaced")

	// Rollback: the canary returns to the last good AMI.
	rolloutAction(t, record.ActionRollback)
	waitPinnedRollout(t, data, suite.Cloud.AMIs[2], record.PhaseRolledBack, harness.ConvergeTimeout)
	onlyOn(t, canary, suite.Cloud.AMIs[0], 2*harness.ConvergeTimeout)

	// A good AMI reaches every group, canary first.
	suite.Env.Bridge.SetNeverJoinImages()
	publishImage(t, param, suite.Cloud.AMIs[1])
	waitPinnedRollout(t, data, suite.Cloud.AMIs[1], record.PhaseComplete, 5*time.Minute)
	for _, ig := range append([]*v1alpha1.InstanceGroup{canary}, others...) {
		onlyOn(t, ig, suite.Cloud.AMIs[1], harness.ConvergeTimeout)
	}
}

// rolloutAction annotates the rollout record with the admin's action.
func rolloutAction(t *testing.T, action string) {
	t.Helper()
	g := NewWithT(t)
	ctx := context.Background()
	cm := &corev1.ConfigMap{}
	g.Expect(suite.Admin.Get(ctx, harness.RolloutRecordKey, cm)).To(Succeed())
	patch := client.MergeFrom(cm.DeepCopy())
	metav1.SetMetaDataAnnotation(&cm.ObjectMeta, record.AnnotationAction, action)
	g.Expect(suite.Admin.Patch(ctx, cm, patch)).To(Succeed())
}

// onlyOn waits until ig pins ami and every instance of it runs ami.
func onlyOn(t *testing.T, ig *v1alpha1.InstanceGroup, ami string, timeout time.Duration) {
	t.Helper()
	NewWithT(t).Eventually(func() error {
		cur := suite.Get(t, ig)
		if cur.Spec.EKS.Configuration.ResolvedImage != ami || cur.Status.CurrentState != v1alpha1.StateReady ||
			cur.Status.ObservedGeneration != cur.Generation || cur.Status.NodesUpdated != cur.Status.NodesTotal {
			return fmt.Errorf("%s/%s pins %s, state %s, %d of %d updated", ig.Namespace, ig.Name, cur.Spec.EKS.Configuration.ResolvedImage,
				cur.Status.CurrentState, cur.Status.NodesUpdated, cur.Status.NodesTotal)
		}
		images, err := instanceImages(context.Background(), cur)
		if err != nil {
			return err
		}
		if len(images) == 0 || len(idsOn(images, ami)) != len(images) {
			return fmt.Errorf("%s/%s instances %v, want all on %s", ig.Namespace, ig.Name, images, ami)
		}
		return nil
	}, timeout, time.Second).Should(Succeed())
}

// An EKS control-plane upgrade changes the AMI `image: latest` resolves
// to; it rolls out in the policy's waves like a published AMI: the
// canary first; a new AMI whose instances never join halts the rollout
// with the other groups untouched; rollback returns the canary; once the
// AMI works (here: its instances join), resume takes it to every group.
func TestAControlPlaneUpgradeRollsOutInWaves(t *testing.T) {
	suite.Require(t)
	g := NewWithT(t)
	ctx := context.Background()
	const canaryNS = "e2e-cp-canary"
	plain := suite.Cloud.Boundaries(v1alpha1.ImageLatest, 5)
	suite.SetBoundaries(t, plain)
	waitRecord(t, boundaries.Revision(plain), record.PhaseComplete, harness.ConvergeTimeout)
	data := rolloutBoundaries(v1alpha1.ImageLatest, canaryNS, "5s", "45s")
	suite.SetBoundaries(t, data)
	canary, others := rolloutGroups(t, "e2e-cp")
	g.Expect(canary.Namespace).To(Equal(canaryNS))
	deleteAndUnpin(t, append(others, canary)...)

	api := eks.NewFromConfig(suite.Env.AWS)
	desc, err := api.DescribeCluster(ctx, &eks.DescribeClusterInput{Name: aws.String(suite.Cloud.Cluster)})
	g.Expect(err).NotTo(HaveOccurred())
	from := aws.ToString(desc.Cluster.Version)
	minor, err := strconv.Atoi(strings.TrimPrefix(from, "1."))
	g.Expect(err).NotTo(HaveOccurred(), "cluster version %q", from)
	to := fmt.Sprintf("1.%d", minor+1)
	published := func(version string) string {
		out, err := ssm.NewFromConfig(suite.Env.AWS).GetParameter(ctx, &ssm.GetParameterInput{Name: aws.String(v1alpha1.LatestImageParameter(version, "", ""))})
		g.Expect(err).NotTo(HaveOccurred())
		return aws.ToString(out.Parameter.Value)
	}
	oldAMI, newAMI := published(from), published(to)
	g.Expect(newAMI).NotTo(Equal(oldAMI), "the premise: AWS recommends another AMI for %s", to)
	waitPinnedRollout(t, data, oldAMI, record.PhaseComplete, harness.ConvergeTimeout)
	otherBefore, err := instanceImages(ctx, suite.Get(t, others[0]))
	g.Expect(err).NotTo(HaveOccurred())

	suite.Env.Bridge.SetNeverJoinImages(newAMI)
	t.Cleanup(func() { suite.Env.Bridge.SetNeverJoinImages() })
	_, err = api.UpdateClusterVersion(ctx, &eks.UpdateClusterVersionInput{Name: aws.String(suite.Cloud.Cluster), Version: aws.String(to)})
	g.Expect(err).NotTo(HaveOccurred())
	rec := waitPinnedRollout(t, data, newAMI, record.PhaseHalted, 5*time.Minute)
	g.Expect(rec.Halt.Groups).To(Equal([]string{canaryNS + "/nodes"}))
	g.Expect(rec.Changes).To(ContainElement(record.Change{Path: "pins.clusterVersions[" + suite.Cloud.Cluster + "]", Old: from, New: to}),
		"the record shows the control-plane version change")
	for _, ig := range others {
		g.Expect(suite.Get(t, ig).Spec.EKS.Configuration.ResolvedImage).To(Equal(oldAMI), "%s/%s keeps its AMI", ig.Namespace, ig.Name)
	}
	otherAfter, err := instanceImages(ctx, suite.Get(t, others[0]))
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(otherAfter).To(Equal(otherBefore), "no instance of the other waves' groups was replaced")

	rolloutAction(t, record.ActionRollback)
	waitPinnedRollout(t, data, newAMI, record.PhaseRolledBack, harness.ConvergeTimeout)
	onlyOn(t, canary, oldAMI, 2*harness.ConvergeTimeout)

	suite.Env.Bridge.SetNeverJoinImages()
	rolloutAction(t, record.ActionResume)
	waitPinnedRollout(t, data, newAMI, record.PhaseComplete, 5*time.Minute)
	for _, ig := range append([]*v1alpha1.InstanceGroup{canary}, others...) {
		onlyOn(t, ig, newAMI, harness.ConvergeTimeout)
	}
}
