package gc

import (
	"context"
	"fmt"
	"strings"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/instancemgr/instance-manager/providers"
	"github.com/instancemgr/instance-manager/providers/aws/ownership"

	"github.com/instancemgr/instance-manager/reconciler/drain"
)

// orphanDrains is the providers.Disruptions (and providers.InstanceDrains)
// a collector's DeleteOrphan gets for one orphan: every drain goes through
// the controller's drain runner (drain.Drains: its Drainer cordons and
// evicts through the Eviction API, PodDisruptionBudgets honoured, within
// the cluster-wide and per-group caps), held (PollHeld) under the key of
// the InstanceGroup the orphan was made for, so that group's reconcile
// (it is gone, or re-created with another UID) leaves them alone. Nothing
// is forced: a drain blocked by a PodDisruptionBudget past the drain
// timeout is reported and asked again at the next sweep.
type orphanDrains struct {
	client client.Client
	drains *drain.Drains
	owner  ownership.Owner
	what   string   // the orphan, for messages: "<kind> <name>"
	nodes  []string // the nodes asked to drain, stopped once the orphan is deleted
}

var (
	_ providers.Disruptions    = (*orphanDrains)(nil)
	_ providers.InstanceDrains = (*orphanDrains)(nil)
)

// Admit: an orphan takes no upgrade slot (nothing replaces it); its
// drains count toward the drain runner's caps.
func (d *orphanDrains) Admit(context.Context) (bool, error) { return true, nil }

// DrainNodes drains the Nodes labelled key=value.
func (d *orphanDrains) DrainNodes(ctx context.Context, key, value string) (providers.Retirement, error) {
	list := &corev1.NodeList{}
	if err := d.client.List(ctx, list, client.MatchingLabels{key: value}); err != nil {
		return providers.Retirement{}, fmt.Errorf("listing the Nodes labelled %s=%s to drain: %w", key, value, err)
	}
	nodes := make([]*corev1.Node, 0, len(list.Items))
	for i := range list.Items {
		nodes = append(nodes, &list.Items[i])
	}
	return d.drain(ctx, nodes)
}

// DrainInstances drains the Nodes whose spec.providerID names one of ids.
func (d *orphanDrains) DrainInstances(ctx context.Context, ids []string) (providers.Retirement, error) {
	want := map[string]bool{}
	for _, id := range ids {
		want[id] = true
	}
	list := &corev1.NodeList{}
	if err := d.client.List(ctx, list); err != nil {
		return providers.Retirement{}, fmt.Errorf("listing nodes: %w", err)
	}
	var nodes []*corev1.Node
	for i := range list.Items {
		if id := providers.InstanceID(list.Items[i].Spec.ProviderID); id != "" && want[id] {
			nodes = append(nodes, &list.Items[i])
		}
	}
	return d.drain(ctx, nodes)
}

// EvictPods evicts the pods labelled key=value: a pod bound to a Node
// leaves by the drain of that Node (an EKS Fargate pod has a Node of its
// own); one bound to none is evicted directly (drain.Drainer
// .EvictUnbound). Finished pods do not count.
func (d *orphanDrains) EvictPods(ctx context.Context, key, value string) (providers.Retirement, error) {
	nodes, unbound, err := d.drains.Drainer.PodNodes(ctx, d.client, key, value)
	if err != nil {
		return providers.Retirement{}, err
	}
	res, err := d.drain(ctx, nodes)
	if err != nil || len(unbound) == 0 {
		return res, err
	}
	res.Done = false
	res.Message = strings.TrimPrefix(res.Message+"; waiting for pod(s) bound to no node: "+strings.Join(unbound, ", "), "; ")
	return res, nil
}

// drain cordons each node and asks the drain runner to drain it in the
// background (drain.Drainer.Start, drain.Drains.PollHeld); done once
// every one is drained.
func (d *orphanDrains) drain(ctx context.Context, nodes []*corev1.Node) (providers.Retirement, error) {
	key := types.NamespacedName{Namespace: d.owner.Namespace, Name: d.owner.Name}
	var waiting, blocked []string
	for _, n := range nodes {
		if err := d.drains.Drainer.Start(ctx, n, drain.OwnerGC); err != nil {
			if apierrors.IsNotFound(err) {
				continue // gone meanwhile: nothing to drain
			}
			return providers.Retirement{}, err
		}
		d.nodes = append(d.nodes, n.Name)
		res, msg, err := d.drains.PollHeld(ctx, key, n)
		switch {
		case err != nil:
			return providers.Retirement{}, err
		case res == drain.Drained:
		case res == drain.Blocked:
			blocked = append(blocked, msg)
		default:
			waiting = append(waiting, strings.TrimSpace(n.Name+" "+msg))
		}
	}
	if len(waiting)+len(blocked) == 0 {
		return providers.Retirement{Done: true}, nil
	}
	return providers.Retirement{
		Message: fmt.Sprintf("draining the nodes of orphaned %s (InstanceGroup %s): %s", d.what, d.owner, strings.Join(append(waiting, blocked...), ", ")),
		Blocked: strings.Join(blocked, "; "),
	}, nil
}
