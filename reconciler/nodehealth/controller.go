// Package nodehealth replaces the instances of an InstanceGroup whose nodes
// do not become Ready within the group's startup timeout after launch, or
// stay NotReady longer than its unhealthy timeout (spec.eks.nodeHealth):
// each is terminated through its Auto Scaling group without decrementing the
// desired capacity, so the group launches a replacement, with a Warning
// Event and a metric. At most spec.eks.nodeHealth.maxReplacing of a group is
// replaced at once, and replacement halts, with the NodesHealthy condition
// saying so, while more than 20% of the group's instances are unhealthy or
// NotReady: a bad image or configuration, which replacing would only
// repeat, or an outage, which replacing would not cure.
//
// The InstanceGroup state machine calls Check on every reconcile of an eks
// group, with the instances it observed and their Nodes, so node health
// costs no AWS call of its own but the terminations.
package nodehealth

import (
	"context"
	"fmt"
	"strings"
	"sync"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/tools/events"
	"sigs.k8s.io/controller-runtime/pkg/log"

	"github.com/instancemgr/instance-manager/api/v1alpha1"
	"github.com/instancemgr/instance-manager/providers"
)

// Repairer judges and replaces unhealthy instances.
type Repairer struct {
	Recorder events.EventRecorder
	// DrainAnnotation marks nodes a rotation is draining; they are left to
	// it.
	DrainAnnotation string
	// Now returns the current time (tests). Default time.Now.
	Now func() time.Time

	mu sync.Mutex
	// announced holds the groups (by UID) whose halt this process has
	// announced: the condition alone cannot say, since the status carrying
	// it may lose a write conflict or be read back from a cache that has not
	// seen it yet, and the halt would be announced again.
	announced map[types.UID]bool
}

// announce reports whether ig's halt is news, and remembers it.
func (r *Repairer) announce(ig *v1alpha1.InstanceGroup, wasHalted bool) bool {
	r.mu.Lock()
	defer r.mu.Unlock()
	news := !wasHalted && !r.announced[ig.UID]
	if r.announced == nil {
		r.announced = map[types.UID]bool{}
	}
	r.announced[ig.UID] = true
	return news
}

// settle forgets ig's halt: the next one is news again.
func (r *Repairer) settle(ig *v1alpha1.InstanceGroup) {
	r.mu.Lock()
	defer r.mu.Unlock()
	delete(r.announced, ig.UID)
}

// Forget drops what is kept about a deleted group: its metrics and, on a
// non-nil Repairer, its halt announcement.
func (r *Repairer) Forget(ig *v1alpha1.InstanceGroup) {
	if r != nil {
		r.settle(ig)
	}
	forgetMetrics(ig.Namespace, ig.Name)
}

