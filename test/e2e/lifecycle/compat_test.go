package lifecycle

import (
	"context"
	"encoding/json"
	"testing"
	"time"

	. "github.com/onsi/gomega"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"

	"github.com/instancemgr/instance-manager/api/v1alpha1"
	"github.com/instancemgr/instance-manager/test/harness"
)

// TestFargateTagsInTheOriginalsListForm: keikoproj instance-manager writes
// spec.eks-fargate.tags as a list of maps (docs/compatibility.md, "Compatibility with
// keikoproj instance-manager"). A group written so is admitted (the typed
// client cannot even express it, so it goes as unstructured JSON), stored
// with our map form, keeps the list in its submitted-spec annotation, and
// its Fargate profile carries both tags; deleting it removes the profile.
func TestFargateTagsInTheOriginalsListForm(t *testing.T) {
	suite.Require(t)
	g := NewWithT(t)
	ctx := context.Background()
	suite.SetBoundaries(t, suite.Cloud.Boundaries(suite.Cloud.AMIs[0], 5))
	const ns, name = "e2e-fargate-tags", "tagged"
	suite.Namespace(t, ns)

	subnets := make([]any, len(suite.Cloud.Subnets))
	for i, s := range suite.Cloud.Subnets {
		subnets[i] = s
	}
	u := &unstructured.Unstructured{Object: map[string]any{
		"apiVersion": v1alpha1.GroupVersion.String(),
		"kind":       "InstanceGroup",
		"metadata":   map[string]any{"namespace": ns, "name": name},
		"spec": map[string]any{
			"provisioner": "eks-fargate",
			"strategy":    map[string]any{"type": "managed"},
			"eks-fargate": map[string]any{
				"clusterName": suite.Cloud.Cluster,
				"subnets":     subnets,
				"selectors":   []any{map[string]any{"namespace": ns}},
				"tags":        []any{map[string]any{"key1": "v1", "key2": "v2"}},
			},
		},
	}}
	g.Expect(suite.Admin.Create(ctx, u)).To(Succeed(), "the original's list-of-maps tags are admitted")

	ig := &v1alpha1.InstanceGroup{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name}}
	ready := suite.WaitReady(t, ig, 2*time.Minute)
	g.Expect(ready.Spec.EKSFargate.Tags).To(Equal(map[string]string{"key1": "v1", "key2": "v2"}), "the stored spec has our map form")
	var submitted map[string]any
	g.Expect(json.Unmarshal([]byte(ready.Annotations[v1alpha1.AnnotationSubmittedSpec]), &submitted)).To(Succeed())
	g.Expect(submitted["eks-fargate"].(map[string]any)["tags"]).To(Equal([]any{map[string]any{"key1": "v1", "key2": "v2"}}),
		"the submitted-spec annotation keeps what the tenant wrote")

	p := ownedProfiles(t, suite.Cloud.Cluster, ns+"/"+name)[ready.Status.ActiveScalingGroupName]
	g.Expect(p).NotTo(BeNil(), "the group's profile %s", ready.Status.ActiveScalingGroupName)
	g.Expect(p.Tags).To(HaveKeyWithValue("key1", "v1"))
	g.Expect(p.Tags).To(HaveKeyWithValue("key2", "v2"))

	g.Expect(suite.Admin.Delete(ctx, ig)).To(Succeed())
	harness.WaitGone(t, suite.Admin, []*v1alpha1.InstanceGroup{ig}, 2*time.Minute)
	g.Expect(ownedProfiles(t, suite.Cloud.Cluster, ns+"/"+name)).To(BeEmpty())
}
