package instancegroup

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/log"

	"github.com/instancemgr/instance-manager/providers"
	"github.com/instancemgr/instance-manager/reconciler/drain"
	"github.com/instancemgr/instance-manager/reconciler/slots"
)

// retireTally is what one pass's retirement drains saw (groupDisruptions
// .retireNodes fills it): an eks-managed node group's or a Fargate
// profile's drains before its deletion. It feeds the managed stall
// timeout: the counts are part of the progress marker, the nodes are
// released when the slot is.
type retireTally struct {
	// nodes and drained count the nodes the retirement drains and those
	// of them drained; unbound the pods bound to no node still waited
	// for (Fargate).
	nodes, drained, unbound int
	// draining names the nodes whose drain runs and has not ended.
	draining []string
	// cordoned names the nodes the retirement cordoned (drain started),
	// drained or not; started those whose drain started this pass.
	cordoned, started []string
}

// managedMarker is a managed group's progress marker: its resource and
// state, the resources it retires, the provisioner's step
// (Observation.Progress) and the retirement's drain counts. It changes
// when the cloud finishes a step, a new node turns Ready, a drain ends or
// a pod leaves; a drain blocked by a PodDisruptionBudget does not change
// it.
func managedMarker(obs *providers.Observation, t *retireTally) string {
	return fmt.Sprintf("%s (active %v, updating %v); retiring [%s]; %s; %d of %d node(s) drained, %d pod(s) unbound",
		obs.GroupName, obs.Active, obs.Updating, strings.Join(obs.Retiring, " "), obs.Progress, t.drained, t.nodes, t.unbound)
}

// managedStall applies the stall timeout to an eks-managed or eks-fargate
// group (after managedProgress), as stall does to an eks rotation:
//   - a group released for lack of progress less than the stall timeout
//     ago waits (Disruptions.Admit refuses it meanwhile), reported as
//     UpgradeStalled;
//   - a group holding its slot whose marker (managedMarker) has not
//     changed for the stall timeout, and none of whose retirement drains
//     waits on a pod inside its termination grace period (inGrace), gives
//     the slot back (stallManaged).
//
// A group that holds no slot is never stalled (slots.Keeper.Progress).
func (r *Reconciler) managedStall(ctx context.Context, s *scope) error {
	if r.StallTimeout <= 0 || r.Slots == nil {
		return nil
	}
	now := r.now()
	if at, ok := r.stalledAt(s.ig, now); ok {
		s.progress.Done, s.progress.Waiting, s.progress.StalledAt = false, true, at
		s.progress.Message = joinNonEmpty(stalledMessage(at, r.StallTimeout), s.obs.Message)
		return nil
	}
	if s.obs.WaitingForSlot || !s.obs.Updating {
		return nil
	}
	marker := managedMarker(s.obs, &s.retired)
	since, err := r.Slots.Progress(ctx, s.key, marker)
	if err != nil || now.Sub(since) < r.StallTimeout {
		return err
	}
	pod, err := r.inGrace(ctx, s.retired.draining, now)
	if err != nil || pod != "" {
		if pod != "" {
			log.FromContext(ctx).V(1).Info("no progress past the stall timeout, but a drain waits on a pod inside its grace period", "pod", pod)
		}
		return err
	}
	return r.stallManaged(ctx, s, marker, since, now)
}

// stallManaged releases a managed group's slot (slots.Keeper.Release; the
// metric instance_manager_upgrade_stalls_total), stops and uncordons the
// nodes its retirement cordoned (releaseRetirement), so the node group or
// profile being replaced keeps serving whole, and says so in a Warning
// Event UpgradeStalled. The new node group or profile stays; the
// replacement goes on when the group gets a slot again, one stall timeout
// later at the earliest.
func (r *Reconciler) stallManaged(ctx context.Context, s *scope, marker string, since, now time.Time) error {
	if err := r.Slots.Release(ctx, s.key, slots.ReasonStalled); err != nil {
		return err
	}
	upgradeStalls.Inc()
	r.blocks.forget(s.key) // a blockage after the slot is back is news
	uncordoned, err := r.releaseRetirement(ctx, s.retired.cordoned)
	if err != nil {
		return err
	}
	serving := "the resources being replaced keep serving"
	if len(s.obs.Retiring) > 0 {
		serving = strings.Join(s.obs.Retiring, ", ") + " keep(s) serving"
	}
	if len(uncordoned) > 0 {
		serving += "; uncordoned " + strings.Join(uncordoned, ", ") + " (drains stopped)"
	}
	r.Recorder.Eventf(s.ig, nil, corev1.EventTypeWarning, ReasonUpgradeStalled, "Replace",
		"No replacement progress for %s (since %s: %s): upgrade slot released for other groups; %s; the group asks for a slot again after %s",
		now.Sub(since).Round(time.Second), since.UTC().Format(time.RFC3339), marker, serving, now.Add(r.StallTimeout).UTC().Format(time.RFC3339))
	log.FromContext(ctx).Info("managed replacement stalled: slot released", "since", since, "progress", marker, "uncordoned", uncordoned)
	s.progress.Done, s.progress.Waiting, s.progress.StalledAt = false, true, now
	s.progress.Message = joinNonEmpty(stalledMessage(now, r.StallTimeout), serving)
	s.releaseSlot = false // released already
	return nil
}

// releaseRetirement stops the drains of the named nodes that the
// retirement owns (drain.OwnerRetire) and gives them back
// (drain.GiveBack: the drain stopped before the uncordon). A node gone
// meanwhile, or whose drain another owner took over (an interruption, a
// termination), is left. It returns the names uncordoned.
func (r *Reconciler) releaseRetirement(ctx context.Context, names []string) ([]string, error) {
	if r.Rolling == nil || r.Rolling.Drainer == nil {
		return nil, nil
	}
	var out []string
	for _, name := range slices.Compact(slices.Sorted(slices.Values(names))) {
		node := &corev1.Node{}
		if err := r.Client.Get(ctx, client.ObjectKey{Name: name}, node); err != nil {
			if apierrors.IsNotFound(err) {
				continue
			}
			return out, err
		}
		// An interruption's or a termination's drain goes on.
		released, err := drain.GiveBack(ctx, r.Rolling.Drains, r.Rolling.Drainer, node, drain.OwnerRetire)
		if err != nil {
			return out, err
		}
		if released {
			out = append(out, name)
		}
	}
	return out, nil
}

func joinNonEmpty(parts ...string) string {
	return strings.Join(slices.DeleteFunc(parts, func(p string) bool { return p == "" }), "; ")
}
