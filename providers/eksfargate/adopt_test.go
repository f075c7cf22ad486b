package eksfargate

import (
	"context"
	"slices"
	"strings"
	"testing"

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
// self was deleted without its finalizer running finds that self's
// Fargate profile under the name it wants (review 2026-11-26 M4). It
// adopts the profile only when its tags name the same namespace/name,
// cluster and installation and the UID they record belongs to no
// InstanceGroup; anything else stays foreign and untouched.
func TestApplyAdoptsTheProfileAnEarlierGroupOfTheSameNameLeft(t *testing.T) {
	ownership.SetInstallation("inst-1")
	defer ownership.SetInstallation("")
	scheme := runtime.NewScheme()
	if err := v1alpha1.AddToScheme(scheme); err != nil {
		t.Fatal(err)
	}
	cases := []struct {
		name     string
		edit     func(map[string]string) // the earlier group's tags
		oldLives bool                    // the earlier group (uid "old") still exists
		adopt    bool
	}{
		{name: "same namespace, name, cluster and installation; the recorded uid is gone", adopt: true},
		{name: "the recorded uid still exists", oldLives: true},
		{name: "another cluster's", edit: func(m map[string]string) {
			delete(m, awsp.ClusterTagKey("prod"))
			m[awsp.ClusterTagKey("staging")] = "owned"
		}},
		{name: "another installation's", edit: func(m map[string]string) { m[ownership.TagInstallation] = "inst-2" }},
		{name: "another namespace's", edit: func(m map[string]string) { m[ownership.TagInstanceGroup] = "team-b/batch" }},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			p, f := newProvisioner()
			first := batchGroup()
			first.UID = "old"
			name := apply(t, p, first).GroupName
			f.settle()
			if c.edit != nil {
				c.edit(f.profiles[name].Tags)
			}

			second := batchGroup()
			second.UID = "new"
			objects := []client.Object{&v1alpha1.InstanceGroup{ObjectMeta: metav1.ObjectMeta{Namespace: "team-a", Name: "batch", UID: "new"}}}
			if c.oldLives {
				objects = append(objects, &v1alpha1.InstanceGroup{ObjectMeta: metav1.ObjectMeta{Namespace: "team-a", Name: "batch-old", UID: "old"}})
			}
			p.adopt.Reader = fake.NewClientBuilder().WithScheme(scheme).WithObjects(objects...).Build()
			var events []string
			ctx := providers.WithEvents(context.Background(), func(typ, reason, msg string) { events = append(events, typ+" "+reason+": "+msg) })
			f.takeCalls()
			obs, err := p.Apply(ctx, second)
			calls := f.takeCalls()

			if !c.adopt {
				if !ownership.IsForeign(err) {
					t.Fatalf("Apply = %+v, %v; want a foreign-resource error", obs, err)
				}
				if got := f.profiles[name].Tags[ownership.TagUID]; got != "old" || len(events) != 0 || len(calls) != 0 {
					t.Fatalf("a foreign profile was touched: uid %q, events %v, calls %v", got, events, calls)
				}
				return
			}
			if err != nil {
				t.Fatalf("Apply: %v", err)
			}
			if got := f.profiles[name].Tags; got[ownership.TagUID] != "new" || got["team"] != "a" {
				t.Fatalf("profile tags %v; want uid new, the spec's tags kept", got)
			}
			if !obs.Active || obs.GroupName != name || obs.Updating {
				t.Fatalf("observation %+v; want the adopted profile ACTIVE", obs)
			}
			if slices.ContainsFunc(calls, func(s string) bool { return strings.HasPrefix(s, "Create ") || strings.HasPrefix(s, "Delete ") }) {
				t.Fatalf("calls %v: the profile is adopted, not replaced", calls)
			}
			if len(events) != 1 || !strings.HasPrefix(events[0], "Normal "+providers.ReasonAdopted+": ") ||
				!strings.Contains(events[0], "Fargate profile "+name) || !strings.Contains(events[0], "uid old") {
				t.Fatalf("events %q; want one Adopted Event naming the profile", events)
			}
		})
	}
}
