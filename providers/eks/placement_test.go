package eks

import (
	"maps"
	"testing"
	"time"

	awssdk "github.com/aws/aws-sdk-go-v2/aws"
	astypes "github.com/aws/aws-sdk-go-v2/service/autoscaling/types"

	"github.com/instancemgr/instance-manager/api/v1alpha1"
)

// contentDrift is driftReasons by launch template content alone (versions:
// instance id to the version EC2 tells; upToDate judges a version).
func contentDrift(instances []astypes.Instance, versions map[string]string, upToDate func(string) bool) map[string]string {
	content := func(in astypes.Instance) string { return contentReason(upToDate, 3, launchVersion(in, versions)) }
	return driftReasons(instances, content, launchSpec{}, nil, nil, nil)
}

func typed(id, instanceType, state string) astypes.Instance {
	in := instance(id, "3", state)
	in.InstanceType = awssdk.String(instanceType)
	return in
}

// An instance drifts by what it was launched with: its subnet, its
// instance type under a mixed policy, and, launched under other purchase
// options, its market in excess of the policy's share or its spot
// allocation strategy. Each says why.
func TestDriftReasons(t *testing.T) {
	policy := func(base, pct int32, strategy string) *mixedPolicy {
		return &mixedPolicy{Overrides: []v1alpha1.InstanceTypeSpec{{Type: "m5.large"}, {Type: "m5a.large"}}, OnDemandBase: base, OnDemandPercent: pct, SpotStrategy: strategy}
	}
	old := policy(0, 100, "capacity-optimized").purchaseOptions()
	cur := policy(0, 50, "capacity-optimized")
	at := func(min int) time.Time { return time.Date(2026, 11, 1, 0, min, 0, 0, time.UTC) }
	four := []astypes.Instance{typed("i-1", "m5.large", "InService"), typed("i-2", "m5.large", "InService"), typed("i-3", "m5.large", "InService"), typed("i-4", "m5.large", "InService")}
	times := map[string]time.Time{"i-1": at(4), "i-2": at(1), "i-3": at(3), "i-4": at(2)}
	onDemand := func(purchase string) map[string]placement {
		out := map[string]placement{}
		for _, id := range []string{"i-1", "i-2", "i-3", "i-4"} {
			out[id] = placement{subnet: "subnet-a", purchase: purchase}
		}
		return out
	}
	cases := []struct {
		name      string
		instances []astypes.Instance
		want      launchSpec
		placed    map[string]placement
		expect    map[string]string
	}{
		{"subnet listed", four[:1], launchSpec{subnets: []string{"subnet-a"}}, onDemand(""), map[string]string{}},
		{"subnet no longer listed (same zone or zone removed)", four[:2], launchSpec{subnets: []string{"subnet-b"}},
			map[string]placement{"i-1": {subnet: "subnet-a"}, "i-2": {subnet: "subnet-b"}},
			map[string]string{"i-1": "subnet subnet-a is no longer listed"}},
		{"subnet not read yet: not judged", four[:1], launchSpec{subnets: []string{"subnet-b"}}, nil, map[string]string{}},
		{"instance type dropped from the overrides", []astypes.Instance{typed("i-1", "m5.large", "InService"), typed("i-2", "m5d.large", "InService")},
			launchSpec{policy: cur}, map[string]placement{"i-1": {purchase: cur.purchaseOptions()}, "i-2": {purchase: cur.purchaseOptions()}},
			map[string]string{"i-2": "instance type m5d.large is not in the mixed instances policy"}},
		{"on-demand share lowered: the two earliest launched of four on-demand", four, launchSpec{policy: cur}, onDemand(old),
			map[string]string{"i-2": "on-demand above the mixed instances policy's share (on-demand base 0, 50% on-demand above it)",
				"i-4": "on-demand above the mixed instances policy's share (on-demand base 0, 50% on-demand above it)"}},
		{"launched under the current options: never judged by market", four, launchSpec{policy: cur}, onDemand(cur.purchaseOptions()), map[string]string{}},
		{"untagged (an earlier controller), within the share either way of rounding", four[:3], launchSpec{policy: cur},
			map[string]placement{"i-1": {}, "i-2": {spot: true}, "i-3": {}}, map[string]string{}},
		{"a base covers every unit: spot in excess", four[:2], launchSpec{policy: policy(2, 0, "capacity-optimized")},
			map[string]placement{"i-1": {spot: true, purchase: old}, "i-2": {purchase: old}},
			map[string]string{"i-1": "spot above the mixed instances policy's share (on-demand base 2, 0% on-demand above it)"}},
		{"spot allocation changed", four[:2], launchSpec{policy: policy(0, 50, "price-capacity-optimized")},
			map[string]placement{"i-1": {spot: true, purchase: cur.purchaseOptions()}, "i-2": {purchase: cur.purchaseOptions()}},
			map[string]string{"i-1": "spot allocation capacity-optimized, the mixed instances policy now says price-capacity-optimized"}},
		{"a terminating instance is not counted for the share", []astypes.Instance{typed("i-1", "m5.large", "Terminating:Wait"), typed("i-2", "m5.large", "InService")},
			launchSpec{policy: policy(1, 0, "capacity-optimized")}, map[string]placement{"i-1": {purchase: old}, "i-2": {purchase: old}}, map[string]string{}},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			got := driftReasons(c.instances, func(astypes.Instance) string { return "" }, c.want, c.placed, times, nil)
			if !maps.Equal(got, c.expect) {
				t.Errorf("drift %v, want %v", got, c.expect)
			}
		})
	}
}

// Launch template content comes first and is said by version.
func TestContentReason(t *testing.T) {
	got := contentDrift([]astypes.Instance{instance("i-1", "2", "InService"), instance("i-2", "3", "InService"), instance("i-3", "", "InService")}, nil, is("3"))
	want := map[string]string{"i-1": "launch template version 2 differs from version 3", "i-3": "launched from an unknown launch template version"}
	if !maps.Equal(got, want) {
		t.Errorf("drift %v, want %v", got, want)
	}
}
