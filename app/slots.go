package app

import (
	"context"
	"fmt"
	"net/http"
	"os"
	"strings"
	"sync"
	"time"

	authorizationv1 "k8s.io/api/authorization/v1"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/healthz"

	"github.com/instancemgr/instance-manager/boundaries/store"
	"github.com/instancemgr/instance-manager/reconciler/slots"
)

// slotNamespace is the namespace of the upgrade slot Leases: the leader
// election Lease's (--leader-election-namespace, else $POD_NAMESPACE),
// else the boundary ConfigMap's (out of cluster).
func (o *Options) slotNamespace() string {
	return orString(orString(o.LeaderElectionNamespace, os.Getenv("POD_NAMESPACE")), o.ConfigNamespace)
}

// slotVerbs are what slots.Leases does with Leases.
var slotVerbs = []string{"create", "list", "update", "delete"}

// upgradeSlots returns the cap on groups rotating at once, kept as Leases
// in the API server (slots.Leases) in every mode: with --dry-run its
// writes are sent with dryRun=All (validated, stored nothing), so a dry
// run counts the slots a real controller holds. It adds the readiness
// check "upgrade-slots", which fails while RBAC does not let the
// controller create, list, update and delete Leases in the slot namespace
// (an image newer than the chart's RBAC): the cap is never kept somewhere
// a restart forgets.
func upgradeSlots(mgr ctrl.Manager, opts Options, st *store.Store) (slots.Keeper, error) {
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
	ns := opts.slotNamespace()
	access := &slotAccess{client: mgr.GetClient(), namespace: ns, every: time.Minute, now: time.Now}
	if err := access.check(context.Background()); err != nil {
		ctrl.Log.WithName("setup").Error(err, "upgrade slots: not ready until RBAC allows the slot Leases")
	}
	if err := mgr.AddReadyzCheck("upgrade-slots", access.checker()); err != nil {
		return nil, err
	}
	writer := mgr.GetClient()
	if opts.DryRun {
		writer = client.NewDryRunClient(writer)
	}
	return &slots.Leases{
		Client: writer, Reader: mgr.GetAPIReader(), Namespace: ns,
		Max: max, PerNamespace: perNamespace, StallTimeout: opts.UpgradeStallTimeout,
	}, nil
}

// slotAccess remembers whether RBAC lets the controller keep the slot
// Leases (SelfSubjectAccessReview of each of slotVerbs), asking again at
// most every `every` while it does not (a chart upgrade may grant it); once
// allowed it is not asked again.
type slotAccess struct {
	client    client.Client
	namespace string
	every     time.Duration
	now       func() time.Time

	mu      sync.Mutex
	err     error
	checked time.Time
	allowed bool
}

// check asks the API server (SelfSubjectAccessReview per verb) and returns
// nil when every verb is allowed; else an error naming the verbs denied,
// the namespace and the fix, or the review's own error.
func (a *slotAccess) check(ctx context.Context) error {
	a.mu.Lock()
	defer a.mu.Unlock()
	if a.allowed {
		return nil
	}
	if !a.checked.IsZero() && a.now().Sub(a.checked) < a.every {
		return a.err
	}
	a.checked = a.now()
	denied, err := deniedVerbs(ctx, a.client, authorizationv1.ResourceAttributes{Namespace: a.namespace, Group: "coordination.k8s.io", Resource: "leases"}, slotVerbs...)
	if err != nil {
		a.err = err
		return a.err
	}
	if len(denied) > 0 {
		a.err = fmt.Errorf("the controller may not %s coordination.k8s.io Leases in namespace %s, where it keeps the upgrade slots: "+
			"upgrade the chart (its Role grants them) or grant them to the controller's service account", strings.Join(denied, ", "), a.namespace)
		return a.err
	}
	a.allowed, a.err = true, nil
	return nil
}

// checker is check as a readiness check.
func (a *slotAccess) checker() healthz.Checker {
	return func(req *http.Request) error {
		ctx := context.Background()
		if req != nil {
			ctx = req.Context()
		}
		return a.check(ctx)
	}
}
