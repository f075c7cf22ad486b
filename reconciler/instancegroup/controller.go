// Package instancegroup is the InstanceGroup controller: the admission and
// quota gates, the provisioner's Apply, readiness from instances and their
// Nodes, node health, rotation of drifted instances through the upgrade
// strategies and slots, deletion behind the finalizer, and the status,
// conditions, Events and metrics that report it. Reconcile (reconcile.go)
// runs these as a list of phases.
package instancegroup

import (
	"context"
	"maps"
	"slices"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/tools/events"
	"k8s.io/client-go/util/workqueue"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/builder"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/controller"
	"sigs.k8s.io/controller-runtime/pkg/event"
	"sigs.k8s.io/controller-runtime/pkg/handler"
	"sigs.k8s.io/controller-runtime/pkg/predicate"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"
	"sigs.k8s.io/controller-runtime/pkg/source"

	"github.com/instancemgr/instance-manager/api/v1alpha1"
	"github.com/instancemgr/instance-manager/boundaries/store"
	"github.com/instancemgr/instance-manager/providers"
	"github.com/instancemgr/instance-manager/reconciler/nodehealth"
	"github.com/instancemgr/instance-manager/reconciler/slots"
	"github.com/instancemgr/instance-manager/reconciler/upgrade"

	"github.com/instancemgr/instance-manager/reconciler/drain"
)

// Finalizer keeps an InstanceGroup until its cloud resources are gone.
const Finalizer = "instancemgr.keikoproj.io/finalizer"

// Reconciler is the InstanceGroup state machine: it has the
// provisioner converge the cloud resources to the stored (effective) spec,
// judges readiness from instances and their Nodes, hands drifted instances
// to the upgrade strategy (at most Slots.Max groups at once), removes the
// cloud resources on deletion (finalizer), and writes the status and
// conditions that are the user-facing truth.
type Reconciler struct {
	Client client.Client
	// Reader reads what is not cached (spot recommendation Events).
	Reader client.Reader
	// SpotRecommender is the Event source (source.component or
	// reportingController) whose spot recommendations are honoured; empty
	// honours none.
	SpotRecommender string
	// Provisioners by spec.provisioner value ("eks-cf" is served by "eks").
	Provisioners map[string]providers.Provisioner
	Rolling      *upgrade.RollingUpdate
	CRD          *upgrade.CRDStrategy
	// Slots caps the groups rotating at once (slots.Leases in the
	// API server; upgrade.Slots in memory).
	Slots slots.Keeper
	// StallTimeout is how long a group holding an upgrade slot may make no
	// rotation progress (progressMarker) before its slot is released
	// (stall); 0: never.
	StallTimeout time.Duration
	// Now returns the current time (tests); default time.Now.
	Now func() time.Time
	// NodeHealth replaces the unhealthy instances of eks groups (nil: off).
	NodeHealth *nodehealth.Repairer
	Recorder   events.EventRecorder
	// PollInterval is how often a group that is converging is re-checked;
	// ResyncInterval how often a Ready group is (new AMIs, outside changes).
	PollInterval   time.Duration
	ResyncInterval time.Duration
	// WaitingInterval is how often a group waiting for an upgrade slot or
	// a maintenance window is re-checked (DefaultWaitingInterval in the
	// manager; at least PollInterval). A slot this controller frees wakes
	// the waiting groups at once.
	WaitingInterval time.Duration
	// FailureBackoffBase and FailureBackoffMax space the retries of a
	// group whose reconcile keeps failing (defaults 1s and 5m); see
	// failureBackoff.
	FailureBackoffBase, FailureBackoffMax time.Duration
	// TransientAttempts and TransientGrace: a transient failure
	// (providers.IsTransient) makes the group Degraded, not Error, until
	// it has lasted both (defaults 5 attempts and 5m); see failure.
	TransientAttempts int
	TransientGrace    time.Duration
	// Boundaries, when set, gates every action but deletion on the group
	// having been admitted under the boundaries in force (admissionGate);
	// AllowNoBoundaries is the webhooks' open mode.
	Boundaries        *store.Store
	AllowNoBoundaries bool
	// Violations re-checks a stored spec against the boundaries in force
	// (webhooks.BoundaryViolations); nil checks the hash only.
	Violations Violations
	// Quotas, when set, re-checks the quotas before a group is first
	// built (QuotaCheck); nil: admission's check alone.
	Quotas QuotaCheck

	backoff *failureBackoff
	waiters *slotWaiters // groups waiting for a slot or a window (SetupWithManager)
	owners  nodeOwners   // provider id -> group, for Nodes without the group's labels
	blocks  drainBlocks  // the last DrainBlocked cause announced per managed group
	repeats fargateRepeats
}

