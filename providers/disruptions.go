package providers

import "context"

// Disruptions is what a provisioner whose cloud replaces nodes or pods
// itself (eks-managed, eks-fargate) asks the controller before it
// disrupts running pods, so that those groups follow the rules eks
// rotations follow: at most maxConcurrentUpgrades groups (and the
// namespace's quota) replace at once, and nothing is deleted under pods
// that were not evicted through the Eviction API first
// (PodDisruptionBudgets honoured). The reconciler implements it for the
// group it reconciles and passes it to Apply in the context
// (WithDisruptions). Every method is called again on each Apply until it
// reports done; none waits.
type Disruptions interface {
	// Admit reports whether the group may start, or go on with, a
	// replacement or a version update: true when it holds an upgrade slot
	// (taken now if one is free; slots are Leases, so a restarted
	// controller finds it held). False: it must wait (Observation
	// .WaitingForSlot), having changed nothing.
	Admit(ctx context.Context) (bool, error)
	// DrainNodes cordons and drains, through the controller's drain
	// runner (Eviction API, PodDisruptionBudgets honoured, DaemonSet and
	// mirror pods left), the Nodes labelled key=value, at most the
	// group's maxUnavailable of them at once. Done when no such Node has
	// a pod left to evict (none at all counts as done).
	DrainNodes(ctx context.Context, key, value string) (Retirement, error)
	// EvictPods evicts (policy/v1 Eviction, PodDisruptionBudgets honoured)
	// the pods labelled key=value, at most the group's maxUnavailable of
	// them evicted and not yet gone at once. Done when none is left
	// (finished pods do not count).
	EvictPods(ctx context.Context, key, value string) (Retirement, error)
}

// Retirement is how far a drain or eviction before a deletion is.
type Retirement struct {
	// Done: nothing is left to drain or evict; the resource may go.
	Done bool
	// Message says what is waited for (the nodes or pods, and why).
	Message string
	// Blocked, when set, names what could not be drained or evicted
	// within the drain timeout (a PodDisruptionBudget allowing no
	// disruption): reported as DrainBlocked and retried, never forced.
	Blocked string
}

type disruptionsKey struct{}

// WithDisruptions returns ctx carrying d for the provisioner's Apply.
func WithDisruptions(ctx context.Context, d Disruptions) context.Context {
	return context.WithValue(ctx, disruptionsKey{}, d)
}

// DisruptionsFrom returns the Disruptions ctx carries; nil when none
// (unit tests of a provisioner alone: it then disrupts without asking,
// as the cloud would).
func DisruptionsFrom(ctx context.Context) Disruptions {
	d, _ := ctx.Value(disruptionsKey{}).(Disruptions)
	return d
}

// Admitted asks the Disruptions ctx carries whether the group may start or
// go on with a replacement (Disruptions.Admit); true when ctx carries none.
// Errors are Admit's.
func Admitted(ctx context.Context) (bool, error) {
	d := DisruptionsFrom(ctx)
	if d == nil {
		return true, nil
	}
	return d.Admit(ctx)
}
