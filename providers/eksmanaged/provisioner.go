// Package eksmanaged is the eks-managed provisioner: an InstanceGroup
// becomes an EKS managed node group (and, unless the spec names a node
// role, an IAM role it creates and owns). AWS launches, rotates and
// drains the nodes; the provisioner creates the node group, keeps its
// scaling, labels and taints in step with the spec (UpdateNodegroupConfig),
// its Kubernetes/AMI release version when the spec sets one
// (UpdateNodegroupVersion), one update at a time, and its tags
// (TagResource, UntagResource), in place.
//
// Every node group without SSH remote access uses the group's launch
// template (launchtemplate.go: IMDSv2 required, hop limit 1, the disk);
// a new version of it is a version update (UpdateNodegroupVersion).
//
// Fields EKS fixes at creation (node role, subnets, instance types, AMI
// type, launch template, disk size without one, remote access, capacity
// type: the shape) are changed
// blue/green: a new node group named after the shape's hash is created,
// and once it is ACTIVE with its nodes Ready and the controller has
// drained the group's other node groups' nodes (providers.Disruptions:
// Eviction API, PodDisruptionBudgets, maxUnavailable at once), those are
// deleted. A replacement and a version update start only with an upgrade
// slot (providers.Disruptions.Admit). The node groups are found from EKS on each step
// (their names and ownership tags), so a restart continues where it
// stopped. A field the spec leaves empty is EKS's choice and is not
// compared. An empty version or releaseVersion is EKS's choice at
// creation and is not followed afterwards: set them to upgrade.
package eksmanaged

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"sync"

	awssdk "github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/eks"
	ekstypes "github.com/aws/aws-sdk-go-v2/service/eks/types"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/log"

	"github.com/instancemgr/instance-manager/api/v1alpha1"
	"github.com/instancemgr/instance-manager/providers"
	awsp "github.com/instancemgr/instance-manager/providers/aws"
	"github.com/instancemgr/instance-manager/providers/aws/iamrole"
	"github.com/instancemgr/instance-manager/providers/aws/ownership"
	"github.com/instancemgr/instance-manager/providers/aws/reads"
)

// Provisioner implements providers.Provisioner for provisioner
// "eks-managed". The references, the node role and a node group found
// ACTIVE alone are kept in Reads; otherwise every Apply finds the group's
// node groups from EKS (ListNodegroups, DescribeNodegroup).
type Provisioner struct {
	aws   *awsp.Clients
	reads *reads.Reads
	nodes client.Reader
	opts  Options
	// templates remembers launch templates whose ownership was checked:
	// "<name>/<group uid>" -> template id.
	templates sync.Map
	// failures paces the re-creation of node groups in CREATE_FAILED
	// (its count is in the group's status).
	failures providers.CreateFailures
	// versions are the version updates sent, by "<cluster>/<name>".
	versions versionUpdates
	// adopt takes over what an earlier InstanceGroup of the same name
	// left (providers.Adopt); its Reader nil: nothing is adopted.
	adopt *ownership.Adopter
}

// Options are the eks-managed provisioner's settings.
type Options struct {
	// NodeRoleCNIPolicy keeps AmazonEKS_CNI_Policy on the node roles the
	// provisioner creates (see iamrole.CNIPolicy). Default off.
	NodeRoleCNIPolicy bool
	// Reader reads InstanceGroups from the API server itself (the
	// manager's APIReader): the node groups, node role and launch template
	// an earlier InstanceGroup of the same name left are adopted once it
	// shows their recorded UID gone (ownership.Adopter). nil: nothing is
	// adopted.
	Reader client.Reader
}

var _ providers.Provisioner = (*Provisioner)(nil)

