package instancegroup

import (
	"context"

	corev1 "k8s.io/api/core/v1"
	ctrl "sigs.k8s.io/controller-runtime"

	"github.com/instancemgr/instance-manager/providers"
	"github.com/instancemgr/instance-manager/providers/aws/ownership"

	"github.com/instancemgr/instance-manager/reconciler/drain"
)

// apply has the provisioner converge the group's cloud resources and keeps
// what it observed. eks-managed and eks-fargate ask for an upgrade slot and
// drain through it before they disrupt pods (see managedProgress). A
// foreign resource or an invalid spec is an error on the group retried at
// the resync (retrying sooner will not help until the spec or the cloud
// changes); any other failure is retried with backoff (failure).
func (r *Reconciler) apply(ctx context.Context, s *scope) (*ctrl.Result, error) {
	ig := s.ig
	obs, err := s.prov.Apply(providers.WithEvents(providers.WithDisruptions(ctx, groupDisruptions{r: r, ig: ig, tally: &s.retired}), r.eventSink(ig, "Reconcile")), ig)
	if err == nil {
		s.obs = obs
		r.owners.set(s.key, obs.Instances)
		return nil, nil
	}
	reason := "CloudError"
	switch {
	case ownership.IsForeign(err):
		reason = ReasonForeignResource
	case providers.IsSpecError(err):
		reason = "InvalidSpec"
	}
	if reason != "CloudError" {
		if ferr := r.fail(ctx, ig, reason, err.Error()); ferr != nil {
			return end(ctrl.Result{}, ferr)
		}
		return end(ctrl.Result{RequeueAfter: r.ResyncInterval}, r.stallFailing(ctx, ig, reason))
	}
	res, ferr := r.failure(ctx, ig, reason, err)
	if ferr != nil {
		return end(ctrl.Result{}, ferr)
	}
	return end(res, r.stallFailing(ctx, ig, reason))
}

// observeNodes matches the instances to their Nodes and counts them.
func (r *Reconciler) observeNodes(ctx context.Context, s *scope) (*ctrl.Result, error) {
	nodes, err := r.groupNodes(ctx, s.obs)
	if err != nil {
		return end(ctrl.Result{}, err)
	}
	s.nodes = nodes
	s.inService, s.readyNodes, s.units = countInstances(s.obs.Instances, nodes)
	return nil, nil
}

// countInstances counts the in-service instances and those with a Ready
// Node, and their capacity units (weights) for readiness: Min is in the
// units the Auto Scaling group counts.
func countInstances(instances []providers.Instance, nodes map[string]*corev1.Node) (inService, readyNodes int, units capacity) {
	for _, in := range instances {
		if !in.InService() {
			continue
		}
		inService++
		units.inService += in.Units()
		units.weighted = units.weighted || in.Units() != 1
		if n := nodes[in.ProviderID]; n != nil && drain.NodeReady(n) {
			readyNodes++
			units.ready += in.Units()
		}
	}
	return inService, readyNodes, units
}

// checkNodeHealth replaces the unhealthy instances of a group the
// controller rotates itself (nodehealth; not managed groups).
func (r *Reconciler) checkNodeHealth(ctx context.Context, s *scope) (*ctrl.Result, error) {
	if r.NodeHealth == nil || s.obs.Managed {
		return nil, nil
	}
	rot, _ := s.prov.(providers.Rotator)
	var err error
	if s.healthCheck, err = r.NodeHealth.Check(ctx, s.ig, s.obs, s.nodes, rot); err != nil {
		return end(r.failure(ctx, s.ig, "NodeRepairFailed", err))
	}
	return nil, nil
}
