package eks

import (
	"context"
	"fmt"

	"github.com/aws/aws-sdk-go-v2/service/autoscaling"

	awsp "github.com/instancemgr/instance-manager/providers/aws"
)

// tagScalingGroup writes tags on the Auto Scaling group (Auto Scaling
// CreateOrUpdateTags; propagated to instances launched from now on, as
// asgTag decides): how an adopted group is retagged (providers.Adopt).
func tagScalingGroup(ctx context.Context, api awsp.AutoScalingAPI, name string, tags map[string]string) error {
	if _, err := api.CreateOrUpdateTags(ctx, &autoscaling.CreateOrUpdateTagsInput{Tags: asgTags(name, tags)}); err != nil {
		return fmt.Errorf("autoscaling CreateOrUpdateTags %s: %w", name, err)
	}
	return nil
}
