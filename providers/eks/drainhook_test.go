package eks

import (
	"context"
	"slices"
	"testing"
	"time"

	awssdk "github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/autoscaling"
	astypes "github.com/aws/aws-sdk-go-v2/service/autoscaling/types"

	"github.com/instancemgr/instance-manager/api/v1alpha1"
	awsp "github.com/instancemgr/instance-manager/providers/aws"
)

// fakeHooks keeps one group's lifecycle hooks and records the calls made.
type fakeHooks struct {
	awsp.AutoScalingAPI
	hooks map[string]astypes.LifecycleHook
	calls []string
}

func (f *fakeHooks) DescribeLifecycleHooks(context.Context, *autoscaling.DescribeLifecycleHooksInput, ...func(*autoscaling.Options)) (*autoscaling.DescribeLifecycleHooksOutput, error) {
	f.calls = append(f.calls, "DescribeLifecycleHooks")
	out := &autoscaling.DescribeLifecycleHooksOutput{}
	for _, h := range f.hooks {
		out.LifecycleHooks = append(out.LifecycleHooks, h)
	}
	return out, nil
}

func (f *fakeHooks) PutLifecycleHook(_ context.Context, in *autoscaling.PutLifecycleHookInput, _ ...func(*autoscaling.Options)) (*autoscaling.PutLifecycleHookOutput, error) {
	f.calls = append(f.calls, "PutLifecycleHook "+*in.LifecycleHookName)
	f.hooks[*in.LifecycleHookName] = astypes.LifecycleHook{LifecycleHookName: in.LifecycleHookName, LifecycleTransition: in.LifecycleTransition,
		DefaultResult: in.DefaultResult, HeartbeatTimeout: in.HeartbeatTimeout, NotificationMetadata: in.NotificationMetadata}
	return &autoscaling.PutLifecycleHookOutput{}, nil
}

func (f *fakeHooks) DeleteLifecycleHook(_ context.Context, in *autoscaling.DeleteLifecycleHookInput, _ ...func(*autoscaling.Options)) (*autoscaling.DeleteLifecycleHookOutput, error) {
	f.calls = append(f.calls, "DeleteLifecycleHook "+*in.LifecycleHookName)
	delete(f.hooks, *in.LifecycleHookName)
	return &autoscaling.DeleteLifecycleHookOutput{}, nil
}

func (f *fakeHooks) CreateOrUpdateTags(_ context.Context, in *autoscaling.CreateOrUpdateTagsInput, _ ...func(*autoscaling.Options)) (*autoscaling.CreateOrUpdateTagsOutput, error) {
	f.calls = append(f.calls, "CreateOrUpdateTags "+*in.Tags[0].Key)
	return &autoscaling.CreateOrUpdateTagsOutput{}, nil
}

func drainHookAs(heartbeat int32) astypes.LifecycleHook {
	return astypes.LifecycleHook{LifecycleHookName: awssdk.String(awsp.DrainHookName), LifecycleTransition: awssdk.String("autoscaling:EC2_INSTANCE_TERMINATING"),
		DefaultResult: awssdk.String("CONTINUE"), HeartbeatTimeout: awssdk.Int32(heartbeat)}
}

