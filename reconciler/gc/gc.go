// Package gc is the garbage collector of cloud resources: a periodic sweep
// that finds what the eks provisioner of this installation created (Auto
// Scaling groups and launch templates, by the installation's ownership tag:
// one tag-filtered listing of each per period, whatever the number of
// clusters and groups, never one call per group) whose
// InstanceGroup no longer exists or no longer points at it, and deletes it
// after a grace period: instances drained first through the Eviction API,
// then the Auto Scaling group, then the launch template and the node role
// and instance profile. Every deletion is logged and counted in
// instance_manager_orphans_deleted_total{resource}; with DryRun nothing is
// deleted and each orphan is only reported.
package gc

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"sync"
	"time"

	awssdk "github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/autoscaling"
	astypes "github.com/aws/aws-sdk-go-v2/service/autoscaling/types"
	"github.com/aws/aws-sdk-go-v2/service/ec2"
	ec2types "github.com/aws/aws-sdk-go-v2/service/ec2/types"
	"github.com/aws/aws-sdk-go-v2/service/iam"
	iamtypes "github.com/aws/aws-sdk-go-v2/service/iam/types"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/log"

	"github.com/instancemgr/instance-manager/api/v1alpha1"
	"github.com/instancemgr/instance-manager/providers"
	awsp "github.com/instancemgr/instance-manager/providers/aws"
	"github.com/instancemgr/instance-manager/providers/aws/ownership"
	"github.com/instancemgr/instance-manager/providers/eks"
	"github.com/instancemgr/instance-manager/reconciler/upgrade"
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
	// two listings per cluster) of one sweep. Default 10.
	MaxDeletions int
	// DryRun only reports orphans.
	DryRun bool
	// Clusters are the EKS clusters this installation manages
	// (--cluster-name, --additional-cluster-names): a resource whose
	// ownership tags name another cluster is never judged, even when it
	// carries this installation's tag (two releases installed with one
	// --installation-id, review 2026-11-26 N12). Empty: any cluster.
	Clusters []string
}

