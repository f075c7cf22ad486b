package eksmanaged

import (
	"context"
	"fmt"
	"maps"
	"slices"
	"strings"

	awssdk "github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/eks"
	ekstypes "github.com/aws/aws-sdk-go-v2/service/eks/types"

	awsp "github.com/instancemgr/instance-manager/providers/aws"
	"github.com/instancemgr/instance-manager/providers/aws/tagrecord"
)

// syncTags brings the node group's tags to want in place (EKS TagResource
// for tags missing or with another value, UntagResource for the tags the
// controller set and want no longer holds, see tagrecord.Removable: a tag
// someone else added stays, the ownership tags are never removed). It
// returns what it changed ("" for nothing). Failures are wrapped with the
// operation and node group name.
func syncTags(ctx context.Context, api awsp.EKSAPI, have *ekstypes.Nodegroup, want map[string]string) (string, error) {
	add := map[string]string{}
	for k, v := range want {
		if hv, ok := have.Tags[k]; !ok || hv != v {
			add[k] = v
		}
	}
	remove := tagrecord.Removable(have.Tags, want)
	if len(add) == 0 && len(remove) == 0 {
		return "", nil
	}
	name, arn := awssdk.ToString(have.NodegroupName), have.NodegroupArn
	var what []string
	if len(add) > 0 {
		if _, err := api.TagResource(ctx, &eks.TagResourceInput{ResourceArn: arn, Tags: add}); err != nil {
			return "", fmt.Errorf("eks TagResource %s (node group %s): %w", awssdk.ToString(arn), name, err)
		}
		what = append(what, "set "+strings.Join(slices.Sorted(maps.Keys(add)), ", "))
	}
	if len(remove) > 0 {
		if _, err := api.UntagResource(ctx, &eks.UntagResourceInput{ResourceArn: arn, TagKeys: remove}); err != nil {
			return "", fmt.Errorf("eks UntagResource %s (node group %s): %w", awssdk.ToString(arn), name, err)
		}
		what = append(what, "removed "+strings.Join(remove, ", "))
	}
	return "tags (" + strings.Join(what, "; ") + ")", nil
}
