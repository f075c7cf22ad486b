// Package eksmanaged is the eks-managed provisioner: an InstanceGroup
// becomes an EKS managed node group (and, unless the spec names a node
// role, an IAM role it creates and owns). AWS launches, rotates and
// drains the nodes; the provisioner creates the node group, keeps its
// scaling, labels and taints in step with the spec (UpdateNodegroupConfig)
// and its Kubernetes/AMI release version when the spec sets one
// (UpdateNodegroupVersion), one update at a time.
//
// Fields EKS fixes at creation (node role, subnets, instance types, AMI
// type, disk size, remote access, capacity type) are not replaced: a
// change is reported as a *providers.SpecError naming the field, and the
// group must be recreated (or the value restored). A field the spec leaves
// empty is EKS's choice and is not compared. Tags are applied at creation
// only. An empty version or releaseVersion is EKS's choice at creation
// and is not followed afterwards: set them to upgrade.
package eksmanaged

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strings"

	awssdk "github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/eks"
	ekstypes "github.com/aws/aws-sdk-go-v2/service/eks/types"
	"k8s.io/apimachinery/pkg/types"

	"github.com/instancemgr/instance-manager/api/v1alpha1"
	"github.com/instancemgr/instance-manager/providers"
	awsp "github.com/instancemgr/instance-manager/providers/aws"
	eksprov "github.com/instancemgr/instance-manager/providers/eks"
)

// Provisioner implements providers.Provisioner for provisioner
// "eks-managed". Every Apply reads the node group (EKS DescribeNodegroup):
// EKS has no shared listing of node group states. The references and the
// node role are kept in Reads.
type Provisioner struct {
	aws   *awsp.Clients
	reads *eksprov.Reads
}

var _ providers.Provisioner = (*Provisioner)(nil)

// New returns the eks-managed provisioner using the EKS, EC2 (subnet and
// security group references) and IAM (node role) clients; reads keeps what
// groups read (nil: eks.NewReads(0)).
func New(clients *awsp.Clients, reads *eksprov.Reads) *Provisioner {
	if reads == nil {
		reads = eksprov.NewReads(0)
	}
	return &Provisioner{aws: clients, reads: reads}
}

// readsID identifies the group in Reads.
func readsID(ig *v1alpha1.InstanceGroup) types.UID {
	return types.UID(eksprov.Owner(ig) + "/" + string(ig.UID))
}

func configured(ig *v1alpha1.InstanceGroup) error {
	if ig.Spec.EKSManaged == nil || ig.Spec.EKSManaged.Configuration == nil {
		return &providers.SpecError{Field: configPath, Detail: "required by the eks-managed provisioner"}
	}
	return nil
}

// Apply creates the node group (EKS CreateNodegroup) or converges an
// existing one: configuration first (UpdateNodegroupConfig), then version
// (UpdateNodegroupVersion), never while EKS reports it CREATING, UPDATING
// or DELETING, and at most one update per call. References are resolved
// first (EC2 DescribeSubnets, DescribeSecurityGroups; IAM GetRole or the
// owned role's calls, see eks.EnsureOwnedRole). Errors: a
// *providers.SpecError for unknown references, a missing cluster, a node
// group of that name not tagged for this group, or a change of an
// immutable field; other failures are wrapped with the EKS operation and
// node group name.
func (p *Provisioner) Apply(ctx context.Context, ig *v1alpha1.InstanceGroup) (_ *providers.Observation, err error) {
	if err := configured(ig); err != nil {
		return nil, err
	}
	defer func() { p.reads.Done(readsID(ig), err) }()
	c := ig.Spec.EKSManaged.Configuration
	r, err := p.resolve(ctx, ig)
	if err != nil {
		return nil, err
	}
	want, err := desiredNodegroup(ig, r)
	if err != nil {
		return nil, err
	}
	have, err := describe(ctx, p.aws.EKS, want.cluster, want.name)
	if err != nil {
		return nil, err
	}
	if have == nil {
		out, err := p.aws.EKS.CreateNodegroup(ctx, want.createInput())
		if err != nil {
			if isNotFound(err) {
				return nil, &providers.SpecError{Field: configPath + ".clusterName", Detail: fmt.Sprintf("EKS cluster %q does not exist", want.cluster)}
			}
			return nil, fmt.Errorf("eks CreateNodegroup %s (cluster %s): %w", want.name, want.cluster, err)
		}
		return observe(out.Nodegroup, ""), nil
	}
	if err := eksprov.OwnerOf(ig, want.cluster).Check("EKS node group", want.name, have.Tags); err != nil {
		return nil, err
	}
	if changes := immutableChanges(have, want, c); len(changes) > 0 {
		return nil, immutableError(want.name, changes)
	}
	if have.Status != ekstypes.NodegroupStatusActive && have.Status != ekstypes.NodegroupStatusDegraded {
		return observe(have, ""), nil // not updatable now: CREATING, UPDATING, DELETING or failed
	}
	sent, err := p.update(ctx, have, want)
	if err != nil {
		return nil, err
	}
	return observe(have, sent), nil
}

