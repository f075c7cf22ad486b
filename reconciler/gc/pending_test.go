package gc

import (
	"context"
	"slices"
	"testing"
	"time"

	coordinationv1 "k8s.io/api/coordination/v1"
	"k8s.io/apimachinery/pkg/types"

	"github.com/instancemgr/instance-manager/providers"
	"github.com/instancemgr/instance-manager/providers/aws/ownership"
)

// Review 2026-11-29 N9: the owners whose leftovers (IAM role, instance
// profile, node access) are still to be deleted survive a restart or a
// leader change between the group's deletion and FinishOrphan: the next
// process finishes them.
func TestSweepFinishesOwnersAcrossRestarts(t *testing.T) {
	ownership.SetInstallation("inst-1")
	kube := newClient()
	pending := &Pending{Client: kube, Reader: kube, Namespace: "im"}
	f := &fakeCollector{res: map[string]*providers.Owned{"a": owned("group", "prod", "a", false), "b": owned("group", "prod", "b", false)}}
	first := &Collector{Client: kube, Pending: pending, Collectors: map[string]providers.Collector{"eks": f}, Now: time.Now}
	if _, err := first.Sweep(context.Background()); err != nil {
		t.Fatal(err)
	}
	// The sweep visits owners in no set order: compare as sets.
	if got := slices.Sorted(slices.Values(f.deleted)); !slices.Equal(got, []string{"group a", "group b"}) {
		t.Fatalf("first sweep deleted %v", f.deleted)
	}
	// The process ends; the groups finish deleting; another one leads.
	next := &Collector{Client: kube, Pending: pending, Collectors: map[string]providers.Collector{"eks": f}, Now: time.Now}
	for i := 0; i < 2; i++ {
		if _, err := next.Sweep(context.Background()); err != nil {
			t.Fatal(err)
		}
	}
	if len(f.deleted) != 4 || !slices.Equal(slices.Sorted(slices.Values(f.deleted[2:])), []string{"finish team/a", "finish team/b"}) {
		t.Fatalf("deleted %v, want both groups, then both owners finished", f.deleted)
	}
	got, err := pending.Load(context.Background())
	if err != nil || len(got) != 0 {
		t.Fatalf("owners still pending after they were finished: %v (%v)", got, err)
	}
}

// An orphan still draining is not recorded (its owner may yet adopt it);
// one whose record cannot be written is not deleted.
func TestSweepRecordsOwnersOnlyForDeletions(t *testing.T) {
	ownership.SetInstallation("inst-1")
	kube := newClient()
	pending := &Pending{Client: kube, Reader: kube, Namespace: "im"}
	f := &draining{fakeCollector{res: map[string]*providers.Owned{"a": owned("group", "prod", "a", false)}}}
	col := &Collector{Client: kube, Pending: pending, Collectors: map[string]providers.Collector{"eks": f}, Now: time.Now}
	if _, err := col.Sweep(context.Background()); err != nil {
		t.Fatal(err)
	}
	if got, _ := pending.Load(context.Background()); len(got) != 0 {
		t.Fatalf("recorded %v while the orphan only drains", got)
	}

	bad := &coordinationv1.Lease{}
	bad.Namespace, bad.Name = "im", PendingLeaseName
	bad.Annotations = map[string]string{AnnotationPending: "not json"}
	kube = newClient(bad)
	g := &fakeCollector{res: map[string]*providers.Owned{"a": owned("group", "prod", "a", false)}}
	col = &Collector{Client: kube, Pending: &Pending{Client: kube, Reader: kube, Namespace: "im"}, Collectors: map[string]providers.Collector{"eks": g}, Now: time.Now}
	if _, err := col.Sweep(context.Background()); err == nil || len(g.deleted) != 0 {
		t.Fatalf("sweep with an unreadable record: err %v, deleted %v", err, g.deleted)
	}
}

type draining struct{ fakeCollector }

func (d *draining) DeleteOrphan(context.Context, providers.Owned) (providers.Deletion, error) {
	return providers.Deletion{Waiting: "draining 1 node"}, nil
}

func TestPendingRoundTrip(t *testing.T) {
	kube := newClient()
	p := &Pending{Client: kube, Reader: kube, Namespace: "im"}
	want := map[string]ownership.Owner{"eks/prod/team/a/u": {Cluster: "prod", Namespace: "team", Name: "a", UID: types.UID("u")}}
	for i := 0; i < 2; i++ { // create, then update
		if err := p.Save(context.Background(), want); err != nil {
			t.Fatal(err)
		}
	}
	got, err := p.Load(context.Background())
	if err != nil || len(got) != 1 || got["eks/prod/team/a/u"] != want["eks/prod/team/a/u"] {
		t.Fatalf("loaded %v (%v), want %v", got, err, want)
	}
}
