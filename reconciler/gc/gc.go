// Package gc is the garbage collector of cloud resources: a periodic sweep
// that asks each provisioner's providers.Collector for what it created in
// this installation's clusters (eks: Auto Scaling groups and launch
// templates, one tag-filtered listing of each per period; eks-managed:
// node groups per cluster and their launch templates; eks-fargate:
// Fargate profiles per cluster), judges which of them no InstanceGroup
// builds any more (judge.go), and, after a grace period and within a cap
// per sweep, has the collector delete them: what runs on them drained
// first through the controller's drain runner (drains.go), then the
// resource, then what its owner leaves that cannot be listed (IAM roles,
// Collector.FinishOrphan). Every deletion is logged and counted in
// instance_manager_orphans_deleted_total{resource}; with DryRun nothing is
// deleted and each orphan is only reported. The package makes no cloud
// call itself.
package gc

import (
	"context"
	"fmt"
	"maps"
	"slices"
	"strings"
	"sync"
	"time"

	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/log"

	"github.com/instancemgr/instance-manager/api/v1alpha1"
	"github.com/instancemgr/instance-manager/providers"
	"github.com/instancemgr/instance-manager/providers/aws/ownership"

	"github.com/instancemgr/instance-manager/reconciler/drain"
)

// Options tune the sweep.
type Options struct {
	// Period between sweeps. Default 10m.
	Period time.Duration
	// Grace is how long a resource must have been seen orphaned, sweep
	// after sweep, before it is deleted (a group being created or
	// re-created is never caught half-way). Default 30m.
	Grace time.Duration
	// MaxDeletions bounds the deletions (and so the AWS calls beyond the
	// listings) of one sweep. Default 10.
	MaxDeletions int
	// DryRun only reports orphans.
	DryRun bool
	// Clusters are the EKS clusters this installation manages
	// (--cluster-name, --additional-cluster-names): a resource whose
	// ownership tags name another cluster is never judged, even when it
	// carries this installation's tag (two releases installed with one
	// --installation-id, review 2026-11-26 N12). Empty: any cluster; the
	// per-cluster listings (node groups, Fargate profiles) then cover the
	// clusters InstanceGroups and the region-wide listings named since the
	// process started (a cluster whose groups all went before a restart
	// is not listed: set the clusters).
	Clusters []string
}

// Collector runs the sweep; it is a manager.Runnable that needs leader
// election (one sweeper per installation).
type Collector struct {
	Client client.Client
	// Collectors are the provisioners' collectors by provisioner name
	// (v1alpha1.ProvisionerEKS, ...), asked in name order.
	Collectors map[string]providers.Collector
	// Drains drains what runs on an orphan before it is deleted: the same
	// runner (Eviction API, PodDisruptionBudgets, per-group and
	// cluster-wide caps) as rotations and deletes. nil deletes without
	// draining (tests of the sweep alone).
	Drains *drain.Drains
	// Pending keeps the owners whose leftovers (FinishOrphan) are still
	// to be deleted across restarts and leader changes; nil keeps them in
	// memory only (tests of the sweep alone).
	Pending *Pending
	Opts    Options
	Now     func() time.Time

	mu        sync.Mutex
	firstSeen map[string]time.Time       // orphan key -> first sweep that saw it orphaned
	finishing map[string]ownership.Owner // collector + owner key -> owner whose resources were deleted
	clusters  map[string]bool            // clusters named since start (used without Opts.Clusters)
}

// NeedLeaderElection implements manager.LeaderElectionRunnable.
func (c *Collector) NeedLeaderElection() bool { return true }

// Start sweeps every Period until ctx ends. Sweep errors are logged; the
// next period tries again.
func (c *Collector) Start(ctx context.Context) error {
	c.defaults()
	t := time.NewTicker(c.Opts.Period)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return nil
		case <-t.C:
			if _, err := c.Sweep(ctx); err != nil {
				log.FromContext(ctx).Info("garbage collection sweep failed; retrying next period", "error", err.Error())
			}
		}
	}
}

