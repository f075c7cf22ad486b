package reconciler

import (
	"context"
	"fmt"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/tools/events"
	"k8s.io/utils/ptr"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/builder"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/controller"
	"sigs.k8s.io/controller-runtime/pkg/log"
	"sigs.k8s.io/controller-runtime/pkg/predicate"

	"github.com/instancemgr/instance-manager/boundaries"
	"github.com/instancemgr/instance-manager/boundaries/store"
)

// Event reasons on the boundary ConfigMap.
const (
	ReasonBoundariesInvalid = "InvalidBoundaries"
	ReasonBoundariesLoaded  = "BoundariesLoaded"
)

// BoundariesReconciler loads the boundary ConfigMap into the Store. It runs
// on every replica (the webhooks of each need the boundaries), not only on
// the leader. An invalid ConfigMap keeps the last valid boundaries in force,
// raises a Warning Event on the ConfigMap and sets the
// instance_manager_boundaries_valid metric to 0 (BOUNDARIES.md "Bad input").
type BoundariesReconciler struct {
	Client    client.Reader
	Store     *store.Store
	ConfigMap types.NamespacedName
	// Recorder receives Events on the ConfigMap; they are sent by the
	// leader only (Elected), so replicas do not repeat them.
	Recorder events.EventRecorder
	Elected  <-chan struct{}
}

// Reconcile implements reconcile.Reconciler for the one ConfigMap.
func (r *BoundariesReconciler) Reconcile(ctx context.Context, _ ctrl.Request) (ctrl.Result, error) {
	return ctrl.Result{}, r.load(ctx)
}

func (r *BoundariesReconciler) load(ctx context.Context) error {
	logger := log.FromContext(ctx).WithValues("configMap", r.ConfigMap)
	cm := &corev1.ConfigMap{}
	if err := r.Client.Get(ctx, r.ConfigMap, cm); err != nil {
		if !apierrors.IsNotFound(err) {
			return fmt.Errorf("reading boundary ConfigMap %s: %w", r.ConfigMap, err)
		}
		if st := r.Store.Get(); !st.Loaded || st.Config != nil {
			logger.Info("no boundary ConfigMap: InstanceGroups are admitted as submitted")
			r.Store.SetValid(nil, "")
		}
		boundariesValid.Set(1)
		return nil
	}
	if st := r.Store.Get(); st.Loaded && st.ResourceVersion == cm.ResourceVersion {
		return nil
	}
	cfg, err := boundaries.Parse(cm.Data)
	if err != nil {
		r.Store.SetInvalid(err)
		boundariesValid.Set(0)
		boundariesRejected.Inc()
		logger.Error(err, "boundary ConfigMap is invalid; keeping the last valid boundaries", "resourceVersion", cm.ResourceVersion)
		r.event(cm, corev1.EventTypeWarning, ReasonBoundariesInvalid,
			"ConfigMap is invalid and was ignored; the last valid boundaries stay in force until it is fixed: %v", err)
		return nil
	}
	r.Store.SetValid(cfg, cm.ResourceVersion)
	boundariesValid.Set(1)
	logger.Info("boundaries loaded", "resourceVersion", cm.ResourceVersion, "hash", cfg.Hash(false))
	r.event(cm, corev1.EventTypeNormal, ReasonBoundariesLoaded,
		"Boundaries loaded (hash %s, resourceVersion %s); stale InstanceGroups are re-admitted", cfg.Hash(false), cm.ResourceVersion)
	return nil
}

func (r *BoundariesReconciler) event(cm *corev1.ConfigMap, kind, reason, msg string, args ...any) {
	if r.Recorder == nil {
		return
	}
	select {
	case <-r.Elected:
		r.Recorder.Eventf(cm, nil, kind, reason, "Load", msg, args...)
	default:
	}
}

// SetupWithManager registers the reconciler and an initial load at start,
// so that a cluster without the ConfigMap still becomes Loaded.
func (r *BoundariesReconciler) SetupWithManager(mgr ctrl.Manager) error {
	if err := mgr.Add(initialLoad{r}); err != nil {
		return err
	}
	isOurs := predicate.NewPredicateFuncs(func(o client.Object) bool {
		return o.GetNamespace() == r.ConfigMap.Namespace && o.GetName() == r.ConfigMap.Name
	})
	return ctrl.NewControllerManagedBy(mgr).
		Named("boundaries").
		For(&corev1.ConfigMap{}, builder.WithPredicates(isOurs)).
		WithOptions(controller.Options{NeedLeaderElection: ptr.To(false), MaxConcurrentReconciles: 1}).
		Complete(r)
}

// initialLoad reads the ConfigMap once at start on every replica, retrying
// until it succeeds, because a missing ConfigMap produces no watch event.
type initialLoad struct{ r *BoundariesReconciler }

func (l initialLoad) NeedLeaderElection() bool { return false }

func (l initialLoad) Start(ctx context.Context) error {
	return wait.PollUntilContextCancel(ctx, time.Second, true, func(ctx context.Context) (bool, error) {
		if err := l.r.load(ctx); err != nil {
			log.FromContext(ctx).Error(err, "initial load of the boundary ConfigMap failed; retrying")
			return false, nil
		}
		return true, nil
	})
}