// New returns the eks-managed provisioner using the EKS, EC2 (subnet and
// security group references) and IAM (node role) clients; cache keeps what
// groups read (nil: reads.New(0)); nodes, when not nil, reads the
// Nodes of a replacement node group (label eks.amazonaws.com/nodegroup),
// which must be Ready before the node group it replaces is deleted (nil:
// the node group's ACTIVE state alone decides).
func New(clients *awsp.Clients, cache *reads.Reads, nodes client.Reader, opts Options) *Provisioner {
	if cache == nil {
		cache = reads.New(0)
	}
	return &Provisioner{aws: clients, reads: cache, nodes: nodes, opts: opts, adopt: &ownership.Adopter{Reader: opts.Reader}}
}

// readsID identifies the group in Reads.
func readsID(ig *v1alpha1.InstanceGroup) types.UID {
	return types.UID(ownership.GroupTag(ig) + "/" + string(ig.UID))
}

func configured(ig *v1alpha1.InstanceGroup) error {
	if ig.Spec.EKSManaged == nil || ig.Spec.EKSManaged.Configuration == nil {
		return &providers.SpecError{Field: configPath, Detail: "required by the eks-managed provisioner"}
	}
	return nil
}

// Apply converges the group's managed node groups to the spec, one step
// per call. References are resolved first (EC2 DescribeSubnets,
// DescribeSecurityGroups; IAM GetRole or the owned role's calls, see
// iamrole.EnsureOwnedRole), then the launch template (ensureTemplate) unless
// the spec asks for SSH remote access. The group's node groups are found (EKS
// ListNodegroups, then DescribeNodegroup of the names that can be the
// group's; only those tagged for the group count). The one whose shape is
// the spec's is converged: tags in place (TagResource, UntagResource),
// then configuration (UpdateNodegroupConfig), then version
// (UpdateNodegroupVersion), never while EKS reports it CREATING, UPDATING
// or DELETING, at most one update per call. When none has the spec's shape
// one is created (CreateNodegroup: the group's first name, or the
// replacement name of the shape when the group has node groups), with the
// desired size of the node group it replaces. The others retire: once the
// converged node group is ACTIVE, needs no update and has its nodes Ready,
// they are deleted (DeleteNodegroup). The Observation names the converged
// node group (GroupName) and the retiring ones (Retiring), and is Updating
// until they are gone. The node groups, node role and launch template an
// earlier InstanceGroup of the same namespace/name, cluster and
// installation left, whose recorded UID no InstanceGroup has any more, are
// adopted (providers.Adopt: retagged with the group's UID, one Normal
// Event Adopted naming them all). Errors: a *providers.SpecError for
// unknown references or a missing cluster, an *ownership.ForeignError for
// a node group of the name needed that another owner tagged; other
// failures are wrapped with the EKS operation and node group name.
func (p *Provisioner) Apply(ctx context.Context, ig *v1alpha1.InstanceGroup) (_ *providers.Observation, err error) {
	if err := configured(ig); err != nil {
		return nil, err
	}
	ctx, flush := providers.CollectAdoptions(ctx)
	defer flush()
	gid := readsID(ig)
	defer func() {
		if err != nil {
			p.reads.Drop(gid, stageSteady)
		}
		p.reads.Done(gid, err)
	}()
	r, err := p.resolve(ctx, ig)
	if err != nil {
		return nil, err
	}
	want, err := desiredNodegroup(ig, r)
	if err != nil {
		return nil, err
	}
	if want.keyPair == "" {
		if want.template, err = p.template(ctx, ig, want); err != nil {
			return nil, err
		}
	}
	found, err := p.find(ctx, ig, want)
	if err != nil {
		return nil, err
	}
	target, retiring := pick(ig, found.groups, want)
	var obs *providers.Observation
	if target == nil {
		obs, err = p.create(ctx, ig, want, found, retiring)
	} else {
		obs, err = p.converge(ctx, ig, want, target, retiring)
	}
	if obs != nil && obs.CreateFailure == nil && !obs.Active {
		// Deleted to be created again, being created: the count goes on
		// until a node group is ACTIVE (recreate sets it).
		obs.CreateFailure = ig.Status.CreateFailure.DeepCopy()
	}
	return obs, err
}

