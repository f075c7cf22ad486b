package aws

import (
	"time"

	"github.com/aws/aws-sdk-go-v2/service/autoscaling/types"
)

// DrainHookName is the termination lifecycle hook the eks provisioner puts
// on every Auto Scaling group it builds
// (autoscaling:EC2_INSTANCE_TERMINATING, DefaultResult CONTINUE): every
// termination Auto Scaling starts waits in Terminating:Wait until the
// termination controller (reconciler/termination) has drained the
// instance's node and calls CompleteLifecycleAction, or until the heartbeat
// timeout. A spec's own lifecycleHooks may not use this name.
const DrainHookName = "instance-manager-drain"

// AWS's bounds of a lifecycle hook's HeartbeatTimeout (Auto Scaling API
// Reference, PutLifecycleHook): 30 to 7200 seconds.
const (
	MinHookHeartbeat = 30 * time.Second
	MaxHookHeartbeat = 7200 * time.Second
)

// DrainHookHeartbeat is the HeartbeatTimeout of the drain hook for a
// controller whose drain timeout is drainTimeout and whose Auto Scaling
// listing is refreshed every pollPeriod: the drain timeout, but at least
// twice the poll period (a wait begins up to a poll period plus a tick
// before it is seen, and must not time out before), clamped to AWS's 30 s
// to 7200 s and rounded up to whole seconds. The controller heartbeats a
// drain that runs longer (RecordLifecycleActionHeartbeat).
func DrainHookHeartbeat(drainTimeout, pollPeriod time.Duration) time.Duration {
	d := max(drainTimeout, 2*pollPeriod)
	d = (d + time.Second - 1).Truncate(time.Second)
	return min(max(d, MinHookHeartbeat), MaxHookHeartbeat)
}

// TerminatingWait reports whether an instance waits in a termination
// lifecycle hook (LifecycleState Terminating:Wait).
func TerminatingWait(in types.Instance) bool {
	return in.LifecycleState == types.LifecycleStateTerminatingWait
}
