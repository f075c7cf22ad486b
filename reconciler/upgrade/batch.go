package upgrade

import (
	"context"
	"fmt"
	"slices"
	"sort"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/equality"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/util/retry"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/instancemgr/instance-manager/api/v1alpha1"
	"github.com/instancemgr/instance-manager/providers"
	"github.com/instancemgr/instance-manager/reconciler/nodehealth"

	"github.com/instancemgr/instance-manager/reconciler/drain"
)

// MaxNeverJoined is how many consecutive replacements may fail to become
// Ready nodes before the rotation stops (status.rotationBatch.neverJoined).
const MaxNeverJoined = 3

// ReasonRotationStopped: the rotation stopped because MaxNeverJoined
// consecutive replacements never became Ready nodes (Warning Event, and
// the reason of the Upgrading condition while it stays stopped).
const ReasonRotationStopped = "RotationStopped"

// batchVerdict is what the batch record says about the next batch.
type batchVerdict struct {
	// stopped, when set, says why the rotation stopped (MaxNeverJoined
	// replacements of this launch template version never joined).
	stopped string
	// waiting, when set, says which replacements the batch waits for.
	waiting string
}

// Stopped returns why ig's rotation is stopped ("" when it is not): its
// stored batch record (status.rotationBatch) counts MaxNeverJoined
// replacements that never became Ready nodes, launched from obs's latest
// launch template version. A newer version (a fixed image or user data)
// restarts the rotation.
func Stopped(ig *v1alpha1.InstanceGroup, obs *providers.Observation) string {
	rec := ig.Status.RotationBatch
	if rec == nil || rec.LaunchTemplateVersion != obs.LatestTemplateVersion || len(rec.NeverJoined) < MaxNeverJoined {
		return ""
	}
	return stoppedMessage(obs, rec)
}

func stoppedMessage(obs *providers.Observation, rec *v1alpha1.RotationBatch) string {
	return fmt.Sprintf("rotation stopped: %d replacement instance(s) launched from launch template %s version %s never became Ready nodes (%s); "+
		"no more old nodes are drained and the old nodes are kept; a new launch template version (fix the image or user data) restarts the rotation",
		len(rec.NeverJoined), obs.LaunchTemplateName, rec.LaunchTemplateVersion, strings.Join(rec.NeverJoined, ", "))
}

// judgeBatch reads ig's batch record from the API server and settles it
// against obs and nodes at now: a pending replacement whose node is Ready
// joined (and clears the never-joined count); one gone (or terminating)
// before, or without a Ready node past the group's node startup timeout
// (spec.eks.nodeHealth.startupTimeout) from its launch, never joined.
// Instances on the latest version the group did not hold when the batch
// began are claimed as its replacements, up to what it owes. The record is cleared
// once the batch's replacements are all Ready, or when the latest launch
// template version changed. With MaxNeverJoined never-joined, the verdict
// is stopped (a Warning Event the pass the count is reached). Errors come
// from the API server.
func (r *RollingUpdate) judgeBatch(ctx context.Context, ig *v1alpha1.InstanceGroup, obs *providers.Observation,
	nodes map[string]*corev1.Node, now time.Time) (batchVerdict, error) {
	stored, err := r.storedBatch(ctx, ig)
	if err != nil || stored == nil {
		return batchVerdict{}, err
	}
	if stored.LaunchTemplateVersion != obs.LatestTemplateVersion {
		return batchVerdict{}, r.writeBatch(ctx, ig, nil)
	}
	rec := stored.DeepCopy()
	before := len(rec.NeverJoined)
	settleBatch(rec, obs, nodes, now, nodehealth.SettingsOf(ig).StartupTimeout)
	if rec.Owed > 0 && rec.JoinedCapacity >= rec.Owed {
		rec = nil // the batch's replacements are Ready
	}
	if !equality.Semantic.DeepEqual(rec, stored) {
		if err := r.writeBatch(ctx, ig, rec); err != nil {
			return batchVerdict{}, err
		}
	}
	switch {
	case rec == nil:
		return batchVerdict{}, nil
	case len(rec.NeverJoined) >= MaxNeverJoined:
		msg := stoppedMessage(obs, rec)
		if before < MaxNeverJoined {
			r.Recorder.Eventf(ig, nil, corev1.EventTypeWarning, ReasonRotationStopped, "Rotate", "%s", strings.ToUpper(msg[:1])+msg[1:])
		}
		return batchVerdict{stopped: msg}, nil
	case rec.Owed > rec.JoinedCapacity:
		msg := fmt.Sprintf("waiting for this batch's replacements to become Ready nodes (%d of %d capacity unit(s) joined", rec.JoinedCapacity, rec.Owed)
		if len(rec.Pending) > 0 {
			msg += "; launched: " + strings.Join(rec.Pending, ", ")
		}
		if len(rec.NeverJoined) > 0 {
			msg += fmt.Sprintf("; never joined: %s (the rotation stops at %d)", strings.Join(rec.NeverJoined, ", "), MaxNeverJoined)
		}
		return batchVerdict{waiting: msg + ")"}, nil
	}
	return batchVerdict{}, nil
}