// find returns the group's node groups: the one Reads keeps as found
// ACTIVE alone for this shape (described again: EKS DescribeNodegroup),
// else those a listing finds (see ownedNodegroups).
func (p *Provisioner) find(ctx context.Context, ig *v1alpha1.InstanceGroup, want nodegroup) (owned, error) {
	gid, owner := readsID(ig), ownership.OwnerOf(ig, want.cluster)
	if v, ok := p.reads.Load(gid, gid, stageSteady, want.shape().hash()); ok && len(ig.Status.RetiringScalingGroupNames) == 0 {
		ng, err := describe(ctx, p.aws.EKS, want.cluster, v.(string))
		if err != nil {
			return owned{}, err
		}
		if ng != nil && owner.Check("EKS node group", v.(string), ng.Tags) == nil && ng.Status != ekstypes.NodegroupStatusDeleting &&
			len(immutableChanges(ng, want, ig.Spec.EKSManaged.Configuration)) == 0 {
			return owned{groups: []*ekstypes.Nodegroup{ng}}, nil
		}
		p.reads.Drop(gid, stageSteady) // gone or changed: look
	}
	names, err := listNames(ctx, p.aws.EKS, want.cluster)
	if errors.Is(err, errNoCluster) {
		return owned{}, &providers.SpecError{Field: configPath + ".clusterName", Detail: fmt.Sprintf("EKS cluster %q does not exist", want.cluster)}
	}
	if err != nil {
		return owned{}, err
	}
	return ownedNodegroups(ctx, p.aws.EKS, p.adopt, want.cluster, names, ownName(ig), owner)
}

// pick chooses the node group to converge among the group's: one not
// DELETING whose shape is want's (no immutableChanges), preferring the
// one the status names, then an ACTIVE one, then the first by name. The
// others retire.
func pick(ig *v1alpha1.InstanceGroup, groups []*ekstypes.Nodegroup, want nodegroup) (target *ekstypes.Nodegroup, retiring []*ekstypes.Nodegroup) {
	rank := func(ng *ekstypes.Nodegroup) int {
		switch {
		case awssdk.ToString(ng.NodegroupName) == ig.Status.ActiveScalingGroupName:
			return 0
		case ng.Status == ekstypes.NodegroupStatusActive:
			return 1
		}
		return 2
	}
	for _, ng := range groups {
		if ng.Status == ekstypes.NodegroupStatusDeleting || len(immutableChanges(ng, want, ig.Spec.EKSManaged.Configuration)) > 0 {
			continue
		}
		if target == nil || rank(ng) < rank(target) {
			target = ng
		}
	}
	for _, ng := range groups {
		if ng != target {
			retiring = append(retiring, ng)
		}
	}
	return target, retiring
}

