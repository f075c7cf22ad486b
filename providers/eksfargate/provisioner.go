// Package eksfargate is the eks-fargate provisioner: an InstanceGroup
// becomes an EKS Fargate profile (and, unless the spec names a pod
// execution role, an IAM role it creates and owns).
//
// A Fargate profile cannot be changed. Its name ends in a hash of the
// fields that shape it (pod execution role, subnets, selectors), so a
// changed spec names a new profile: with an upgrade slot
// (providers.Disruptions.Admit), Apply creates it, waits until it is
// ACTIVE, has the controller evict the older profiles' pods through the
// Eviction API (providers.Disruptions.EvictPods, label
// eks.amazonaws.com/fargate-profile; DeleteFargateProfile would delete
// them outright), and only once they have none deletes the group's older
// profiles (those tagged for the group), so the selected pods always have
// a profile. Tags are applied at creation only.
package eksfargate

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"slices"
	"strings"
	"sync"
	"time"

	"encoding/json"

	awssdk "github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/eks"
	ekstypes "github.com/aws/aws-sdk-go-v2/service/eks/types"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/instancemgr/instance-manager/api/v1alpha1"
	"github.com/instancemgr/instance-manager/providers"
	awsp "github.com/instancemgr/instance-manager/providers/aws"
	"github.com/instancemgr/instance-manager/providers/aws/iamrole"
	"github.com/instancemgr/instance-manager/providers/aws/ownership"
	"github.com/instancemgr/instance-manager/providers/aws/reads"
)

// Provisioner implements providers.Provisioner for provisioner
// "eks-fargate".
type Provisioner struct {
	aws   *awsp.Clients
	opts  Options
	names profileNames
	// failures paces the re-creation of profiles in CREATE_FAILED (its
	// count is in the group's status, see Observation.CreateFailure).
	failures providers.CreateFailures
	// adopt takes over what an earlier InstanceGroup of the same name
	// left (providers.Adopt); its Reader nil: nothing is adopted.
	adopt *ownership.Adopter
}

var _ providers.Provisioner = (*Provisioner)(nil)

// Options tune the provisioner.
type Options struct {
	// Reads keeps what groups read (subnets, the pod execution role, a
	// profile found ACTIVE); default reads.New(0).
	Reads *reads.Reads
	// PollPeriod is how old the shared listing of a cluster's profile
	// names may be for a group whose profile was ACTIVE (a profile deleted
	// by hand is noticed within it). Default 2m.
	PollPeriod time.Duration
	// Reader reads InstanceGroups from the API server itself (the
	// manager's APIReader): the profiles and pod execution role an
	// earlier InstanceGroup of the same name left are adopted once it
	// shows their recorded UID gone (ownership.Adopter). nil: nothing is
	// adopted.
	Reader client.Reader
}

// New returns the eks-fargate provisioner using the EKS, EC2 (subnet
// references) and IAM (pod execution role) clients.
func New(clients *awsp.Clients, opts Options) *Provisioner {
	if opts.Reads == nil {
		opts.Reads = reads.New(0)
	}
	if opts.PollPeriod <= 0 {
		opts.PollPeriod = 2 * time.Minute
	}
	return &Provisioner{aws: clients, opts: opts, adopt: &ownership.Adopter{Reader: opts.Reader}}
}

// Stages of a group's reads (see reads.Reads).
const (
	stageRole   = "fargate-role"
	stageSteady = "fargate-active" // the profile ACTIVE, no other of the group's
)

// readsID identifies the group in Reads.
func readsID(ig *v1alpha1.InstanceGroup) types.UID {
	return types.UID(ownership.GroupTag(ig) + "/" + string(ig.UID))
}

// profileNames is the shared listing of each cluster's profile names.
type profileNames struct {
	mu sync.Mutex
	m  map[string]namesEntry
}

type namesEntry struct {
	names []string
	at    time.Time
}

// get returns the cluster's profile names, listed again when older than
// maxAge.
func (n *profileNames) get(ctx context.Context, api awsp.EKSAPI, cluster string, maxAge time.Duration) ([]string, error) {
	n.mu.Lock()
	e, ok := n.m[cluster]
	n.mu.Unlock()
	if ok && time.Since(e.at) < maxAge {
		return e.names, nil
	}
	names, err := listNames(ctx, api, cluster)
	if err != nil {
		return nil, err
	}
	n.put(cluster, names)
	return names, nil
}

