package eksmanaged

import (
	"context"
	"maps"
	"slices"
	"strings"
	"testing"

	awssdk "github.com/aws/aws-sdk-go-v2/aws"
	ec2types "github.com/aws/aws-sdk-go-v2/service/ec2/types"
	iamtypes "github.com/aws/aws-sdk-go-v2/service/iam/types"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/fake"

	"github.com/instancemgr/instance-manager/api/v1alpha1"
	"github.com/instancemgr/instance-manager/providers"
	awsp "github.com/instancemgr/instance-manager/providers/aws"
	"github.com/instancemgr/instance-manager/providers/aws/ownership"
)

// A group re-created under the same name (a new UID) after its earlier
// self was deleted without its finalizer running finds that self's node
// group, node role and launch template (review 2026-11-26 M4). It adopts
// them only when their tags name the same namespace/name, cluster and
// installation and the UID they record belongs to no InstanceGroup;
// anything else stays foreign and untouched.
func TestApplyAdoptsWhatAnEarlierGroupOfTheSameNameLeft(t *testing.T) {
	ownership.SetInstallation("inst-1")
	defer ownership.SetInstallation("")
	scheme := runtime.NewScheme()
	if err := v1alpha1.AddToScheme(scheme); err != nil {
		t.Fatal(err)
	}
	cases := []struct {
		name string
		// edit changes the tags the earlier group left.
		edit func(map[string]string)
		// oldLives: the earlier group (uid "old") still exists.
		oldLives bool
		adopt    bool
	}{
		{name: "same namespace, name, cluster and installation; the recorded uid is gone", adopt: true},
		{name: "the recorded uid still exists", oldLives: true},
		{name: "another cluster's", edit: func(m map[string]string) {
			delete(m, awsp.ClusterTagKey("prod"))
			m[awsp.ClusterTagKey("staging")] = "owned"
		}},
		{name: "another installation's", edit: func(m map[string]string) { m[ownership.TagInstallation] = "inst-2" }},
		{name: "another namespace's", edit: func(m map[string]string) { m[ownership.TagInstanceGroup] = "team-b/web" }},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			e := newEnv()
			ec2 := e.p.aws.EC2.(*fakeEC2)
			cfg := v1alpha1.EKSManagedConfiguration{Subnets: []string{"subnet-a"}, InstanceType: "m5.large"}
			first := managedGroup(cfg)
			first.UID = "old"
			e.apply(t, first)
			e.eks.settle()
			if c.edit != nil {
				editTags(e, ec2, c.edit)
			}
			before := e.eks.groups[ngName].Tags[ownership.TagUID]

			second := managedGroup(cfg)
			second.UID = "new"
			objects := []client.Object{&v1alpha1.InstanceGroup{ObjectMeta: metav1.ObjectMeta{Namespace: "team-a", Name: "web", UID: "new"}}}
			if c.oldLives {
				objects = append(objects, &v1alpha1.InstanceGroup{ObjectMeta: metav1.ObjectMeta{Namespace: "team-a", Name: "web-old", UID: "old"}})
			}
			e.p.adopt.Reader = fake.NewClientBuilder().WithScheme(scheme).WithObjects(objects...).Build()
			var events []string
			ctx := providers.WithEvents(context.Background(), func(typ, reason, msg string) { events = append(events, typ+" "+reason+": "+msg) })
			e.eks.takeCalls()
			obs, err := e.p.Apply(ctx, second)

			uids := resourceUIDs(e, ec2)
			if !c.adopt {
				if !ownership.IsForeign(err) {
					t.Fatalf("Apply = %+v, %v; want a foreign-resource error", obs, err)
				}
				if uids != [3]string{before, before, before} || len(events) != 0 {
					t.Fatalf("foreign resources changed: uids %v, events %v", uids, events)
				}
				if calls := e.eks.takeCalls(); len(calls) != 0 {
					t.Fatalf("EKS calls on a foreign node group: %v", calls)
				}
				return
			}
			if err != nil {
				t.Fatalf("Apply: %v", err)
			}
			if uids != [3]string{"new", "new", "new"} {
				t.Fatalf("uids (node group, role, template) %v; want all retagged with the new uid", uids)
			}
			if !obs.Active || obs.GroupName != ngName || len(obs.Retiring) != 0 {
				t.Fatalf("observation %+v; want the adopted node group converged, none retiring", obs)
			}
			if calls := e.eks.takeCalls(); slices.ContainsFunc(calls, func(s string) bool {
				return strings.HasPrefix(s, "CreateNodegroup") || strings.HasPrefix(s, "DeleteNodegroup")
			}) {
				t.Fatalf("calls %v: the node group is adopted, not replaced", calls)
			}
			if len(events) != 1 || !strings.HasPrefix(events[0], "Normal "+providers.ReasonAdopted+": ") ||
				!strings.Contains(events[0], "EKS node group "+ngName) || !strings.Contains(events[0], "IAM role "+ngName) ||
				!strings.Contains(events[0], "launch template "+templateName(second)) || !strings.Contains(events[0], "uid old") {
				t.Fatalf("events %q; want one Adopted Event naming the node group, role and template", events)
			}
		})
	}
}

// editTags applies edit to the tags of the node group, node role and
// launch template the earlier group left.
func editTags(e *env, ec2 *fakeEC2, edit func(map[string]string)) {
	ng := e.eks.groups[ngName]
	edit(ng.Tags)
	role := e.iam.roles[ngName]
	m := iamMap(role.tags)
	edit(m)
	role.tags = nil
	for _, k := range slices.Sorted(maps.Keys(m)) {
		role.tags = append(role.tags, iamtypes.Tag{Key: awssdk.String(k), Value: awssdk.String(m[k])})
	}
	for _, lt := range ec2.templates {
		m := ec2Map(lt.tags)
		edit(m)
		lt.tags = nil
		for _, k := range slices.Sorted(maps.Keys(m)) {
			lt.tags = append(lt.tags, ec2types.Tag{Key: awssdk.String(k), Value: awssdk.String(m[k])})
		}
	}
}

// resourceUIDs are the TagUID of the node group, the node role and the
// launch template.
func resourceUIDs(e *env, ec2 *fakeEC2) [3]string {
	var lt string
	for _, t := range ec2.templates {
		lt = ec2Map(t.tags)[ownership.TagUID]
	}
	return [3]string{e.eks.groups[ngName].Tags[ownership.TagUID], iamMap(e.iam.roles[ngName].tags)[ownership.TagUID], lt}
}

func iamMap(tags []iamtypes.Tag) map[string]string {
	return ownership.TagMap(tags, func(t iamtypes.Tag) *string { return t.Key }, func(t iamtypes.Tag) *string { return t.Value })
}

func ec2Map(tags []ec2types.Tag) map[string]string {
	return ownership.TagMap(tags, func(t ec2types.Tag) *string { return t.Key }, func(t ec2types.Tag) *string { return t.Value })
}