// create creates the node group of want's shape (EKS CreateNodegroup):
// under the group's first name when it has no node group, else under the
// shape's replacement name, with the largest desired size of the retiring
// node groups (kept within min and max) so the capacity the cluster
// autoscaler added is there before they go.
func (p *Provisioner) create(ctx context.Context, ig *v1alpha1.InstanceGroup, want nodegroup, found owned, retiring []*ekstypes.Nodegroup) (*providers.Observation, error) {
	if len(found.groups) > 0 {
		want.name = replacementName(ig, want.shape())
	}
	if tags, ok := found.foreign[want.name]; ok {
		return nil, ownership.OwnerOf(ig, want.cluster).Check("EKS node group", want.name, tags)
	}
	for _, ng := range found.groups {
		if awssdk.ToString(ng.NodegroupName) == want.name { // DELETING: pick skips it
			obs := observe(ng, "")
			obs.Active, obs.Updating, obs.Retiring = false, true, groupNames(retiring)
			obs.Message = fmt.Sprintf("waiting for EKS node group %s to finish deleting before it is created again with the spec's shape", want.name)
			return obs, nil
		}
	}
	if len(found.groups) > 0 {
		if wait, err := p.admit(ctx, ig, want, retiring); wait != nil || err != nil {
			return wait, err
		}
	}
	in := want.createInput()
	for _, ng := range retiring {
		if s := ng.ScalingConfig; s != nil && ng.Status != ekstypes.NodegroupStatusDeleting {
			in.ScalingConfig.DesiredSize = awssdk.Int32(max(awssdk.ToInt32(in.ScalingConfig.DesiredSize), min(awssdk.ToInt32(s.DesiredSize), want.max)))
		}
	}
	out, err := p.aws.EKS.CreateNodegroup(ctx, in)
	switch {
	case isNotFound(err):
		return nil, &providers.SpecError{Field: configPath + ".clusterName", Detail: fmt.Sprintf("EKS cluster %q does not exist", want.cluster)}
	case isInUse(err): // created meanwhile (a retried call whose answer was lost): found next time
		return &providers.Observation{GroupName: want.name, Managed: true, Updating: true, Retiring: groupNames(retiring),
			Lifecycle: lifecycle(ekstypes.CapacityTypes(want.capacityType)),
			Message:   fmt.Sprintf("EKS node group %s exists already; reading it again", want.name)}, nil
	case err != nil:
		return nil, fmt.Errorf("eks CreateNodegroup %s (cluster %s): %w", want.name, want.cluster, err)
	}
	obs := observe(out.Nodegroup, "")
	obs.Retiring = groupNames(retiring)
	if len(retiring) > 0 {
		obs.Updating = true
		obs.Message = replacing(ig, want, retiring, fmt.Sprintf("created %s, waiting for it to be ACTIVE", want.name)) + "; " + obs.Message
	}
	return obs, nil
}

// converge brings target to want in place (tags, then one configuration or
// version update) and, once it is ACTIVE, needs no update and has its
// nodes Ready, deletes the retiring node groups.
func (p *Provisioner) converge(ctx context.Context, ig *v1alpha1.InstanceGroup, want nodegroup, target *ekstypes.Nodegroup, retiring []*ekstypes.Nodegroup) (*providers.Observation, error) {
	want.name = awssdk.ToString(target.NodegroupName)
	switch target.Status {
	case ekstypes.NodegroupStatusCreateFailed:
		return p.recreate(ctx, ig, want, target, retiring)
	}
	var done []string
	if s := target.Status; s == ekstypes.NodegroupStatusActive || s == ekstypes.NodegroupStatusDegraded || s == ekstypes.NodegroupStatusUpdating {
		what, err := syncTags(ctx, p.aws.EKS, target, want.tags)
		if err != nil {
			return nil, err
		}
		if what != "" {
			done = append(done, fmt.Sprintf("updated EKS node group %s: %s", want.name, what))
		}
	}
	if len(retiring) > 0 {
		// A replacement under way goes on only with the slot it took
		// (held across restarts: a Lease).
		if wait, err := p.admit(ctx, ig, want, retiring); wait != nil || err != nil {
			return wait, err
		}
	}
	sent, waiting := "", ""
	if target.Status == ekstypes.NodegroupStatusActive || target.Status == ekstypes.NodegroupStatusDegraded {
		var err error
		var failed *failedUpdate
		switch sent, waiting, err = p.update(ctx, target, want); {
		case errors.As(err, &failed):
			done = append(done, failed.why)
		case err != nil:
			return nil, err
		}
	}
	obs := observe(target, sent)
	obs.Retiring = groupNames(retiring)
	if waiting != "" {
		obs.WaitingForSlot = true
		done = append(done, fmt.Sprintf("update EKS node group %s: %s", want.name, waiting))
	}
	if len(retiring) == 0 {
		if target.Status == ekstypes.NodegroupStatusActive && sent == "" {
			p.reads.Store(readsID(ig), stageSteady, want.shape().hash(), want.name)
		}
		obs.Message = strings.Join(append(done, nonEmpty(obs.Message)...), "; ")
		return obs, nil
	}
	obs.Updating = true
	step, blocked, err := p.retire(ctx, want, target, retiring, sent)
	if err != nil {
		return nil, err
	}
	obs.Blocked = blocked
	obs.Message = strings.Join(append(append([]string{replacing(ig, want, retiring, step)}, done...), nonEmpty(obs.Message)...), "; ")
	return obs, nil
}

