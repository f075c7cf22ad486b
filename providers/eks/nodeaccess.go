package eks

import (
	"context"
	"encoding/json"
	"fmt"
	"slices"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/util/retry"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/yaml"

	"github.com/instancemgr/instance-manager/api/v1alpha1"
	awsp "github.com/instancemgr/instance-manager/providers/aws"
	"github.com/instancemgr/instance-manager/providers/aws/ownership"
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
	iam  awsp.IAMAPI // the role's current id (GetRole); nil: not compared
}

// AnnotationMapRoles on the aws-auth ConfigMap records the mapRoles
// entries instance-manager added: JSON {"<role ARN>": ["<namespace>/<name>",
// ...]} naming the InstanceGroups using each. Only recorded entries are
// ever removed; an entry that was there before (an admin's, a node group's
// outside instance-manager) is left as it is through every create, update
// and delete.
const AnnotationMapRoles = "instancemgr.keikoproj.io/map-roles"

// nodeEntry is the mapRoles entry instance-manager adds for a node role.
func nodeEntry(ig *v1alpha1.InstanceGroup, roleARN string) map[string]any {
	groups := []any{"system:bootstrappers", "system:nodes"}
	if osFamily(ig) == v1alpha1.OSFamilyWindows {
		groups = append(groups, "eks:kube-proxy-windows")
	}
	return map[string]any{"rolearn": roleARN, "username": "system:node:{{EC2PrivateDNSName}}", "groups": groups}
}

// grant lets the nodes of ig (role roleARN) join: with an EKS access
// entry where the cluster's authentication mode allows it
// (ensureAccessEntry), otherwise an aws-auth mapRoles entry, added and
// recorded unless the role already has one that instance-manager did not
// add. In API_AND_CONFIG_MAP mode a role aws-auth already maps keeps that
// mapping (an access entry would override it).
func (n nodeAccess) grant(ctx context.Context, ig *v1alpha1.InstanceGroup, cluster ClusterInfo, roleARN string) error {
	entry, err := n.useAccessEntry(ctx, cluster, roleARN)
	if err != nil {
		return err
	}
	if entry {
		return n.ensureAccessEntry(ctx, ig, cluster, roleARN)
	}
	user := ownership.GroupTag(ig)
	roleARN = authMapARN(roleARN) // aws-auth maps role ARNs without their path
	return n.updateMapRoles(ctx, func(roles []map[string]any, rec record) []map[string]any {
		users, ours := rec[roleARN]
		for _, r := range roles {
			if r["rolearn"] == roleARN {
				if ours && !slices.Contains(users, user) {
					rec[roleARN] = append(users, user)
				}
				return roles // someone else's entry when not recorded: not ours to change
			}
		}
		rec[roleARN] = []string{user}
		return append(roles, nodeEntry(ig, roleARN))
	})
}

// revoke removes ig's use of the role: in API and API_AND_CONFIG_MAP mode
// the access entry when it carries the cluster's ownership tag (EKS
// DescribeAccessEntry, DeleteAccessEntry) and no other InstanceGroup uses
// the role; in CONFIG_MAP and API_AND_CONFIG_MAP mode, in aws-auth
// the recorded entry once no InstanceGroup that still exists is recorded
// as using it, and only while it is still the entry that was added (an
// entry someone edited is left).
func (n nodeAccess) revoke(ctx context.Context, ig *v1alpha1.InstanceGroup, cluster ClusterInfo, roleARN string) error {
	if roleARN == "" {
		return nil
	}
	igs := &v1alpha1.InstanceGroupList{}
	if err := n.kube.List(ctx, igs); err != nil {
		return fmt.Errorf("listing InstanceGroups sharing role %s: %w", roleARN, err)
	}
	if cluster.AuthenticationMode == modeAPI || cluster.AuthenticationMode == modeBoth {
		if err := n.revokeAccessEntry(ctx, ig, igs, cluster, roleARN); err != nil || cluster.AuthenticationMode == modeAPI {
			return err
		}
	}
	live := map[string]bool{}
	for _, other := range igs.Items {
		if other.UID != ig.UID {
			live[ownership.GroupTag(&other)] = true
		}
	}
	roleARN = authMapARN(roleARN)
	added := nodeEntry(ig, roleARN)
	return n.updateMapRoles(ctx, func(roles []map[string]any, rec record) []map[string]any {
		users, ours := rec[roleARN]
		if !ours {
			return roles
		}
		var keep []string
		for _, u := range users {
			if u != ownership.GroupTag(ig) && live[u] {
				keep = append(keep, u)
			}
		}
		if len(keep) > 0 {
			rec[roleARN] = keep
			return roles
		}
		delete(rec, roleARN)
		out := roles[:0]
		for _, r := range roles {
			if r["rolearn"] != roleARN || !sameEntry(r, added) {
				out = append(out, r)
			}
		}
		return out
	})
}

// sameEntry: the entry is still the one instance-manager adds (its
// username and groups; the Windows group may differ between groups
// sharing a role).
func sameEntry(have, added map[string]any) bool {
	if have["username"] != added["username"] {
		return false
	}
	groups, _ := have["groups"].([]any)
	for _, g := range groups {
		if g != "system:bootstrappers" && g != "system:nodes" && g != "eks:kube-proxy-windows" {
			return false
		}
	}
	return true
}

