package eksfargate

import (
	"context"
	"fmt"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/instancemgr/instance-manager/providers/aws/ownership"

	"github.com/instancemgr/instance-manager/api/v1alpha1"
	"github.com/instancemgr/instance-manager/providers"
	awsp "github.com/instancemgr/instance-manager/providers/aws"
)

const owner = "team-a/batch"

func newProvisioner() (*Provisioner, *fakeEKS) {
	f := newFakeEKS()
	return New(&awsp.Clients{EKS: f, EC2: &fakeEC2{subnets: map[string]bool{"subnet-a": true, "subnet-b": true}},
		IAM: &fakeIAM{roles: map[string]bool{"pods": true}}}, Options{}), f
}

func batchGroup() *v1alpha1.InstanceGroup {
	return fargateGroup(v1alpha1.EKSFargateSpec{
		PodExecutionRoleArn: "arn:aws:iam::123456789012:role/pods", Subnets: []string{"subnet-b", "subnet-a"},
		Selectors: []v1alpha1.EKSFargateSelector{{Namespace: "jobs", Labels: map[string]string{"tier": "batch"}}},
		Tags:      map[string]string{"team": "a"},
	})
}

func apply(t *testing.T, p *Provisioner, ig *v1alpha1.InstanceGroup) *providers.Observation {
	t.Helper()
	obs, err := p.Apply(context.Background(), ig)
	if err != nil {
		t.Fatalf("Apply: %v", err)
	}
	ig.Status.CreateFailure = obs.CreateFailure // as the reconciler stores it
	return obs
}

func TestApplyReplacesAProfileOnlyOnceTheNewOneIsActive(t *testing.T) {
	p, f := newProvisioner()
	ig := batchGroup()
	obs := apply(t, p, ig)
	first := obs.GroupName
	if !obs.Managed || obs.Active || !obs.Updating || obs.RoleARN != "arn:aws:iam::123456789012:role/pods" {
		t.Fatalf("observation while creating %+v", obs)
	}
	created := f.profiles[first]
	if created == nil || !reflect.DeepEqual(created.Subnets, []string{"subnet-a", "subnet-b"}) || created.Tags["team"] != "a" ||
		created.Tags["instancemgr.keikoproj.io/instancegroup"] != owner || *created.Selectors[0].Namespace != "jobs" {
		t.Fatalf("created profile %+v", created)
	}
	f.settle()
	if obs = apply(t, p, ig); !obs.Active || obs.Updating || obs.Message != "" {
		t.Fatalf("observation once ACTIVE %+v", obs)
	}
	f.takeCalls()

	// New selectors: a new profile; the old one stays until it is ACTIVE.
	ig.Spec.EKSFargate.Selectors[0].Labels["tier"] = "batch-v2"
	obs = apply(t, p, ig)
	second := obs.GroupName
	if second == first || !obs.Updating || obs.Active {
		t.Fatalf("observation after the change %+v (first profile %s)", obs, first)
	}
	if calls := f.takeCalls(); !reflect.DeepEqual(calls, []string{"Create " + second}) {
		t.Fatalf("calls %v, want only the new profile created", calls)
	}
	apply(t, p, ig) // the new one is still CREATING
	if calls := f.takeCalls(); calls != nil {
		t.Fatalf("calls while the new profile is CREATING: %v", calls)
	}
	if got := f.owned(owner); len(got) != 2 {
		t.Fatalf("owned profiles %v while replacing, want both", got)
	}

	f.settle()
	obs = apply(t, p, ig)
	if calls := f.takeCalls(); !reflect.DeepEqual(calls, []string{"Delete " + first}) || !obs.Active || !obs.Updating ||
		!strings.Contains(obs.Message, "replacing Fargate profile(s) "+first+" with "+second) {
		t.Fatalf("once the new profile is ACTIVE: calls %v, observation %+v", calls, obs)
	}
	apply(t, p, ig) // the old one is DELETING: not asked again
	if calls := f.takeCalls(); calls != nil {
		t.Fatalf("calls while the old profile is DELETING: %v", calls)
	}
	f.settle()
	if obs = apply(t, p, ig); !obs.Active || obs.Updating || !reflect.DeepEqual(f.owned(owner), []string{second}) {
		t.Fatalf("after the replacement: observation %+v, profiles %v", obs, f.owned(owner))
	}
}

