package eksfargate

import (
	"context"
	"fmt"
	"time"

	awssdk "github.com/aws/aws-sdk-go-v2/aws"
	ekstypes "github.com/aws/aws-sdk-go-v2/service/eks/types"
	corev1 "k8s.io/api/core/v1"

	"github.com/instancemgr/instance-manager/api/v1alpha1"
	"github.com/instancemgr/instance-manager/providers"
)

// recreate handles the group's profile in CREATE_FAILED, which EKS never
// retries: the first sighting of each failed incarnation is a Warning
// Event (providers.ReasonCreateFailed) with the health issues EKS
// reports; after the backoff of providers.CreateFailures the profile is
// deleted (EKS DeleteFargateProfile) and, once gone, Apply creates it
// again. It returns what the group's status says meanwhile, the record to
// store as status.createFailure (the count goes on across restarts), and
// whether the deletion was sent.
func (p *Provisioner) recreate(ctx context.Context, ig *v1alpha1.InstanceGroup, cluster string, cur *ekstypes.FargateProfile) (note string, rec *v1alpha1.CreateFailure, deleting bool, _ error) {
	name := awssdk.ToString(cur.FargateProfileName)
	why := fmt.Sprintf("Fargate profile %s failed to create (%s)", name, issues(cur))
	rec, first, wait := p.failures.Observe(ig.Status.CreateFailure, name, awssdk.ToTime(cur.CreatedAt))
	attempt := rec.Attempts
	if first {
		providers.Emit(ctx, corev1.EventTypeWarning, providers.ReasonCreateFailed, "%s; failure %d in a row: it is deleted and created again in %s",
			why, attempt, wait.Round(time.Second))
	}
	if wait > 0 {
		return fmt.Sprintf("%s; deleting it to create it again in %s", why, wait.Round(time.Second)), rec, false, nil
	}
	// No pod to evict first: the Fargate scheduler places pods only by
	// ACTIVE profiles, and this one never was.
	if _, err := deleteProfiles(ctx, p.aws.EKS, cluster, []ekstypes.FargateProfile{*cur}); err != nil {
		return "", nil, false, err
	}
	return fmt.Sprintf("%s; deleting it to create it again (failure %d in a row)", why, attempt), rec, true, nil
}