func (c *Collector) defaults() {
	if c.Opts.Period <= 0 {
		c.Opts.Period = 10 * time.Minute
	}
	if c.Opts.Grace < 0 {
		c.Opts.Grace = 0
	}
	if c.Opts.MaxDeletions <= 0 {
		c.Opts.MaxDeletions = 10
	}
	if c.Now == nil {
		c.Now = time.Now
	}
}

// Report is what one sweep found and did.
type Report struct {
	Orphans []string // "<resource> <name>: <why>"
	Deleted []string // "<resource> <name>"
}

// found is a resource a collector listed.
type found struct {
	by string // provisioner name of the collector
	r  providers.Owned
}

func (f found) key() string {
	return f.by + "/" + f.r.Kind + "/" + f.r.Name + "/" + string(f.r.Owner.UID)
}

// ownerKey identifies an owner (and its UID) across collectors.
func ownerKey(o ownership.Owner) string {
	return o.Cluster + "/" + o.String() + "/" + string(o.UID)
}

// Sweep runs one pass: each collector's listings (Collector.Owned), the
// judgement of each resource, then, for at most MaxDeletions orphans past
// their grace period, the deletions; then FinishOrphan for owners whose
// resources of a collector are all gone. Resources of earlier versions
// (without the installation tag) are never swept.
func (c *Collector) Sweep(ctx context.Context) (Report, error) {
	c.defaults()
	var rep Report
	if ownership.Installation() == "" {
		return rep, nil
	}
	igs := &v1alpha1.InstanceGroupList{}
	if err := c.Client.List(ctx, igs); err != nil {
		return rep, fmt.Errorf("listing InstanceGroups: %w", err)
	}
	live := map[string]*v1alpha1.InstanceGroup{}
	for i := range igs.Items {
		live[igs.Items[i].Namespace+"/"+igs.Items[i].Name] = &igs.Items[i]
	}
	if err := c.loadPending(ctx); err != nil {
		return rep, err
	}
	list, err := c.list(ctx, igs.Items)
	if err != nil {
		return rep, err
	}
	var orphans []found
	why := map[string]string{}
	seen := map[string]bool{}
	for _, f := range list {
		reason := orphaned(c.Collectors[f.by], f.r, live[f.r.Owner.String()])
		if reason == "" {
			continue
		}
		seen[f.key()], why[f.key()] = true, reason
		orphans = append(orphans, f)
		rep.Orphans = append(rep.Orphans, fmt.Sprintf("%s %s: %s", f.r.Kind, f.r.Name, reason))
	}
	orphansFound.Reset()
	for _, f := range orphans {
		orphansFound.WithLabelValues(f.r.Kind).Inc()
	}
	due := c.due(seen)

	logger := log.FromContext(ctx).WithName("gc")
	// Resources first, dependents (launch templates) only once their owner
	// has no other orphan listed, so none loses the template it launches from.
	slices.SortStableFunc(orphans, func(a, b found) int { return boolOrder(a.r.Dependent) - boolOrder(b.r.Dependent) })
	blocking := map[string]bool{}
	for _, f := range orphans {
		if !f.r.Dependent {
			blocking[ownerKey(f.r.Owner)] = true
		}
	}
	left := map[string]bool{} // collector + owner with a resource not gone after this sweep
	budget := c.Opts.MaxDeletions
	for _, f := range orphans {
		fk := f.by + "/" + ownerKey(f.r.Owner)
		gone := false
		switch {
		case f.r.Deleting:
		case !due[f.key()]:
		case c.Opts.DryRun:
			logger.Info("orphan found (dry run: not deleted)", "resource", f.r.Kind, "name", f.r.Name, "cluster", f.r.Owner.Cluster, "reason", why[f.key()])
		case f.r.Dependent && blocking[ownerKey(f.r.Owner)]:
			// its owner's other resources go first
		case budget == 0:
			logger.Info("orphan left for the next sweep: deletion budget spent", "resource", f.r.Kind, "name", f.r.Name)
		default:
			// The owner is recorded before the deletion is asked, so a
			// restart right after it still finishes the owner.
			had, err := c.finish(ctx, fk, f.r.Owner)
			if err != nil {
				logger.Info("could not record an orphan's owner; retrying next sweep", "resource", f.r.Kind, "name", f.r.Name, "error", err.Error())
				break
			}
			budget--
			d, err := c.delete(ctx, f)
			switch {
			case err != nil:
				logger.Info("could not delete an orphan; retrying next sweep", "resource", f.r.Kind, "name", f.r.Name, "error", err.Error())
			case d.Deleting || d.Gone:
				logger.Info("deleted an orphan", "resource", f.r.Kind, "name", f.r.Name, "cluster", f.r.Owner.Cluster, "reason", why[f.key()])
				orphansDeleted.WithLabelValues(f.r.Kind).Inc()
				rep.Deleted = append(rep.Deleted, f.r.Kind+" "+f.r.Name)
				gone = d.Gone
			default:
				logger.Info("draining before deleting an orphan", "resource", f.r.Kind, "name", f.r.Name, "waiting", d.Waiting)
			}
			if !had && !d.Deleting && !d.Gone {
				// nothing was deleted: not this owner's leftovers to finish yet
				if err := c.forget(ctx, fk); err != nil {
					logger.Info("could not forget an orphan's owner", "owner", f.r.Owner.String(), "error", err.Error())
				}
			}
		}
		if !gone {
			left[fk] = true
		}
	}
	for _, f := range list { // what a collector lists that is not an orphan keeps its owner's leftovers
		if !seen[f.key()] {
			left[f.by+"/"+ownerKey(f.r.Owner)] = true
		}
	}
	rep.Deleted = append(rep.Deleted, c.finishAll(ctx, left)...)
	return rep, nil
}