// retire deletes the retiring node groups once target is ACTIVE, needs
// no update (sent empty), when Nodes are read every Node of it is counted
// Ready up to its desired size, and the controller has drained the
// retiring node groups' Nodes (providers.Disruptions.DrainNodes of label
// LabelNodegroup, paced by maxUnavailable; not asked for a node group
// already DELETING). EKS's own drain on DeleteNodegroup is not relied on:
// it force-terminates nodes it could not drain within 5 minutes,
// PodDisruptionBudgets or not. It says which step the replacement is at
// and what drain is blocked, if any.
func (p *Provisioner) retire(ctx context.Context, want nodegroup, target *ekstypes.Nodegroup, retiring []*ekstypes.Nodegroup, sent string) (step, blocked string, err error) {
	switch {
	case target.Status != ekstypes.NodegroupStatusActive:
		return fmt.Sprintf("waiting for %s to be ACTIVE (it is %s)", want.name, target.Status), "", nil
	case sent != "":
		return fmt.Sprintf("waiting for the update of %s", want.name), "", nil
	}
	if p.nodes != nil {
		total, ready, err := nodeCount(ctx, p.nodes, want.name)
		if err != nil {
			return "", "", err
		}
		desired := 0
		if s := target.ScalingConfig; s != nil {
			desired = int(awssdk.ToInt32(s.DesiredSize))
		}
		// No Node at all: EKS made the node group ACTIVE once its nodes
		// joined, so none were asked for (or they are not Nodes of this
		// cluster's API, as on an emulator).
		if total > 0 && ready < desired {
			return fmt.Sprintf("waiting for the nodes of %s to be Ready (%d of %d desired Ready)", want.name, ready, desired), "", nil
		}
	}
	waits, blocks, err := drainBeforeDelete(ctx, retiring)
	if err != nil {
		return "", "", err
	}
	if len(waits) > 0 {
		return fmt.Sprintf("%s is ACTIVE; draining %s before deleting: %s", want.name, strings.Join(groupNames(retiring), ", "), strings.Join(waits, "; ")),
			strings.Join(blocks, "; "), nil
	}
	notes, err := deleteNodegroups(ctx, p.aws.EKS, want.cluster, retiring)
	if err != nil {
		return "", "", err
	}
	return strings.Join(append([]string{fmt.Sprintf("%s is ACTIVE; deleting %s (their nodes are drained)", want.name, strings.Join(groupNames(retiring), ", "))}, notes...), "; "), "", nil
}

// admit asks the controller for an upgrade slot (providers.Disruptions
// .Admit) before a replacement starts or goes on. Nil when admitted (or
// no Disruptions is given); else the observation of the group waiting:
// the node group serving now (the first of retiring not DELETING), Active
// as it is, WaitingForSlot, nothing retiring yet unless a replacement had
// started, and the message says what waits.
func (p *Provisioner) admit(ctx context.Context, ig *v1alpha1.InstanceGroup, want nodegroup, retiring []*ekstypes.Nodegroup) (*providers.Observation, error) {
	if ok, err := providers.Admitted(ctx); err != nil || ok {
		return nil, err
	}
	var serving *ekstypes.Nodegroup
	for _, ng := range retiring {
		if ng.Status != ekstypes.NodegroupStatusDeleting {
			serving = ng
			break
		}
	}
	obs := &providers.Observation{GroupName: want.name, Managed: true, Lifecycle: lifecycle(ekstypes.CapacityTypes(want.capacityType))}
	if serving != nil {
		obs = observe(serving, "")
		obs.Updating = false
	}
	obs.WaitingForSlot = true
	obs.Message = replacing(ig, want, retiring, "waiting for an upgrade slot")
	return obs, nil
}

