// Package autoscalerpriority keeps the cluster-autoscaler's priority
// expander ConfigMap (data key "priorities": priority -> regular
// expressions of node group names) in step with the InstanceGroups' own
// priorities (annotation instancemgr.keikoproj.io/cluster-autoscaler-priority
// on groups with instancemgr.keikoproj.io/cluster-autoscaler-enabled), so an
// overflow order is stated on the groups: when the autoscaler cannot scale
// the preferred group (no capacity: its instances do not come up within
// --max-node-provision-time), it backs that group off and scales the next.
// Groups without a priority share the lowest, 0.
package autoscalerpriority

import (
	"context"
	"fmt"
	"maps"
	"regexp"
	"slices"
	"strconv"
	"strings"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/handler"
	"sigs.k8s.io/controller-runtime/pkg/log"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"

	"github.com/instancemgr/instance-manager/api/v1alpha1"
)

// DataKey is the ConfigMap key the priority expander reads.
const DataKey = "priorities"

// Managed labels the ConfigMap as the controller's; one without it is
// someone else's and never changed.
const (
	ManagedLabel = "app.kubernetes.io/managed-by"
	ManagedValue = "instance-manager"
)

// Reconciler writes the ConfigMap.
type Reconciler struct {
	// Client lists InstanceGroups and writes the ConfigMap.
	Client client.Client
	// Reader reads the ConfigMap (the manager's cache holds only its own
	// ConfigMaps).
	Reader client.Reader
	// ConfigMap is where the autoscaler reads it: its namespace (the
	// autoscaler's, kube-system by default) and
	// cluster-autoscaler-priority-expander.
	ConfigMap types.NamespacedName
}

// Priorities renders the expander's priorities for groups: for each
// priority, the exact names of the Auto Scaling groups that have it, highest
// first; groups of the cluster-autoscaler without a priority under 0, with
// ".*" so that node groups instance-manager does not manage stay
// eligible.
func Priorities(groups []v1alpha1.InstanceGroup) string {
	by := map[int][]string{0: {".*"}}
	for _, ig := range groups {
		name := ig.Status.ActiveScalingGroupName
		if name == "" || ig.DeletionTimestamp != nil || ig.Annotations[v1alpha1.AnnotationClusterAutoscalerEnabled] != "true" {
			continue
		}
		p, err := strconv.Atoi(ig.Annotations[v1alpha1.AnnotationClusterAutoscalerPriority])
		if err != nil || p < 0 {
			p = 0
		}
		by[p] = append(by[p], scalingGroupExpr(&ig, name))
	}
	var b strings.Builder
	for _, p := range slices.Backward(slices.Sorted(maps.Keys(by))) {
		fmt.Fprintf(&b, "%d:\n", p)
		exprs := by[p]
		slices.Sort(exprs)
		for _, e := range exprs {
			fmt.Fprintf(&b, "  - %q\n", e)
		}
	}
	return b.String()
}

// scalingGroupExpr is the expander's expression for the Auto Scaling group
// of ig, whose status names name: that exact name, or for eks-managed,
// whose status names the node group, the Auto Scaling group EKS makes
// for it, "eks-<node group>-<node group uuid>" (the cluster-autoscaler's
// node groups are Auto Scaling groups; review 2026-11-29 L6).
func scalingGroupExpr(ig *v1alpha1.InstanceGroup, name string) string {
	if ig.Spec.Provisioner == v1alpha1.ProvisionerEKSManaged {
		return "^eks-" + regexp.QuoteMeta(name) + "-[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$"
	}
	return "^" + regexp.QuoteMeta(name) + "$"
}

// Reconcile implements reconcile.Reconciler: any InstanceGroup change
// rewrites the one ConfigMap if its priorities changed.
func (r *Reconciler) Reconcile(ctx context.Context, _ ctrl.Request) (ctrl.Result, error) {
	list := &v1alpha1.InstanceGroupList{}
	if err := r.Client.List(ctx, list); err != nil {
		return ctrl.Result{}, fmt.Errorf("listing InstanceGroups: %w", err)
	}
	want := Priorities(list.Items)
	cm := &corev1.ConfigMap{}
	err := r.Reader.Get(ctx, r.ConfigMap, cm)
	switch {
	case apierrors.IsNotFound(err):
		cm = &corev1.ConfigMap{
			ObjectMeta: metav1.ObjectMeta{Namespace: r.ConfigMap.Namespace, Name: r.ConfigMap.Name, Labels: map[string]string{ManagedLabel: ManagedValue}},
			Data:       map[string]string{DataKey: want},
		}
		if err := r.Client.Create(ctx, cm); err != nil {
			return ctrl.Result{}, fmt.Errorf("creating the cluster-autoscaler priority ConfigMap %s: %w", r.ConfigMap, err)
		}
		return ctrl.Result{}, nil
	case err != nil:
		return ctrl.Result{}, fmt.Errorf("reading the cluster-autoscaler priority ConfigMap %s: %w", r.ConfigMap, err)
	case cm.Labels[ManagedLabel] != ManagedValue:
		log.FromContext(ctx).Info("leaving a cluster-autoscaler priority ConfigMap this controller did not create (no label "+ManagedLabel+"="+ManagedValue+")", "configMap", r.ConfigMap.String())
		return ctrl.Result{}, nil
	case cm.Data[DataKey] == want:
		return ctrl.Result{}, nil
	}
	patch := client.MergeFrom(cm.DeepCopy())
	if cm.Data == nil {
		cm.Data = map[string]string{}
	}
	cm.Data[DataKey] = want
	if err := r.Client.Patch(ctx, cm, patch); err != nil {
		return ctrl.Result{}, fmt.Errorf("updating the cluster-autoscaler priority ConfigMap %s: %w", r.ConfigMap, err)
	}
	return ctrl.Result{}, nil
}

// SetupWithManager registers the controller: every InstanceGroup event
// enqueues the one ConfigMap.
func (r *Reconciler) SetupWithManager(mgr ctrl.Manager) error {
	key := reconcile.Request{NamespacedName: r.ConfigMap}
	return ctrl.NewControllerManagedBy(mgr).
		Named("autoscalerpriority").
		Watches(&v1alpha1.InstanceGroup{}, handler.EnqueueRequestsFromMapFunc(func(context.Context, client.Object) []reconcile.Request {
			return []reconcile.Request{key}
		})).
		Complete(r)
}
