// Package boundaryload is the boundary ConfigMap controller: it loads the
// admin's boundaries (and the rollout record) into the boundaries Store on
// every replica, and reports an invalid ConfigMap (Event, metric) while the
// last valid boundaries stay in force.
package boundaryload

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/tools/events"
	"k8s.io/utils/ptr"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/builder"
	"sigs.k8s.io/controller-runtime/pkg/cache"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/controller"
	"sigs.k8s.io/controller-runtime/pkg/handler"
	"sigs.k8s.io/controller-runtime/pkg/log"
	"sigs.k8s.io/controller-runtime/pkg/predicate"
	"sigs.k8s.io/controller-runtime/pkg/source"

	"github.com/instancemgr/instance-manager/boundaries"
	"github.com/instancemgr/instance-manager/boundaries/record"
	"github.com/instancemgr/instance-manager/boundaries/store"
)

// Event reasons on the boundary ConfigMap.
const (
	ReasonBoundariesInvalid = "InvalidBoundaries"
	ReasonBoundariesLoaded  = "BoundariesLoaded"
)

// Reconciler loads the boundary ConfigMap into the Store. It runs
// on every replica (the webhooks of each need the boundaries), not only on
// the leader. An invalid ConfigMap keeps the last valid boundaries in force,
// raises a Warning Event on the ConfigMap and sets the
// instance_manager_boundaries_valid metric to 0 (BOUNDARIES.md "Bad input").
type Reconciler struct {
	Client    client.Reader
	Store     *store.Store
	ConfigMap types.NamespacedName
	// Record, when set, reads the rollout record ConfigMap RecordName (a
	// cache of that one object, see app); its revisions and state are
	// loaded into the Store for the webhooks and the fan-out.
	Record     cache.Cache
	RecordName types.NamespacedName
	// Recorder receives Events on the ConfigMap; they are sent by the
	// leader only (Elected), so replicas do not repeat them.
	Recorder events.EventRecorder
	Elected  <-chan struct{}

	recordMu      sync.Mutex // serializes loadRecord (the initial load and reconciles)
	recordVersion string     // resourceVersion of the record last loaded
	// pins is the record's data key boundaries.KeyPins as last loaded
	// (under recordMu): the values resolved from AWS that the current
	// revision pins (reconciler/imagepins writes them).
	pins string
}

// currentPins is the pins of the record last loaded.
func (r *Reconciler) currentPins() string {
	r.recordMu.Lock()
	defer r.recordMu.Unlock()
	return r.pins
}

// Reconcile implements reconcile.Reconciler for the one ConfigMap.
func (r *Reconciler) Reconcile(ctx context.Context, _ ctrl.Request) (ctrl.Result, error) {
	// The record first: admission starts once the ConfigMap is loaded,
	// and should know the rollout by then; the boundaries load whatever
	// becomes of the record.
	recErr := r.loadRecord(ctx)
	return ctrl.Result{}, errors.Join(r.load(ctx), recErr)
}

// loadRecord reads the rollout record into the Store when it changed:
// the rollout state and every revision it keeps, parsed. A revision that
// no longer parses is left out (groups on it are then admitted against
// the stable revision) and reported.
func (r *Reconciler) loadRecord(ctx context.Context) error {
	if r.Record == nil {
		return nil
	}
	r.recordMu.Lock()
	defer r.recordMu.Unlock()
	cm := &corev1.ConfigMap{}
	err := r.Record.Get(ctx, r.RecordName, cm)
	switch {
	case apierrors.IsNotFound(err):
		if r.recordVersion != "" {
			r.Store.SetRecord(nil, nil)
			r.recordVersion, r.pins = "", ""
		}
		return nil
	case err != nil:
		return fmt.Errorf("reading the rollout record %s: %w", r.RecordName, err)
	case cm.ResourceVersion == r.recordVersion:
		return nil
	}
	r.pins = cm.Data[boundaries.KeyPins]
	logger := log.FromContext(ctx).WithValues("configMap", r.RecordName)
	rec, raw, err := record.Decode(cm.Data)
	if err != nil {
		logger.Error(err, "parts of the rollout record do not decode; they are ignored")
	}
	revisions := make(map[string]*boundaries.Config, len(raw))
	for id, data := range raw {
		cfg, err := boundaries.ParseRevision(data)
		if err != nil {
			logger.Error(err, "a boundaries revision kept in the rollout record no longer parses; it is ignored", "revision", id)
			continue
		}
		revisions[id] = cfg
	}
	r.Store.SetRecord(rec, revisions)
	r.recordVersion = cm.ResourceVersion
	return nil
}

