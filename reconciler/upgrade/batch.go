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
const MaxNeverJoined = v1alpha1.MaxNeverJoined

// ReasonReplacementForgone: a batch owed a replacement that Auto Scaling
// will not launch (the group holds its desired capacity, lowered by
// someone else, with nothing launching); the batch no longer waits for it
// (Warning Event naming the replacement that went and why).
const ReasonReplacementForgone = "ReplacementForgone"

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
	if !rec.StoppedAt(obs.LatestTemplateVersion) {
		return ""
	}
	return stoppedMessage(obs, rec)
}

// Unsettled reports whether ig's batch record (as cached in ig) for obs's
// latest launch template version still owes replacements that are not
// Ready nodes, or stopped the rotation: the rotation is not done, and
// keeps its upgrade slot, until the last batch's replacements joined or
// were forgone, even once no drifted instance is left.
func Unsettled(ig *v1alpha1.InstanceGroup, obs *providers.Observation) bool {
	rec := ig.Status.RotationBatch
	return rec != nil && rec.LaunchTemplateVersion == obs.LatestTemplateVersion &&
		(rec.Owed > rec.JoinedCapacity || len(rec.NeverJoined) >= MaxNeverJoined)
}

func stoppedMessage(obs *providers.Observation, rec *v1alpha1.RotationBatch) string {
	return fmt.Sprintf("rotation stopped: %d replacement instance(s) launched from launch template %s version %s never became Ready nodes (%s); "+
		"no more old nodes are drained, the old nodes are kept and the Auto Scaling group launches from the newest version its running instances have; "+
		"a new launch template version (fix the image or user data) restarts the rotation, and so does the annotation %s on the InstanceGroup when the cause has passed",
		len(rec.NeverJoined), obs.LaunchTemplateName, rec.LaunchTemplateVersion, strings.Join(rec.NeverJoined, ", "), v1alpha1.AnnotationResumeRotation)
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
	owed := rec.Owed
	if forgone := settleBatch(rec, obs, nodes, now, nodehealth.SettingsOf(ig).StartupTimeout); forgone != "" {
		replacementsForgone.Add(float64(owed - rec.Owed))
		r.Recorder.Eventf(ig, nil, corev1.EventTypeWarning, ReasonReplacementForgone, "Rotate", "%s", forgone)
	}
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
// are judged, then new ones claimed, then what Auto Scaling will not
// launch is forgone (forgo). startup is the node startup timeout. It
// returns what was forgone and why ("" when nothing was).
func settleBatch(rec *v1alpha1.RotationBatch, obs *providers.Observation, nodes map[string]*corev1.Node, now time.Time, startup time.Duration) string {
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
	return forgo(rec, obs, need)
}

// forgo lowers rec.Owed by need, the capacity the batch is owed beyond
// its joined and pending replacements, when Auto Scaling will not launch
// it: the replacements that never joined have all left the group (one
// still listed may yet be replaced without a decrement), the group holds
// its desired capacity (in capacity units, Standby instances left out, as
// Auto Scaling counts them) and no instance is Pending or Terminating (a
// termination without a decrement is followed by a launch). That is the
// case when someone else lowered the desired capacity as it removed the
// replacement: the cluster-autoscaler's cleanup of a node that never
// registered terminates it with a decrement. Requiring a replacement that
// left keeps a stale desired capacity (a cached listing taken before a
// maxSurge scale-out) from forgoing a launch still to come. The
// never-joined count is kept, so a cleanup that repeats still stops the
// rotation at MaxNeverJoined. It returns the Event message ("" when
// nothing is forgone).
func forgo(rec *v1alpha1.RotationBatch, obs *providers.Observation, need int) string {
	if need <= 0 {
		return ""
	}
	listed := map[string]bool{}
	for _, in := range obs.Instances {
		listed[in.ID] = true
	}
	var gone []string
	for _, id := range rec.NeverJoined {
		if listed[id] {
			// Still in the group: node health replaces it without a
			// decrement (or the group keeps it), so capacity may still come.
			return ""
		}
		gone = append(gone, id)
	}
	if len(gone) == 0 {
		return ""
	}
	capacity := 0
	for _, in := range obs.Instances {
		switch {
		case strings.HasPrefix(in.LifecycleState, "Pending"), strings.HasPrefix(in.LifecycleState, "Terminating"):
			return ""
		case providers.Standby(in):
			continue
		}
		capacity += in.Units()
	}
	if capacity < obs.Desired {
		return ""
	}
	rec.Owed -= need
	return fmt.Sprintf("The rotation batch no longer waits for %d capacity unit(s) of replacements that Auto Scaling will not launch: "+
		"replacement instance(s) %s left the group before becoming Ready nodes, and the group holds its desired capacity %d with no instance launching "+
		"(someone else lowered it as the replacement went, e.g. the cluster-autoscaler removing a node that never registered); the never-joined count is kept",
		need, strings.Join(gone, ", "), obs.Desired)
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