// Check judges the instances of ig (obs, with their Nodes by providerID),
// terminates the ones to replace through rot (Auto Scaling
// TerminateInstanceInAutoScalingGroup, no decrement; nil rot replaces
// nothing), emits Events, updates the metrics and sets the NodesHealthy
// condition on ig (the caller stores the status). It returns how long until
// an instance not yet judged unhealthy could be (0: none), for the requeue.
// Errors come from the termination; the instances terminated before it
// are reported.
func (r *Repairer) Check(ctx context.Context, ig *v1alpha1.InstanceGroup, obs *providers.Observation, nodes map[string]*corev1.Node, rot providers.Rotator) (time.Duration, error) {
	now := time.Now
	if r.Now != nil {
		now = r.Now
	}
	s := SettingsOf(ig)
	v := Judge(now(), s, obs.Instances, nodes, r.DrainAnnotation)
	unhealthy.WithLabelValues(ig.Namespace, ig.Name).Set(float64(len(v.Unhealthy)))
	halted.WithLabelValues(ig.Namespace, ig.Name).Set(map[bool]float64{true: 1}[v.Halted])

	wasHalted := false
	if c := meta.FindStatusCondition(ig.Status.Conditions, v1alpha1.ConditionNodesHealthy); c != nil {
		wasHalted = c.Reason == ConditionReasonHalted
	}
	if !v.Halted {
		r.settle(ig)
	}
	switch {
	case len(v.Unhealthy) == 0 && !v.Halted:
		setCondition(ig, metav1.ConditionTrue, ConditionReasonHealthy, fmt.Sprintf("%d instance(s) judged, none unhealthy", v.Judged))
		return recheck(v.NextCheck), nil
	case v.Halted:
		msg := fmt.Sprintf("%d of %d instance(s) unhealthy or NotReady, more than %s (%d): replacement halted until fewer are (a bad image or configuration, or an outage?)",
			v.Failing, v.Judged, HaltShare, v.Limit)
		if len(v.Unhealthy) > 0 {
			msg += ": " + details(v.Unhealthy)
		}
		setCondition(ig, metav1.ConditionFalse, ConditionReasonHalted, msg)
		if r.announce(ig, wasHalted) {
			r.Recorder.Eventf(ig, nil, corev1.EventTypeWarning, EventRepairHalted, "ReplaceUnhealthy", "%s", msg)
		}
		log.FromContext(ctx).Info("node repair halted", "unhealthy", len(v.Unhealthy), "judged", v.Judged)
		return recheck(v.NextCheck), nil
	}

	var done []string
	var err error
	replace := v.Replace
	if rot != nil && len(replace) > 0 {
		if replace, err = stillThere(ctx, ig, rot, replace); err != nil {
			err = fmt.Errorf("re-reading the group's instances before replacing: %w", err)
		}
	}
	if rot != nil && err == nil {
		for _, u := range replace {
			if err = rot.Terminate(ctx, ig, u.Instance.ID, false); err != nil {
				err = fmt.Errorf("replacing unhealthy instance %s: %w", u.Instance.ID, err)
				break
			}
			replacements.WithLabelValues(ig.Namespace, ig.Name, u.Reason).Inc()
			r.Recorder.Eventf(ig, nil, corev1.EventTypeWarning, EventNodeUnhealthy, "ReplaceUnhealthy",
				"%s: %s; terminated for replacement (desired capacity kept)", u.Reason, u.Detail)
			done = append(done, u.Instance.ID)
		}
	}
	msg := fmt.Sprintf("%d of %d instance(s) unhealthy: %s", len(v.Unhealthy), v.Judged, details(v.Unhealthy))
	switch {
	case len(done) > 0:
		msg += fmt.Sprintf("; replacing %s", strings.Join(done, ", "))
	case rot == nil:
		msg += "; this provisioner cannot replace instances"
	default:
		msg += fmt.Sprintf("; waiting: %d replacement(s) in flight, maxReplacing %s", v.InFlight, s.MaxReplacing.String())
	}
	setCondition(ig, metav1.ConditionFalse, ConditionReasonRepairing, msg)
	return recheck(v.NextCheck), err
}

// stillThere keeps the instances to replace that a fresh listing of the
// group (providers.FreshLister, one call; none when rot is not one) still
// shows InService: the judgement used the provisioner's shared listing,
// which may predate a termination by someone else (the cluster-autoscaler's
// scale in: the instance is gone, then its Node is deleted, and the Node's
// absence must not read as "never joined"). An instance gone or leaving is
// not replaced: it is already terminating.
func stillThere(ctx context.Context, ig *v1alpha1.InstanceGroup, rot providers.Rotator, replace []Unhealthy) ([]Unhealthy, error) {
	now, ok, err := providers.Relist(ctx, ig, rot)
	if !ok || err != nil {
		return replace, err
	}
	var keep []Unhealthy
	for _, u := range replace {
		if in, ok := now[u.Instance.ID]; ok && in.InService() {
			keep = append(keep, u)
			continue
		}
		log.FromContext(ctx).Info("not replacing an instance that is no longer in service (terminated by someone else)",
			"instance", u.Instance.ID, "state", now[u.Instance.ID].LifecycleState)
	}
	return keep, nil
}

// recheck is a little after the next deadline, so the instance is past it.
func recheck(next time.Duration) time.Duration {
	if next <= 0 {
		return 0
	}
	return next + time.Second
}

func details(us []Unhealthy) string {
	parts := make([]string, 0, len(us))
	for _, u := range us {
		parts = append(parts, u.Detail)
	}
	return strings.Join(parts, "; ")
}

func setCondition(ig *v1alpha1.InstanceGroup, status metav1.ConditionStatus, reason, msg string) {
	meta.SetStatusCondition(&ig.Status.Conditions, metav1.Condition{
		Type: v1alpha1.ConditionNodesHealthy, Status: status, Reason: reason, Message: msg, ObservedGeneration: ig.Generation,
	})
}
