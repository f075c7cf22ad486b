package rollout

import (
	"context"
	"fmt"
	"maps"
	"reflect"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/tools/events"
	"k8s.io/client-go/util/workqueue"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/builder"
	"sigs.k8s.io/controller-runtime/pkg/cache"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/controller"
	"sigs.k8s.io/controller-runtime/pkg/event"
	"sigs.k8s.io/controller-runtime/pkg/handler"
	"sigs.k8s.io/controller-runtime/pkg/log"
	"sigs.k8s.io/controller-runtime/pkg/predicate"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"
	"sigs.k8s.io/controller-runtime/pkg/source"

	"github.com/instancemgr/instance-manager/api/v1alpha1"
	"github.com/instancemgr/instance-manager/boundaries"
	"github.com/instancemgr/instance-manager/boundaries/record"
	"github.com/instancemgr/instance-manager/boundaries/store"

	"github.com/instancemgr/instance-manager/reconciler/drain"
)

// Reconciler runs the rollout on the leader: one key, reconciled on every
// boundary or record change, every InstanceGroup change (status
// included), every Node readiness change, and when a soak or a startup
// timeout ends.
type Reconciler struct {
	// Client reads InstanceGroups and Nodes from the manager's cache and
	// writes the record.
	Client client.Client
	// Record is the cache of the one record ConfigMap (see app).
	Record     cache.Cache
	RecordName types.NamespacedName
	// ConfigMap is the boundary ConfigMap, which rollout Events are about.
	ConfigMap types.NamespacedName
	Store     *store.Store
	Recorder  events.EventRecorder
	// Pods reads pods live from the API server (the manager's API
	// reader: there is no Pod cache) for the workload criteria
	// (workload_read.go); nil: the workload criteria see no pods.
	Pods client.Reader
	pods *podReader

	// notWritten is the last failure to write the record that was
	// reported ("" when the last write succeeded). One worker reconciles
	// (MaxConcurrentReconciles 1), so it needs no lock.
	notWritten string
}

// idle is how often a rollout in progress is looked at without a change.
const idle = 30 * time.Second

// Reconcile runs one Step and stores its record. Errors are failures to
// read or write the cluster; a lost write race is retried.
func (r *Reconciler) Reconcile(ctx context.Context, _ ctrl.Request) (ctrl.Result, error) {
	st := r.Store.Get()
	if !st.Loaded || st.Config == nil || st.Data == nil {
		return ctrl.Result{}, nil // no boundaries: nothing rolls out
	}
	cm := &corev1.ConfigMap{}
	switch err := r.Record.Get(ctx, r.RecordName, cm); {
	case apierrors.IsNotFound(err):
		cm = nil
	case err != nil:
		return ctrl.Result{}, fmt.Errorf("reading the rollout record %s: %w", r.RecordName, err)
	}
	var prev *record.Record
	raw := map[string]map[string]string{}
	action := ""
	if cm != nil {
		var err error
		if prev, raw, err = record.Decode(cm.Data); err != nil {
			log.FromContext(ctx).Error(err, "parts of the rollout record do not decode; they are rewritten")
		}
		action = cm.Annotations[record.AnnotationAction]
	}
	groups, err := r.groups(ctx, st)
	if err != nil {
		return ctrl.Result{}, err
	}
	now := time.Now()
	if r.Pods != nil {
		if r.pods == nil {
			r.pods = newPodReader(r.Pods)
		}
		r.pods.readPods(ctx, r.Client, prev, st.Policy(), st.Revision, groups, now)
	}
	configs := map[string]*boundaries.Config{st.Revision: st.Config}
	for rev, c := range st.Revisions {
		if rev != st.Revision {
			configs[rev] = c
		}
	}
	res := Step(prev, Input{Now: now, Revision: st.Revision, Policy: st.Policy(), Maintenance: st.Maintenance(), Groups: groups, Action: action, Configs: configs})

	revisions := keep(st, res.Record, groups, raw)
	data, err := record.Encode(res.Record, revisions)
	if pins, ok := recordPins(cm); ok && err == nil {
		data[boundaries.KeyPins] = pins // the image pin controller's (reconciler/imagepins)
	}
	if err == nil {
		err = r.write(ctx, cm, data, res.Acted)
	}
	if err != nil {
		if apierrors.IsConflict(err) || apierrors.IsAlreadyExists(err) {
			return ctrl.Result{RequeueAfter: 200 * time.Millisecond}, nil
		}
		err = fmt.Errorf("writing the rollout record %s: %w", r.RecordName, err)
		r.reportWrite(ctx, err)
		return ctrl.Result{}, err
	}
	r.reportWrite(ctx, nil)
	r.send(ctx, res.Notes)
	observe(res.Record, res.Notes)
	switch {
	case res.After > 0:
		return ctrl.Result{RequeueAfter: res.After}, nil
	case res.Record.Phase == record.PhaseProgressing:
		return ctrl.Result{RequeueAfter: idle}, nil
	}
	return ctrl.Result{}, nil
}

