package eks

import (
	"context"
	"strings"
	"testing"

	awssdk "github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/eks"
	ekstypes "github.com/aws/aws-sdk-go-v2/service/eks/types"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"sigs.k8s.io/controller-runtime/pkg/client/fake"

	"github.com/instancemgr/instance-manager/api/v1alpha1"
	awsp "github.com/instancemgr/instance-manager/providers/aws"
)

// fakeAccessEntries records EKS access entries (moto 5.2.5 does not
// implement them; see providers/aws/MOTO.md).
type fakeAccessEntries struct {
	awsp.EKSAPI
	entries map[string]string            // principal ARN -> type
	tags    map[string]map[string]string // principal ARN -> tags
}

func (f *fakeAccessEntries) CreateAccessEntry(_ context.Context, in *eks.CreateAccessEntryInput, _ ...func(*eks.Options)) (*eks.CreateAccessEntryOutput, error) {
	if _, ok := f.entries[*in.PrincipalArn]; ok {
		return nil, &ekstypes.ResourceInUseException{Message: awssdk.String("exists")}
	}
	f.entries[*in.PrincipalArn] = *in.Type
	if f.tags == nil {
		f.tags = map[string]map[string]string{}
	}
	f.tags[*in.PrincipalArn] = in.Tags
	return &eks.CreateAccessEntryOutput{}, nil
}

func (f *fakeAccessEntries) DescribeAccessEntry(_ context.Context, in *eks.DescribeAccessEntryInput, _ ...func(*eks.Options)) (*eks.DescribeAccessEntryOutput, error) {
	if _, ok := f.entries[*in.PrincipalArn]; !ok {
		return nil, &ekstypes.ResourceNotFoundException{Message: awssdk.String("no entry")}
	}
	return &eks.DescribeAccessEntryOutput{AccessEntry: &ekstypes.AccessEntry{PrincipalArn: in.PrincipalArn, Tags: f.tags[*in.PrincipalArn]}}, nil
}

func (f *fakeAccessEntries) DeleteAccessEntry(_ context.Context, in *eks.DeleteAccessEntryInput, _ ...func(*eks.Options)) (*eks.DeleteAccessEntryOutput, error) {
	delete(f.entries, *in.PrincipalArn)
	return &eks.DeleteAccessEntryOutput{}, nil
}

func scheme(t *testing.T) *runtime.Scheme {
	s := runtime.NewScheme()
	if err := corev1.AddToScheme(s); err != nil {
		t.Fatal(err)
	}
	if err := v1alpha1.AddToScheme(s); err != nil {
		t.Fatal(err)
	}
	return s
}

func TestAWSAuthUpsertKeepsOtherEntriesAndSharedRoles(t *testing.T) {
	ctx := context.Background()
	existing := &corev1.ConfigMap{
		ObjectMeta: metav1.ObjectMeta{Namespace: "kube-system", Name: "aws-auth"},
		Data: map[string]string{
			"mapRoles": "- rolearn: arn:aws:iam::1:role/admin\n  username: admin\n  groups: [system:masters]\n",
			"mapUsers": "- userarn: arn:aws:iam::1:user/ops\n  username: ops\n",
		},
	}
	a, b := eksGroup(v1alpha1.EKSConfiguration{}), eksGroup(v1alpha1.EKSConfiguration{})
	a.UID, b.UID, b.Name = "a", "b", "other"
	b.Status.NodesInstanceRoleArn = "arn:aws:iam::1:role/shared"
	kube := fake.NewClientBuilder().WithScheme(scheme(t)).WithObjects(existing, a, b).Build()
	na := nodeAccess{kube: kube}
	cluster := ClusterInfo{Name: "prod", AuthenticationMode: "CONFIG_MAP"}
	for i := 0; i < 2; i++ { // idempotent
		for _, ig := range []*v1alpha1.InstanceGroup{a, b} {
			if err := na.grant(ctx, ig, cluster, "arn:aws:iam::1:role/shared"); err != nil {
				t.Fatal(err)
			}
		}
	}
	cm := &corev1.ConfigMap{}
	if err := kube.Get(ctx, AuthConfigMap, cm); err != nil {
		t.Fatal(err)
	}
	roles := cm.Data["mapRoles"]
	if !strings.Contains(roles, "role/admin") || strings.Count(roles, "role/shared") != 1 || !strings.Contains(roles, "system:node:{{EC2PrivateDNSName}}") {
		t.Fatalf("mapRoles after grant:\n%s", roles)
	}
	if cm.Data["mapUsers"] != existing.Data["mapUsers"] {
		t.Errorf("mapUsers changed:\n%s", cm.Data["mapUsers"])
	}
	// Another group still uses the role: it stays.
	if err := na.revoke(ctx, a, cluster, "arn:aws:iam::1:role/shared"); err != nil {
		t.Fatal(err)
	}
	_ = kube.Get(ctx, AuthConfigMap, cm)
	if !strings.Contains(cm.Data["mapRoles"], "role/shared") {
		t.Fatal("a role another group uses was removed")
	}
	// The last user goes: the entry goes, the admin's stays.
	if err := kube.Delete(ctx, b); err != nil {
		t.Fatal(err)
	}
	if err := na.revoke(ctx, a, cluster, "arn:aws:iam::1:role/shared"); err != nil {
		t.Fatal(err)
	}
	_ = kube.Get(ctx, AuthConfigMap, cm)
	if strings.Contains(cm.Data["mapRoles"], "role/shared") || !strings.Contains(cm.Data["mapRoles"], "role/admin") {
		t.Fatalf("mapRoles after revoke:\n%s", cm.Data["mapRoles"])
	}
}

