package eksmanaged

import (
	"context"
	"testing"

	awssdk "github.com/aws/aws-sdk-go-v2/aws"
	ekstypes "github.com/aws/aws-sdk-go-v2/service/eks/types"

	"github.com/instancemgr/instance-manager/providers"
)

func TestFrozenScaling(t *testing.T) {
	sc := func(min, max, desired int32) *ekstypes.NodegroupScalingConfig {
		return &ekstypes.NodegroupScalingConfig{MinSize: awssdk.Int32(min), MaxSize: awssdk.Int32(max), DesiredSize: awssdk.Int32(desired)}
	}
	for _, tc := range []struct {
		name             string
		have             *ekstypes.NodegroupScalingConfig
		wantNil          bool
		wantMin, wantMax int32
	}{
		{name: "room to grow: max lowered to desired", have: sc(2, 5, 4), wantMin: 2, wantMax: 4},
		{name: "min above desired is lowered too", have: sc(3, 6, 2), wantMin: 2, wantMax: 2},
		{name: "frozen already", have: sc(1, 3, 3), wantNil: true},
		{name: "empty: nothing to drain, max cannot be 0", have: sc(0, 5, 0), wantNil: true},
		{name: "no scaling config", wantNil: true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got := frozenScaling(tc.have)
			if tc.wantNil {
				if got != nil {
					t.Fatalf("frozenScaling = min %d max %d, want nothing sent", *got.MinSize, *got.MaxSize)
				}
				return
			}
			if got == nil || *got.MinSize != tc.wantMin || *got.MaxSize != tc.wantMax || got.DesiredSize != nil {
				t.Fatalf("frozenScaling = %+v, want min %d max %d, desired unset", got, tc.wantMin, tc.wantMax)
			}
		})
	}
}

// freezeRecorder is a Disruptions that notes the retiring node group's
// scaling when its drain is asked for.
type freezeRecorder struct {
	fakeDisruptions
	e     *env
	maxAt []int32
}

func (f *freezeRecorder) DrainNodes(ctx context.Context, key, value string) (providers.Retirement, error) {
	f.maxAt = append(f.maxAt, awssdk.ToInt32(f.e.eks.groups[value].ScalingConfig.MaxSize))
	return f.fakeDisruptions.DrainNodes(ctx, key, value)
}

// A retiring node group is frozen (max = its desired size, min no
// higher) before its Nodes are drained, so the cluster-autoscaler cannot
// scale it out onto new, uncordoned nodes while its pods go Pending
// (review N8); a group being deleted is frozen by Freeze (the reconciler
// calls it before drainForDelete drains).
func TestRetiringNodegroupIsFrozenBeforeItsDrain(t *testing.T) {
	e := newEnv()
	ig := activeGroup(t, e) // min 2, max 5, desired 4
	withInstanceType(ig, "m5.xlarge")
	e.applyWith(t, ig, &fakeDisruptions{admit: true})
	e.eks.settle()
	d := &freezeRecorder{fakeDisruptions: fakeDisruptions{admit: true, drained: map[string]providers.Retirement{ngName: {Message: "draining"}}}, e: e}
	e.applyWith(t, ig, d)
	if len(d.maxAt) != 1 || d.maxAt[0] != 4 {
		t.Fatalf("maxSize of %s when its drain was asked: %v, want [4]", ngName, d.maxAt)
	}
	if s := e.eks.groups[ngName].ScalingConfig; awssdk.ToInt32(s.MinSize) != 2 || awssdk.ToInt32(s.DesiredSize) != 4 {
		t.Errorf("frozen scaling min %d desired %d, want 2 and 4 unchanged", *s.MinSize, *s.DesiredSize)
	}

	// Deletion: Freeze freezes every node group of the group.
	e2 := newEnv()
	ig2 := activeGroup(t, e2)
	if err := e2.p.Freeze(context.Background(), ig2); err != nil {
		t.Fatal(err)
	}
	if s := e2.eks.groups[ngName].ScalingConfig; awssdk.ToInt32(s.MaxSize) != 4 {
		t.Errorf("after Freeze: maxSize %d, want 4", *s.MaxSize)
	}
	e2.eks.settle()
	e2.eks.takeCalls()
	if err := e2.p.Freeze(context.Background(), ig2); err != nil || e2.eks.takeCalls() != nil {
		t.Errorf("Freeze of a frozen group wrote something (err %v)", err)
	}
}