// settleBatch updates rec in place (see judgeBatch): pending replacements
// are judged, then new ones claimed. startup is the node startup timeout.
func settleBatch(rec *v1alpha1.RotationBatch, obs *providers.Observation, nodes map[string]*corev1.Node, now time.Time, startup time.Duration) {
	live := map[string]providers.Instance{}
	for _, in := range obs.Instances {
		if !strings.HasPrefix(in.LifecycleState, "Terminating") {
			live[in.ID] = in
		}
	}
	var pending []string
	for _, id := range rec.Pending {
		in, ok := live[id]
		node := nodes[in.ProviderID]
		switch {
		case ok && node != nil && drain.NodeReady(node):
			rec.Joined = append(rec.Joined, id)
			rec.JoinedCapacity += in.Units()
			rec.NeverJoined = nil // consecutive failures only
		case !ok, !in.LaunchTime.IsZero() && now.Sub(in.LaunchTime) >= startup:
			rec.NeverJoined = append(rec.NeverJoined, id)
		default:
			pending = append(pending, id)
		}
	}
	rec.Pending = pending

	// Claim replacements, oldest launch first, while the batch is owed
	// more than its pending and joined replacements are worth.
	need := rec.Owed - rec.JoinedCapacity
	for _, id := range rec.Pending {
		need -= live[id].Units()
	}
	var fresh []providers.Instance
	for _, in := range live {
		if in.UpToDate && !slices.Contains(rec.Existing, in.ID) &&
			!slices.Contains(rec.Pending, in.ID) && !slices.Contains(rec.Joined, in.ID) && !slices.Contains(rec.NeverJoined, in.ID) {
			fresh = append(fresh, in)
		}
	}
	sort.Slice(fresh, func(i, j int) bool {
		if !fresh[i].LaunchTime.Equal(fresh[j].LaunchTime) {
			return fresh[i].LaunchTime.Before(fresh[j].LaunchTime)
		}
		return fresh[i].ID < fresh[j].ID
	})
	for _, in := range fresh {
		if need <= 0 {
			break
		}
		rec.Pending = append(rec.Pending, in.ID)
		need -= in.Units()
	}
	// A replacement claimed and judged in the same pass: one already
	// Ready or past its startup timeout is settled at the next pass.
}

// owe records that the batch asked Auto Scaling for units more capacity
// of replacements (a termination without a decrement, or a maxSurge
// scale-out), starting a record at now if none is under way for obs's
// latest launch template version: obs, observed before the request, has
// the instances on the latest version that are not replacements
// (Existing). Errors come from the API server.
func (r *RollingUpdate) owe(ctx context.Context, ig *v1alpha1.InstanceGroup, obs *providers.Observation, units int, now time.Time) error {
	if units <= 0 {
		return nil
	}
	stored, err := r.storedBatch(ctx, ig)
	if err != nil {
		return err
	}
	rec := stored.DeepCopy()
	if rec == nil || rec.LaunchTemplateVersion != obs.LatestTemplateVersion {
		rec = &v1alpha1.RotationBatch{LaunchTemplateVersion: obs.LatestTemplateVersion}
	}
	if rec.Owed == 0 {
		rec.Since = metav1.NewTime(now.UTC().Truncate(time.Second))
		rec.Existing = nil
		for _, in := range obs.Instances {
			if in.UpToDate && !slices.Contains(rec.Pending, in.ID) && !slices.Contains(rec.Joined, in.ID) && !slices.Contains(rec.NeverJoined, in.ID) {
				rec.Existing = append(rec.Existing, in.ID)
			}
		}
		slices.Sort(rec.Existing)
	}
	rec.Owed += units
	return r.writeBatch(ctx, ig, rec)
}

// storedBatch is status.rotationBatch as stored in the API server (not
// the cache: a stale record would start the next batch early).
func (r *RollingUpdate) storedBatch(ctx context.Context, ig *v1alpha1.InstanceGroup) (*v1alpha1.RotationBatch, error) {
	cur := &v1alpha1.InstanceGroup{}
	if err := r.reader().Get(ctx, client.ObjectKeyFromObject(ig), cur); err != nil {
		return nil, fmt.Errorf("reading the rotation batch record: %w", err)
	}
	ig.Status.RotationBatch = cur.Status.RotationBatch
	return cur.Status.RotationBatch, nil
}

// writeBatch writes status.rotationBatch = rec (nil clears it) to the
// API server, retrying on conflicts, and into ig.
func (r *RollingUpdate) writeBatch(ctx context.Context, ig *v1alpha1.InstanceGroup, rec *v1alpha1.RotationBatch) error {
	err := retry.RetryOnConflict(retry.DefaultBackoff, func() error {
		cur := &v1alpha1.InstanceGroup{}
		if err := r.reader().Get(ctx, client.ObjectKeyFromObject(ig), cur); err != nil {
			return err
		}
		if equality.Semantic.DeepEqual(cur.Status.RotationBatch, rec) {
			return nil
		}
		cur.Status.RotationBatch = rec.DeepCopy()
		return r.Client.Status().Update(ctx, cur)
	})
	if err != nil {
		return fmt.Errorf("recording the rotation batch: %w", err)
	}
	ig.Status.RotationBatch = rec.DeepCopy()
	return nil
}
