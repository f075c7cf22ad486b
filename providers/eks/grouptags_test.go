package eks

import (
	"reflect"
	"testing"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/instancemgr/instance-manager/api/v1alpha1"
	"github.com/instancemgr/instance-manager/providers/aws/ownership"
)

func TestGroupTagsCannotReplaceOwnership(t *testing.T) {
	ig := &v1alpha1.InstanceGroup{ObjectMeta: metav1.ObjectMeta{Namespace: "team-a", Name: "web", UID: "u1"},
		Spec: v1alpha1.InstanceGroupSpec{EKS: &v1alpha1.EKSSpec{Configuration: &v1alpha1.EKSConfiguration{ClusterName: "prod",
			Tags: []map[string]string{{"key": ownership.TagInstanceGroup, "value": "victim/web"}, {"key": "kubernetes.io/cluster/prod", "value": "shared"}, {"key": "team", "value": "a"}}}}}}
	tags := groupTags(ig, "g")
	want := map[string]string{"Name": "g", "team": "a", ownership.TagInstanceGroup: "team-a/web", "instancemgr.keikoproj.io/uid": "u1",
		"instancemgr.keikoproj.io/cluster/prod": "owned", "kubernetes.io/cluster/prod": "owned"}
	if !reflect.DeepEqual(tags, want) {
		t.Fatalf("groupTags = %v, want %v", tags, want)
	}
}
