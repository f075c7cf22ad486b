package rotation

import (
	"context"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/eks"
	. "github.com/onsi/gomega"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/instancemgr/instance-manager/api/v1alpha1"
	"github.com/instancemgr/instance-manager/providers/aws/ownership"
	"github.com/instancemgr/instance-manager/providers/eksfargate"
	"github.com/instancemgr/instance-manager/providers/eksmanaged"
	"github.com/instancemgr/instance-manager/test/env"
	"github.com/instancemgr/instance-manager/test/harness"
)

// kwokNode registers a Node kwok keeps Ready, with labels; removed when
// the test ends.
func kwokNode(t *testing.T, name string, labels map[string]string) {
	t.Helper()
	n := &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: name, Labels: labels,
		Annotations: map[string]string{env.KwokAnnotation: env.KwokAnnotationValue}}}
	if err := suite.Admin.Create(context.Background(), n); err != nil {
		t.Fatalf("creating node %s: %v", name, err)
	}
	t.Cleanup(func() { _ = client.IgnoreNotFound(suite.Admin.Delete(context.Background(), n)) })
}

// One boundary default (the subnets every eks-managed and eks-fargate
// group takes) changed for 2 managed node groups and 2 Fargate profiles
// with maxConcurrentUpgrades 2: all four are replaced, never more than 2
// at once (in the cloud: groups with two node groups / profiles; in the
// API: slot Leases), the others wait (InitUpgrade, WaitingForUpgradeSlot).
// An app of 4 replicas under a budget of minAvailable 3 on the first old
// node group's nodes keeps at least 3 available pods while the controller
// drains those nodes before DeleteNodegroup; a pod of the first old
// Fargate profile is evicted before DeleteFargateProfile (moto's delete
// leaves pods alone, so only the controller's eviction removes it).
func TestOneDefaultReplacesManagedAndFargateGroupsWithinTheCap(t *testing.T) {
	suite.Require(t)
	g := NewWithT(t)
	ctx := context.Background()
	const ns, cap = "e2e-mslots", 2
	before := suite.Cloud.Boundaries(suite.Cloud.AMIs[0], cap)
	suite.SetBoundaries(t, before)
	suite.Namespace(t, ns)
	var groups []*v1alpha1.InstanceGroup
	for i := range 2 {
		groups = append(groups, &v1alpha1.InstanceGroup{
			ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: fmt.Sprintf("managed-%d", i)},
			Spec: v1alpha1.InstanceGroupSpec{
				Provisioner: v1alpha1.ProvisionerEKSManaged,
				Strategy:    v1alpha1.AwsUpgradeStrategy{Type: v1alpha1.StrategyManaged},
				EKSManaged: &v1alpha1.EKSManagedSpec{MinSize: 1, MaxSize: 3, Configuration: &v1alpha1.EKSManagedConfiguration{
					ClusterName: suite.Cloud.Cluster, InstanceType: "m5.large"}},
			},
		}, &v1alpha1.InstanceGroup{
			ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: fmt.Sprintf("fargate-%d", i)},
			Spec: v1alpha1.InstanceGroupSpec{
				Provisioner: v1alpha1.ProvisionerEKSFargate,
				Strategy:    v1alpha1.AwsUpgradeStrategy{Type: v1alpha1.StrategyManaged},
				EKSFargate: &v1alpha1.EKSFargateSpec{ClusterName: suite.Cloud.Cluster,
					Selectors: []v1alpha1.EKSFargateSelector{{Namespace: ns, Labels: map[string]string{"fargate": fmt.Sprint(i)}}}},
			},
		})
	}
	first := map[string]string{} // group name -> node group / profile before the change
	for _, ig := range groups {
		g.Expect(suite.Admin.Create(ctx, ig)).To(Succeed())
		t.Cleanup(func() { _ = client.IgnoreNotFound(suite.Admin.Delete(context.Background(), ig)) })
	}
	for _, ig := range groups {
		first[ig.Name] = suite.WaitReady(t, ig, 2*time.Minute).Status.ActiveScalingGroupName
	}

	// The app on the first managed group's old nodes, then other nodes of
	// the team to move to.
	oldNG := first["managed-0"]
	for i := range 2 {
		kwokNode(t, fmt.Sprintf("mslots-old-%d", i), map[string]string{eksmanaged.LabelNodegroup: oldNG, "team": ns})
	}
	d := suite.TeamApp(t, ns, 4, intstr.FromInt32(3))
	for i := range 2 {
		kwokNode(t, fmt.Sprintf("mslots-landing-%d", i), map[string]string{"team": ns})
	}
	// A pod of the first Fargate profile, on a Node of its own as on EKS.
	oldProfile := first["fargate-0"]
	kwokNode(t, "fargate-mslots-0", map[string]string{"eks.amazonaws.com/compute-type": "fargate"})
	fpod := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "fargate-job",
		Labels: map[string]string{eksfargate.LabelProfile: oldProfile, "fargate": "0"}},
		Spec: corev1.PodSpec{NodeName: "fargate-mslots-0", Containers: []corev1.Container{{Name: "job", Image: "registry.example/job:1"}}}}
	g.Expect(suite.Admin.Create(ctx, fpod)).To(Succeed())

	// Samplers: the app's available pods; per group, its node groups /
	// profiles in the cloud; slot Leases; states.
	api := eks.NewFromConfig(suite.Env.AWS)
	prefixes := map[string]string{}
	for _, ig := range groups {
		limit := ownership.LimitNodegroup - 9
		if ig.Spec.Provisioner == v1alpha1.ProvisionerEKSFargate {
			limit = ownership.LimitFargateProfile - 9
		}
		prefixes[ig.Name] = ownership.Name(limit, suite.Cloud.Cluster, ns, ig.Name) + "-"
	}
	var mu sync.Mutex
	minPods, maxReplacing, maxHolders, samples := int32(1<<30), 0, 0, 0
	waited := map[string]bool{}
	var sampleErrs []error
	stop, done := make(chan struct{}), make(chan struct{})
	go func() {
		defer close(done)
		for {
			select {
			case <-stop:
				return
			case <-time.After(100 * time.Millisecond):
			}
			ngs, err1 := api.ListNodegroups(ctx, &eks.ListNodegroupsInput{ClusterName: aws.String(suite.Cloud.Cluster)})
			fps, err2 := api.ListFargateProfiles(ctx, &eks.ListFargateProfilesInput{ClusterName: aws.String(suite.Cloud.Cluster)})
			holders, err3 := slotHolders(ctx)
			igs := &v1alpha1.InstanceGroupList{}
			err4 := suite.Admin.List(ctx, igs, client.InNamespace(ns))
			n := suite.AvailableReplicas(d)
			mu.Lock()
			if err := firstErr(err1, err2, err3, err4); err != nil {
				sampleErrs = append(sampleErrs, err)
				mu.Unlock()
				continue
			}
			replacing := 0
			for name, prefix := range prefixes {
				count := 0
				for _, r := range append(append([]string{}, ngs.Nodegroups...), fps.FargateProfileNames...) {
					if r == first[name] || strings.HasPrefix(r, prefix) || strings.HasPrefix(r, ownership.Name(ownership.LimitNodegroup, suite.Cloud.Cluster, ns, name)) {
						count++
					}
				}
				if count > 1 {
					replacing++
				}
			}
			mine := 0
			for _, h := range holders {
				if strings.HasPrefix(h, ns+"/") {
					mine++
				}
			}
			for _, ig := range igs.Items {
				if ig.Status.CurrentState == v1alpha1.StateInitUpgrade {
					waited[ig.Name] = true
				}
			}
			maxReplacing, maxHolders, samples = max(maxReplacing, replacing), max(maxHolders, mine), samples+1
			if n >= 0 {
				minPods = min(minPods, n)
			}
			mu.Unlock()
		}
	}()

	// The admin's change: one subnet instead of two for every group.
	suite.SetBoundaries(t, suite.Cloud.WithoutFirstSubnet(t, before))

	for _, ig := range groups {
		g.Eventually(func(g Gomega) {
			cur := suite.Get(t, ig)
			g.Expect(cur.Status.ActiveScalingGroupName).NotTo(Equal(first[ig.Name]))
			g.Expect(cur.Status.CurrentState).To(Equal(v1alpha1.StateReady))
			g.Expect(cur.Status.RetiringScalingGroupNames).To(BeEmpty())
		}, 4*time.Minute, 500*time.Millisecond).Should(Succeed(), "%s is replaced", ig.Name)
	}
	g.Eventually(func(g Gomega) {
		ngs, err := api.ListNodegroups(ctx, &eks.ListNodegroupsInput{ClusterName: aws.String(suite.Cloud.Cluster)})
		g.Expect(err).NotTo(HaveOccurred())
		fps, err := api.ListFargateProfiles(ctx, &eks.ListFargateProfilesInput{ClusterName: aws.String(suite.Cloud.Cluster)})
		g.Expect(err).NotTo(HaveOccurred())
		for _, old := range first {
			g.Expect(ngs.Nodegroups).NotTo(ContainElement(old))
			g.Expect(fps.FargateProfileNames).NotTo(ContainElement(old))
		}
	}, harness.ConvergeTimeout, 250*time.Millisecond).Should(Succeed(), "every old node group and profile is deleted")
	g.Eventually(func() int32 { return suite.AvailableReplicas(d) }, time.Minute, 250*time.Millisecond).Should(BeEquivalentTo(4))
	close(stop)
	<-done

	mu.Lock()
	defer mu.Unlock()
	t.Logf("%d samples: at most %d group(s) replacing at once in the cloud, %d slot Lease(s) of the namespace; groups that waited for a slot: %v; app's fewest available pods %d",
		samples, maxReplacing, maxHolders, waited, minPods)
	g.Expect(sampleErrs).To(BeEmpty())
	g.Expect(samples).To(BeNumerically(">", 10))
	g.Expect(maxReplacing).To(BeNumerically("<=", cap), "never more than maxConcurrentUpgrades groups with two node groups / profiles")
	g.Expect(maxHolders).To(BeNumerically("<=", cap))
	g.Expect(len(waited)).To(BeNumerically(">=", 1), "with 4 groups and 2 slots, some group waited for a slot")
	g.Expect(minPods).To(BeNumerically(">=", 3), "the PodDisruptionBudget (minAvailable 3 of 4) held at every sample")
	for _, n := range suite.PodNodes(t, ns) {
		g.Expect(n).To(HavePrefix("mslots-landing-"), "the app left the old node group's nodes")
	}
	err := suite.Admin.Get(ctx, client.ObjectKeyFromObject(fpod), &corev1.Pod{})
	g.Expect(client.IgnoreNotFound(err)).To(Succeed())
	g.Expect(err).To(HaveOccurred(), "the old Fargate profile's pod was evicted")
	for _, name := range []string{"mslots-old-0", "mslots-old-1"} {
		node := &corev1.Node{}
		g.Expect(suite.Admin.Get(ctx, client.ObjectKey{Name: name}, node)).To(Succeed())
		g.Expect(node.Spec.Unschedulable).To(BeTrue(), "%s was cordoned for its drain", name)
	}
	for _, ig := range groups {
		g.Expect(suite.Admin.Delete(ctx, ig)).To(Succeed())
	}
	for _, ig := range groups {
		harness.WaitGone(t, suite.Admin, []*v1alpha1.InstanceGroup{ig}, 2*time.Minute)
	}
}

func firstErr(errs ...error) error {
	for _, err := range errs {
		if err != nil {
			return err
		}
	}
	return nil
}