func TestAccessEntriesInAPIMode(t *testing.T) {
	ctx := context.Background()
	ig := eksGroup(v1alpha1.EKSConfiguration{})
	ig.Annotations = map[string]string{v1alpha1.AnnotationOSFamily: v1alpha1.OSFamilyWindows}
	kube := fake.NewClientBuilder().WithScheme(scheme(t)).WithObjects(ig).Build()
	entries := &fakeAccessEntries{entries: map[string]string{}}
	na := nodeAccess{kube: kube, eks: entries}
	cluster := ClusterInfo{Name: "prod", AuthenticationMode: "API"}
	if err := na.grant(ctx, ig, cluster, "arn:aws:iam::1:role/win"); err != nil {
		t.Fatal(err)
	}
	if entries.entries["arn:aws:iam::1:role/win"] != "EC2_WINDOWS" {
		t.Fatalf("access entries: %v", entries.entries)
	}
	cm := &corev1.ConfigMap{}
	if err := kube.Get(ctx, AuthConfigMap, cm); err == nil {
		t.Error("aws-auth was written in API authentication mode")
	}
	if err := na.revoke(ctx, ig, cluster, "arn:aws:iam::1:role/win"); err != nil {
		t.Fatal(err)
	}
	if len(entries.entries) != 0 {
		t.Errorf("access entry left: %v", entries.entries)
	}
	// An entry made outside instance-manager (no ownership tag) survives.
	entries.entries["arn:aws:iam::1:role/admin"] = "STANDARD"
	for _, step := range []func(context.Context, *v1alpha1.InstanceGroup, ClusterInfo, string) error{na.grant, na.revoke} {
		if err := step(ctx, ig, cluster, "arn:aws:iam::1:role/admin"); err != nil {
			t.Fatal(err)
		}
	}
	if entries.entries["arn:aws:iam::1:role/admin"] != "STANDARD" {
		t.Errorf("a foreign access entry was changed or deleted: %v", entries.entries)
	}
}

func TestAWSAuthEntryPresentBeforeSurvives(t *testing.T) {
	ctx := context.Background()
	cases := []struct{ name, mapRoles string }{
		{"an admin's entry for the node role", "- rolearn: arn:aws:iam::1:role/nodes\n  username: admin\n  groups: [system:masters]\n"},
		{"an unmanaged node group's identical entry", "- rolearn: arn:aws:iam::1:role/nodes\n  username: system:node:{{EC2PrivateDNSName}}\n  groups: [system:bootstrappers, system:nodes]\n"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			existing := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: "kube-system", Name: "aws-auth"}, Data: map[string]string{"mapRoles": c.mapRoles}}
			ig := eksGroup(v1alpha1.EKSConfiguration{})
			kube := fake.NewClientBuilder().WithScheme(scheme(t)).WithObjects(existing, ig).Build()
			na := nodeAccess{kube: kube}
			cluster := ClusterInfo{Name: "prod", AuthenticationMode: "CONFIG_MAP"}
			if err := na.grant(ctx, ig, cluster, "arn:aws:iam::1:role/nodes"); err != nil {
				t.Fatal(err)
			}
			if err := na.revoke(ctx, ig, cluster, "arn:aws:iam::1:role/nodes"); err != nil {
				t.Fatal(err)
			}
			cm := &corev1.ConfigMap{}
			if err := kube.Get(ctx, AuthConfigMap, cm); err != nil {
				t.Fatal(err)
			}
			if strings.Count(cm.Data["mapRoles"], "role/nodes") != 1 || (strings.Contains(c.mapRoles, "admin") && !strings.Contains(cm.Data["mapRoles"], "system:masters")) {
				t.Fatalf("mapRoles before:\n%s\nafter create and delete of a group using the role:\n%s", c.mapRoles, cm.Data["mapRoles"])
			}
		})
	}
}