// groups reads every InstanceGroup and its Nodes from the cache. Both
// lists are of the cached objects themselves (no deep copy: with 2,000
// groups and 10,000 Nodes the copies made most of the manager's
// allocations); nothing here or in Step may modify them.
func (r *Reconciler) groups(ctx context.Context, st store.State) ([]Group, error) {
	igs := &v1alpha1.InstanceGroupList{}
	if err := r.Client.List(ctx, igs, client.UnsafeDisableDeepCopy); err != nil {
		return nil, fmt.Errorf("listing InstanceGroups: %w", err)
	}
	nodes := &corev1.NodeList{}
	if err := r.Client.List(ctx, nodes, client.HasLabels{v1alpha1.LabelInstanceGroup}, client.UnsafeDisableDeepCopy); err != nil {
		return nil, fmt.Errorf("listing Nodes: %w", err)
	}
	type count struct{ all, bad int }
	perGroup := map[string]count{}
	for i := range nodes.Items {
		n := &nodes.Items[i]
		key := n.Labels[v1alpha1.LabelInstanceGroupNamespace] + "/" + n.Labels[v1alpha1.LabelInstanceGroup]
		c := perGroup[key]
		c.all++
		if !drain.NodeReady(n) {
			c.bad++
		}
		perGroup[key] = c
	}
	out := make([]Group, 0, len(igs.Items))
	for i := range igs.Items {
		ig := &igs.Items[i]
		key := ig.Namespace + "/" + ig.Name
		running, _ := st.Running(ig.Annotations[v1alpha1.AnnotationBoundariesHash], ig.Namespace)
		g := Group{
			Key: key, Namespace: ig.Namespace, Labels: ig.Labels,
			Excluded: st.Config.Excluded(ig.Namespace), Deleting: ig.DeletionTimestamp != nil,
			Running:    running.Revision,
			AtTarget:   running.Config != nil && running.Revision == st.Revision,
			Generation: ig.Generation, ObservedGeneration: ig.Status.ObservedGeneration,
			State: ig.Status.CurrentState, NodesUpdated: ig.Status.NodesUpdated, NodesTotal: ig.Status.NodesTotal,
			InService: ig.Status.NodesInService, ReadyNodes: ig.Status.NodesReady,
			Nodes: perGroup[key].all, NotReadyNodes: perGroup[key].bad,
			Tenant: ig.Annotations[v1alpha1.AnnotationRollout],
		}
		if c := meta.FindStatusCondition(ig.Status.Conditions, v1alpha1.ConditionReady); c != nil {
			g.Ready, g.Message = c.Status == metav1.ConditionTrue, c.Message
		}
		if c := meta.FindStatusCondition(ig.Status.Conditions, v1alpha1.ConditionNodesReady); c != nil {
			g.NodesReady = c.Status == metav1.ConditionTrue
		}
		if c := meta.FindStatusCondition(ig.Status.Conditions, v1alpha1.ConditionNodesHealthy); c != nil {
			g.NodesUnhealthy = c.Status == metav1.ConditionFalse
		}
		if c := meta.FindStatusCondition(ig.Status.Conditions, v1alpha1.ConditionBoundariesApplied); c != nil && c.Reason == "Rejected" && !g.AtTarget {
			g.Rejected = c.Message
		}
		out = append(out, g)
	}
	return out, nil
}

