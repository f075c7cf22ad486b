package main

import (
	"context"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
)

// The workload of the simulation: one pod on each Node of a group that
// rotates, evicted by the product's drains; the modelled kubelet stops it
// after its grace period.

// schedulePod puts the workload's pod on in's Node, when the group's pods
// are modelled (it rotates).
func (w *fleetWorld) schedulePod(a *fleetASG, in *fleetInstance) error {
	g := a.g
	if g.kube == nil {
		return nil
	}
	grace := int64(w.in.Drain / time.Second)
	return g.kube.Add(&corev1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: a.ns, Name: "app-" + in.node, UID: types.UID("pod-" + in.node)},
		Spec: corev1.PodSpec{NodeName: in.node, TerminationGracePeriodSeconds: &grace}, Status: corev1.PodStatus{Phase: corev1.PodRunning}})
}

// kubelet deletes the group's pods whose grace period ended by now, and
// the pods of Nodes that are gone.
func (w *fleetWorld) kubelet(ctx context.Context, a *fleetASG, now time.Time) error {
	g := a.g
	if g.kube == nil {
		return nil
	}
	nodes := map[string]bool{}
	for _, in := range a.insts {
		if in.nodeUp {
			nodes[in.node] = true
		}
	}
	pods, err := g.kube.Kube.CoreV1().Pods(a.ns).List(ctx, metav1.ListOptions{})
	if err != nil {
		return err
	}
	for _, p := range pods.Items {
		if !nodes[p.Spec.NodeName] || p.DeletionTimestamp != nil && !now.Before(p.DeletionTimestamp.Time) {
			if err := g.kube.Kube.Tracker().Delete(podsResource, p.Namespace, p.Name); err != nil {
				return err
			}
		}
	}
	return nil
}

var podsResource = corev1.SchemeGroupVersion.WithResource("pods")

// podDeadlines are when the group's terminating pods end.
func (w *fleetWorld) podDeadlines(ctx context.Context, g *fleetGroup) ([]time.Time, error) {
	if g.kube == nil {
		return nil, nil
	}
	pods, err := g.kube.Kube.CoreV1().Pods(g.key.Namespace).List(ctx, metav1.ListOptions{})
	if err != nil {
		return nil, err
	}
	var out []time.Time
	for _, p := range pods.Items {
		if p.DeletionTimestamp != nil {
			out = append(out, p.DeletionTimestamp.Time)
		}
	}
	return out, nil
}
