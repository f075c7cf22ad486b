package instancegroup

import (
	"context"
	"encoding/json"
	"fmt"

	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/util/retry"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/log"

	"github.com/instancemgr/instance-manager/api/v1alpha1"
)

// recordIdentity stores status.identity (v1alpha1.SpecIdentity of the
// stored spec) when the group has none, before anything is written to the
// cloud for it: from then on the validating webhook refuses a provisioner
// or cluster change, whatever happens to the writes that follow (a cloud
// write that fails, a status report that loses to a tenant's edits).
//
// The record is a JSON merge patch of status.identity alone on the status
// subresource (tenants have no instancegroups/status rights), guarded by
// the resourceVersion read, so that it records the spec as stored when it
// lands: a conflict reads the group again from the API server and retries
// (retry.DefaultRetry). On success ig is the stored group, record
// included, and written is true. A group stored before the record existed
// whose status says which provisioner built it (status.provisioner,
// written with status.activeScalingGroupName) is recorded with that
// provisioner (backfill), so that a switch admitted by the older webhook
// is not taken for the identity.
func (r *Reconciler) recordIdentity(ctx context.Context, ig *v1alpha1.InstanceGroup) (written bool, err error) {
	if ig.Status.Identity != nil {
		return false, nil
	}
	first := true
	err = retry.RetryOnConflict(retry.DefaultRetry, func() error {
		if !first {
			if err := r.apiReader().Get(ctx, client.ObjectKeyFromObject(ig), ig); err != nil {
				return err
			}
			if ig.Status.Identity != nil {
				return nil // another replica recorded it meanwhile
			}
		}
		first = false
		id := identityToRecord(ig)
		raw, err := json.Marshal(map[string]any{
			"metadata": map[string]any{"resourceVersion": ig.ResourceVersion},
			"status":   map[string]any{"identity": id},
		})
		if err != nil {
			return err
		}
		if err := r.Client.Status().Patch(ctx, ig, client.RawPatch(types.MergePatchType, raw)); err != nil {
			return err
		}
		log.FromContext(ctx).Info("recorded the group's identity before its first cloud write", "provisioner", id.Provisioner, "cluster", id.ClusterName)
		return nil
	})
	if err != nil {
		return false, fmt.Errorf("recording status.identity of InstanceGroup %s/%s before building it: %w", ig.Namespace, ig.Name, err)
	}
	return true, nil
}

// identityToRecord is the identity recordIdentity writes: the spec's,
// with the provisioner status.provisioner names when the status says the
// group was built (a group stored before the record existed).
func identityToRecord(ig *v1alpha1.InstanceGroup) v1alpha1.GroupIdentity {
	id := v1alpha1.SpecIdentity(&ig.Spec)
	if ig.Status.Provisioner == "" || ig.Status.ActiveScalingGroupName == "" {
		return id
	}
	spec := ig.Spec
	spec.Provisioner = ig.Status.Provisioner
	built := v1alpha1.SpecIdentity(&spec)
	if built.ClusterName == "" {
		built.ClusterName = id.ClusterName // the section is gone; the older webhook refused cluster changes
	}
	return built
}

// identityMismatch returns why the group's spec may not be built: it names
// another provisioner or cluster than status.identity records; "" when it
// does not (or nothing is recorded).
func identityMismatch(ig *v1alpha1.InstanceGroup) string {
	rec := ig.Status.Identity
	if rec == nil {
		return ""
	}
	now := v1alpha1.SpecIdentity(&ig.Spec)
	switch {
	case now.Provisioner != rec.Provisioner:
		return fmt.Sprintf("spec.provisioner is %q but status.identity records that the group's cloud resources were built (or may have been) by provisioner %s in cluster %q: nothing is built until spec.provisioner is %q again; to move the group, create a new InstanceGroup and delete this one (its deletion removes what was built)",
			now.Provisioner, rec.Provisioner, rec.ClusterName, rec.Provisioner)
	case now.ClusterName != rec.ClusterName:
		return fmt.Sprintf("%s is %q but status.identity records that the group's cloud resources were built (or may have been) in cluster %q: nothing is built until it is %q again; to move the group, create a new InstanceGroup and delete this one (its deletion removes what was built)",
			v1alpha1.ClusterNamePath(now.Provisioner), now.ClusterName, rec.ClusterName, rec.ClusterName)
	}
	return ""
}

// builtIdentity returns the identity the group's resources were built
// under, for its deletion: status.identity, or for a group stored before
// the record existed whose status names resources, identityToRecord
// (backfill). ok is false when neither says (the spec is all there is).
func builtIdentity(ig *v1alpha1.InstanceGroup) (v1alpha1.GroupIdentity, bool) {
	switch {
	case ig.Status.Identity != nil:
		return *ig.Status.Identity, true
	case ig.Status.ActiveScalingGroupName != "":
		return identityToRecord(ig), true
	}
	return v1alpha1.GroupIdentity{}, false
}

// deletionView returns the group as the provisioner deleting it must see
// it: with the identity its resources were built under (builtIdentity,
// v1alpha1.WithIdentity), so that what is deleted is what was built,
// whatever the spec says now. A copy: the caller's writes (status,
// finalizer) start from the stored group.
func deletionView(ig *v1alpha1.InstanceGroup) *v1alpha1.InstanceGroup {
	if id, ok := builtIdentity(ig); ok {
		return ig.WithIdentity(id)
	}
	return ig
}

// apiReader reads from the API server (Reader) when set, else through
// Client.
func (r *Reconciler) apiReader() client.Reader {
	if r.Reader != nil {
		return r.Reader
	}
	return r.Client
}
