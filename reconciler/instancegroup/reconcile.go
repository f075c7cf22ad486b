package instancegroup

import (
	"context"
	"fmt"
	"maps"
	"slices"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/types"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/controller/controllerutil"
	"sigs.k8s.io/controller-runtime/pkg/log"

	"github.com/instancemgr/instance-manager/api/v1alpha1"
	"github.com/instancemgr/instance-manager/dryrun"
	"github.com/instancemgr/instance-manager/providers"
	"github.com/instancemgr/instance-manager/reconciler/upgrade"
)

// scope is what one reconcile pass of a group knows, filled in phase by
// phase (Cluster API's scope in doReconcile).
type scope struct {
	key types.NamespacedName
	ig  *v1alpha1.InstanceGroup
	// before is the group as last stored: the status patch's base.
	before *v1alpha1.InstanceGroup
	// name is the provisioner serving the group ("eks-cf" is "eks").
	name string
	prov providers.Provisioner

	obs   *providers.Observation
	nodes map[string]*corev1.Node // by providerID (matchNodes)
	// inService and readyNodes count instances; units are their capacity.
	inService, readyNodes int
	units                 capacity
	// healthCheck is when node health wants the group back (0: no need).
	healthCheck time.Duration
	progress    upgrade.Progress
	// releaseSlot: report frees the upgrade slot once the status is stored.
	releaseSlot bool
	// retired is what a managed group's retirement drains saw this pass.
	retired retireTally
}

// phase is one step of a reconcile pass. A nil result lets the pass go
// on to the next phase; a result or an error ends the pass with it.
type phase func(ctx context.Context, s *scope) (*ctrl.Result, error)

// Reconcile implements reconcile.Reconciler: it reads the group and runs
// the phases in order, until one ends the pass; the last, report, always
// does.
func (r *Reconciler) Reconcile(ctx context.Context, req ctrl.Request) (ctrl.Result, error) {
	ig := &v1alpha1.InstanceGroup{}
	if err := r.Client.Get(ctx, req.NamespacedName, ig); err != nil {
		if apierrors.IsNotFound(err) {
			r.forget(req.NamespacedName)
		}
		return ctrl.Result{}, client.IgnoreNotFound(err)
	}
	ctx = dryrun.WithObject(ctx, ig) // a dry run's "would …" Events are about the group
	s := &scope{key: req.NamespacedName, ig: ig, before: ig.DeepCopy()}
	for _, p := range []phase{
		r.resolveProvisioner, // which provisioner serves the group
		r.deleteIfDeleted,    // deletion behind the finalizer
		r.addFinalizer,
		r.gateAdmission, // admitted under the boundaries in force
		r.gateQuota,     // quotas before a first build
		r.recordBuiltIdentity,
		r.applySpot,
		r.apply, // the provisioner converges the cloud resources
		r.observeNodes,
		r.checkNodeHealth,
		r.rotate, // drifted instances to the strategy; surge give-back
		r.reportPass,
	} {
		res, err := p(ctx, s)
		if res != nil || err != nil {
			if res == nil {
				res = &ctrl.Result{}
			}
			return *res, err
		}
	}
	return ctrl.Result{}, fmt.Errorf("InstanceGroup %s: no phase reported", req.NamespacedName)
}

// forget drops what the controller keeps about a group that is gone.
func (r *Reconciler) forget(key types.NamespacedName) {
	r.owners.forget(key)
	r.blocks.forget(key)
	r.repeats.forget(key)
	if r.backoff != nil {
		r.backoff.forget(key)
	}
	if r.Rolling != nil && r.Rolling.Drains != nil {
		r.Rolling.Drains.Cancel(key)
	}
}

// end is a phase's "the pass ends here with res".
func end(res ctrl.Result, err error) (*ctrl.Result, error) { return &res, err }

