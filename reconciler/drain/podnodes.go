package drain

import (
	"context"
	"fmt"
	"slices"
	"strings"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"sigs.k8s.io/controller-runtime/pkg/client"
)

// PodNodes is the first step of evicting the pods labelled key=value
// (every namespace, listed from the API server through Kube) before their
// cloud resource goes, e.g. a Fargate profile: a pod bound to a Node
// leaves by the drain of that Node (an EKS Fargate pod has a Node of its
// own), so the caller drains nodes (sorted by name, read through nodes)
// with its own pacing; a pod bound to none is evicted here
// (EvictUnbound). unbound names the pods still waiting that no drain will
// move ("namespace/name (why)"). Finished pods do not count. Errors come
// from the API server.
func (d *Drainer) PodNodes(ctx context.Context, nodes client.Reader, key, value string) (drain []*corev1.Node, unbound []string, err error) {
	pods, err := d.Kube.CoreV1().Pods("").List(ctx, metav1.ListOptions{LabelSelector: labels.SelectorFromSet(labels.Set{key: value}).String()})
	if err != nil {
		return nil, nil, fmt.Errorf("listing the pods labelled %s=%s to evict: %w", key, value, err)
	}
	seen := map[string]bool{}
	for i := range pods.Items {
		p := &pods.Items[i]
		if p.Status.Phase == corev1.PodSucceeded || p.Status.Phase == corev1.PodFailed {
			continue
		}
		name := p.Namespace + "/" + p.Name
		if p.Spec.NodeName == "" {
			if gone, refusal := d.EvictUnbound(ctx, p); !gone {
				if refusal != "" {
					name += " (eviction refused: " + refusal + ")"
				}
				unbound = append(unbound, name)
			}
			continue
		}
		if seen[p.Spec.NodeName] {
			continue
		}
		seen[p.Spec.NodeName] = true
		node := &corev1.Node{}
		switch err := nodes.Get(ctx, client.ObjectKey{Name: p.Spec.NodeName}, node); {
		case apierrors.IsNotFound(err):
			unbound = append(unbound, name+" (its node "+p.Spec.NodeName+" is gone)")
		case err != nil:
			return nil, nil, fmt.Errorf("reading node %s of pod %s: %w", p.Spec.NodeName, name, err)
		default:
			drain = append(drain, node)
		}
	}
	slices.SortFunc(drain, func(a, b *corev1.Node) int { return strings.Compare(a.Name, b.Name) })
	return drain, unbound, nil
}
