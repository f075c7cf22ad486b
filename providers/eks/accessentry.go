package eks

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"time"

	awssdk "github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/eks"
	ekstypes "github.com/aws/aws-sdk-go-v2/service/eks/types"
	"github.com/aws/aws-sdk-go-v2/service/iam"
	corev1 "k8s.io/api/core/v1"

	"github.com/instancemgr/instance-manager/api/v1alpha1"
	"github.com/instancemgr/instance-manager/providers"
	awsp "github.com/instancemgr/instance-manager/providers/aws"
)

// TagRoleID on an access entry instance-manager creates records the IAM
// role id (GetRole RoleId, "AROA…") of the principal it was created for.
// EKS keeps that id with the entry: "If you … recreate the IAM principal,
// even if it has the same ARN, the access entry won't work" (Amazon EKS
// User Guide, "Create access entries"); DescribeAccessEntry does not show
// it, so the tag does.
const TagRoleID = "instancemgr.keikoproj.io/role-id"

// principal is the current identity of an IAM role: its id and creation
// time (IAM GetRole).
type principal struct {
	id      string
	created time.Time
}

// arnRoleName is the role name of a role ARN
// ("arn:aws:iam::111122223333:role/path/name" -> "name").
func arnRoleName(arn string) string {
	return arn[strings.LastIndex(arn, "/")+1:]
}

// currentPrincipal reads the role's id and creation time (IAM GetRole);
// ok false when n has no IAM client.
func (n nodeAccess) currentPrincipal(ctx context.Context, roleARN string) (principal, bool, error) {
	if n.iam == nil {
		return principal{}, false, nil
	}
	got, err := n.iam.GetRole(ctx, &iam.GetRoleInput{RoleName: awssdk.String(arnRoleName(roleARN))})
	if err != nil {
		return principal{}, false, fmt.Errorf("iam GetRole %s: %w", arnRoleName(roleARN), err)
	}
	return principal{id: awssdk.ToString(got.Role.RoleId), created: awssdk.ToTime(got.Role.CreateDate)}, true, nil
}

// stale reports why entry was made for an earlier role of the same ARN
// than p, or "": its TagRoleID names another role id, or (an entry without
// the tag) it was created before the role was.
func (p principal) stale(entry *ekstypes.AccessEntry) string {
	if id := entry.Tags[TagRoleID]; id != "" {
		if id != p.id {
			return fmt.Sprintf("it was created for role id %s, the role's id is now %s", id, p.id)
		}
		return ""
	}
	if at := awssdk.ToTime(entry.CreatedAt); !at.IsZero() && !p.created.IsZero() && at.Before(p.created) {
		return fmt.Sprintf("it was created at %s, before the role (created %s)", at.UTC().Format(time.RFC3339), p.created.UTC().Format(time.RFC3339))
	}
	return ""
}