func (n *profileNames) put(cluster string, names []string) {
	n.mu.Lock()
	defer n.mu.Unlock()
	if n.m == nil {
		n.m = map[string]namesEntry{}
	}
	n.m[cluster] = namesEntry{names: names, at: time.Now()}
}

func configured(ig *v1alpha1.InstanceGroup) error {
	if ig.Spec.EKSFargate == nil {
		return &providers.SpecError{Field: specPath, Detail: "required by the eks-fargate provisioner"}
	}
	return nil
}

// Apply ensures the Fargate profile of the current spec exists (EKS
// CreateFargateProfile) and, once it is ACTIVE and the group's other
// profiles have no pod left (evictFirst), deletes them
// (DeleteFargateProfile). While the group has other profiles nothing is
// done without an upgrade slot (admit). It resolves subnets (EC2
// DescribeSubnets) and the pod execution role (IAM GetRole, or the owned
// role's calls, see iamrole.EnsureOwnedRole), both kept in Reads, and reads
// only the group's own profiles: the cluster's profile names
// (ListFargateProfiles), then DescribeFargateProfile for the names that can
// be the group's. A group whose profile was ACTIVE alone is only looked
// for in the shared listing of names (at most PollPeriod old) until its
// spec changes. The profiles and pod execution role an earlier
// InstanceGroup of the same namespace/name, cluster and installation left,
// whose recorded UID no InstanceGroup has any more, are adopted
// (providers.Adopt: retagged with the group's UID, one Normal Event
// Adopted naming them all). Errors: a *providers.SpecError for unknown
// subnets, a missing role or cluster, an *ownership.ForeignError for a
// profile of the same name that another owner tagged; other failures are
// wrapped with the EKS operation and profile name.
func (p *Provisioner) Apply(ctx context.Context, ig *v1alpha1.InstanceGroup) (*providers.Observation, error) {
	ctx, flush := providers.CollectAdoptions(ctx)
	defer flush()
	obs, err := p.apply(ctx, ig)
	if obs != nil && obs.CreateFailure == nil && !obs.Active {
		// Deleted to be created again, being created: the count of
		// failed creations goes on until the profile is ACTIVE.
		obs.CreateFailure = ig.Status.CreateFailure.DeepCopy()
	}
	return obs, err
}

