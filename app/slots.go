package app

import (
	"context"
	"fmt"
	"os"

	authorizationv1 "k8s.io/api/authorization/v1"
	ctrl "sigs.k8s.io/controller-runtime"

	"github.com/instancemgr/instance-manager/boundaries/store"
	"github.com/instancemgr/instance-manager/reconciler/upgrade"
)

// slotNamespace is the namespace of the upgrade slot Leases: the leader
// election Lease's (--leader-election-namespace, else $POD_NAMESPACE),
// else the boundary ConfigMap's (out of cluster).
func (o *Options) slotNamespace() string {
	return orString(orString(o.LeaderElectionNamespace, os.Getenv("POD_NAMESPACE")), o.ConfigNamespace)
}

// upgradeSlots returns the cap on groups rotating at once: Leases in the
// API server (upgrade.LeaseSlots), or slots in memory with --dry-run
// (nothing is written) or when RBAC does not let the controller keep the
// Leases (an image newer than the chart's RBAC; a WARNING says so).
func upgradeSlots(mgr ctrl.Manager, opts Options, st *store.Store) (upgrade.SlotKeeper, error) {
	max := func() int {
		if c := st.Get().Config; c != nil && c.MaxConcurrentUpgrades > 0 {
			return c.MaxConcurrentUpgrades
		}
		return opts.MaxConcurrentUpgrades
	}
	perNamespace := func(namespace string) int {
		if q, _ := st.Get().Config.QuotasFor(namespace); q != nil && q.MaxConcurrentUpgrades != nil {
			return int(*q.MaxConcurrentUpgrades)
		}
		return 0
	}
	memory := &upgrade.Slots{Max: max, PerNamespace: perNamespace}
	if opts.DryRun {
		return memory, nil
	}
	ns := opts.slotNamespace()
	for _, verb := range []string{"create", "list", "update", "delete"} {
		review := &authorizationv1.SelfSubjectAccessReview{Spec: authorizationv1.SelfSubjectAccessReviewSpec{
			ResourceAttributes: &authorizationv1.ResourceAttributes{Namespace: ns, Verb: verb, Group: "coordination.k8s.io", Resource: "leases"},
		}}
		if err := mgr.GetClient().Create(context.Background(), review); err != nil {
			return nil, fmt.Errorf("checking whether the controller may %s Leases in namespace %s (SelfSubjectAccessReview): %w", verb, ns, err)
		}
		if !review.Status.Allowed {
			ctrl.Log.WithName("setup").Info("WARNING: the controller may not " + verb + " Leases in namespace " + ns +
				" (chart RBAC older than the image?): upgrade slots are kept in memory; a restart forgets them")
			return memory, nil
		}
	}
	return &upgrade.LeaseSlots{
		Client: mgr.GetClient(), Reader: mgr.GetAPIReader(), Namespace: ns,
		Max: max, PerNamespace: perNamespace, StallTimeout: opts.UpgradeStallTimeout,
	}, nil
}