// replacing describes a replacement: the retiring node groups, the new
// one, why (the shape fields that differ from the retiring node group
// serving until now, the first not DELETING) and the step.
func replacing(ig *v1alpha1.InstanceGroup, want nodegroup, retiring []*ekstypes.Nodegroup, step string) string {
	why := ""
	for _, ng := range retiring {
		if ng.Status == ekstypes.NodegroupStatusDeleting {
			continue
		}
		var parts []string
		for _, c := range immutableChanges(ng, want, ig.Spec.EKSManaged.Configuration) {
			parts = append(parts, fmt.Sprintf("%s %s -> %s", c.field, c.have, c.want))
		}
		why = " (" + strings.Join(parts, ", ") + ")"
		break
	}
	return fmt.Sprintf("replacing EKS node group %s with %s%s: %s", strings.Join(groupNames(retiring), ", "), want.name, why, step)
}

func nonEmpty(s string) []string {
	if s == "" {
		return nil
	}
	return []string{s}
}

func lifecycle(c ekstypes.CapacityTypes) string {
	if c == ekstypes.CapacityTypesSpot {
		return v1alpha1.LifecycleSpot
	}
	return v1alpha1.LifecycleNormal
}

// update sends at most one update: the configuration's, else the
// version's. It returns what it changed ("" for nothing). An update EKS
// refuses because another is in progress (ResourceInUseException) counts
// as sent: the group is updating. A version update replaces every node
// (EKS surges, then drains the old ones), so it is sent only with an
// upgrade slot (providers.Disruptions.Admit); without one nothing is sent
// and waiting says what waits. A version update that asks for what the
// node group's last one asked for, which failed (EKS ListUpdates,
// DescribeUpdate), is not sent: a *failedUpdate says why, with EKS's
// errors.
func (p *Provisioner) update(ctx context.Context, have *ekstypes.Nodegroup, want nodegroup) (sent, waiting string, err error) {
	if in, what := configUpdate(have, want); in != nil {
		if _, err := p.aws.EKS.UpdateNodegroupConfig(ctx, in); err != nil && !isInUse(err) {
			return "", "", fmt.Errorf("eks UpdateNodegroupConfig %s (cluster %s: %s): %w", want.name, want.cluster, strings.Join(what, ", "), err)
		}
		return strings.Join(what, ", "), "", nil
	}
	if in, what := versionUpdate(have, want); in != nil {
		// The last update's outcome is advisory: when it cannot be read
		// (an IAM policy without eks:ListUpdates, an emulator without the
		// call) the update is sent as before rather than never.
		history := func() error {
			if last, err := lastVersionUpdate(ctx, p.aws.EKS, &p.versions, want.cluster, want.name); err != nil {
				log.FromContext(ctx).Info("could not read the node group's last version update; sending the update", "nodegroup", want.name, "error", err.Error())
			} else if why := failedAgain(last, p.versions.get(want.cluster+"/"+want.name).forced, in); why != "" {
				return &failedUpdate{why}
			}
			return nil
		}
		// An update this process sent (or read) costs one DescribeUpdate
		// until it ends, none after: its failure is said without a slot.
		// Listing the history (ListUpdates and up to 10 DescribeUpdate)
		// waits for the slot: a group waiting for one is reconciled every
		// poll interval, against EKS's low API limits (review 2026-11-29 N7).
		known := p.versions.get(want.cluster+"/"+want.name).id != ""
		if known {
			if err := history(); err != nil {
				return "", "", err
			}
		}
		if d := providers.DisruptionsFrom(ctx); d != nil {
			ok, err := d.Admit(ctx)
			if err != nil {
				return "", "", err
			}
			if !ok {
				return "", what, nil
			}
		}
		if !known {
			if err := history(); err != nil {
				return "", "", err
			}
		}
		out, err := p.aws.EKS.UpdateNodegroupVersion(ctx, in)
		if err == nil && out.Update != nil {
			p.versions.put(want.cluster+"/"+want.name, sentUpdate{id: awssdk.ToString(out.Update.Id), forced: in.Force})
		}
		if err != nil && !isInUse(err) {
			var invalid *ekstypes.InvalidParameterException
			if errors.As(err, &invalid) {
				return "", "", &providers.SpecError{Field: configPath + ".version",
					Detail: fmt.Sprintf("EKS refused to update node group %s (%s): %s", want.name, what, awssdk.ToString(invalid.Message))}
			}
			return "", "", fmt.Errorf("eks UpdateNodegroupVersion %s (cluster %s: %s): %w", want.name, want.cluster, what, err)
		}
		return what, "", nil
	}
	return "", "", nil
}

