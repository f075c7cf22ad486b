// Package providers defines the interface every provisioner implements
// (eks, eks-managed, eks-fargate) and what it reports back. Each
// provisioner lives in its own subpackage and turns an InstanceGroup's
// effective spec into cloud resources; the reconciler only sees this
// interface.
package providers

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"math"
	"slices"
	"time"

	"k8s.io/apimachinery/pkg/types"

	"github.com/instancemgr/instance-manager/api/v1alpha1"
)

// Provisioner builds, observes and removes the cloud resources of one kind
// of InstanceGroup. Implementations are idempotent: a crash between any two
// cloud calls followed by another Apply or Delete reaches the same end state
// without duplicates.
type Provisioner interface {
	// Apply converges the cloud resources to ig.Spec (creating, updating or
	// replacing them) and returns what it observed afterwards. It never
	// rotates nodes itself; drifted instances are reported for the upgrade
	// strategy. A *SpecError means the spec cannot be built as written (an
	// unknown subnet, a missing role): retrying will not help until the spec
	// or the cloud changes.
	Apply(ctx context.Context, ig *v1alpha1.InstanceGroup) (*Observation, error)

	// Delete removes every resource the group created (never resources it
	// did not create) and returns true once nothing is left.
	Delete(ctx context.Context, ig *v1alpha1.InstanceGroup) (bool, error)
}

// Rotator is implemented by provisioners whose instances the controller
// rotates (eks); managed node groups and Fargate rotate themselves.
type Rotator interface {
	// Terminate terminates one instance of the group. With decrement false
	// the group launches a replacement; with true its desired capacity drops
	// by the instance's weight (used to give a surge back). A decrement the
	// cloud refuses because the desired capacity is at the group's minimum
	// is an error wrapping ErrDesiredAtMinSize (nothing was terminated).
	Terminate(ctx context.Context, ig *v1alpha1.InstanceGroup, instanceID string, decrement bool) error
	// AddCapacity adds delta (capacity units, >= 0) to the group's desired
	// capacity as it is at the time of the call, read from the cloud, not
	// from a cache, so capacity others set meanwhile is kept; the result
	// is kept within the group's max. It returns the change made. A
	// negative delta is refused with an error wrapping ErrScaleIn and
	// changes nothing: lowering the desired capacity lets the cloud pick
	// the instances to terminate, undrained; capacity is given back by
	// draining chosen nodes and terminating them with decrement (above).
	AddCapacity(ctx context.Context, ig *v1alpha1.InstanceGroup, delta int) (int, error)
}

// InstanceLister is implemented by provisioners that can list a group's
// instances without converging anything (eks), so a group being deleted
// finds the Nodes to drain by their provider ids.
type InstanceLister interface {
	// Instances returns the instances of the group's cloud resources as
	// they are (ID, ProviderID, LifecycleState and PrivateDNSName set);
	// none when the resources do not exist or are not the group's.
	Instances(ctx context.Context, ig *v1alpha1.InstanceGroup) ([]Instance, error)
}

// SizeReader is implemented by provisioners that can read a group's sizes
// without converging anything (eks: from the shared Auto Scaling
// listing), so that a group the admission gate holds, whose spec is not
// applied, can still give back the surge capacity its rotation added
// (through the drain path and Rotator.Terminate with a decrement, never by
// lowering the desired capacity).
type SizeReader interface {
	// Sizes returns the group's minimum size and desired capacity
	// (instances, or capacity units with weights); found is false (and
	// the sizes 0) when the group does not exist or is not ig's.
	Sizes(ctx context.Context, ig *v1alpha1.InstanceGroup) (min, desired int, found bool, err error)
}

// FreshLister is implemented by provisioners whose instance listings are
// shared and cached (eks: one listing per cluster, up to minutes old), so
// that whoever is about to terminate an instance first sees the group as it
// is now: another actor (the cluster-autoscaler, a spot interruption, a
// rebalance) may already have taken the instance out.
type FreshLister interface {
	// FreshInstances reads the group's instances from the cloud now (one
	// call, no cache): ID, ProviderID, LifecycleState and Healthy set;
	// none when the group does not exist or is not the group's.
	FreshInstances(ctx context.Context, ig *v1alpha1.InstanceGroup) ([]Instance, error)
}