// update sends at most one update: the configuration's, else the
// version's. It returns what it changed ("" for nothing). An update EKS
// refuses because another is in progress (ResourceInUseException) counts
// as sent: the group is updating.
func (p *Provisioner) update(ctx context.Context, have *ekstypes.Nodegroup, want nodegroup) (string, error) {
	if in, what := configUpdate(have, want); in != nil {
		if _, err := p.aws.EKS.UpdateNodegroupConfig(ctx, in); err != nil && !isInUse(err) {
			return "", fmt.Errorf("eks UpdateNodegroupConfig %s (cluster %s: %s): %w", want.name, want.cluster, strings.Join(what, ", "), err)
		}
		return strings.Join(what, ", "), nil
	}
	if in, what := versionUpdate(have, want); in != nil {
		if _, err := p.aws.EKS.UpdateNodegroupVersion(ctx, in); err != nil && !isInUse(err) {
			var invalid *ekstypes.InvalidParameterException
			if errors.As(err, &invalid) {
				return "", &providers.SpecError{Field: configPath + ".version",
					Detail: fmt.Sprintf("EKS refused to update node group %s (%s): %s", want.name, what, awssdk.ToString(invalid.Message))}
			}
			return "", fmt.Errorf("eks UpdateNodegroupVersion %s (cluster %s: %s): %w", want.name, want.cluster, what, err)
		}
		return what, nil
	}
	return "", nil
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
		raw, err := json.Marshal(nodeRole(ig))
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
		if err := eksprov.CheckRoleARN(ctx, p.aws.IAM, c.NodeRole, configPath+".nodeRole"); err != nil {
			return refs{}, err
		}
		r.roleARN = c.NodeRole
	} else if r.roleARN, err = eksprov.EnsureOwnedRole(ctx, p.aws.IAM, nodeRole(ig)); err != nil {
		return refs{}, err
	}
	p.reads.Store(gid, stageRole, key, r.roleARN)
	return r, nil
}

// stageRole is the node role's entry in Reads.
const stageRole = "managed-role"

// observe reports the node group: Active when ACTIVE, Updating while EKS
// creates or updates it or when this call sent an update (sent, a
// description of it), the health issues as the message.
func observe(ng *ekstypes.Nodegroup, sent string) *providers.Observation {
	obs := &providers.Observation{
		GroupName: awssdk.ToString(ng.NodegroupName), RoleARN: awssdk.ToString(ng.NodeRole),
		Managed: true, Active: ng.Status == ekstypes.NodegroupStatusActive,
		Updating:  sent != "" || ng.Status == ekstypes.NodegroupStatusCreating || ng.Status == ekstypes.NodegroupStatusUpdating,
		Lifecycle: v1alpha1.LifecycleNormal,
	}
	if ng.CapacityType == ekstypes.CapacityTypesSpot {
		obs.Lifecycle = v1alpha1.LifecycleSpot
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

// Delete deletes the node group (EKS DeleteNodegroup) and returns false
// until EKS no longer knows it (DescribeNodegroup: ResourceNotFound); then
// it deletes the node role the group created, if any (see
// eks.DeleteOwnedRole), and returns true. A node group not tagged for this
// group is not deleted: that is an error naming it.
func (p *Provisioner) Delete(ctx context.Context, ig *v1alpha1.InstanceGroup) (bool, error) {
	if configured(ig) != nil {
		return true, nil // nothing could have been created
	}
	cluster, name := ig.Spec.EKSManaged.Configuration.ClusterName, nodegroupName(ig)
	ng, err := describe(ctx, p.aws.EKS, cluster, name)
	if err != nil {
		return false, err
	}
	if ng != nil {
		if eksprov.OwnerOf(ig, cluster).Check("EKS node group", name, ng.Tags) != nil {
			ng = nil // someone else's node group of that name: never ours to delete
		}
	}
	if ng != nil {
		if ng.Status == ekstypes.NodegroupStatusDeleting {
			return false, nil
		}
		_, err := p.aws.EKS.DeleteNodegroup(ctx, &eks.DeleteNodegroupInput{ClusterName: awssdk.String(cluster), NodegroupName: awssdk.String(name)})
		if err != nil && !isNotFound(err) && !isInUse(err) {
			return false, fmt.Errorf("eks DeleteNodegroup %s (cluster %s): %w", name, cluster, err)
		}
		return false, nil // gone once DescribeNodegroup says so
	}
	// The created role is deleted whatever nodeRole says now: the owner
	// tag tells whether it is ours.
	if err := eksprov.DeleteOwnedRole(ctx, p.aws.IAM, nodeRole(ig)); err != nil {
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
