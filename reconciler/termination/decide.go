package termination

import (
	"time"

	corev1 "k8s.io/api/core/v1"

	"github.com/instancemgr/instance-manager/reconciler/drain"
)

// step is what the controller does next for one waiting instance.
type step int

const (
	// stepComplete: nothing to drain; complete the lifecycle action.
	stepComplete step = iota
	// stepCordon: cordon the node, or take over a drain a rotation or a
	// replacement started, which could be undone (drain.Drainer.Start with
	// drain.OwnerTermination), then poll its drain.
	stepCordon
	// stepPoll: the node is cordoned for a drain of an instance that goes
	// anyway (this controller's, an interruption's, a delete's, the
	// GC's): poll it.
	stepPoll
)

// first decides for an instance waiting in Terminating:Wait whose Node is
// node (nil: none, it never joined or is gone).
func first(node *corev1.Node) step {
	switch {
	case node == nil:
		return stepComplete
	case drain.NeedsStart(node, drain.OwnerTermination):
		return stepCordon
	default:
		return stepPoll
	}
}

// outcome is what a drain poll means for the waiting instance.
type outcome int

const (
	// keepWaiting: the drain goes on; heartbeat when due.
	keepWaiting outcome = iota
	// complete: the node is drained; complete the lifecycle action.
	complete
	// blocked: evictions are refused past the drain timeout; say so once
	// and poll again (a new drain starts), heartbeating meanwhile.
	blocked
)

// after maps a drain poll (drain.Drains.Poll) to an outcome. An error
// (listing or evicting pods) is retried like a drain still under way.
func after(res drain.DrainResult, err error) outcome {
	switch {
	case err != nil:
		return keepWaiting
	case res == drain.Drained:
		return complete
	case res == drain.Blocked:
		return blocked
	default:
		return keepWaiting
	}
}

// heartbeatDue reports whether the wait must be extended now: a third of
// the hook's heartbeat timeout has passed since the last heartbeat (or
// since the wait was first seen, which is later than it began by up to
// the listing's poll period, which the timeout covers: see
// awsp.DrainHookHeartbeat).
func heartbeatDue(now, last time.Time, timeout time.Duration) bool {
	return now.Sub(last) >= timeout/3
}

// expired reports whether an accepted wait (Controller.Accept) may be
// forgotten: its action was completed, or no heartbeat was made, a whole
// heartbeat timeout ago. By then Auto Scaling has ended the wait, and a
// listing taken during it is stale (the timeout is at least the poll
// period: awsp.DrainHookHeartbeat).
func expired(now time.Time, st *wait, timeout time.Duration) bool {
	last := st.beat
	if st.done {
		last = st.doneAt
	}
	return now.Sub(last) > timeout
}