func (r *Reconciler) load(ctx context.Context) error {
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
	pins := r.currentPins()
	if st := r.Store.Get(); st.Loaded && st.ResourceVersion == cm.ResourceVersion && st.Data[boundaries.KeyPins] == pins {
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
	// The revision is the ConfigMap's data with the pins resolved from
	// AWS: a newly published AMI or a control-plane upgrade is a new
	// revision, rolled out like the admin's change.
	data := cm.Data
	if pins != "" {
		pinned := boundaries.WithPins(cm.Data, pins)
		if withPins, err := boundaries.ParseRevision(pinned); err != nil {
			logger.Error(err, "the pins of the rollout record do not parse; the boundaries load without them", "record", r.RecordName)
		} else {
			cfg, data = withPins, pinned
		}
	}
	rev := boundaries.Revision(data)
	r.Store.SetData(cfg, cm.ResourceVersion, data, rev)
	boundariesValid.Set(1)
	logger.Info("boundaries loaded", "resourceVersion", cm.ResourceVersion, "revision", rev, "hash", cfg.Hash(false))
	next := "stale InstanceGroups are re-admitted"
	if cfg.Rollout != nil && r.Record != nil {
		next = fmt.Sprintf("it rolls out in %d wave(s)", len(cfg.Rollout.Waves))
	}
	r.event(cm, corev1.EventTypeNormal, ReasonBoundariesLoaded,
		"Boundaries loaded (hash %s, resourceVersion %s) as revision %s; %s", cfg.Hash(false), cm.ResourceVersion, rev, next)
	return nil
}

func (r *Reconciler) event(cm *corev1.ConfigMap, kind, reason, msg string, args ...any) {
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
func (r *Reconciler) SetupWithManager(mgr ctrl.Manager) error {
	if err := mgr.Add(initialLoad{r}); err != nil {
		return err
	}
	isOurs := predicate.NewPredicateFuncs(func(o client.Object) bool {
		return o.GetNamespace() == r.ConfigMap.Namespace && o.GetName() == r.ConfigMap.Name
	})
	b := ctrl.NewControllerManagedBy(mgr).
		Named("boundaries").
		For(&corev1.ConfigMap{}, builder.WithPredicates(isOurs)).
		WithOptions(controller.Options{NeedLeaderElection: ptr.To(false), MaxConcurrentReconciles: 1})
	if r.Record != nil {
		b = b.WatchesRawSource(source.Kind(r.Record, &corev1.ConfigMap{}, &handler.TypedEnqueueRequestForObject[*corev1.ConfigMap]{}))
	}
	return b.Complete(r)
}

// initialLoad reads the ConfigMap once at start on every replica, retrying
// until it succeeds, because a missing ConfigMap produces no watch event.
type initialLoad struct{ r *Reconciler }

func (l initialLoad) NeedLeaderElection() bool { return false }

func (l initialLoad) Start(ctx context.Context) error {
	return wait.PollUntilContextCancel(ctx, time.Second, true, func(ctx context.Context) (bool, error) {
		if err := l.r.loadRecord(ctx); err != nil {
			// The watch of the record brings it in later.
			log.FromContext(ctx).Error(err, "initial load of the rollout record failed; the boundaries load without it")
		}
		if err := l.r.load(ctx); err != nil {
			log.FromContext(ctx).Error(err, "initial load of the boundary ConfigMap failed; retrying")
			return false, nil
		}
		return true, nil
	})
}
