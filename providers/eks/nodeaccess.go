package eks

import (
	"context"
	"errors"
	"fmt"

	awssdk "github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/eks"
	ekstypes "github.com/aws/aws-sdk-go-v2/service/eks/types"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/util/retry"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/yaml"

	"github.com/instancemgr/instance-manager/api/v1alpha1"
	awsp "github.com/instancemgr/instance-manager/providers/aws"
)

// AuthConfigMap is the aws-auth ConfigMap through which EKS clusters in
// CONFIG_MAP (or API_AND_CONFIG_MAP) authentication mode map node roles.
var AuthConfigMap = client.ObjectKey{Namespace: "kube-system", Name: "aws-auth"}

// nodeAccess lets a group's nodes join: an aws-auth mapRoles entry, or an
// EKS access entry (type EC2_LINUX or EC2_WINDOWS) when the cluster's
// authentication mode is API.
type nodeAccess struct {
	kube client.Client
	eks  awsp.EKSAPI
}

func (n nodeAccess) grant(ctx context.Context, ig *v1alpha1.InstanceGroup, cluster ClusterInfo, roleARN string) error {
	if cluster.AuthenticationMode == "API" {
		typ := "EC2_LINUX"
		if osFamily(ig) == v1alpha1.OSFamilyWindows {
			typ = "EC2_WINDOWS"
		}
		_, err := n.eks.CreateAccessEntry(ctx, &eks.CreateAccessEntryInput{ClusterName: awssdk.String(cluster.Name), PrincipalArn: awssdk.String(roleARN), Type: awssdk.String(typ)})
		var inUse *ekstypes.ResourceInUseException
		if err != nil && !errors.As(err, &inUse) {
			return fmt.Errorf("eks CreateAccessEntry %s for %s: %w", cluster.Name, roleARN, err)
		}
		return nil
	}
	groups := []string{"system:bootstrappers", "system:nodes"}
	if osFamily(ig) == v1alpha1.OSFamilyWindows {
		groups = append(groups, "eks:kube-proxy-windows")
	}
	mapARN := authMapARN(roleARN)
	return n.updateMapRoles(ctx, func(roles []map[string]any) []map[string]any {
		for _, r := range roles {
			if r["rolearn"] == mapARN {
				return roles
			}
		}
		return append(roles, map[string]any{"rolearn": mapARN, "username": "system:node:{{EC2PrivateDNSName}}", "groups": groups})
	})
}

// revoke removes the role's access unless another InstanceGroup (on the
// same cluster) still uses the role.
func (n nodeAccess) revoke(ctx context.Context, ig *v1alpha1.InstanceGroup, cluster ClusterInfo, roleARN string) error {
	if roleARN == "" {
		return nil
	}
	igs := &v1alpha1.InstanceGroupList{}
	if err := n.kube.List(ctx, igs); err != nil {
		return fmt.Errorf("listing InstanceGroups sharing role %s: %w", roleARN, err)
	}
	for _, other := range igs.Items {
		// Groups being deleted no longer count: groups sharing a role and
		// deleted together would otherwise each keep it for the other.
		if other.UID != ig.UID && other.DeletionTimestamp == nil && other.Status.NodesInstanceRoleArn == roleARN {
			return nil
		}
	}
	if cluster.AuthenticationMode == "API" {
		_, err := n.eks.DeleteAccessEntry(ctx, &eks.DeleteAccessEntryInput{ClusterName: awssdk.String(cluster.Name), PrincipalArn: awssdk.String(roleARN)})
		var nf *ekstypes.ResourceNotFoundException
		if err != nil && !errors.As(err, &nf) {
			return fmt.Errorf("eks DeleteAccessEntry %s for %s: %w", cluster.Name, roleARN, err)
		}
		return nil
	}
	mapARN := authMapARN(roleARN)
	return n.updateMapRoles(ctx, func(roles []map[string]any) []map[string]any {
		out := roles[:0]
		for _, r := range roles {
			if r["rolearn"] != mapARN {
				out = append(out, r)
			}
		}
		return out
	})
}

// updateMapRoles edits mapRoles of aws-auth with edit, keeping every other
// key and entry as they are, retrying on conflicts; it creates the
// ConfigMap when missing.
func (n nodeAccess) updateMapRoles(ctx context.Context, edit func([]map[string]any) []map[string]any) error {
	// Conflicts, and another group creating aws-auth at the same moment,
	// are retried on a fresh read.
	return retry.OnError(retry.DefaultBackoff, func(err error) bool {
		return apierrors.IsConflict(err) || apierrors.IsAlreadyExists(err)
	}, func() error {
		cm := &corev1.ConfigMap{}
		err := n.kube.Get(ctx, AuthConfigMap, cm)
		create := apierrors.IsNotFound(err)
		if err != nil && !create {
			return fmt.Errorf("reading ConfigMap %s: %w", AuthConfigMap, err)
		}
		var roles []map[string]any
		if raw := cm.Data["mapRoles"]; raw != "" {
			if err := yaml.Unmarshal([]byte(raw), &roles); err != nil {
				return fmt.Errorf("ConfigMap %s: data.mapRoles is not a YAML list: %w", AuthConfigMap, err)
			}
		}
		before, _ := yaml.Marshal(roles)
		roles = edit(roles)
		after, err := yaml.Marshal(roles)
		if err != nil {
			return err
		}
		if string(before) == string(after) && !create {
			return nil
		}
		if cm.Data == nil {
			cm.Data = map[string]string{}
		}
		cm.Data["mapRoles"] = string(after)
		if create {
			cm.ObjectMeta = metav1.ObjectMeta{Namespace: AuthConfigMap.Namespace, Name: AuthConfigMap.Name}
			return n.kube.Create(ctx, cm)
		}
		return n.kube.Update(ctx, cm)
	})
}
