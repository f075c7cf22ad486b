package eksmanaged

import (
	"context"
	"fmt"
	"strings"
	"time"

	awssdk "github.com/aws/aws-sdk-go-v2/aws"
	ekstypes "github.com/aws/aws-sdk-go-v2/service/eks/types"
	corev1 "k8s.io/api/core/v1"

	"github.com/instancemgr/instance-manager/api/v1alpha1"
	"github.com/instancemgr/instance-manager/providers"
)

// recreate handles a target node group in CREATE_FAILED, which EKS never
// retries (an IAM role not yet usable, a quota or capacity refusal): the
// first sighting of each failed incarnation is a Warning Event
// (providers.ReasonCreateFailed) with the health issues EKS reports; after
// the backoff of providers.CreateFailures (counted in
// status.createFailure, so a restart continues it) it is deleted (EKS
// DeleteNodegroup) once the Nodes that joined before the failure are
// drained (drainBeforeDelete), and once gone Apply creates it again. Until then the
// observation says why it is not Ready and when it is deleted. The
// retiring node groups, if any, keep serving meanwhile.
func (p *Provisioner) recreate(ctx context.Context, ig *v1alpha1.InstanceGroup, want nodegroup, target *ekstypes.Nodegroup, retiring []*ekstypes.Nodegroup) (*providers.Observation, error) {
	name := awssdk.ToString(target.NodegroupName)
	obs := observe(target, "")
	obs.Retiring = groupNames(retiring)
	why := fmt.Sprintf("EKS node group %s failed to create (%s)", name, issues(target))
	rec, first, wait := p.failures.Observe(ig.Status.CreateFailure, name, awssdk.ToTime(target.CreatedAt))
	obs.CreateFailure = rec
	attempt := rec.Attempts
	if first {
		providers.Emit(ctx, corev1.EventTypeWarning, providers.ReasonCreateFailed, "%s; failure %d in a row: it is deleted and created again in %s",
			why, attempt, wait.Round(time.Second))
	}
	if wait > 0 {
		obs.Message = fmt.Sprintf("%s; deleting it to create it again in %s (failure %d in a row)", why, wait.Round(time.Second), attempt)
		return obs, nil
	}
	// A node group can fail creation after some of its nodes joined (a
	// partial launch): they leave through the drain path like any other.
	waits, blocks, err := drainBeforeDelete(ctx, []*ekstypes.Nodegroup{target})
	if err != nil {
		return nil, err
	}
	if len(waits) > 0 {
		obs.Blocked = strings.Join(blocks, "; ")
		obs.Message = fmt.Sprintf("%s; draining its nodes before deleting it to create it again: %s (failure %d in a row)", why, strings.Join(waits, "; "), attempt)
		return obs, nil
	}
	if _, err := deleteNodegroups(ctx, p.aws.EKS, want.cluster, []*ekstypes.Nodegroup{target}); err != nil {
		return nil, err
	}
	obs.Updating = true
	obs.Message = fmt.Sprintf("%s; deleting it to create it again (failure %d in a row)", why, attempt)
	return obs, nil
}
