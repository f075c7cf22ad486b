package aws

import (
	"context"
	"slices"
	"strings"
	"testing"

	awssdk "github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/autoscaling"
	"github.com/aws/aws-sdk-go-v2/service/autoscaling/types"
)

// freezingAutoScaling is fakeAutoScaling that applies SuspendProcesses and
// UpdateAutoScalingGroup (MaxSize) to its one group and records them;
// onSuspend runs after a suspension (tests: a scale-out that landed just
// before it).
type freezingAutoScaling struct {
	fakeAutoScaling
	writes    []string
	onSuspend func(g *types.AutoScalingGroup)
}

func (f *freezingAutoScaling) SuspendProcesses(_ context.Context, in *autoscaling.SuspendProcessesInput, _ ...func(*autoscaling.Options)) (*autoscaling.SuspendProcessesOutput, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	g := &f.groups[0]
	for _, p := range in.ScalingProcesses {
		g.SuspendedProcesses = append(g.SuspendedProcesses, types.SuspendedProcess{ProcessName: awssdk.String(p)})
	}
	f.writes = append(f.writes, "SuspendProcesses "+strings.Join(in.ScalingProcesses, ","))
	if f.onSuspend != nil {
		f.onSuspend(g)
	}
	return &autoscaling.SuspendProcessesOutput{}, nil
}

func (f *freezingAutoScaling) UpdateAutoScalingGroup(_ context.Context, in *autoscaling.UpdateAutoScalingGroupInput, _ ...func(*autoscaling.Options)) (*autoscaling.UpdateAutoScalingGroupOutput, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if in.MinSize != nil || in.DesiredCapacity != nil {
		panic("Freeze must change only MaxSize")
	}
	f.groups[0].MaxSize = in.MaxSize
	f.writes = append(f.writes, "UpdateAutoScalingGroup")
	return &autoscaling.UpdateAutoScalingGroupOutput{}, nil
}

func (f *freezingAutoScaling) DeleteTags(_ context.Context, in *autoscaling.DeleteTagsInput, _ ...func(*autoscaling.Options)) (*autoscaling.DeleteTagsOutput, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	g := &f.groups[0]
	var keys []string
	for _, d := range in.Tags {
		if awssdk.ToString(d.ResourceId) != awssdk.ToString(g.AutoScalingGroupName) || awssdk.ToString(d.ResourceType) != "auto-scaling-group" {
			panic("DeleteTags of another resource")
		}
		keys = append(keys, awssdk.ToString(d.Key))
		g.Tags = slices.DeleteFunc(g.Tags, func(t types.TagDescription) bool { return awssdk.ToString(t.Key) == awssdk.ToString(d.Key) })
	}
	f.writes = append(f.writes, "DeleteTags "+strings.Join(keys, ","))
	return &autoscaling.DeleteTagsOutput{}, nil
}

func tagged(keys ...string) []types.TagDescription {
	out := make([]types.TagDescription, len(keys))
	for i, k := range keys {
		out[i] = types.TagDescription{Key: awssdk.String(k), Value: awssdk.String("v")}
	}
	return out
}

func instancesIn(states ...types.LifecycleState) []types.Instance {
	out := make([]types.Instance, len(states))
	for i, s := range states {
		out[i] = types.Instance{InstanceId: awssdk.String("i-" + string(rune('a'+i))), LifecycleState: s}
	}
	return out
}

func suspended(names ...string) []types.SuspendedProcess {
	out := make([]types.SuspendedProcess, len(names))
	for i, n := range names {
		out[i] = types.SuspendedProcess{ProcessName: awssdk.String(n)}
	}
	return out
}