// ensureAccessEntry creates the EKS access entry of type EC2_LINUX (or
// EC2_WINDOWS) for roleARN, tagged with the cluster's ownership tag and
// TagRoleID (EKS CreateAccessEntry). When one exists
// (ResourceInUseException) it is compared with the role as it is now (EKS
// DescribeAccessEntry, IAM GetRole): an entry made for an earlier role of
// that ARN (principal.stale) no longer lets nodes join, so one
// instance-manager created (the cluster's ownership tag) is deleted and
// created again (DeleteAccessEntry, CreateAccessEntry) with a Normal Event
// (providers.ReasonAccessEntryReplaced); someone else's stale entry is an
// error saying so, and is left as it is.
func (n nodeAccess) ensureAccessEntry(ctx context.Context, ig *v1alpha1.InstanceGroup, cluster ClusterInfo, roleARN string) error {
	typ := "EC2_LINUX"
	if osFamily(ig) == v1alpha1.OSFamilyWindows {
		typ = "EC2_WINDOWS"
	}
	cur, known, err := n.currentPrincipal(ctx, roleARN)
	if err != nil {
		return err
	}
	tags := map[string]string{awsp.ClusterTagKey(cluster.Name): "owned"}
	if known && cur.id != "" {
		tags[TagRoleID] = cur.id
	}
	create := func() error {
		_, err := n.eks.CreateAccessEntry(ctx, &eks.CreateAccessEntryInput{ClusterName: awssdk.String(cluster.Name), PrincipalArn: awssdk.String(roleARN), Type: awssdk.String(typ), Tags: tags})
		return err
	}
	err = create()
	var inUse *ekstypes.ResourceInUseException
	if err == nil || !errors.As(err, &inUse) {
		if err != nil {
			return fmt.Errorf("eks CreateAccessEntry %s for %s: %w", cluster.Name, roleARN, err)
		}
		return nil
	}
	if !known {
		return nil
	}
	got, err := n.eks.DescribeAccessEntry(ctx, &eks.DescribeAccessEntryInput{ClusterName: awssdk.String(cluster.Name), PrincipalArn: awssdk.String(roleARN)})
	var nf *ekstypes.ResourceNotFoundException
	switch {
	case errors.As(err, &nf):
		// An entry being deleted, or not yet readable: the next pass tries again.
		return providers.Transient(fmt.Errorf("eks CreateAccessEntry %s for %s answered ResourceInUse, DescribeAccessEntry ResourceNotFound: retrying", cluster.Name, roleARN))
	case err != nil:
		return fmt.Errorf("eks DescribeAccessEntry %s for %s: %w", cluster.Name, roleARN, err)
	case got.AccessEntry == nil:
		return nil
	}
	why := cur.stale(got.AccessEntry)
	if why == "" {
		return nil
	}
	if got.AccessEntry.Tags[awsp.ClusterTagKey(cluster.Name)] != "owned" {
		return fmt.Errorf("the EKS access entry of cluster %s for %s no longer lets nodes join (%s; EKS keeps the role id it was made for), and instance-manager did not create it, so it is left: delete it to let instance-manager create a new one", cluster.Name, roleARN, why)
	}
	if _, err := n.eks.DeleteAccessEntry(ctx, &eks.DeleteAccessEntryInput{ClusterName: awssdk.String(cluster.Name), PrincipalArn: awssdk.String(roleARN)}); err != nil && !errors.As(err, &nf) {
		return fmt.Errorf("eks DeleteAccessEntry %s for %s (stale: %s): %w", cluster.Name, roleARN, why, err)
	}
	if err := create(); err != nil {
		return fmt.Errorf("eks CreateAccessEntry %s for %s (replacing a stale entry): %w", cluster.Name, roleARN, err)
	}
	providers.Emit(ctx, corev1.EventTypeNormal, providers.ReasonAccessEntryReplaced,
		"Replaced the EKS access entry of cluster %s for %s: %s, so nodes could not join with it", cluster.Name, roleARN, why)
	return nil
}

// DeleteAccessEntry deletes the EKS access entry of cluster for roleARN
// when instance-manager created it (its cluster ownership tag; EKS
// DescribeAccessEntry, DeleteAccessEntry); none, or someone else's, is
// left and is not an error. The garbage collector calls it with the
// orphaned role it deletes.
func DeleteAccessEntry(ctx context.Context, api awsp.EKSAPI, cluster, roleARN string) error {
	got, err := api.DescribeAccessEntry(ctx, &eks.DescribeAccessEntryInput{ClusterName: awssdk.String(cluster), PrincipalArn: awssdk.String(roleARN)})
	var nf *ekstypes.ResourceNotFoundException
	if errors.As(err, &nf) {
		return nil
	}
	if err != nil {
		return fmt.Errorf("eks DescribeAccessEntry %s for %s: %w", cluster, roleARN, err)
	}
	if got.AccessEntry == nil || got.AccessEntry.Tags[awsp.ClusterTagKey(cluster)] != "owned" {
		return nil // an entry instance-manager did not create
	}
	_, err = api.DeleteAccessEntry(ctx, &eks.DeleteAccessEntryInput{ClusterName: awssdk.String(cluster), PrincipalArn: awssdk.String(roleARN)})
	if err != nil && !errors.As(err, &nf) {
		return fmt.Errorf("eks DeleteAccessEntry %s for %s: %w", cluster, roleARN, err)
	}
	return nil
}

// ForgetAccessEntry deletes the access entry instance-manager created for
// roleARN (DeleteAccessEntry) when cluster authenticates through access
// entries (EKS DescribeCluster: API or API_AND_CONFIG_MAP); in CONFIG_MAP
// mode there is none to delete. The garbage collector calls it before it
// deletes an orphaned role: an entry outliving its role is one a role
// created again under that ARN could not use.
func ForgetAccessEntry(ctx context.Context, api awsp.EKSAPI, cluster, roleARN string) error {
	info, err := (&clusters{api: api, now: time.Now}).get(ctx, cluster)
	if providers.IsSpecError(err) {
		return nil // the cluster is gone, and its access entries with it
	}
	if err != nil {
		return err
	}
	if info.AuthenticationMode != modeAPI && info.AuthenticationMode != modeBoth {
		return nil
	}
	return DeleteAccessEntry(ctx, api, cluster, roleARN)
}
