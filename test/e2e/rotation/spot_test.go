package rotation

import (
	"context"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/ec2"
	. "github.com/onsi/gomega"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/instancemgr/instance-manager/api/v1alpha1"
	"github.com/instancemgr/instance-manager/reconciler/instancegroup"
	"github.com/instancemgr/instance-manager/test/harness"
)

// recommend publishes a spot recommendation Event for an Auto Scaling group
// the way minion-manager does.
func recommend(t *testing.T, namespace, group, message string) {
	t.Helper()
	now := metav1.Now()
	ev := &corev1.Event{
		ObjectMeta:     metav1.ObjectMeta{Namespace: namespace, GenerateName: "spot-recommendation-"},
		InvolvedObject: corev1.ObjectReference{Kind: "AutoScalingGroup", Name: group, Namespace: namespace},
		Reason:         instancegroup.ReasonSpotRecommendation, Message: message, Type: corev1.EventTypeNormal,
		FirstTimestamp: now, LastTimestamp: now, Source: corev1.EventSource{Component: "minion-manager"},
	}
	if err := suite.Admin.Create(context.Background(), ev); err != nil {
		t.Fatal(err)
	}
}

// defaultSpotPrice is the spot max price of the launch template's default
// version, the one the group launches from ("" for on-demand).
func defaultSpotPrice(t *testing.T, template string) string {
	t.Helper()
	out, err := ec2.NewFromConfig(suite.Env.AWS).DescribeLaunchTemplateVersions(context.Background(),
		&ec2.DescribeLaunchTemplateVersionsInput{LaunchTemplateName: aws.String(template), Versions: []string{"$Default"}})
	if err != nil || len(out.LaunchTemplateVersions) == 0 {
		t.Fatalf("describing launch template %s: %v", template, err)
	}
	d := out.LaunchTemplateVersions[0].LaunchTemplateData
	if d.InstanceMarketOptions == nil || d.InstanceMarketOptions.SpotOptions == nil {
		return ""
	}
	return aws.ToString(d.InstanceMarketOptions.SpotOptions.MaxPrice)
}

func TestSpotRecommendationsSwitchBetweenSpotAndOnDemand(t *testing.T) {
	suite.Require(t)
	g := NewWithT(t)
	ctx := context.Background()
	suite.SetBoundaries(t, suite.Cloud.Boundaries(suite.Cloud.AMIs[0], 5))
	suite.Namespace(t, "e2e-spot")
	ig := harness.ShortGroup("e2e-spot", "spot", 1, 2)
	suite.Create(t, ig)
	ready := suite.WaitReady(t, ig, 3*time.Minute)
	g.Expect(ready.Status.Lifecycle).To(Equal(v1alpha1.LifecycleNormal))

	recommend(t, "e2e-spot", ready.Status.ActiveScalingGroupName, `{"apiVersion":"v1alpha1","spotPrice":"0.0067","useSpot":true}`)
	g.Eventually(func() string { return describe(suite.Get(t, ig)) + " " + suite.Get(t, ig).Status.Lifecycle },
		3*time.Minute, time.Second).Should(Equal("Ready v2 1/1 surge 0 spot"))
	cur := suite.Get(t, ig)
	g.Expect(cur.Status.UsingSpotRecommendation).To(BeTrue())
	g.Expect(cur.Spec.EKS.Configuration.SpotPrice).To(BeEmpty(), "the stored spec is not changed")
	g.Expect(defaultSpotPrice(t, cur.Status.ActiveLaunchTemplateName)).To(Equal("0.0067"))

	time.Sleep(1100 * time.Millisecond) // Event timestamps have second precision
	recommend(t, "e2e-spot", ready.Status.ActiveScalingGroupName, `{"apiVersion":"v1alpha1","spotPrice":"0.0067","useSpot":false}`)
	// Back to on-demand is back to version 1's content: drift is judged by
	// content, so version 1 is the default again (no identical version 3)
	// and the spot instance is replaced by an on-demand one from it.
	g.Eventually(func() string { return describe(suite.Get(t, ig)) + " " + suite.Get(t, ig).Status.Lifecycle },
		3*time.Minute, time.Second).Should(Equal("Ready v1 1/1 surge 0 normal"))
	g.Expect(defaultSpotPrice(t, cur.Status.ActiveLaunchTemplateName)).To(BeEmpty())
	g.Expect(suite.Admin.Delete(ctx, ig)).To(Succeed())
}