// resolve turns the spec's subnet and security group references into ids
// and returns the node role ARN: the spec's (checked to exist) or the
// owned role's (created if missing). What it reads is kept in Reads.
func (p *Provisioner) resolve(ctx context.Context, ig *v1alpha1.InstanceGroup) (refs, error) {
	c := ig.Spec.EKSManaged.Configuration
	gid := readsID(ig)
	var r refs
	var err error
	if r.subnets, err = p.reads.Subnets(ctx, p.aws.EC2, gid, c.Subnets, configPath+".subnets"); err != nil {
		return refs{}, err
	}
	if len(c.SecurityGroups) > 0 {
		if r.sourceSGs, err = p.reads.SecurityGroups(ctx, p.aws.EC2, gid, c.SecurityGroups, configPath+".securityGroups"); err != nil {
			return refs{}, err
		}
	}
	key := "byo\x00" + c.NodeRole
	if c.NodeRole == "" {
		raw, err := json.Marshal(nodeRole(ig, p.opts.NodeRoleCNIPolicy))
		if err != nil {
			return refs{}, err
		}
		key = string(raw)
	}
	if v, ok := p.reads.Load(gid, gid, stageRole, key); ok {
		r.roleARN = v.(string)
		return r, nil
	}
	if c.NodeRole != "" {
		if err := iamrole.CheckRoleARN(ctx, p.aws.IAM, c.NodeRole, configPath+".nodeRole"); err != nil {
			return refs{}, err
		}
		r.roleARN = c.NodeRole
	} else {
		role := nodeRole(ig, p.opts.NodeRoleCNIPolicy)
		role.Adopter = p.adopt
		if r.roleARN, err = iamrole.EnsureOwnedRole(ctx, p.aws.IAM, role); err != nil {
			return refs{}, err
		}
	}
	p.reads.Store(gid, stageRole, key, r.roleARN)
	return r, nil
}

// template returns the launch template version the node group is to use
// (ensureTemplate), read again only when the settings change (or per
// Reads).
func (p *Provisioner) template(ctx context.Context, ig *v1alpha1.InstanceGroup, want nodegroup) (*templateRef, error) {
	gid, settings := readsID(ig), settingsOf(want)
	if v, ok := p.reads.Load(gid, gid, stageTemplate, settings.description()); ok {
		ref := v.(templateRef)
		return &ref, nil
	}
	ref, err := p.ensureTemplate(ctx, ig, want.cluster, settings)
	if err != nil {
		p.reads.Drop(gid, stageTemplate)
		return nil, err
	}
	p.reads.Store(gid, stageTemplate, settings.description(), ref)
	return &ref, nil
}

// Stages of a group's reads (see reads.Reads).
const (
	stageTemplate = "managed-template"
	stageRole     = "managed-role"
	stageSteady   = "managed-active" // the node group ACTIVE alone, by shape hash
)