// Collector runs the sweep; it is a manager.Runnable that needs leader
// election (one sweeper per installation).
type Collector struct {
	Client client.Client
	AWS    *awsp.Clients
	// Drains drains the nodes of an orphaned Auto Scaling group before it
	// is deleted: the same runner (Eviction API, PodDisruptionBudgets,
	// per-group and cluster-wide caps) as rotations and deletes. nil
	// deletes without draining (tests of the sweep alone).
	Drains *upgrade.Drains
	Opts   Options
	Now    func() time.Time

	mu        sync.Mutex
	firstSeen map[string]time.Time // orphan key -> first sweep that saw it orphaned
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

// Sweep runs one pass: one paginated DescribeAutoScalingGroups and one
// paginated DescribeLaunchTemplates, both filtered by this installation's
// ownership tag (ownership.TagInstallation); then, for at most
// MaxDeletions orphans past their grace period, the deletion calls.
// Resources of earlier versions (without the installation tag) are not
// swept.
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
	list, err := c.list(ctx)
	if err != nil {
		return rep, err
	}
	var orphans []found
	why := map[string]string{}
	seen := map[string]bool{}
	for _, f := range list {
		o, ok := f.owner()
		if !ok || len(c.Opts.Clusters) > 0 && !slices.Contains(c.Opts.Clusters, f.cluster) {
			continue
		}
		reason := orphaned(f, live[o.String()])
		if reason == "" {
			continue
		}
		key := f.kind + "/" + f.name + "/" + string(o.UID)
		seen[key] = true
		why[key] = reason
		orphans = append(orphans, f)
		rep.Orphans = append(rep.Orphans, fmt.Sprintf("%s %s: %s", f.kind, f.name, reason))
	}
	now := c.Now()
	c.mu.Lock()
	if c.firstSeen == nil {
		c.firstSeen = map[string]time.Time{}
	}
	for k := range c.firstSeen {
		if !seen[k] {
			delete(c.firstSeen, k) // adopted again, or gone
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
	c.mu.Unlock()

	logger := log.FromContext(ctx).WithName("gc")
	// Auto Scaling groups first; a launch template only once its owner has
	// no Auto Scaling group left, so no group loses the template it launches from.
	slices.SortStableFunc(orphans, func(a, b found) int { return strings.Compare(kindOrder(a.kind), kindOrder(b.kind)) })
	groupsOf := map[string]bool{}
	for _, f := range orphans {
		if f.kind == resourceASG {
			o, _ := f.owner()
			groupsOf[o.String()+"/"+string(o.UID)] = true
		}
	}
	budget := c.Opts.MaxDeletions
	for _, f := range orphans {
		o, _ := f.owner()
		key := f.kind + "/" + f.name + "/" + string(o.UID)
		if !due[key] {
			continue
		}
		if c.Opts.DryRun {
			logger.Info("orphan found (dry run: not deleted)", "resource", f.kind, "name", f.name, "cluster", f.cluster, "reason", why[key])
			continue
		}
		if budget == 0 {
			logger.Info("orphan left for the next sweep: deletion budget spent", "resource", f.kind, "name", f.name)
			continue
		}
		if f.kind == resourceLaunchTemplate && groupsOf[o.String()+"/"+string(o.UID)] {
			continue // its Auto Scaling group goes first
		}
		budget--
		done, err := c.delete(ctx, f, o)
		if err != nil {
			logger.Info("could not delete an orphan; retrying next sweep", "resource", f.kind, "name", f.name, "error", err.Error())
			continue
		}
		if done {
			logger.Info("deleted an orphan", "resource", f.kind, "name", f.name, "cluster", f.cluster, "reason", why[key])
			orphansDeleted.WithLabelValues(f.kind).Inc()
			rep.Deleted = append(rep.Deleted, f.kind+" "+f.name)
			if f.kind == resourceLaunchTemplate {
				rep.Deleted = append(rep.Deleted, c.deleteRoles(ctx, o)...)
			}
		}
	}
	return rep, nil
}

func kindOrder(kind string) string {
	if kind == resourceASG {
		return "0"
	}
	return "1"
}

// list returns this installation's Auto Scaling groups and launch
// templates (tag instancemgr.keikoproj.io/installation=<id>), each with the
// cluster its ownership tag names (resources naming none or several are
// left out).
func (c *Collector) list(ctx context.Context) ([]found, error) {
	filter := "tag:" + ownership.TagInstallation
	id := ownership.Installation()
	var out []found
	var token *string
	for {
		page, err := c.AWS.AutoScaling.DescribeAutoScalingGroups(ctx, &autoscaling.DescribeAutoScalingGroupsInput{
			Filters: []astypes.Filter{{Name: awssdk.String(filter), Values: []string{id}}}, NextToken: token, MaxRecords: awssdk.Int32(100)})
		if err != nil {
			return nil, fmt.Errorf("autoscaling DescribeAutoScalingGroups (installation %s): %w", id, err)
		}
		for _, g := range page.AutoScalingGroups {
			if awssdk.ToString(g.Status) == "Delete in progress" {
				continue
			}
			tags := ownership.TagMap(g.Tags, func(t astypes.TagDescription) *string { return t.Key }, func(t astypes.TagDescription) *string { return t.Value })
			if cluster := clusterOf(tags); cluster != "" {
				out = append(out, found{kind: resourceASG, name: awssdk.ToString(g.AutoScalingGroupName), cluster: cluster, tags: tags})
			}
		}
		if token = page.NextToken; token == nil || *token == "" {
			break
		}
	}
	token = nil
	for {
		page, err := c.AWS.EC2.DescribeLaunchTemplates(ctx, &ec2.DescribeLaunchTemplatesInput{
			Filters: []ec2types.Filter{{Name: awssdk.String(filter), Values: []string{id}}}, NextToken: token})
		if err != nil {
			return nil, fmt.Errorf("ec2 DescribeLaunchTemplates (installation %s): %w", id, err)
		}
		for _, lt := range page.LaunchTemplates {
			tags := ownership.TagMap(lt.Tags, func(t ec2types.Tag) *string { return t.Key }, func(t ec2types.Tag) *string { return t.Value })
			if cluster := clusterOf(tags); cluster != "" {
				out = append(out, found{kind: resourceLaunchTemplate, name: awssdk.ToString(lt.LaunchTemplateName), id: awssdk.ToString(lt.LaunchTemplateId), cluster: cluster, tags: tags})
			}
		}
		if token = page.NextToken; token == nil || *token == "" {
			break
		}
	}
	return out, nil
}

// clusterOf is the one cluster the ownership tags name, or "".
func clusterOf(tags map[string]string) string {
	cluster := ""
	for k := range tags {
		if name, ok := strings.CutPrefix(k, ownership.TagClusterPrefix); ok {
			if cluster != "" {
				return ""
			}
			cluster = name
		}
	}
	return cluster
}

// delete removes one orphan; it returns false while the Auto Scaling
// group's instances are still being drained.
func (c *Collector) delete(ctx context.Context, f found, o ownership.Owner) (bool, error) {
	switch f.kind {
	case resourceASG:
		// Frozen before its nodes drain, as a deleted group's is: an
		// orphan that can still grow (the cluster-autoscaler scaling it
		// out for the evicted pods) would take them on new nodes.
		if _, err := awsp.Freeze(ctx, c.AWS.AutoScaling, f.name, func(astypes.AutoScalingGroup) bool { return true }); err != nil {
			return false, err
		}
		drained, nodes, err := c.drain(ctx, f, o)
		if err != nil || !drained {
			return false, err
		}
		if _, err := c.AWS.AutoScaling.DeleteAutoScalingGroup(ctx, &autoscaling.DeleteAutoScalingGroupInput{
			AutoScalingGroupName: awssdk.String(f.name), ForceDelete: awssdk.Bool(true)}); err != nil {
			return false, fmt.Errorf("autoscaling DeleteAutoScalingGroup %s: %w", f.name, err)
		}
		if c.Drains != nil {
			c.Drains.Stop(nodes...) // they go with the group
		}
		return true, nil
	case resourceLaunchTemplate:
		if _, err := c.AWS.EC2.DeleteLaunchTemplate(ctx, &ec2.DeleteLaunchTemplateInput{LaunchTemplateId: awssdk.String(f.id)}); err != nil {
			return false, fmt.Errorf("ec2 DeleteLaunchTemplate %s: %w", f.name, err)
		}
		return true, nil
	}
	return false, nil
}

// drainKey is the key the orphan's drains run under in the drain runner:
// the InstanceGroup it was made for (gone, or re-created with another
// UID), so its drains share that group's per-group cap. They are held
// (upgrade.Drains.PollHeld): that group's reconcile, which cancels the
// drains of a group that does not exist, leaves them alone.
func drainKey(o ownership.Owner) types.NamespacedName {
	return types.NamespacedName{Namespace: o.Namespace, Name: o.Name}
}

// drain cordons the nodes of the group's instances and asks the drain
// runner (upgrade.Drains.PollHeld) to drain them in the background; true
// once every one is drained, with the nodes' names. A drain blocked by a
// PodDisruptionBudget past the drain timeout, or failed, is logged and
// asked again at the next sweep.
func (c *Collector) drain(ctx context.Context, f found, o ownership.Owner) (bool, []string, error) {
	out, err := c.AWS.AutoScaling.DescribeAutoScalingGroups(ctx, &autoscaling.DescribeAutoScalingGroupsInput{AutoScalingGroupNames: []string{f.name}})
	if err != nil {
		return false, nil, fmt.Errorf("autoscaling DescribeAutoScalingGroups %s: %w", f.name, err)
	}
	ids := map[string]bool{}
	for _, g := range out.AutoScalingGroups {
		for _, in := range g.Instances {
			ids[awssdk.ToString(in.InstanceId)] = true
		}
	}
	if len(ids) == 0 || c.Drains == nil {
		return true, nil, nil
	}
	nodes := &corev1.NodeList{}
	if err := c.Client.List(ctx, nodes); err != nil {
		return false, nil, fmt.Errorf("listing nodes: %w", err)
	}
	all := true
	var names []string
	for i := range nodes.Items {
		n := &nodes.Items[i]
		if id := providers.InstanceID(n.Spec.ProviderID); id == "" || !ids[id] {
			continue
		}
		if err := c.Drains.Drainer.Start(ctx, n, false); err != nil && !apierrors.IsNotFound(err) {
			return false, nil, err
		}
		names = append(names, n.Name)
		res, msg, err := c.Drains.PollHeld(ctx, drainKey(o), n)
		if err != nil {
			return false, nil, err
		}
		if res != upgrade.Drained {
			all = false
			log.FromContext(ctx).Info("draining a node of an orphaned Auto Scaling group", "group", f.name, "node", n.Name, "result", res, "status", msg)
		}
	}
	return all, names, nil
}

// deleteRoles deletes the node role and instance profile created for o,
// when their tags name o (eks.DeleteOwnedRole checks), after forgetting
// the aws-auth entry recorded for the role and deleting the EKS access
// entry instance-manager created for it (eks.ForgetAccessEntry).
func (c *Collector) deleteRoles(ctx context.Context, o ownership.Owner) []string {
	var deleted []string
	for _, name := range eks.CandidateRoleNames(o.Cluster, o.Namespace, o.Name) {
		got, err := c.AWS.IAM.GetRole(ctx, &iam.GetRoleInput{RoleName: awssdk.String(name)})
		if err != nil || got.Role == nil || o.Check("IAM role", name, roleTags(got)) != nil {
			continue
		}
		logger := log.FromContext(ctx).WithName("gc")
		if err := eks.ForgetRole(ctx, c.Client, awssdk.ToString(got.Role.Arn)); err != nil {
			logger.Info("could not remove the aws-auth entry of an orphaned role", "role", name, "error", err.Error())
			continue
		}
		if c.AWS.EKS != nil {
			if err := eks.ForgetAccessEntry(ctx, c.AWS.EKS, o.Cluster, awssdk.ToString(got.Role.Arn)); err != nil {
				logger.Info("could not delete the EKS access entry of an orphaned role; retrying when found again", "role", name, "error", err.Error())
				continue
			}
		}
		if err := eks.DeleteOwnedRole(ctx, c.AWS.IAM, eks.OwnedRole{Name: name, Owner: o, InstanceProfile: true, Legacy: true}); err != nil {
			logger.Info("could not delete an orphaned role; retrying when found again", "role", name, "error", err.Error())
			continue
		}
		logger.Info("deleted an orphan", "resource", resourceRole, "name", name, "owner", o.String())
		orphansDeleted.WithLabelValues(resourceRole).Inc()
		deleted = append(deleted, resourceRole+" "+name)
	}
	return deleted
}

func roleTags(out *iam.GetRoleOutput) map[string]string {
	return ownership.TagMap(out.Role.Tags, func(t iamtypes.Tag) *string { return t.Key }, func(t iamtypes.Tag) *string { return t.Value })
}

func splitOwner(s string) (string, string, bool) {
	ns, name, ok := strings.Cut(s, "/")
	return ns, name, ok && ns != "" && name != ""
}