func boolOrder(b bool) int {
	if b {
		return 1
	}
	return 0
}

// due records when each orphan of this sweep was first seen (forgetting
// those no longer orphaned: adopted again, or gone) and returns those
// orphaned for at least the grace period.
func (c *Collector) due(seen map[string]bool) map[string]bool {
	now := c.Now()
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.firstSeen == nil {
		c.firstSeen = map[string]time.Time{}
	}
	for k := range c.firstSeen {
		if !seen[k] {
			delete(c.firstSeen, k)
		}
	}
	due := map[string]bool{}
	for k := range seen {
		first, ok := c.firstSeen[k]
		if !ok {
			first, c.firstSeen[k] = now, now
		}
		due[k] = now.Sub(first) >= c.Opts.Grace
	}
	return due
}

// list asks each collector, in provisioner name order, for what it owns.
// The clusters passed are Opts.Clusters, or else every cluster the
// InstanceGroups or the listings (eks's are region-wide) named since the
// process started. Resources of clusters outside Opts.Clusters, and those
// whose tags do not prove them this installation's for the owner given,
// are left out.
func (c *Collector) list(ctx context.Context, igs []v1alpha1.InstanceGroup) ([]found, error) {
	c.mu.Lock()
	if c.clusters == nil {
		c.clusters = map[string]bool{}
	}
	clusters := c.clusters // kept across sweeps: a cluster whose last group is gone still has its orphans listed
	c.mu.Unlock()
	for _, ig := range igs {
		if name := clusterOf(&ig); name != "" {
			clusters[name] = true
		}
	}
	var out []found
	for _, name := range slices.Sorted(maps.Keys(c.Collectors)) {
		ask := c.Opts.Clusters
		if len(ask) == 0 {
			ask = slices.Sorted(maps.Keys(clusters))
		}
		owned, err := c.Collectors[name].Owned(ctx, ask)
		if err != nil {
			return nil, fmt.Errorf("listing the resources of provisioner %s: %w", name, err)
		}
		for _, r := range owned {
			if o, ok := ownership.Recorded(r.Tags); !ok || o != r.Owner {
				continue // never trust a listing beyond what the tags prove
			}
			if len(c.Opts.Clusters) > 0 && !slices.Contains(c.Opts.Clusters, r.Owner.Cluster) {
				continue
			}
			clusters[r.Owner.Cluster] = true
			out = append(out, found{by: name, r: r})
		}
	}
	return out, nil
}