func TestApplyKeepsTheOldProfileWhenTheNewOneFails(t *testing.T) {
	p, f := newProvisioner()
	ig := batchGroup()
	first := apply(t, p, ig).GroupName
	f.settle()
	ig.Spec.EKSFargate.Subnets = []string{"subnet-a"}
	second := apply(t, p, ig).GroupName
	f.profiles[second].Status = "CREATE_FAILED"
	f.takeCalls()
	now := time.Date(2026, 11, 26, 12, 0, 0, 0, time.UTC)
	p.failures = providers.CreateFailures{Base: time.Minute, Now: func() time.Time { return now }}
	obs := apply(t, p, ig)
	if calls := f.takeCalls(); calls != nil || obs.Active || obs.Updating || !strings.Contains(obs.Message, "failed to create") ||
		!strings.Contains(obs.Message, "in 1m0s") {
		t.Fatalf("calls %v, observation %+v", calls, obs)
	}
	if f.profiles[first] == nil {
		t.Fatal("the old profile was deleted although its replacement failed")
	}
	// A restarted controller (nothing but the stored status) goes on
	// waiting rather than deleting the failed profile at once.
	now = now.Add(30 * time.Second)
	p = New(p.aws, p.opts)
	p.failures = providers.CreateFailures{Base: time.Minute, Now: func() time.Time { return now }}
	if obs = apply(t, p, ig); f.takeCalls() != nil || !strings.Contains(obs.Message, "in 30s") {
		t.Fatalf("after a restart: observation %+v, want the backoff continued", obs)
	}
	// After the backoff the failed profile (only) is deleted, to be
	// created again once gone.
	now = now.Add(30 * time.Second)
	obs = apply(t, p, ig)
	if calls := f.takeCalls(); len(calls) != 1 || !strings.Contains(calls[0], second) || !obs.Updating {
		t.Fatalf("after the backoff: calls %v, observation %+v", calls, obs)
	}
	if f.profiles[first] == nil {
		t.Fatal("the old profile was deleted although its replacement failed")
	}
}

func TestApplyWaitsWhileEKSIsBusyWithAnotherProfile(t *testing.T) {
	p, f := newProvisioner()
	f.add("someone-elses", "team-b/x", "DELETING")
	obs := apply(t, p, batchGroup())
	if !obs.Updating || obs.Active || !strings.Contains(obs.Message, "waiting to create") {
		t.Fatalf("observation %+v", obs)
	}
	f.settle()
	if obs = apply(t, p, batchGroup()); len(f.owned(owner)) != 1 {
		t.Fatalf("not created once EKS was free: %+v", obs)
	}
}

func TestApplySpecErrors(t *testing.T) {
	p, f := newProvisioner()
	name := profileName(batchGroup(), newShape("arn:aws:iam::123456789012:role/pods", []string{"subnet-a", "subnet-b"}, batchGroup().Spec.EKSFargate.Selectors))
	f.add(name, "team-b/batch", "ACTIVE")
	cases := []struct {
		name   string
		edit   func(*v1alpha1.EKSFargateSpec)
		prefix string
		detail string
	}{
		{"a profile of that name owned by another group", func(*v1alpha1.EKSFargateSpec) {}, "", "Fargate profile \"" + name + "\" exists but belongs to InstanceGroup team-b/batch"},
		{"unknown subnet", func(s *v1alpha1.EKSFargateSpec) { s.Subnets = []string{"subnet-z"} }, "spec.eks-fargate.subnets: ", "subnet-z"},
		{"missing role", func(s *v1alpha1.EKSFargateSpec) { s.PodExecutionRoleArn = "arn:aws:iam::1:role/nope" }, "spec.eks-fargate.podExecutionRoleArn: ", "nope"},
		{"missing cluster", func(s *v1alpha1.EKSFargateSpec) { s.ClusterName = "staging" }, "spec.eks-fargate.clusterName: ", "staging"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			ig := batchGroup()
			tc.edit(ig.Spec.EKSFargate)
			_, err := p.Apply(context.Background(), ig)
			if !(providers.IsSpecError(err) || ownership.IsForeign(err)) || !strings.HasPrefix(err.Error(), tc.prefix) || !strings.Contains(err.Error(), tc.detail) {
				t.Fatalf("error %v, want a SpecError %q... naming %q", err, tc.prefix, tc.detail)
			}
		})
	}
	if f.profiles[name].Tags["instancemgr.keikoproj.io/instancegroup"] != "team-b/batch" || f.takeCalls() != nil {
		t.Fatal("the other group's profile was touched")
	}
}

