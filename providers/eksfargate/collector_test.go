package eksfargate

import (
	"context"
	"reflect"
	"strings"
	"testing"

	ekstypes "github.com/aws/aws-sdk-go-v2/service/eks/types"

	"github.com/instancemgr/instance-manager/api/v1alpha1"
	"github.com/instancemgr/instance-manager/providers"
	"github.com/instancemgr/instance-manager/providers/aws/ownership"
)

// An orphaned Fargate profile is listed by its tags and deleted only once
// the controller evicted its pods; profiles of another installation or
// without tags are not listed.
func TestCollectorDeletesAnOrphanedProfileEvictedFirst(t *testing.T) {
	ownership.SetInstallation("inst-1")
	defer ownership.SetInstallation("")
	p, f := newProvisioner()
	ig := batchGroup()
	ig.UID = "u-1"
	apply(t, p, ig)
	f.settle()
	f.takeCalls()
	f.add("hand-made", "team-a/batch", ekstypes.FargateProfileStatusActive) // no installation tag
	other := ownership.Owner{Cluster: "prod", Namespace: "team-a", Name: "x"}.Tags()
	other[ownership.TagInstallation] = "inst-2"
	f.profiles["foreign"] = &ekstypes.FargateProfile{FargateProfileName: strp("foreign"), Tags: other, Status: ekstypes.FargateProfileStatusActive}

	owned, err := p.Owned(context.Background(), []string{"prod", "no-such-cluster"})
	if err != nil {
		t.Fatal(err)
	}
	if len(owned) != 1 || owned[0].Kind != KindProfile || owned[0].Owner != ownership.OwnerOf(ig, "prod") || owned[0].Deleting {
		t.Fatalf("listed %+v", owned)
	}
	r := owned[0]
	d := &fakeDisruptions{evicted: map[string]providers.Retirement{r.Name: {Message: "evicting jobs/a"}}}
	ctx := providers.WithDisruptions(context.Background(), d)
	del, err := p.DeleteOrphan(ctx, r)
	if err != nil || del.Deleting || del.Gone || !strings.Contains(del.Waiting, "evicting jobs/a") {
		t.Fatalf("while evicting: %+v, %v", del, err)
	}
	if calls := f.takeCalls(); len(calls) != 0 {
		t.Fatalf("EKS calls before the pods were evicted: %v", calls)
	}
	d.evicted[r.Name] = providers.Retirement{Done: true}
	if del, err = p.DeleteOrphan(ctx, r); err != nil || !del.Deleting {
		t.Fatalf("once evicted: %+v, %v", del, err)
	}
	if calls := f.takeCalls(); !reflect.DeepEqual(calls, []string{"Delete " + r.Name}) {
		t.Fatalf("calls %v", calls)
	}
	if !reflect.DeepEqual(d.asked, []string{"EvictPods " + LabelProfile + "=" + r.Name, "EvictPods " + LabelProfile + "=" + r.Name}) {
		t.Fatalf("asked %v", d.asked)
	}
	// Deleting: asked again, nothing is sent.
	owned, _ = p.Owned(context.Background(), []string{"prod"})
	if del, err = p.DeleteOrphan(ctx, owned[0]); err != nil || !del.Deleting || !owned[0].Deleting || len(f.takeCalls()) != 0 {
		t.Fatalf("while deleting: %+v %+v, %v", owned[0], del, err)
	}
	f.settle()
	if del, err = p.DeleteOrphan(ctx, r); err != nil || !del.Gone {
		t.Fatalf("once gone: %+v, %v", del, err)
	}
	// The pod execution role was the admin's (named by ARN): nothing of
	// o's to delete.
	if done, err := p.FinishOrphan(context.Background(), r.Owner); err != nil || len(done) != 0 {
		t.Fatalf("FinishOrphan = %v, %v", done, err)
	}
}

func TestCollectorBuilds(t *testing.T) {
	o := ownership.Owner{Cluster: "prod", Namespace: "team-a", Name: "batch", UID: "u-1"}
	r := providers.Owned{Kind: KindProfile, Name: "p", Owner: o}
	live := func(edit func(*v1alpha1.InstanceGroup)) *v1alpha1.InstanceGroup {
		ig := batchGroup()
		ig.UID = "u-1"
		edit(ig)
		return ig
	}
	cases := []struct {
		name   string
		live   *v1alpha1.InstanceGroup
		orphan bool
	}{
		{"builds it", live(func(*v1alpha1.InstanceGroup) {}), false},
		{"another provisioner", live(func(ig *v1alpha1.InstanceGroup) { ig.Spec.Provisioner = v1alpha1.ProvisionerEKSManaged }), true},
		{"another cluster", live(func(ig *v1alpha1.InstanceGroup) { ig.Spec.EKSFargate.ClusterName = "dev" }), true},
		{"re-created", live(func(ig *v1alpha1.InstanceGroup) { ig.UID = "u-2" }), true},
	}
	p := &Provisioner{}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			if why := p.Builds(c.live, r); (why != "") != c.orphan {
				t.Errorf("Builds = %q, orphan want %v", why, c.orphan)
			}
		})
	}
}

func strp(s string) *string { return &s }