// clusterOf is the cluster ig's spec names for its provisioner, or "".
func clusterOf(ig *v1alpha1.InstanceGroup) string {
	switch s := ig.Spec; {
	case s.EKSManaged != nil && s.EKSManaged.Configuration != nil && s.Provisioner == v1alpha1.ProvisionerEKSManaged:
		return s.EKSManaged.Configuration.ClusterName
	case s.EKSFargate != nil && s.Provisioner == v1alpha1.ProvisionerEKSFargate:
		return s.EKSFargate.ClusterName
	case s.EKS != nil && s.EKS.Configuration != nil:
		return s.EKS.Configuration.ClusterName
	}
	return ""
}

// delete has f's collector delete it, with the orphan's drains (see
// drains.go) in ctx; the drained nodes are then forgotten by the drain
// runner once the resource is being deleted (they go with it).
func (c *Collector) delete(ctx context.Context, f found) (providers.Deletion, error) {
	dctx := ctx
	var od *orphanDrains
	if c.Drains != nil {
		od = &orphanDrains{client: c.Client, drains: c.Drains, owner: f.r.Owner, what: f.r.Kind + " " + f.r.Name}
		dctx = providers.WithDisruptions(ctx, od)
	}
	d, err := c.Collectors[f.by].DeleteOrphan(dctx, f.r)
	if err == nil && (d.Deleting || d.Gone) && od != nil && len(od.nodes) > 0 {
		c.Drains.Stop(od.nodes...)
	}
	return d, err
}

// loadPending merges the owners Pending records (an earlier process's)
// into those this process holds.
func (c *Collector) loadPending(ctx context.Context) error {
	if c.Pending == nil {
		return nil
	}
	got, err := c.Pending.Load(ctx)
	if err != nil {
		return err
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.finishing == nil {
		c.finishing = map[string]ownership.Owner{}
	}
	for fk, o := range got {
		c.finishing[fk] = o
	}
	return nil
}

// finish records that the owner key fk (collector + owner) is having a
// resource deleted: its leftovers are deleted once none of its resources
// is left. It reports whether fk was recorded already; with Pending, the
// record is written there first (an error records nothing).
func (c *Collector) finish(ctx context.Context, fk string, o ownership.Owner) (bool, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.finishing == nil {
		c.finishing = map[string]ownership.Owner{}
	}
	if _, had := c.finishing[fk]; had {
		return true, nil
	}
	next := maps.Clone(c.finishing)
	next[fk] = o
	if c.Pending != nil {
		if err := c.Pending.Save(ctx, next); err != nil {
			return false, err
		}
	}
	c.finishing = next
	return false, nil
}

// forget drops fk from the owners to finish (and from Pending).
func (c *Collector) forget(ctx context.Context, fk string) error {
	c.mu.Lock()
	defer c.mu.Unlock()
	if _, ok := c.finishing[fk]; !ok {
		return nil
	}
	next := maps.Clone(c.finishing)
	delete(next, fk)
	if c.Pending != nil {
		if err := c.Pending.Save(ctx, next); err != nil {
			return err
		}
	}
	c.finishing = next
	return nil
}

// finishAll calls FinishOrphan for each owner recorded by finish that has
// nothing left of that collector (left), and forgets it once that
// succeeds.
func (c *Collector) finishAll(ctx context.Context, left map[string]bool) []string {
	c.mu.Lock()
	pending := maps.Clone(c.finishing)
	c.mu.Unlock()
	logger := log.FromContext(ctx).WithName("gc")
	var deleted []string
	for _, fk := range slices.Sorted(maps.Keys(pending)) {
		if left[fk] {
			continue
		}
		o := pending[fk]
		by, _, _ := strings.Cut(fk, "/")
		col, ok := c.Collectors[by]
		if !ok {
			continue // recorded by a process that had this collector
		}
		done, err := col.FinishOrphan(ctx, o)
		for _, d := range done {
			kind, name, _ := strings.Cut(d, " ")
			logger.Info("deleted an orphan", "resource", kind, "name", name, "owner", o.String())
			orphansDeleted.WithLabelValues(kind).Inc()
		}
		deleted = append(deleted, done...)
		if err != nil {
			logger.Info("could not delete what an orphan's owner left; retrying next sweep", "owner", o.String(), "error", err.Error())
			continue
		}
		if err := c.forget(ctx, fk); err != nil {
			logger.Info("could not forget an orphan's owner; finishing it again next sweep", "owner", o.String(), "error", err.Error())
		}
	}
	return deleted
}