// Relist returns the group's instances by id as a fresh listing shows them
// (FreshLister.FreshInstances, one call) when rot is a FreshLister; ok is
// false (and no call made) when it is not.
func Relist(ctx context.Context, ig *v1alpha1.InstanceGroup, rot Rotator) (map[string]Instance, bool, error) {
	fl, ok := rot.(FreshLister)
	if !ok {
		return nil, false, nil
	}
	list, err := fl.FreshInstances(ctx, ig)
	if err != nil {
		return nil, true, err
	}
	out := make(map[string]Instance, len(list))
	for _, in := range list {
		out[in.ID] = in
	}
	return out, true, nil
}

// Freezer is implemented by provisioners whose groups grow on their own
// (eks: Auto Scaling, the cluster-autoscaler), so that a group being
// deleted stops launching instances before its nodes are drained.
type Freezer interface {
	// Freeze stops the group from launching instances (eks: Launch and
	// AZRebalance suspended, the cluster-autoscaler's auto-discovery tags
	// removed, MaxSize lowered to what the group holds; see aws.Freeze)
	// without terminating any. Idempotent; nothing is done to
	// a group that does not exist or is not ig's.
	Freeze(ctx context.Context, ig *v1alpha1.InstanceGroup) error
}

// ErrScaleIn: Rotator.AddCapacity was asked for a negative delta, which it
// refuses (see there).
var ErrScaleIn = errors.New("lowering the desired capacity is refused: the cloud would pick the instances to terminate, undrained")

// ErrDesiredAtMinSize: a terminate with a capacity decrement was refused
// because the desired capacity is at the group's minimum size.
var ErrDesiredAtMinSize = errors.New("the desired capacity is at the group's minimum size, it cannot be decremented")

// Watcher is implemented by provisioners that observe their groups in
// shared, periodic listings (eks: one Auto Scaling listing per cluster).
// Watch runs until ctx ends and calls changed with each InstanceGroup whose
// cloud resources changed between two listings, whoever changed them (an
// instance terminated, sizes or the launch template changed by hand, a
// group deleted), so that group alone is reconciled, without waiting for
// its resync.
type Watcher interface {
	Watch(ctx context.Context, changed func(types.NamespacedName)) error
}

// Observation is the state of the group's cloud resources after Apply.
type Observation struct {
	// GroupName is the Auto Scaling group, node group or Fargate profile.
	GroupName string
	// LaunchTemplateName and LatestTemplateVersion identify the launch
	// template version matching the spec (eks).
	LaunchTemplateName    string
	LatestTemplateVersion string
	// RoleARN is the IAM role of the nodes (or the pod execution role).
	RoleARN string
	// Min, Max and Desired are the group's sizes as the cloud counts them:
	// instances, or capacity units when the group weighs its instance
	// types (eks mixed instances with weights; see Instance.Weight).
	Min, Max, Desired int
	// Lifecycle is v1alpha1.LifecycleNormal, LifecycleSpot or LifecycleMixed.
	Lifecycle string
	// Instances are the group's instances (eks); empty for provisioners
	// whose instances are not individually managed.
	Instances []Instance
	// Managed is true when the cloud rotates nodes itself (eks-managed,
	// eks-fargate); Updating is true while it does.
	Managed  bool
	Updating bool
	// Active is true when the cloud reports the resource usable (a managed
	// node group or Fargate profile in ACTIVE state). For eks, readiness is
	// judged from Instances and their nodes instead.
	Active bool
	// Retiring names the group's older resources GroupName replaces
	// (eks-managed: node groups with a field EKS cannot change in place),
	// deleted once GroupName is ready; empty when no replacement is in
	// progress.
	Retiring []string
	// Message carries cloud-reported problems (health issues), if any.
	Message string
	// WaitingForSlot is true when the spec needs a replacement or a
	// version update (eks-managed, eks-fargate) that has not started for
	// lack of an upgrade slot (Disruptions.Admit said no); Message says
	// what it will do.
	WaitingForSlot bool
	// Blocked, when set, names what a retirement could not drain or
	// evict within the drain timeout (see Retirement.Blocked).
	Blocked string
	// LaunchFailure, when set, is the StatusMessage of the latest failed
	// scaling activity of a group below its desired capacity (eks: Auto
	// Scaling DescribeScalingActivities, read only while the group
	// converges), e.g. "… InsufficientInstanceCapacity - We currently do
	// not have sufficient m5.large capacity in the Availability Zone you
	// requested …"; empty when the latest launch succeeded.
	LaunchFailure string
	// CreateFailure is the record of the group's resource in CREATE_FAILED
	// (eks-managed, eks-fargate; see CreateFailures) to store as
	// status.createFailure: those provisioners return the stored one
	// (ig.Status.CreateFailure) unchanged on every Observation until their
	// resource is ACTIVE, and nil then. Always nil for eks.
	CreateFailure *v1alpha1.CreateFailure
	// Progress, for a managed group replacing or updating (eks-managed,
	// eks-fargate), names the step it is at with the counts that move
	// when it advances (eks-managed: the new node group's status and its
	// Nodes, how many Ready) and nothing that changes while it waits. The
	// controller's stall timeout runs while Progress and the retirement's
	// drains stay the same. Empty when nothing is replaced or updated.
	Progress string
	// Hold, when set, says why a rotation must not start another batch
	// yet (eks: the warm pool is being replaced so no instance of an older
	// launch template version joins from it).
	Hold string
}