// record is the AnnotationMapRoles record: role ARN -> InstanceGroups.
type record map[string][]string

// updateMapRoles edits mapRoles of aws-auth and the AnnotationMapRoles
// record with edit, keeping every other key and entry as they are,
// retrying on conflicts; it creates the ConfigMap when missing.
func (n nodeAccess) updateMapRoles(ctx context.Context, edit func([]map[string]any, record) []map[string]any) error {
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
		rec := record{}
		if raw := cm.Annotations[AnnotationMapRoles]; raw != "" {
			if err := json.Unmarshal([]byte(raw), &rec); err != nil {
				return fmt.Errorf("ConfigMap %s: annotation %s is not the JSON object instance-manager writes: %w", AuthConfigMap, AnnotationMapRoles, err)
			}
		}
		before, _ := yaml.Marshal(roles)
		recBefore, _ := json.Marshal(rec)
		roles = edit(roles, rec)
		after, err := yaml.Marshal(roles)
		if err != nil {
			return err
		}
		recAfter, _ := json.Marshal(rec)
		if string(before) == string(after) && string(recBefore) == string(recAfter) {
			return nil // nothing to add or remove (an absent aws-auth is not created for nothing)
		}
		if cm.Annotations == nil {
			cm.Annotations = map[string]string{}
		}
		cm.Annotations[AnnotationMapRoles] = string(recAfter)
		if cm.Data == nil {
			cm.Data = map[string]string{}
		}
		cm.Data["mapRoles"] = string(after)
		if create {
			cm.ObjectMeta = metav1.ObjectMeta{Namespace: AuthConfigMap.Namespace, Name: AuthConfigMap.Name, Annotations: cm.Annotations}
			return n.kube.Create(ctx, cm)
		}
		return n.kube.Update(ctx, cm)
	})
}

// ForgetRole removes the aws-auth mapRoles entry instance-manager recorded
// for roleARN once none of the InstanceGroups recorded as using it exists
// any more (the garbage collector calls it for roles of groups removed
// without their finalizer). Entries it did not add are never touched.
func ForgetRole(ctx context.Context, kube client.Client, roleARN string) error {
	if err := kube.Get(ctx, AuthConfigMap, &corev1.ConfigMap{}); apierrors.IsNotFound(err) {
		return nil
	}
	igs := &v1alpha1.InstanceGroupList{}
	if err := kube.List(ctx, igs); err != nil {
		return fmt.Errorf("listing InstanceGroups: %w", err)
	}
	live := map[string]bool{}
	for i := range igs.Items {
		live[ownership.GroupTag(&igs.Items[i])] = true
	}
	n := nodeAccess{kube: kube}
	roleARN = authMapARN(roleARN)
	return n.updateMapRoles(ctx, func(roles []map[string]any, rec record) []map[string]any {
		users, ours := rec[roleARN]
		if !ours || slices.ContainsFunc(users, func(u string) bool { return live[u] }) {
			return roles
		}
		delete(rec, roleARN)
		out := roles[:0]
		for _, r := range roles {
			if r["rolearn"] != roleARN || !sameEntry(r, map[string]any{"username": "system:node:{{EC2PrivateDNSName}}"}) {
				out = append(out, r)
			}
		}
		return out
	})
}

// EKS authentication modes (DescribeCluster accessConfig).
const (
	modeAPI  = "API"
	modeBoth = "API_AND_CONFIG_MAP"
)

// useAccessEntry: access entries in API mode; in API_AND_CONFIG_MAP mode
// too, unless aws-auth already maps the role (an access entry for it would
// take precedence over that mapping, which may be an admin's).
func (n nodeAccess) useAccessEntry(ctx context.Context, cluster ClusterInfo, roleARN string) (bool, error) {
	switch cluster.AuthenticationMode {
	case modeAPI:
		return true, nil
	case modeBoth:
		cm := &corev1.ConfigMap{}
		err := n.kube.Get(ctx, AuthConfigMap, cm)
		if apierrors.IsNotFound(err) {
			return true, nil
		}
		if err != nil {
			return false, fmt.Errorf("reading ConfigMap %s: %w", AuthConfigMap, err)
		}
		var roles []map[string]any
		if err := yaml.Unmarshal([]byte(cm.Data["mapRoles"]), &roles); err != nil {
			return false, fmt.Errorf("ConfigMap %s: data.mapRoles is not a YAML list: %w", AuthConfigMap, err)
		}
		return !slices.ContainsFunc(roles, func(r map[string]any) bool { return r["rolearn"] == authMapARN(roleARN) }), nil
	}
	return false, nil
}

// revokeAccessEntry deletes the role's access entry when instance-manager
// created it (its cluster ownership tag; EKS DescribeAccessEntry,
// DeleteAccessEntry) and no other InstanceGroup in igs still uses the role.
func (n nodeAccess) revokeAccessEntry(ctx context.Context, ig *v1alpha1.InstanceGroup, igs *v1alpha1.InstanceGroupList, cluster ClusterInfo, roleARN string) error {
	for _, other := range igs.Items {
		// Groups being deleted no longer count: groups sharing a role and
		// deleted together would otherwise each keep it for the other.
		if other.UID != ig.UID && other.DeletionTimestamp == nil && other.Status.NodesInstanceRoleArn == roleARN {
			return nil
		}
	}
	return DeleteAccessEntry(ctx, n.eks, cluster.Name, roleARN)
}
