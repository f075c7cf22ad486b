package instancegroup

import (
	"context"
	"maps"
	"slices"
	"sync"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/util/workqueue"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/event"
	"sigs.k8s.io/controller-runtime/pkg/handler"
	"sigs.k8s.io/controller-runtime/pkg/log"
	"sigs.k8s.io/controller-runtime/pkg/manager"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"
	"sigs.k8s.io/controller-runtime/pkg/source"

	"github.com/instancemgr/instance-manager/api/v1alpha1"
	"github.com/instancemgr/instance-manager/providers"
)

// nodeOwners maps the provider ids of the instances each group last
// observed to the group, so a Node is mapped to the one group owning it
// even when it does not carry the group's labels (a kubelet started with
// other labels, a node registered before the labels were set).
type nodeOwners struct {
	mu         sync.Mutex
	byProvider map[string]types.NamespacedName
	byGroup    map[types.NamespacedName][]string
}

// set records the group's instances (their provider ids).
func (o *nodeOwners) set(group types.NamespacedName, instances []providers.Instance) {
	ids := make([]string, 0, len(instances))
	for _, in := range instances {
		ids = append(ids, in.ProviderID)
	}
	slices.Sort(ids)
	o.mu.Lock()
	defer o.mu.Unlock()
	if slices.Equal(o.byGroup[group], ids) {
		return
	}
	if o.byProvider == nil {
		o.byProvider, o.byGroup = map[string]types.NamespacedName{}, map[types.NamespacedName][]string{}
	}
	for _, id := range o.byGroup[group] {
		if o.byProvider[id] == group {
			delete(o.byProvider, id)
		}
	}
	for _, id := range ids {
		o.byProvider[id] = group
	}
	o.byGroup[group] = ids
}

// forget drops a group that is gone.
func (o *nodeOwners) forget(group types.NamespacedName) {
	o.set(group, nil)
	o.mu.Lock()
	defer o.mu.Unlock()
	delete(o.byGroup, group)
}

// owner is the group whose instance has providerID.
func (o *nodeOwners) owner(providerID string) (types.NamespacedName, bool) {
	o.mu.Lock()
	defer o.mu.Unlock()
	g, ok := o.byProvider[providerID]
	return g, ok
}

// nodeGroup maps a Node to the one group that owns it: by the group's
// labels, else by its provider id among the instances groups observed.
func (r *Reconciler) nodeGroup(_ context.Context, o client.Object) []reconcile.Request {
	name, ns := o.GetLabels()[v1alpha1.LabelInstanceGroup], o.GetLabels()[v1alpha1.LabelInstanceGroupNamespace]
	if name != "" && ns != "" {
		return []reconcile.Request{{NamespacedName: types.NamespacedName{Namespace: ns, Name: name}}}
	}
	if n, ok := o.(*corev1.Node); ok && n.Spec.ProviderID != "" {
		if g, ok := r.owners.owner(n.Spec.ProviderID); ok {
			return []reconcile.Request{{NamespacedName: g}}
		}
	}
	return nil
}

// watchCloud adds, for each provisioner that is a providers.Watcher, a
// leader-only runnable running its Watch and a source enqueueing the
// groups it reports changed. Only Ready groups are enqueued: the others
// are re-checked every PollInterval anyway (and a group reports its own
// writes as changes too).
func (r *Reconciler) watchCloud(mgr ctrl.Manager) (source.Source, error) {
	var watchers []providers.Watcher
	for _, name := range slices.Sorted(maps.Keys(r.Provisioners)) {
		if w, ok := r.Provisioners[name].(providers.Watcher); ok && !slices.Contains(watchers, w) {
			watchers = append(watchers, w)
		}
	}
	if len(watchers) == 0 {
		return nil, nil
	}
	ch := make(chan event.TypedGenericEvent[types.NamespacedName], 1024)
	for _, w := range watchers {
		if err := mgr.Add(manager.RunnableFunc(func(ctx context.Context) error {
			return w.Watch(ctx, func(key types.NamespacedName) {
				select {
				case ch <- event.TypedGenericEvent[types.NamespacedName]{Object: key}:
				case <-ctx.Done():
				}
			})
		})); err != nil {
			return nil, err
		}
	}
	return source.Channel(ch, handler.TypedFuncs[types.NamespacedName, reconcile.Request]{
		GenericFunc: func(ctx context.Context, e event.TypedGenericEvent[types.NamespacedName], q workqueue.TypedRateLimitingInterface[reconcile.Request]) {
			ig := &v1alpha1.InstanceGroup{}
			if err := r.Client.Get(ctx, e.Object, ig); err != nil || ig.Status.CurrentState != v1alpha1.StateReady {
				return
			}
			log.FromContext(ctx).V(1).Info("cloud resources changed", "instanceGroup", e.Object)
			q.Add(reconcile.Request{NamespacedName: e.Object})
		},
	}), nil
}