// Freeze suspends Launch and AZRebalance, then lowers MaxSize to what the
// group holds as read after the suspension, never below its size (which
// would make Auto Scaling terminate instances), and writes nothing to a
// frozen group, one that is not the caller's, or one being deleted.
func TestFreeze(t *testing.T) {
	inService := types.LifecycleStateInService
	cases := []struct {
		name       string
		group      types.AutoScalingGroup
		owned      bool
		onSuspend  func(*types.AutoScalingGroup)
		wantWrote  bool
		wantMax    int32
		wantSusp   []string
		wantWrites int
		wantTags   []string // nil: not checked
	}{
		{name: "a scalable group is frozen at its desired capacity", owned: true,
			group:     types.AutoScalingGroup{MinSize: awssdk.Int32(1), MaxSize: awssdk.Int32(5), DesiredCapacity: awssdk.Int32(2), Instances: instancesIn(inService, inService)},
			wantWrote: true, wantMax: 2, wantSusp: []string{"Launch", "AZRebalance"}, wantWrites: 2},
		{name: "a frozen group gets no write", owned: true,
			group: types.AutoScalingGroup{MinSize: awssdk.Int32(1), MaxSize: awssdk.Int32(2), DesiredCapacity: awssdk.Int32(2), Instances: instancesIn(inService, inService),
				SuspendedProcesses: suspended("AZRebalance", "Launch")},
			wantMax: 2, wantSusp: []string{"AZRebalance", "Launch"}},
		{name: "a process the spec suspended already is kept, the other added", owned: true,
			group: types.AutoScalingGroup{MinSize: awssdk.Int32(2), MaxSize: awssdk.Int32(2), DesiredCapacity: awssdk.Int32(2), Instances: instancesIn(inService, inService),
				SuspendedProcesses: suspended("Launch")},
			wantWrote: true, wantMax: 2, wantSusp: []string{"Launch", "AZRebalance"}, wantWrites: 1},
		{name: "never below the instances it holds", owned: true,
			group:     types.AutoScalingGroup{MinSize: awssdk.Int32(0), MaxSize: awssdk.Int32(6), DesiredCapacity: awssdk.Int32(1), Instances: instancesIn(inService, types.LifecycleStatePending, inService)},
			wantWrote: true, wantMax: 3, wantSusp: []string{"Launch", "AZRebalance"}, wantWrites: 2},
		{name: "terminating instances do not count", owned: true,
			group:     types.AutoScalingGroup{MinSize: awssdk.Int32(0), MaxSize: awssdk.Int32(6), DesiredCapacity: awssdk.Int32(2), Instances: instancesIn(inService, inService, types.LifecycleStateTerminatingWait)},
			wantWrote: true, wantMax: 2, wantSusp: []string{"Launch", "AZRebalance"}, wantWrites: 2},
		{name: "a scale-out before the suspension is read back, not undone", owned: true,
			group:     types.AutoScalingGroup{MinSize: awssdk.Int32(1), MaxSize: awssdk.Int32(5), DesiredCapacity: awssdk.Int32(2), Instances: instancesIn(inService, inService)},
			onSuspend: func(g *types.AutoScalingGroup) { g.DesiredCapacity = awssdk.Int32(3) },
			wantWrote: true, wantMax: 3, wantSusp: []string{"Launch", "AZRebalance"}, wantWrites: 2},
		{name: "the cluster-autoscaler's discovery tags go, its node template and other tags stay", owned: true,
			group: types.AutoScalingGroup{MinSize: awssdk.Int32(1), MaxSize: awssdk.Int32(5), DesiredCapacity: awssdk.Int32(2), Instances: instancesIn(inService, inService),
				Tags: tagged("team", TagAutoscalerEnabled, TagAutoscalerClusterPrefix+"prod", TagAutoscalerClusterPrefix+"node-template/label/role")},
			wantWrote: true, wantMax: 2, wantSusp: []string{"Launch", "AZRebalance"}, wantWrites: 3,
			wantTags: []string{"team", TagAutoscalerClusterPrefix + "node-template/label/role"}},
		{name: "a frozen group left with its discovery tags loses them", owned: true,
			group: types.AutoScalingGroup{MinSize: awssdk.Int32(1), MaxSize: awssdk.Int32(2), DesiredCapacity: awssdk.Int32(2), Instances: instancesIn(inService, inService),
				SuspendedProcesses: suspended("AZRebalance", "Launch"), Tags: tagged(TagAutoscalerEnabled)},
			wantWrote: true, wantMax: 2, wantSusp: []string{"AZRebalance", "Launch"}, wantWrites: 1, wantTags: []string{}},
		{name: "someone else's group is never touched", owned: false,
			group:   types.AutoScalingGroup{MinSize: awssdk.Int32(1), MaxSize: awssdk.Int32(5), DesiredCapacity: awssdk.Int32(2), Tags: tagged(TagAutoscalerEnabled)},
			wantMax: 5, wantTags: []string{TagAutoscalerEnabled}},
		{name: "a group being deleted is left to its deletion", owned: true,
			group:   types.AutoScalingGroup{MinSize: awssdk.Int32(1), MaxSize: awssdk.Int32(5), DesiredCapacity: awssdk.Int32(2), Status: awssdk.String("Delete in progress")},
			wantMax: 5},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			g := tc.group
			g.AutoScalingGroupName = awssdk.String("web")
			f := &freezingAutoScaling{onSuspend: tc.onSuspend}
			f.pageSize = 10
			f.set(g)
			wrote, err := Freeze(context.Background(), f, "web", func(types.AutoScalingGroup) bool { return tc.owned })
			if err != nil {
				t.Fatal(err)
			}
			got := f.groups[0]
			var susp []string
			for _, p := range got.SuspendedProcesses {
				susp = append(susp, awssdk.ToString(p.ProcessName))
			}
			if wrote != tc.wantWrote || awssdk.ToInt32(got.MaxSize) != tc.wantMax || !slices.Equal(susp, tc.wantSusp) || len(f.writes) != tc.wantWrites {
				t.Errorf("wrote %v, MaxSize %d, suspended %v, writes %v; want %v, %d, %v, %d writes",
					wrote, awssdk.ToInt32(got.MaxSize), susp, f.writes, tc.wantWrote, tc.wantMax, tc.wantSusp, tc.wantWrites)
			}
			if tc.wantTags != nil {
				keys := []string{}
				for _, tag := range got.Tags {
					keys = append(keys, awssdk.ToString(tag.Key))
				}
				if !slices.Equal(keys, tc.wantTags) {
					t.Errorf("tags %v after Freeze, want %v", keys, tc.wantTags)
				}
			}
			if tc.owned && got.Status == nil && !Frozen(got) {
				t.Errorf("Frozen is false after Freeze: %+v", got)
			}
		})
	}
	t.Run("a group that is gone", func(t *testing.T) {
		f := &freezingAutoScaling{}
		if wrote, err := Freeze(context.Background(), f, "gone", func(types.AutoScalingGroup) bool { return true }); wrote || err != nil {
			t.Errorf("Freeze of a missing group: %v, %v", wrote, err)
		}
	})
}
