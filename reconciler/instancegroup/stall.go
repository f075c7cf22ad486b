package instancegroup

import (
	"context"
	"fmt"
	"strings"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/log"
	"sigs.k8s.io/controller-runtime/pkg/metrics"

	"github.com/instancemgr/instance-manager/api/v1alpha1"
	"github.com/instancemgr/instance-manager/providers"
	"github.com/instancemgr/instance-manager/reconciler/slots"
	"github.com/instancemgr/instance-manager/reconciler/upgrade"

	"github.com/instancemgr/instance-manager/reconciler/drain"
)

// upgradeStalls counts upgrade slots released for lack of progress.
var upgradeStalls = prometheus.NewCounter(prometheus.CounterOpts{
	Name: "instance_manager_upgrade_stalls_total",
	Help: "Upgrade slots released because the holding InstanceGroup's rotation made no progress for --upgrade-stall-timeout.",
})

func init() { metrics.Registry.MustRegister(upgradeStalls) }

// progressMarker is what a rotation's progress is judged by: the
// instances on the latest launch template version and the drifted ones
// not yet terminating. A drain that finishes (its instance terminates) or
// a replacement that comes up changes it; a drain blocked and skipped
// over and over does not.
func progressMarker(obs *providers.Observation) string {
	updated, drifted := 0, 0
	for _, in := range obs.Instances {
		switch {
		case in.UpToDate:
			updated++
		case !strings.HasPrefix(in.LifecycleState, "Terminating"):
			drifted++
		}
	}
	return fmt.Sprintf("%d updated, %d drifted", updated, drifted)
}

// stalledAt returns when ig's slot was released for lack of progress, if
// that was less than the stall timeout ago: the group waits that long
// before asking for a slot again, so the groups waiting get theirs. It is
// read from the Upgrading condition (reason UpgradeStalled, its
// lastTransitionTime), so it survives a restart.
func (r *Reconciler) stalledAt(ig *v1alpha1.InstanceGroup, now time.Time) (time.Time, bool) {
	if r.StallTimeout <= 0 {
		return time.Time{}, false
	}
	c := meta.FindStatusCondition(ig.Status.Conditions, v1alpha1.ConditionUpgrading)
	if c == nil || c.Reason != ReasonUpgradeStalled || now.Sub(c.LastTransitionTime.Time) >= r.StallTimeout {
		return time.Time{}, false
	}
	return c.LastTransitionTime.Time, true
}

// stall releases the slot of a group whose rotation made no progress since
// since, uncordons its nodes left cordoned for a drain that no longer runs
// (releaseDrains) and says so in a Warning Event. The returned progress
// waits (condition Upgrading False, reason UpgradeStalled).
func (r *Reconciler) stall(ctx context.Context, ig *v1alpha1.InstanceGroup, obs *providers.Observation,
	nodes map[string]*corev1.Node, progress upgrade.Progress, since, now time.Time) (upgrade.Progress, error) {
	if err := r.Slots.Release(ctx, client.ObjectKeyFromObject(ig), slots.ReasonStalled); err != nil {
		return progress, err
	}
	upgradeStalls.Inc()
	uncordoned, err := r.releaseDrains(ctx, ig, obs, nodes)
	if err != nil {
		return progress, err
	}
	what := "no node was left cordoned"
	if len(uncordoned) > 0 {
		what = "uncordoned " + strings.Join(uncordoned, ", ") + " (drains stopped)"
	}
	marker := progressMarker(obs)
	r.Recorder.Eventf(ig, nil, corev1.EventTypeWarning, ReasonUpgradeStalled, "Rotate",
		"No rotation progress for %s (since %s: %s): upgrade slot released for other groups; %s; the group asks for a slot again after %s",
		now.Sub(since).Round(time.Second), since.UTC().Format(time.RFC3339), marker, what, now.Add(r.StallTimeout).UTC().Format(time.RFC3339))
	log.FromContext(ctx).Info("upgrade stalled: slot released", "since", since, "progress", marker, "uncordoned", uncordoned)
	progress.Done, progress.Waiting, progress.StalledAt = false, true, now
	progress.Message = stalledMessage(now, r.StallTimeout)
	return progress, nil
}

