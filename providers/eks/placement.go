package eks

import (
	"fmt"
	"slices"
	"strconv"
	"strings"
	"time"

	awssdk "github.com/aws/aws-sdk-go-v2/aws"
	astypes "github.com/aws/aws-sdk-go-v2/service/autoscaling/types"
	ec2types "github.com/aws/aws-sdk-go-v2/service/ec2/types"
)

// Drift is everything a running instance was launched with, not only its
// launch template's content: Auto Scaling applies a new subnet list or
// mixed instances policy to launches only (a subnet swap inside the same
// Availability Zones never moves an instance; an instance type dropped
// from the overrides stays; a purchase-option change is applied at
// AWS's own pace). So an instance is also drifted when (driftReasons):
//   - its subnet is not among the group's subnets;
//   - with a mixed instances policy, its instance type is not among the
//     policy's instance types;
//   - with a mixed instances policy, it was launched under other purchase
//     options (tagPurchaseOptions) and its market (spot or on-demand) is
//     in excess of what the policy asks for now, or it is spot and was
//     launched under another spot allocation strategy.
// Its replacement is launched by Auto Scaling under the current subnets
// and policy. Everything here is read once per instance (EC2
// DescribeInstances, with its launch template version), so an idle group
// costs no call.

// tagPurchaseOptions, propagated to the instances of a group with a mixed
// instances policy, records the purchase options they were launched
// under (mixedPolicy.purchaseOptions).
const tagPurchaseOptions = "instancemgr.keikoproj.io/purchase-options"

// placement is where and how an instance was launched, from EC2
// DescribeInstances: its subnet ("" unknown), whether it is a spot
// instance (InstanceLifecycle spot), and its tagPurchaseOptions ("" when
// launched before the tag existed or without a mixed policy).
type placement struct {
	subnet   string
	spot     bool
	purchase string
}

func placementOf(in ec2types.Instance) placement {
	pl := placement{subnet: awssdk.ToString(in.SubnetId), spot: in.InstanceLifecycle == ec2types.InstanceLifecycleTypeSpot}
	for _, t := range in.Tags {
		if awssdk.ToString(t.Key) == tagPurchaseOptions {
			pl.purchase = awssdk.ToString(t.Value)
		}
	}
	return pl
}

// purchaseOptions is p's purchase options as tagPurchaseOptions records
// them: "onDemandBase=<units>,onDemandPercent=<0-100>,spotAllocation=<strategy>,spotPools=<n>".
func (p *mixedPolicy) purchaseOptions() string {
	return fmt.Sprintf("onDemandBase=%d,onDemandPercent=%d,spotAllocation=%s,spotPools=%d", p.OnDemandBase, p.OnDemandPercent, p.SpotStrategy, p.SpotPools)
}

// spotAllocationOf returns the spotAllocation and spotPools of a
// tagPurchaseOptions value ("" when it has none).
func spotAllocationOf(options string) string {
	var strategy, pools string
	for _, kv := range strings.Split(options, ",") {
		k, v, _ := strings.Cut(kv, "=")
		switch k {
		case "spotAllocation":
			strategy = v
		case "spotPools":
			pools = v
		}
	}
	if strategy == "" {
		return ""
	}
	if pools != "" && pools != "0" {
		return strategy + " over " + pools + " pools"
	}
	return strategy
}

// launchSpec is what the group launches now, besides its launch template
// content: its subnets (ids) and its mixed instances policy (nil without
// one).
type launchSpec struct {
	subnets []string
	policy  *mixedPolicy
}

// judged is an instance with what is known of it for driftReasons.
type judged struct {
	in       astypes.Instance
	pl       placement
	launched time.Time
	units    int
}