func (r *Reconciler) now() time.Time {
	if r.Now != nil {
		return r.Now()
	}
	return time.Now()
}

// SetupWithManager registers the controller. An InstanceGroup is
// reconciled when its spec, labels, annotations, finalizers or deletion
// change, never for a status write (its own would loop); a Node enqueues
// the one group that owns it (by its labels or its provider id, see
// nodeGroup) when something the group judges changes (see nodeChanged),
// not on every heartbeat; a provisioner's shared cloud listing enqueues
// the Ready groups whose cloud resources changed (see watchCloud).
func (r *Reconciler) SetupWithManager(mgr ctrl.Manager, workers int) error {
	r.backoff = newFailureBackoff(r.FailureBackoffBase, r.FailureBackoffMax)
	cloud, err := r.watchCloud(mgr)
	if err != nil {
		return err
	}
	b := ctrl.NewControllerManagedBy(mgr).
		Named("instancegroup").
		For(&v1alpha1.InstanceGroup{}, builder.WithPredicates(instanceGroupChanged)).
		Watches(&corev1.Node{}, handler.EnqueueRequestsFromMapFunc(r.nodeGroup), builder.WithPredicates(nodeChanged)).
		WithOptions(controller.Options{MaxConcurrentReconciles: workers})
	if cloud != nil {
		b = b.WatchesRawSource(cloud)
	}
	if r.Slots != nil {
		// A slot freed wakes the groups waiting for one.
		r.waiters = newSlotWaiters()
		r.Slots = wakingSlots{Keeper: r.Slots, waiters: r.waiters}
		b = b.WatchesRawSource(source.Channel(r.waiters.ch, handler.TypedFuncs[types.NamespacedName, reconcile.Request]{
			GenericFunc: func(_ context.Context, e event.TypedGenericEvent[types.NamespacedName], q workqueue.TypedRateLimitingInterface[reconcile.Request]) {
				q.Add(reconcile.Request{NamespacedName: e.Object})
			},
		}))
	}
	if r.Rolling != nil && r.Rolling.Drains != nil {
		// A drain that ended (drained, blocked, failed) reconciles its group now.
		b = b.WatchesRawSource(source.Channel(r.Rolling.Drains.Finished(), handler.TypedFuncs[types.NamespacedName, reconcile.Request]{
			GenericFunc: func(_ context.Context, e event.TypedGenericEvent[types.NamespacedName], q workqueue.TypedRateLimitingInterface[reconcile.Request]) {
				q.Add(reconcile.Request{NamespacedName: e.Object})
			},
		}))
	}
	return b.Complete(r)
}

// instanceGroupChanged passes every InstanceGroup event but a status-only
// update.
var instanceGroupChanged = predicate.Or(
	predicate.GenerationChangedPredicate{}, predicate.AnnotationChangedPredicate{},
	predicate.LabelChangedPredicate{}, lifecycleChanged)

// lifecycleChanged passes updates that set the deletion timestamp or change
// the finalizers (neither bumps the generation of every kind).
var lifecycleChanged = predicate.Funcs{UpdateFunc: func(e event.UpdateEvent) bool {
	return !e.ObjectOld.GetDeletionTimestamp().Equal(e.ObjectNew.GetDeletionTimestamp()) ||
		!slices.Equal(e.ObjectOld.GetFinalizers(), e.ObjectNew.GetFinalizers())
}}

// nodeChanged passes Node creates and deletes, and the updates a group
// judges: readiness, cordon, taints, labels, provider id, deletion.
// Heartbeats and image lists do not wake every group.
var nodeChanged = predicate.Funcs{UpdateFunc: func(e event.UpdateEvent) bool {
	before, okOld := e.ObjectOld.(*corev1.Node)
	after, okNew := e.ObjectNew.(*corev1.Node)
	if !okOld || !okNew {
		return true
	}
	return drain.NodeReady(before) != drain.NodeReady(after) ||
		before.Spec.Unschedulable != after.Spec.Unschedulable ||
		before.Spec.ProviderID != after.Spec.ProviderID ||
		!slices.EqualFunc(before.Spec.Taints, after.Spec.Taints, func(a, b corev1.Taint) bool { return a.MatchTaint(&b) && a.Value == b.Value }) ||
		!maps.Equal(before.Labels, after.Labels) ||
		!before.DeletionTimestamp.Equal(after.DeletionTimestamp)
}}