func TestAWSAuthEntryGoesWhenGroupsSharingTheRoleAreDeletedTogether(t *testing.T) {
	ctx := context.Background()
	a, b := eksGroup(v1alpha1.EKSConfiguration{}), eksGroup(v1alpha1.EKSConfiguration{})
	a.UID, b.UID, b.Name = "a", "b", "other"
	now := metav1.Now()
	for _, ig := range []*v1alpha1.InstanceGroup{a, b} {
		ig.Status.NodesInstanceRoleArn = "arn:aws:iam::1:role/shared"
		ig.DeletionTimestamp, ig.Finalizers = &now, []string{"instancemgr.keikoproj.io/finalizer"}
	}
	kube := fake.NewClientBuilder().WithScheme(scheme(t)).WithObjects(a, b).Build()
	na := nodeAccess{kube: kube}
	cluster := ClusterInfo{Name: "prod", AuthenticationMode: "CONFIG_MAP"}
	if err := na.grant(ctx, a, cluster, "arn:aws:iam::1:role/shared"); err != nil {
		t.Fatal(err)
	}
	if err := na.revoke(ctx, a, cluster, "arn:aws:iam::1:role/shared"); err != nil {
		t.Fatal(err)
	}
	cm := &corev1.ConfigMap{}
	if err := kube.Get(ctx, AuthConfigMap, cm); err != nil {
		t.Fatal(err)
	}
	if strings.Contains(cm.Data["mapRoles"], "role/shared") {
		t.Fatalf("a role only groups being deleted use was kept:\n%s", cm.Data["mapRoles"])
	}
}

func TestAPIAndConfigMapModePrefersAccessEntries(t *testing.T) {
	ctx := context.Background()
	cluster := ClusterInfo{Name: "prod", AuthenticationMode: "API_AND_CONFIG_MAP"}
	admins := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: "kube-system", Name: "aws-auth"},
		Data: map[string]string{"mapRoles": "- rolearn: arn:aws:iam::1:role/mapped\n  username: admin\n  groups: [system:masters]\n"}}
	ig := eksGroup(v1alpha1.EKSConfiguration{})
	kube := fake.NewClientBuilder().WithScheme(scheme(t)).WithObjects(admins, ig).Build()
	entries := &fakeAccessEntries{entries: map[string]string{}}
	na := nodeAccess{kube: kube, eks: entries}
	for _, step := range []func(context.Context, *v1alpha1.InstanceGroup, ClusterInfo, string) error{na.grant, na.revoke} {
		for _, role := range []string{"arn:aws:iam::1:role/mapped", "arn:aws:iam::1:role/new"} {
			if err := step(ctx, ig, cluster, role); err != nil {
				t.Fatal(err)
			}
		}
	}
	cm := &corev1.ConfigMap{}
	if err := kube.Get(ctx, AuthConfigMap, cm); err != nil {
		t.Fatal(err)
	}
	if cm.Data["mapRoles"] != admins.Data["mapRoles"] || cm.Annotations[AnnotationMapRoles] != "" {
		t.Errorf("aws-auth changed:\n%s\n%v", cm.Data["mapRoles"], cm.Annotations)
	}
	if len(entries.entries) != 0 {
		t.Errorf("access entries left after revoke: %v", entries.entries)
	}
	// After grant only: the new role has an access entry, the mapped one none.
	if err := na.grant(ctx, ig, cluster, "arn:aws:iam::1:role/new"); err != nil {
		t.Fatal(err)
	}
	if err := na.grant(ctx, ig, cluster, "arn:aws:iam::1:role/mapped"); err != nil {
		t.Fatal(err)
	}
	if _, ok := entries.entries["arn:aws:iam::1:role/new"]; !ok || len(entries.entries) != 1 {
		t.Errorf("access entries %v, want one for the role aws-auth does not map", entries.entries)
	}
}