func stalledMessage(at time.Time, timeout time.Duration) string {
	return fmt.Sprintf("no rotation progress for %s: upgrade slot released at %s; asking for one again after %s",
		timeout, at.UTC().Format(time.RFC3339), at.Add(timeout).UTC().Format(time.RFC3339))
}

// releaseDrains gives back the nodes of ig's drifted instances (and of
// up-to-date ones drained to give surge back) whose drains ig's rotation
// owns (drain.OwnerRotation, drain.OwnerSurge): ig holds no upgrade slot,
// so no drain of its rotation may go on, evicting pods from a node that
// is schedulable again, and none may leave a node cordoned. Each drain is
// stopped in the runner (drain.Drains.Stop: a running step is
// interrupted) and then the node uncordoned (drain.Drainer.Release: for
// one drain timeout it is not picked again). A node drained for another
// owner (a spot interruption, Auto Scaling's termination, the group's
// deletion, the GC) is never touched: its instance goes whatever the
// rotation does (review N1). Stop and uncordon are drain.GiveBack. Instances already terminating are skipped.
// It returns the node names released.
func (r *Reconciler) releaseDrains(ctx context.Context, ig *v1alpha1.InstanceGroup, obs *providers.Observation,
	nodes map[string]*corev1.Node) ([]string, error) {
	if r.Rolling == nil || r.Rolling.Drainer == nil {
		return nil, nil
	}
	var names []string
	for _, in := range obs.Instances {
		node := nodes[in.ProviderID]
		if strings.HasPrefix(in.LifecycleState, "Terminating") || node == nil {
			continue
		}
		if in.UpToDate && node.Annotations[drain.AnnotationSurge] != "true" {
			continue // drained only to give surge back (upgrade.Settle)
		}
		released, err := drain.GiveBack(ctx, r.Rolling.Drains, r.Rolling.Drainer, node, drain.OwnerRotation, drain.OwnerSurge)
		if err != nil {
			return names, err
		}
		if released {
			names = append(names, node.Name)
		}
	}
	if len(names) > 0 {
		log.FromContext(ctx).Info("uncordoned nodes whose rotation drain stopped (no upgrade slot)", "group", client.ObjectKeyFromObject(ig), "nodes", names)
	}
	return names, nil
}

// stallFailing releases the slot of a group whose reconcile fails before
// its rotation can be judged (reason: the Ready condition's) once it has
// held it without progress for the stall timeout, with a Warning Event.
// Its nodes left cordoned are uncordoned at its next pass that reads the
// cloud (it then waits for a slot, see releaseDrains).
func (r *Reconciler) stallFailing(ctx context.Context, ig *v1alpha1.InstanceGroup, reason string) error {
	if r.StallTimeout <= 0 {
		return nil
	}
	key := client.ObjectKeyFromObject(ig)
	since, held, err := r.Slots.LastProgress(ctx, key)
	now := r.now()
	if err != nil || !held || now.Sub(since) < r.StallTimeout {
		return err
	}
	if err := r.Slots.Release(ctx, key, slots.ReasonStalled); err != nil {
		return err
	}
	upgradeStalls.Inc()
	r.Recorder.Eventf(ig, nil, corev1.EventTypeWarning, ReasonUpgradeStalled, "Rotate",
		"No rotation progress for %s (since %s) while the group fails (%s): upgrade slot released for other groups",
		now.Sub(since).Round(time.Second), since.UTC().Format(time.RFC3339), reason)
	log.FromContext(ctx).Info("upgrade stalled while failing: slot released", "since", since, "reason", reason)
	return nil
}