func TestDeleteRemovesEveryOwnedProfileAndNothingElse(t *testing.T) {
	p, f := newProvisioner()
	ig := batchGroup()
	for _, n := range []string{"prod-team-a-batch-00000001", "prod-team-a-batch-00000002", "prod-team-a-batch-00000003"} {
		f.add(n, owner, "ACTIVE")
	}
	f.add("prod-team-b-batch-00000001", "team-b/batch", "ACTIVE")
	ctx := context.Background()
	rounds := 0
	for {
		done, err := p.Delete(ctx, ig)
		if err != nil {
			t.Fatal(err)
		}
		if done {
			break
		}
		if len(f.owned(owner)) == 0 {
			t.Fatal("Delete returned false with no profile left")
		}
		f.settle()
		if rounds++; rounds > 5 {
			t.Fatalf("profiles left after %d rounds: %v", rounds, f.owned(owner))
		}
	}
	if rounds != 3 { // EKS deletes one profile at a time
		t.Errorf("deleted in %d rounds, want 3", rounds)
	}
	if len(f.owned(owner)) != 0 || f.profiles["prod-team-b-batch-00000001"] == nil {
		t.Fatalf("profiles after Delete: %v", f.profiles)
	}
	if done, err := p.Delete(ctx, ig); !done || err != nil { // idempotent
		t.Fatalf("Delete again: %v, %v", done, err)
	}
	ig.Spec.EKSFargate.ClusterName = "gone"
	if done, err := p.Delete(ctx, ig); !done || err != nil {
		t.Fatalf("Delete with the cluster gone: %v, %v", done, err)
	}
}

func TestDeleteReportsAProfileThatFailedToDelete(t *testing.T) {
	p, f := newProvisioner()
	f.add("prod-team-a-batch-00000001", owner, "DELETE_FAILED")
	done, err := p.Delete(context.Background(), batchGroup())
	if done || err == nil || !strings.Contains(err.Error(), "prod-team-a-batch-00000001 failed to delete") {
		t.Fatalf("Delete: %v, %v", done, err)
	}
	if calls := f.takeCalls(); !reflect.DeepEqual(calls, []string{"Delete prod-team-a-batch-00000001"}) {
		t.Fatalf("calls %v, want the delete retried", calls)
	}
}

// A group whose profile is ACTIVE makes no call of its own; only the
// group's own profiles are ever described, never the cluster's others.
func TestApplyReadsOnlyTheGroupsOwnProfiles(t *testing.T) {
	p, f := newProvisioner()
	for i := range 5 {
		f.add(fmt.Sprintf("prod-team-b-web-%08d", i), "team-b/web", "ACTIVE")
	}
	ig := batchGroup()
	name := apply(t, p, ig).GroupName
	f.settle()
	apply(t, p, ig)
	for n, c := range f.describes {
		if n != name {
			t.Errorf("described %s (%d times), a profile that cannot be the group's", n, c)
		}
	}
	f.lists, f.describes = 0, nil
	for range 5 {
		if obs := apply(t, p, ig); !obs.Active || obs.Updating {
			t.Fatalf("observation %+v", obs)
		}
	}
	if f.lists != 0 || len(f.describes) != 0 {
		t.Fatalf("an ACTIVE group reconciled 5 times listed %d pages and described %v", f.lists, f.describes)
	}

	// Deleted by hand: noticed from the cluster's listing (here at once),
	// and created again.
	p.opts.PollPeriod = time.Nanosecond
	delete(f.profiles, name)
	if obs := apply(t, p, ig); obs.Active || f.profiles[name] == nil {
		t.Fatalf("after the profile was deleted by hand: observation %+v, profile %v", obs, f.profiles[name])
	}
}