func TestEnsureHooks(t *testing.T) {
	userHook := v1alpha1.LifecycleHookSpec{Name: "notify", Lifecycle: "launch", DefaultResult: "continue", HeartbeatTimeout: 60}
	for _, tc := range []struct {
		name    string
		spec    []v1alpha1.LifecycleHookSpec
		have    map[string]astypes.LifecycleHook
		tag     func(hooks []v1alpha1.LifecycleHookSpec) string // the listing's lifecycle-hooks tag
		want    []string
		wantNow []string // the hooks the group ends with
	}{
		{name: "a group without the hook gains it", have: map[string]astypes.LifecycleHook{},
			want: []string{"DescribeLifecycleHooks", "PutLifecycleHook " + awsp.DrainHookName}, wantNow: []string{awsp.DrainHookName}},
		{name: "a group with the hook as wanted: one read, no write", have: map[string]astypes.LifecycleHook{awsp.DrainHookName: drainHookAs(600)},
			want: []string{"DescribeLifecycleHooks"}, wantNow: []string{awsp.DrainHookName}},
		{name: "another heartbeat is put right", have: map[string]astypes.LifecycleHook{awsp.DrainHookName: drainHookAs(300)},
			want: []string{"DescribeLifecycleHooks", "PutLifecycleHook " + awsp.DrainHookName}, wantNow: []string{awsp.DrainHookName}},
		{name: "the spec's hooks beside it, recorded in the tag", spec: []v1alpha1.LifecycleHookSpec{userHook}, have: map[string]astypes.LifecycleHook{},
			want:    []string{"DescribeLifecycleHooks", "PutLifecycleHook notify", "PutLifecycleHook " + awsp.DrainHookName, "CreateOrUpdateTags " + tagHooksHash},
			wantNow: []string{awsp.DrainHookName, "notify"}},
		{name: "a hook the spec dropped is deleted, the drain hook stays", spec: nil,
			have: map[string]astypes.LifecycleHook{"notify": {LifecycleHookName: awssdk.String("notify")}, awsp.DrainHookName: drainHookAs(600)},
			tag:  func([]v1alpha1.LifecycleHookSpec) string { return "old" },
			want: []string{"DescribeLifecycleHooks", "DeleteLifecycleHook notify", "CreateOrUpdateTags " + tagHooksHash}, wantNow: []string{awsp.DrainHookName}},
		{name: "the tag records the set: no call", spec: []v1alpha1.LifecycleHookSpec{userHook}, have: map[string]astypes.LifecycleHook{},
			tag: func(h []v1alpha1.LifecycleHookSpec) string { return hashOf(h) }, want: nil, wantNow: nil},
	} {
		t.Run(tc.name, func(t *testing.T) {
			api := &fakeHooks{hooks: tc.have}
			p := New(&awsp.Clients{AutoScaling: api}, nil, Options{DrainHookHeartbeat: 10 * time.Minute})
			ig := &v1alpha1.InstanceGroup{}
			ig.Namespace, ig.Name, ig.UID = "team", "web", "uid-1"
			ig.Spec.EKS = &v1alpha1.EKSSpec{Configuration: &v1alpha1.EKSConfiguration{ClusterName: "prod", LifecycleHooks: tc.spec}}
			g := &astypes.AutoScalingGroup{AutoScalingGroupName: awssdk.String("team-web")}
			if tc.tag != nil {
				g.Tags = []astypes.TagDescription{{Key: awssdk.String(tagHooksHash), Value: awssdk.String(tc.tag(desiredHooks(tc.spec, 10*time.Minute)))}}
			}
			if _, err := p.ensureHooks(context.Background(), ig, readsID(ig), g); err != nil {
				t.Fatal(err)
			}
			if !slices.Equal(api.calls, tc.want) {
				t.Errorf("calls %q, want %q", api.calls, tc.want)
			}
			var now []string
			for n := range api.hooks {
				now = append(now, n)
			}
			slices.Sort(now)
			if tc.wantNow != nil && !slices.Equal(now, tc.wantNow) {
				t.Errorf("hooks %q, want %q", now, tc.wantNow)
			}
			if h, ok := api.hooks[awsp.DrainHookName]; ok && awssdk.ToInt32(h.HeartbeatTimeout) != 600 {
				t.Errorf("drain hook heartbeat %d, want 600 (the drain timeout)", awssdk.ToInt32(h.HeartbeatTimeout))
			}
			// Checked once: the next reconcile within CloudResync calls nothing.
			api.calls = nil
			if _, err := p.ensureHooks(context.Background(), ig, readsID(ig), g); err != nil {
				t.Fatal(err)
			}
			if len(api.calls) > 0 {
				t.Errorf("second reconcile called %q, want nothing", api.calls)
			}
		})
	}
}

func TestDesiredHooksDropsASpecHookOfTheDrainHooksName(t *testing.T) {
	got := desiredHooks([]v1alpha1.LifecycleHookSpec{{Name: awsp.DrainHookName, Lifecycle: "launch"}, {Name: "a", Lifecycle: "terminate"}}, 5*time.Hour)
	if len(got) != 2 || got[0].Name != "a" || got[1] != (v1alpha1.LifecycleHookSpec{Name: awsp.DrainHookName, Lifecycle: "terminate", DefaultResult: "continue", HeartbeatTimeout: 7200}) {
		t.Errorf("desiredHooks = %+v, want the spec's hook a, then the drain hook clamped to 7200 s", got)
	}
}
