package ownership

import (
	"context"
	"testing"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/fake"

	"github.com/instancemgr/instance-manager/api/v1alpha1"
	awsp "github.com/instancemgr/instance-manager/providers/aws"
)

func TestAdoptable(t *testing.T) {
	SetInstallation("inst-1")
	defer SetInstallation("")
	o := Owner{Cluster: "prod", Namespace: "acme", Name: "web", UID: "new"}
	old := Owner{Cluster: "prod", Namespace: "acme", Name: "web", UID: "old"}
	with := func(edit func(map[string]string)) map[string]string {
		t := old.Tags()
		edit(t)
		return t
	}
	cases := []struct {
		name string
		tags map[string]string
		ok   bool
	}{
		{"an earlier group of the same name, cluster and installation", old.Tags(), true},
		{"already ours: nothing to adopt", o.Tags(), false},
		{"another group's", with(func(m map[string]string) { m[TagInstanceGroup] = "acme/api" }), false},
		{"another cluster's", with(func(m map[string]string) {
			delete(m, awsp.ClusterTagKey("prod"))
			m[awsp.ClusterTagKey("dev")] = "owned"
		}), false},
		{"two clusters named", with(func(m map[string]string) { m[awsp.ClusterTagKey("dev")] = "owned" }), false},
		{"no cluster tag", with(func(m map[string]string) { delete(m, awsp.ClusterTagKey("prod")) }), false},
		{"the cluster tag is not owned", with(func(m map[string]string) { m[awsp.ClusterTagKey("prod")] = "shared" }), false},
		{"another installation's", with(func(m map[string]string) { m[TagInstallation] = "inst-2" }), false},
		{"no installation tag (an earlier version's)", with(func(m map[string]string) { delete(m, TagInstallation) }), false},
		{"no uid recorded (Check accepts it already)", with(func(m map[string]string) { delete(m, TagUID) }), false},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			uid, ok := o.Adoptable(c.tags)
			if ok != c.ok || ok && uid != "old" {
				t.Fatalf("Adoptable = %q, %v; want ok=%v (uid old)", uid, ok, c.ok)
			}
		})
	}
}

func TestAdopterCheck(t *testing.T) {
	SetInstallation("inst-1")
	defer SetInstallation("")
	s := runtime.NewScheme()
	if err := v1alpha1.AddToScheme(s); err != nil {
		t.Fatal(err)
	}
	group := func(ns, name string, uid types.UID, deleting bool) client.Object {
		ig := &v1alpha1.InstanceGroup{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name, UID: uid}}
		if deleting {
			now := metav1.Now() // a zero time reads back as none
			ig.DeletionTimestamp = &now
			ig.Finalizers = []string{"x"}
		}
		return ig
	}
	o := Owner{Cluster: "prod", Namespace: "acme", Name: "web", UID: "new"}
	oldTags := Owner{Cluster: "prod", Namespace: "acme", Name: "web", UID: "old"}.Tags()
	cases := []struct {
		name    string
		objects []client.Object
		reader  bool
		tags    map[string]string
		adopt   bool
		foreign bool
	}{
		{"ours: nothing to adopt", []client.Object{group("acme", "web", "new", false)}, true, o.Tags(), false, false},
		{"the recorded uid is gone: adopted", []client.Object{group("acme", "web", "new", false)}, true, oldTags, true, false},
		{"the recorded uid is a live group's: never adopted", []client.Object{group("acme", "web", "new", false), group("other", "x", "old", false)}, true, oldTags, false, true},
		{"the recorded uid's group is being deleted: its finalizer acts", []client.Object{group("acme", "web", "new", false), group("other", "x", "old", true)}, true, oldTags, false, true},
		{"the adopter itself is not live (a stale reconcile)", nil, true, oldTags, false, true},
		{"the adopter is being deleted", []client.Object{group("acme", "web", "new", true)}, true, oldTags, false, true},
		{"no API server reader: never adopted", []client.Object{group("acme", "web", "new", false)}, false, oldTags, false, true},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			a := &Adopter{}
			if c.reader {
				a.Reader = fake.NewClientBuilder().WithScheme(s).WithObjects(c.objects...).Build()
			}
			prev, err := a.Check(context.Background(), o, "Auto Scaling group", "asg", c.tags)
			if IsForeign(err) != c.foreign || !c.foreign && err != nil {
				t.Fatalf("Check = %v, want foreign=%v", err, c.foreign)
			}
			if (prev == "old") != c.adopt || !c.adopt && prev != "" {
				t.Fatalf("Check adopts %q, want adopt=%v", prev, c.adopt)
			}
		})
	}
}