// Instance is one instance of a group.
type Instance struct {
	// ID is the EC2 instance id.
	ID string
	// ProviderID is the Node's spec.providerID: aws:///<zone>/<id>.
	ProviderID string
	// LifecycleState is the Auto Scaling lifecycle state: Pending,
	// Pending:Wait, InService, Terminating, Terminating:Wait, Standby, ...
	LifecycleState string
	// Healthy is the Auto Scaling health status.
	Healthy bool
	// UpToDate is false when the instance has drifted from what the group
	// launches now: by launch template content, and for Auto Scaling
	// groups by subnet, instance type or purchase options (see
	// docs/upgrades.md, "What counts as drift").
	UpToDate bool
	// Drift says why the instance is not UpToDate, for status and Events
	// (such as "subnet subnet-0abc is no longer listed"); "" when it is,
	// or when the provisioner does not tell.
	Drift string
	// PrivateDNSName is the instance's private DNS name from EC2, the name
	// its Node registers with; "" when unknown.
	PrivateDNSName string
	// LaunchTime is when EC2 last started the instance (EC2 LaunchTime):
	// for an instance of a warm pool, when Auto Scaling started it to put
	// it in service, not when it was launched into the pool. Node health's
	// startup timeout runs from it; zero when unknown.
	LaunchTime time.Time
	// Weight is the capacity units the instance counts for toward Min,
	// Max and Desired: its weight in a weighted mixed instances policy,
	// else 1. Zero is read as 1.
	Weight int
}

// Units is the capacity the instance counts for (Weight, at least 1).
func (i Instance) Units() int { return max(i.Weight, 1) }

// Capacity sums the capacity units of the instances keep accepts (every
// instance when keep is nil).
func Capacity(instances []Instance, keep func(Instance) bool) int {
	n := 0
	for _, in := range instances {
		if keep == nil || keep(in) {
			n += in.Units()
		}
	}
	return n
}

// InService reports whether the instance serves traffic for its group.
func (i Instance) InService() bool { return i.LifecycleState == "InService" }

// Standby reports whether the instance is in Standby or entering it (EC2
// Auto Scaling EnterStandby): Auto Scaling does not count it against the
// desired capacity, and terminating it without a decrement launches
// nothing (Amazon EC2 Auto Scaling User Guide, "Temporarily remove
// instances from your Auto Scaling group").
func Standby(in Instance) bool {
	return in.LifecycleState == "Standby" || in.LifecycleState == "EnteringStandby"
}

// SpecError is an error in the spec, as opposed to a cloud or network
// failure: it names the field path and what would be valid.
type SpecError struct {
	Field  string
	Detail string
}

func (e *SpecError) Error() string { return e.Field + ": " + e.Detail }

// CheckInt32 returns a *SpecError for the first of fields (path -> value)
// outside AWS's int32 range [0, 2147483647], in path order, else nil. The
// CRD refuses such values since it says so (maximum 2147483647); a group
// stored before is refused here rather than truncated on the way to AWS.
func CheckInt32(fields map[string]int64) error {
	for _, path := range slices.Sorted(maps.Keys(fields)) {
		if v := fields[path]; v < 0 || v > math.MaxInt32 {
			return &SpecError{Field: path, Detail: fmt.Sprintf("%d is out of range (0 to %d)", v, math.MaxInt32)}
		}
	}
	return nil
}

// IsSpecError reports whether err is or wraps a *SpecError.
func IsSpecError(err error) bool {
	var se *SpecError
	return errors.As(err, &se)
}