func (p *Provisioner) apply(ctx context.Context, ig *v1alpha1.InstanceGroup) (_ *providers.Observation, err error) {
	if err := configured(ig); err != nil {
		return nil, err
	}
	reads, gid := p.opts.Reads, readsID(ig)
	defer func() {
		if err != nil {
			reads.Drop(gid, stageSteady)
		}
		reads.Done(gid, err)
	}()
	f := ig.Spec.EKSFargate
	subnets, err := reads.Subnets(ctx, p.aws.EC2, gid, f.Subnets, specPath+".subnets")
	if err != nil {
		return nil, err
	}
	roleARN, err := p.role(ctx, ig, gid)
	if err != nil {
		return nil, err
	}
	s := newShape(roleARN, subnets, f.Selectors)
	name := profileName(ig, s)
	own := ownName(ig)
	if _, ok := reads.Load(gid, gid, stageSteady, name); ok {
		listed, err := p.names.get(ctx, p.aws.EKS, f.ClusterName, p.opts.PollPeriod)
		if err == nil && slices.Equal(slices.DeleteFunc(slices.Clone(listed), func(n string) bool { return !own(n) }), []string{name}) {
			return &providers.Observation{GroupName: name, RoleARN: roleARN, Managed: true, Active: true}, nil
		}
		reads.Drop(gid, stageSteady) // gone, or another profile of the group appeared: look
	}
	listed, err := listNames(ctx, p.aws.EKS, f.ClusterName)
	if errors.Is(err, errNoCluster) {
		return nil, &providers.SpecError{Field: specPath + ".clusterName", Detail: fmt.Sprintf("EKS cluster %q does not exist", f.ClusterName)}
	}
	if err != nil {
		return nil, err
	}
	p.names.put(f.ClusterName, listed)
	owned, takenBy, err := ownedProfiles(ctx, p.aws.EKS, p.adopt, f.ClusterName, listed, own, ownership.OwnerOf(ig, f.ClusterName), name)
	if err != nil {
		return nil, err
	}
	if takenBy != nil {
		return nil, taken(name, f.ClusterName, *takenBy, ig)
	}
	cur, old := split(owned, name)
	obs := &providers.Observation{GroupName: name, RoleARN: roleARN, Managed: true}
	if len(old) > 0 {
		// A replacement starts, or goes on, only with an upgrade slot.
		if wait, err := admit(ctx, name, roleARN, old); wait != nil || err != nil {
			return wait, err
		}
	}
	if cur == nil {
		cur, err = p.create(ctx, ig, name, s, subnets)
		if err != nil {
			return nil, err
		}
		if cur == nil { // EKS is busy with another profile of the cluster
			obs.Updating = true
			obs.Message = fmt.Sprintf("waiting to create Fargate profile %s: EKS creates or deletes one profile of cluster %s at a time", name, f.ClusterName)
			return obs, nil
		}
	}

	var notes []string
	switch cur.Status {
	case ekstypes.FargateProfileStatusActive:
		obs.Active = true
		if len(old) == 0 {
			reads.Store(gid, stageSteady, name, true)
		}
		if len(old) > 0 {
			obs.Updating = true
			notes = append(notes, fmt.Sprintf("replacing Fargate profile(s) %s with %s", strings.Join(names(old), ", "), name))
			evicted, blocked, err := evictFirst(ctx, old)
			if err != nil {
				return nil, err
			}
			obs.Blocked = blocked
			if len(evicted) == 0 {
				more, err := deleteProfiles(ctx, p.aws.EKS, f.ClusterName, old)
				if err != nil {
					return nil, err
				}
				notes = append(notes, more...)
			}
			notes = append(notes, evicted...)
		}
	case ekstypes.FargateProfileStatusCreating:
		obs.Updating = true
		notes = append(notes, fmt.Sprintf("Fargate profile %s is CREATING", name))
	case ekstypes.FargateProfileStatusDeleting:
		// Someone else is deleting it; it is created again once gone.
		obs.Updating = true
		notes = append(notes, fmt.Sprintf("Fargate profile %s is being DELETED outside instance-manager; it will be created again", name))
	case ekstypes.FargateProfileStatusCreateFailed:
		note, rec, deleting, err := p.recreate(ctx, ig, f.ClusterName, cur)
		if err != nil {
			return nil, err
		}
		obs.CreateFailure = rec
		obs.Updating = deleting // it is created again once gone
		notes = append(notes, note)
		if len(old) > 0 {
			notes = append(notes, fmt.Sprintf("the previous profile(s) %s are kept meanwhile", strings.Join(names(old), ", ")))
		}
	default: // DELETE_FAILED or a state this version does not know
		notes = append(notes, fmt.Sprintf("Fargate profile %s is in unexpected state %s (%s); the previous profile(s) are kept", name, cur.Status, issues(cur)))
	}
	if len(old) > 0 {
		// The stall timeout's marker: the step; the evictions are
		// counted by the controller's drains.
		obs.Progress = fmt.Sprintf("replacing Fargate profile(s) %s with %s (%s)", strings.Join(names(old), ", "), name, cur.Status)
	}
	obs.Message = strings.Join(notes, "; ")
	return obs, nil
}

// create creates the profile (EKS CreateFargateProfile) and returns it;
// nil when EKS refuses because another profile of the cluster is being
// created or deleted (ResourceInUseException with no profile of that
// name). A profile of that name that appeared meanwhile is returned when
// it is ours and is a *providers.SpecError otherwise.
func (p *Provisioner) create(ctx context.Context, ig *v1alpha1.InstanceGroup, name string, s shape, subnets []string) (*ekstypes.FargateProfile, error) {
	f := ig.Spec.EKSFargate
	tags := map[string]string{}
	for k, v := range f.Tags {
		tags[k] = v
	}
	maps.Copy(tags, ownership.OwnerOf(ig, f.ClusterName).Tags()) // last: a spec tag cannot replace them
	out, err := p.aws.EKS.CreateFargateProfile(ctx, &eks.CreateFargateProfileInput{
		ClusterName: awssdk.String(f.ClusterName), FargateProfileName: awssdk.String(name),
		PodExecutionRoleArn: awssdk.String(s.RoleARN), Subnets: s.Subnets, Selectors: s.selectors(), Tags: tags,
	})
	switch {
	case err == nil:
		return out.FargateProfile, nil
	case isNotFound(err):
		return nil, &providers.SpecError{Field: specPath + ".clusterName", Detail: fmt.Sprintf("EKS cluster %q does not exist", f.ClusterName)}
	case isInUse(err):
		got, derr := describe(ctx, p.aws.EKS, f.ClusterName, name)
		if derr != nil || got == nil {
			return nil, derr
		}
		if _, err := providers.Adopt(ctx, p.adopt, ownership.OwnerOf(ig, f.ClusterName), "Fargate profile", name, got.Tags, retagProfile(p.aws.EKS, got)); err != nil {
			return nil, err
		}
		return got, nil
	}
	return nil, fmt.Errorf("eks CreateFargateProfile %s (cluster %s): %w", name, f.ClusterName, err)
}