// keep returns the revisions the record keeps: the target (the current
// data), the stable one, and every revision a group runs.
func keep(st store.State, rec *record.Record, groups []Group, raw map[string]map[string]string) map[string]map[string]string {
	out := map[string]map[string]string{}
	add := func(rev string) {
		if rev == st.Revision {
			out[rev] = st.Data
		} else if d, ok := raw[rev]; ok {
			out[rev] = d
		}
	}
	add(rec.Target)
	add(rec.Stable)
	for _, g := range groups {
		if g.Running != "" {
			add(g.Running)
		}
	}
	return out
}

// write creates or updates the record ConfigMap when its data changed or
// an action was consumed (its annotation is removed).
func (r *Reconciler) write(ctx context.Context, cm *corev1.ConfigMap, data map[string]string, acted bool) error {
	if cm == nil {
		cm = &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{
			Namespace: r.RecordName.Namespace, Name: r.RecordName.Name,
			Labels: map[string]string{"app.kubernetes.io/managed-by": "instance-manager"},
		}, Data: data}
		return r.Client.Create(ctx, cm)
	}
	if maps.Equal(cm.Data, data) && !acted {
		return nil
	}
	cm = cm.DeepCopy()
	cm.Data = data
	if acted {
		delete(cm.Annotations, record.AnnotationAction)
	}
	return r.Client.Update(ctx, cm)
}

// reportWrite tells the admin when the record cannot be written (too
// large for a ConfigMap: record.TooLargeError; refused by the API
// server): the rollout cannot move while it is so. A Warning Event
// ReasonRecordNotWritten on the boundary ConfigMap and a log, once per
// distinct failure (the reconcile is retried with backoff), the gauge
// instance_manager_boundaries_rollout_record_write_failing at 1; a
// Normal ReasonRecordWritten Event once a write succeeds again.
func (r *Reconciler) reportWrite(ctx context.Context, err error) {
	switch {
	case err == nil && r.notWritten == "":
		return
	case err == nil:
		r.notWritten = ""
		recordFailing.Set(0)
		r.send(ctx, []Note{{Reason: ReasonRecordWritten, Message: "The rollout record " + r.RecordName.String() + " is written again; the rollout carries on"}})
	case err.Error() != r.notWritten:
		r.notWritten = err.Error()
		recordFailing.Set(1)
		r.send(ctx, []Note{{Warning: true, Reason: ReasonRecordNotWritten,
			Message: "The rollout cannot move: " + err.Error() + ". Retried with backoff; fewer revisions kept (groups moved off old revisions) or fewer groups make it fit"}})
	}
}

// send records the step's Events: on the boundary ConfigMap, or on a group.
func (r *Reconciler) send(ctx context.Context, notes []Note) {
	for _, n := range notes {
		kind := corev1.EventTypeNormal
		if n.Warning {
			kind = corev1.EventTypeWarning
		}
		var about client.Object
		if n.Group == "" {
			about = &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: r.ConfigMap.Namespace, Name: r.ConfigMap.Name}}
			if err := r.Client.Get(ctx, r.ConfigMap, about); err != nil {
				log.FromContext(ctx).Error(err, "reading the boundary ConfigMap for an Event", "reason", n.Reason)
			}
		} else {
			ns, name, _ := strings.Cut(n.Group, "/")
			about = &v1alpha1.InstanceGroup{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name}}
			if err := r.Client.Get(ctx, types.NamespacedName{Namespace: ns, Name: name}, about); err != nil {
				continue
			}
		}
		r.Recorder.Eventf(about, nil, kind, n.Reason, "Rollout", "%s", n.Message)
		log.FromContext(ctx).Info(n.Message, "reason", n.Reason)
	}
}