// observe reports the node group: Active when ACTIVE, Updating while EKS
// creates or updates it or when this call sent an update (sent, a
// description of it), the health issues as the message.
func observe(ng *ekstypes.Nodegroup, sent string) *providers.Observation {
	obs := &providers.Observation{
		GroupName: awssdk.ToString(ng.NodegroupName), RoleARN: awssdk.ToString(ng.NodeRole),
		Managed: true, Active: ng.Status == ekstypes.NodegroupStatusActive,
		Updating:  sent != "" || ng.Status == ekstypes.NodegroupStatusCreating || ng.Status == ekstypes.NodegroupStatusUpdating,
		Lifecycle: lifecycle(ng.CapacityType),
	}
	if s := ng.ScalingConfig; s != nil {
		obs.Min, obs.Max, obs.Desired = int(awssdk.ToInt32(s.MinSize)), int(awssdk.ToInt32(s.MaxSize)), int(awssdk.ToInt32(s.DesiredSize))
	}
	var msgs []string
	if ng.Status != ekstypes.NodegroupStatusActive {
		msgs = append(msgs, fmt.Sprintf("EKS node group %s is %s", obs.GroupName, ng.Status))
	}
	if sent != "" {
		msgs = append(msgs, fmt.Sprintf("updating EKS node group %s: %s", obs.GroupName, sent))
	}
	if ng.Health != nil {
		for _, is := range ng.Health.Issues {
			msgs = append(msgs, fmt.Sprintf("%s: %s", is.Code, awssdk.ToString(is.Message)))
		}
	}
	obs.Message = strings.Join(msgs, "; ")
	return obs
}

// Delete deletes every managed node group tagged for the group (EKS
// ListNodegroups, DescribeNodegroup of the names that can be the group's,
// DeleteNodegroup; the reconciler has drained the group's nodes before,
// see reconciler/delete.go: EKS's own drain force-terminates after 5
// minutes)
// and returns false until none is left, a replacement and the node group
// it replaces alike (an error names a node group that failed to delete,
// which is tried again); then it deletes the node role the group created,
// if any (see iamrole.DeleteOwnedRole), and its launch template (deleteTemplate),
// and returns true. A node group of the
// group's name that another owner tagged is never deleted; a missing
// cluster has no node groups left.
func (p *Provisioner) Delete(ctx context.Context, ig *v1alpha1.InstanceGroup) (bool, error) {
	if configured(ig) != nil {
		return true, nil // nothing could have been created
	}
	cluster := ig.Spec.EKSManaged.Configuration.ClusterName
	names, err := listNames(ctx, p.aws.EKS, cluster)
	if err != nil && !errors.Is(err, errNoCluster) {
		return false, err
	}
	found, err := ownedNodegroups(ctx, p.aws.EKS, p.adopt, cluster, names, ownName(ig), ownership.OwnerOf(ig, cluster))
	if err != nil {
		return false, err
	}
	if len(found.groups) > 0 {
		notes, err := deleteNodegroups(ctx, p.aws.EKS, cluster, found.groups)
		if err != nil {
			return false, err
		}
		if len(notes) > 0 {
			return false, errors.New(strings.Join(notes, "; "))
		}
		return false, nil // gone once no longer listed
	}
	// The created role is deleted whatever nodeRole says now: the owner
	// tag tells whether it is ours.
	if err := iamrole.DeleteOwnedRole(ctx, p.aws.IAM, nodeRole(ig, false)); err != nil { // by name: its policies do not matter
		return false, err
	}
	// The launch template last: no node group uses it any more.
	if err := p.deleteTemplate(ctx, ig, cluster); err != nil {
		return false, err
	}
	p.reads.Forget(readsID(ig))
	return true, nil
}

// describe returns the node group, or nil when it (or its cluster) does
// not exist (EKS DescribeNodegroup).
func describe(ctx context.Context, api awsp.EKSAPI, cluster, name string) (*ekstypes.Nodegroup, error) {
	out, err := api.DescribeNodegroup(ctx, &eks.DescribeNodegroupInput{ClusterName: awssdk.String(cluster), NodegroupName: awssdk.String(name)})
	if isNotFound(err) {
		return nil, nil
	}
	if err != nil {
		return nil, fmt.Errorf("eks DescribeNodegroup %s (cluster %s): %w", name, cluster, err)
	}
	return out.Nodegroup, nil
}

func isNotFound(err error) bool {
	var nf *ekstypes.ResourceNotFoundException
	return err != nil && errors.As(err, &nf)
}

func isInUse(err error) bool {
	var iu *ekstypes.ResourceInUseException
	return err != nil && errors.As(err, &iu)
}