// resolveProvisioner picks the provisioner of spec.provisioner ("eks-cf"
// is served by "eks"); one this controller does not serve is an error on
// the group (UnknownProvisioner), unless the group is being deleted.
func (r *Reconciler) resolveProvisioner(ctx context.Context, s *scope) (*ctrl.Result, error) {
	s.name = s.ig.Spec.Provisioner
	if s.name == v1alpha1.ProvisionerEKSCF {
		s.name = v1alpha1.ProvisionerEKS
	}
	var ok bool
	s.prov, ok = r.Provisioners[s.name]
	if !ok && s.ig.DeletionTimestamp == nil {
		msg := fmt.Sprintf("spec.provisioner %q is not served by this controller (served: %s)", s.ig.Spec.Provisioner, strings.Join(slices.Sorted(maps.Keys(r.Provisioners)), ", "))
		return end(ctrl.Result{}, r.fail(ctx, s.ig, "UnknownProvisioner", msg))
	}
	return nil, nil
}

// deleteIfDeleted removes a deleted group's cloud resources (delete).
func (r *Reconciler) deleteIfDeleted(ctx context.Context, s *scope) (*ctrl.Result, error) {
	if s.ig.DeletionTimestamp == nil {
		return nil, nil
	}
	if id, ok := builtIdentity(s.ig); ok {
		// What is deleted is what the recorded identity built,
		// whatever the spec says now.
		return end(r.delete(ctx, s.ig, r.Provisioners[id.Provisioner]))
	}
	return end(r.delete(ctx, s.ig, s.prov))
}

// addFinalizer stores the Finalizer before anything is built; a conflict
// retries the pass soon.
func (r *Reconciler) addFinalizer(ctx context.Context, s *scope) (*ctrl.Result, error) {
	if !controllerutil.AddFinalizer(s.ig, Finalizer) {
		return nil, nil
	}
	if err := r.Client.Update(ctx, s.ig); err != nil {
		if apierrors.IsConflict(err) {
			return end(ctrl.Result{RequeueAfter: 100 * time.Millisecond}, nil)
		}
		return end(ctrl.Result{}, client.IgnoreNotFound(err))
	}
	s.before = s.ig.DeepCopy()
	return nil, nil
}

// recordBuiltIdentity stores the identity before the first cloud write
// (recordIdentity): from then on the webhook refuses a provisioner or
// cluster switch. A spec that names another identity than the recorded
// one is an error on the group (ReasonIdentityChanged).
func (r *Reconciler) recordBuiltIdentity(ctx context.Context, s *scope) (*ctrl.Result, error) {
	switch written, err := r.recordIdentity(ctx, s.ig); {
	case apierrors.IsConflict(err):
		log.FromContext(ctx).Info("the group kept changing while its identity was recorded; retrying", "error", err.Error())
		return end(ctrl.Result{RequeueAfter: conflictRetry}, nil)
	case err != nil:
		return end(r.failure(ctx, s.ig, "IdentityNotRecorded", err))
	case written:
		s.before = s.ig.DeepCopy()
	}
	if msg := identityMismatch(s.ig); msg != "" {
		if err := r.fail(ctx, s.ig, ReasonIdentityChanged, msg); err != nil {
			return end(ctrl.Result{}, err)
		}
		return end(ctrl.Result{RequeueAfter: r.ResyncInterval}, nil)
	}
	return nil, nil
}

// applySpot takes a spot recommendation into an eks group's spec
// (applySpotRecommendation).
func (r *Reconciler) applySpot(ctx context.Context, s *scope) (*ctrl.Result, error) {
	if s.name != v1alpha1.ProvisionerEKS {
		return nil, nil
	}
	if err := r.applySpotRecommendation(ctx, s.ig); err != nil {
		return end(ctrl.Result{}, err)
	}
	return nil, nil
}

// reportPass writes the status and conditions (report) and brings the
// group back before node health's next check is due.
func (r *Reconciler) reportPass(ctx context.Context, s *scope) (*ctrl.Result, error) {
	ready := false
	if s.obs.Managed {
		ready = s.obs.Active && !s.obs.Updating
	} else {
		ready = s.units.ready >= s.obs.Min && s.units.inService >= s.obs.Min
	}
	res, err := r.report(ctx, s.before, s.ig, s.obs, s.progress, s.inService, s.readyNodes, s.units, ready, s.releaseSlot)
	if err == nil && s.healthCheck > 0 && (res.RequeueAfter == 0 || s.healthCheck < res.RequeueAfter) {
		res.RequeueAfter = s.healthCheck // an instance may turn unhealthy before the next resync
	}
	return end(res, err)
}