// driftReasons returns why each drifted one of instances is not up to
// date (instance id -> reason; absent: up to date). content tells, for an
// instance, "" when its launch template content is current, else why not;
// placed, launched and weights are what was read of each instance
// (launchedVersions.placements, launchTimes) and the policy's weights. An
// instance not read from EC2 yet is judged by content and instance type
// only. Purchase options are judged among instances not terminating.
func driftReasons(instances []astypes.Instance, content func(astypes.Instance) string, want launchSpec,
	placed map[string]placement, launched map[string]time.Time, weights map[string]int) map[string]string {
	reasons := map[string]string{}
	var types []string
	if want.policy != nil {
		for _, o := range want.policy.Overrides {
			types = append(types, o.Type)
		}
	}
	var live []judged
	for _, in := range instances {
		id := awssdk.ToString(in.InstanceId)
		pl, known := placed[id]
		why := content(in)
		if t := awssdk.ToString(in.InstanceType); why == "" && want.policy != nil && t != "" && !slices.Contains(types, t) {
			why = fmt.Sprintf("instance type %s is not in the mixed instances policy", t)
		}
		if why == "" && known && pl.subnet != "" && len(want.subnets) > 0 && !slices.Contains(want.subnets, pl.subnet) {
			why = fmt.Sprintf("subnet %s is no longer listed", pl.subnet)
		}
		if why != "" {
			reasons[id] = why
		}
		if known && !strings.HasPrefix(string(in.LifecycleState), "Terminating") {
			live = append(live, judged{in: in, pl: pl, launched: launched[id], units: instanceWeight(in, weights)})
		}
	}
	if want.policy != nil && len(live) > 0 {
		purchaseDrift(live, want.policy, reasons)
	}
	return reasons
}

// purchaseDrift adds to reasons the instances of live launched under
// other purchase options (tagPurchaseOptions differs or is absent) that
// policy no longer wants:
//   - spot ones launched under another spot allocation strategy (a tagged
//     instance only: an untagged one's strategy is unknown);
//   - of the market in excess (on-demand above OnDemandBase plus
//     OnDemandPercent of the rest, rounded up; spot above the rest,
//     rounded up too, so AWS's rounding is never taken for excess), as
//     many capacity units as the excess: instances drifted already first
//     (their replacements restore the share anyway), then the earliest
//     launched, then by id.
//
// Auto Scaling launches each replacement in the market short of its
// share. An instance launched under the current options is never judged
// by market: AWS chose it for them.
func purchaseDrift(live []judged, policy *mixedPolicy, reasons map[string]string) {
	current := policy.purchaseOptions()
	total, onDemand := 0, 0
	for _, j := range live {
		total += j.units
		if !j.pl.spot {
			onDemand += j.units
		}
	}
	base := min(int(policy.OnDemandBase), total)
	above := total - base
	pct := int(policy.OnDemandPercent)
	maxOnDemand := base + (above*pct+99)/100
	maxSpot := above - above*pct/100
	excessSpot := total-onDemand > maxSpot
	excess, market := onDemand-maxOnDemand, "on-demand"
	if excessSpot {
		excess, market = total-onDemand-maxSpot, "spot"
	}
	share := fmt.Sprintf("%s above the mixed instances policy's share (on-demand base %d, %d%% on-demand above it)", market, policy.OnDemandBase, policy.OnDemandPercent)
	strategy := spotAllocationOf(current)
	var candidates []judged
	for _, j := range live {
		id := awssdk.ToString(j.in.InstanceId)
		if j.pl.purchase == current {
			continue
		}
		if was := spotAllocationOf(j.pl.purchase); j.pl.spot && was != "" && was != strategy && reasons[id] == "" {
			reasons[id] = fmt.Sprintf("spot allocation %s, the mixed instances policy now says %s", was, strategy)
		}
		if j.pl.spot == excessSpot {
			candidates = append(candidates, j)
		}
	}
	slices.SortStableFunc(candidates, func(a, b judged) int {
		ra, rb := reasons[awssdk.ToString(a.in.InstanceId)] != "", reasons[awssdk.ToString(b.in.InstanceId)] != ""
		if ra != rb {
			return map[bool]int{true: -1, false: 1}[ra]
		}
		if c := a.launched.Compare(b.launched); c != 0 {
			return c
		}
		return strings.Compare(awssdk.ToString(a.in.InstanceId), awssdk.ToString(b.in.InstanceId))
	})
	for _, j := range candidates {
		if excess <= 0 {
			return
		}
		excess -= j.units
		if id := awssdk.ToString(j.in.InstanceId); reasons[id] == "" {
			reasons[id] = share
		}
	}
}

// contentReason says why an instance launched from version v is not up to
// date by content ("" when it is): upToDate as versionContents judges it,
// target the version the group launches from.
func contentReason(upToDate func(string) bool, target int64, v string) string {
	if upToDate(v) {
		return ""
	}
	if v == "" {
		return "launched from an unknown launch template version"
	}
	return "launch template version " + v + " differs from version " + strconv.FormatInt(target, 10)
}
