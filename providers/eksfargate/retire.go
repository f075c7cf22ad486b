package eksfargate

import (
	"context"
	"fmt"
	"strings"

	awssdk "github.com/aws/aws-sdk-go-v2/aws"
	ekstypes "github.com/aws/aws-sdk-go-v2/service/eks/types"

	"github.com/instancemgr/instance-manager/providers"
)

// LabelProfile is the label EKS puts on each pod it runs on Fargate: the
// name of the Fargate profile that selected it.
const LabelProfile = "eks.amazonaws.com/fargate-profile"

// admit asks the controller for an upgrade slot (providers.Disruptions
// .Admit) before the replacement of old by the profile name starts or
// goes on. Nil when admitted (or no Disruptions is given); else the
// observation of the group waiting: the profile serving now (the first
// of old that is ACTIVE), WaitingForSlot, with a message saying what
// waits.
func admit(ctx context.Context, name, roleARN string, old []ekstypes.FargateProfile) (*providers.Observation, error) {
	if ok, err := providers.Admitted(ctx); err != nil || ok {
		return nil, err
	}
	obs := &providers.Observation{GroupName: name, RoleARN: roleARN, Managed: true, WaitingForSlot: true}
	for _, p := range old {
		if p.Status == ekstypes.FargateProfileStatusActive {
			obs.GroupName, obs.RoleARN, obs.Active = awssdk.ToString(p.FargateProfileName), awssdk.ToString(p.PodExecutionRoleArn), true
			break
		}
	}
	obs.Message = fmt.Sprintf("replacing Fargate profile(s) %s with %s", strings.Join(names(old), ", "), name)
	return obs, nil
}

// evictFirst has the controller evict the pods of each of old not
// already DELETING (providers.Disruptions.EvictPods of label
// LabelProfile: the Eviction API, PodDisruptionBudgets honoured, paced by
// maxUnavailable) and returns what is still waited for (none: every old
// profile is empty and may be deleted) and what is blocked. The evicted
// pods' replacements are created by their controllers while both
// profiles exist, and EKS gives each the profile it picks among those
// that match; one that lands on an old profile is evicted again. Without
// Disruptions nothing is waited for.
func evictFirst(ctx context.Context, old []ekstypes.FargateProfile) (waiting []string, blocked string, err error) {
	d := providers.DisruptionsFrom(ctx)
	if d == nil {
		return nil, "", nil
	}
	var blocks []string
	for _, p := range old {
		if p.Status == ekstypes.FargateProfileStatusDeleting {
			continue
		}
		name := awssdk.ToString(p.FargateProfileName)
		r, err := d.EvictPods(ctx, LabelProfile, name)
		if err != nil {
			return nil, "", fmt.Errorf("evicting the pods of Fargate profile %s before deleting it: %w", name, err)
		}
		if !r.Done {
			waiting = append(waiting, fmt.Sprintf("evicting the pods of Fargate profile %s before deleting it: %s", name, r.Message))
			if r.Blocked != "" {
				blocks = append(blocks, r.Blocked)
			}
		}
	}
	return waiting, strings.Join(blocks, "; "), nil
}