// SetupWithManager registers the controller (leader only).
func (r *Reconciler) SetupWithManager(mgr ctrl.Manager) error {
	changes := make(chan store.State, 1)
	r.Store.Subscribe(changes)
	key := reconcile.Request{NamespacedName: r.RecordName}
	trigger := make(chan event.GenericEvent, 1)
	if err := mgr.Add(relay{changes: changes, out: trigger}); err != nil {
		return err
	}
	one := enqueueAfter[client.Object](key)
	oneCM := enqueueAfter[*corev1.ConfigMap](key)
	return ctrl.NewControllerManagedBy(mgr).
		Named("rollout").
		Watches(&v1alpha1.InstanceGroup{}, one).
		Watches(&corev1.Node{}, one, builder.WithPredicates(nodeReadiness)).
		WatchesRawSource(source.Kind(r.Record, &corev1.ConfigMap{}, oneCM)).
		WatchesRawSource(source.Channel(trigger, one)).
		WithOptions(controller.Options{MaxConcurrentReconciles: 1}).
		Complete(r)
}

// coalesce is how long after a change the rollout looks at the fleet:
// the changes within it (a fleet's status writes come by the thousand)
// make one reconcile, each of which reads every group and Node, instead of
// one each.
const coalesce = time.Second

// enqueueAfter enqueues key coalesce after any event; an event while key
// already waits does not postpone it.
func enqueueAfter[T client.Object](key reconcile.Request) handler.TypedEventHandler[T, reconcile.Request] {
	add := func(q workqueue.TypedRateLimitingInterface[reconcile.Request]) { q.AddAfter(key, coalesce) }
	return handler.TypedFuncs[T, reconcile.Request]{
		CreateFunc: func(_ context.Context, _ event.TypedCreateEvent[T], q workqueue.TypedRateLimitingInterface[reconcile.Request]) {
			add(q)
		},
		UpdateFunc: func(_ context.Context, _ event.TypedUpdateEvent[T], q workqueue.TypedRateLimitingInterface[reconcile.Request]) {
			add(q)
		},
		DeleteFunc: func(_ context.Context, _ event.TypedDeleteEvent[T], q workqueue.TypedRateLimitingInterface[reconcile.Request]) {
			add(q)
		},
		GenericFunc: func(_ context.Context, _ event.TypedGenericEvent[T], q workqueue.TypedRateLimitingInterface[reconcile.Request]) {
			add(q)
		},
	}
}

// nodeReadiness passes Node creates, deletes and readiness changes.
var nodeReadiness = predicate.Funcs{UpdateFunc: func(e event.UpdateEvent) bool {
	before, ok1 := e.ObjectOld.(*corev1.Node)
	after, ok2 := e.ObjectNew.(*corev1.Node)
	return !ok1 || !ok2 || drain.NodeReady(before) != drain.NodeReady(after) || !reflect.DeepEqual(before.Labels, after.Labels)
}}

// relay turns store changes into one generic event.
type relay struct {
	changes <-chan store.State
	out     chan<- event.GenericEvent
}

func (l relay) Start(ctx context.Context) error {
	for {
		select {
		case <-ctx.Done():
			return nil
		case <-l.changes:
			select {
			case l.out <- event.GenericEvent{Object: &corev1.ConfigMap{}}:
			case <-ctx.Done():
				return nil
			}
		}
	}
}

// recordPins is the record's data key boundaries.KeyPins, which the image
// pin controller writes and a step keeps.
func recordPins(cm *corev1.ConfigMap) (string, bool) {
	if cm == nil {
		return "", false
	}
	pins, ok := cm.Data[boundaries.KeyPins]
	return pins, ok
}