// taken is the error for a profile of the group's name owned by another.
func taken(name, cluster, owner string, ig *v1alpha1.InstanceGroup) error {
	return &ownership.ForeignError{Kind: "Fargate profile", Name: name, Want: ownership.OwnerOf(ig, cluster), Found: owner}
}

// split separates the profile named name from the others.
func split(profiles []ekstypes.FargateProfile, name string) (cur *ekstypes.FargateProfile, old []ekstypes.FargateProfile) {
	for i := range profiles {
		if awssdk.ToString(profiles[i].FargateProfileName) == name {
			cur = &profiles[i]
		} else {
			old = append(old, profiles[i])
		}
	}
	return cur, old
}

func names(profiles []ekstypes.FargateProfile) []string {
	out := make([]string, 0, len(profiles))
	for _, p := range profiles {
		out = append(out, awssdk.ToString(p.FargateProfileName))
	}
	return out
}

// role returns the pod execution role's ARN: the spec's (checked to exist,
// IAM GetRole) or the owned role's (iamrole.EnsureOwnedRole), kept in Reads.
func (p *Provisioner) role(ctx context.Context, ig *v1alpha1.InstanceGroup, gid types.UID) (string, error) {
	f := ig.Spec.EKSFargate
	key := "byo\x00" + f.PodExecutionRoleArn
	if f.PodExecutionRoleArn == "" {
		raw, err := json.Marshal(podRole(ig))
		if err != nil {
			return "", err
		}
		key = string(raw)
	}
	if v, ok := p.opts.Reads.Load(gid, gid, stageRole, key); ok {
		return v.(string), nil
	}
	roleARN := f.PodExecutionRoleArn
	var err error
	if roleARN != "" {
		err = iamrole.CheckRoleARN(ctx, p.aws.IAM, roleARN, specPath+".podExecutionRoleArn")
	} else {
		role := podRole(ig)
		role.Adopter = p.adopt
		roleARN, err = iamrole.EnsureOwnedRole(ctx, p.aws.IAM, role)
	}
	if err != nil {
		return "", err
	}
	p.opts.Reads.Store(gid, stageRole, key, roleARN)
	return roleARN, nil
}

// Delete deletes every Fargate profile tagged for the group (EKS
// ListFargateProfiles, DescribeFargateProfile of the names that can be the
// group's, DeleteFargateProfile) and
// returns false until none is left (an error names a profile that failed
// to delete, which is tried again); then it deletes the pod execution role
// the group created, if any (see iamrole.DeleteOwnedRole), and returns true.
// A missing cluster has no profiles left.
func (p *Provisioner) Delete(ctx context.Context, ig *v1alpha1.InstanceGroup) (bool, error) {
	if configured(ig) != nil {
		return true, nil // nothing could have been created
	}
	cluster := ig.Spec.EKSFargate.ClusterName
	listed, err := listNames(ctx, p.aws.EKS, cluster)
	if err != nil && !errors.Is(err, errNoCluster) {
		return false, err
	}
	owned, _, err := ownedProfiles(ctx, p.aws.EKS, p.adopt, cluster, listed, ownName(ig), ownership.OwnerOf(ig, cluster), "")
	if err != nil {
		return false, err
	}
	if len(owned) > 0 {
		notes, err := deleteProfiles(ctx, p.aws.EKS, cluster, owned)
		if err != nil {
			return false, err
		}
		if len(notes) > 0 {
			return false, errors.New(strings.Join(notes, "; "))
		}
		return false, nil // gone once no longer listed
	}
	// The created role is deleted whatever podExecutionRoleArn says now:
	// the owner tag tells whether it is ours.
	if err := iamrole.DeleteOwnedRole(ctx, p.aws.IAM, podRole(ig)); err != nil {
		return false, err
	}
	p.opts.Reads.Forget(readsID(ig))
	return true, nil
}
