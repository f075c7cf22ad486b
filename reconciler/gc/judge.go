package gc

import (
	"fmt"

	"k8s.io/apimachinery/pkg/types"

	"github.com/instancemgr/instance-manager/api/v1alpha1"
	"github.com/instancemgr/instance-manager/providers/aws/ownership"
	"github.com/instancemgr/instance-manager/providers/eks"
	"github.com/instancemgr/instance-manager/providers/eksmanaged"
)

// found is a resource the sweep listed by the cluster's ownership tag.
type found struct {
	kind    string // resourceASG or resourceLaunchTemplate
	name    string
	id      string // launch template id
	cluster string
	tags    map[string]string
}

// Resource types, the "resource" label of the orphans metric.
const (
	resourceASG            = "auto-scaling-group"
	resourceLaunchTemplate = "launch-template"
	resourceRole           = "iam-role"
)

// owner is the InstanceGroup the resource's tags name, ok false when they
// name none (then the resource is never touched).
func (f found) owner() (ownership.Owner, bool) {
	ns, name, ok := splitOwner(f.tags[ownership.TagInstanceGroup])
	if !ok {
		return ownership.Owner{}, false
	}
	return ownership.Owner{Cluster: f.cluster, Namespace: ns, Name: name, UID: types.UID(f.tags[ownership.TagUID])}, true
}

// orphaned returns why f is an orphan given live, the InstanceGroup its
// tags name as found now (nil when it does not exist), or "" when it is
// not: the group is gone, or no longer points at f (another cluster,
// provisioner or name). A group being deleted is not judged: its finalizer
// deletes what it owns. A group deleted and created again under the same
// name (another UID) still pointing at f adopts it (ownership.Adopter, in
// the eks provisioner's Apply): f is not swept from under it; once it no
// longer points at f, f is an orphan.
func orphaned(f found, live *v1alpha1.InstanceGroup) string {
	o, ok := f.owner()
	switch {
	case !ok || ownership.Installation() == "" || f.tags[ownership.TagInstallation] != ownership.Installation():
		return "" // only what this installation made is ever collected
	case live == nil:
		return fmt.Sprintf("InstanceGroup %s no longer exists", o)
	case live.DeletionTimestamp != nil:
		return ""
	}
	why := pointsElsewhere(f, o, live)
	if why == "" && o.UID != "" && live.UID != o.UID {
		// Only the eks provisioner adopts (eks-managed does not yet: what
		// an earlier group left is swept for it, freeing the name).
		eksBuilt := live.Spec.Provisioner == v1alpha1.ProvisionerEKS || live.Spec.Provisioner == v1alpha1.ProvisionerEKSCF
		if _, adoptable := (ownership.Owner{Cluster: f.cluster, Namespace: o.Namespace, Name: o.Name, UID: live.UID}).Adoptable(f.tags); !adoptable || !eksBuilt {
			return fmt.Sprintf("InstanceGroup %s was deleted and created again (uid %s, now %s)", o, o.UID, live.UID)
		}
	}
	return why
}

// pointsElsewhere returns why live (the InstanceGroup f's tags name, not
// being deleted) no longer builds f, or "" when it does.
func pointsElsewhere(f found, o ownership.Owner, live *v1alpha1.InstanceGroup) string {
	p := live.Spec.Provisioner
	if p == v1alpha1.ProvisionerEKSManaged && f.kind == resourceLaunchTemplate {
		// A managed node group's launch template (eksmanaged.TemplateName);
		// the eks-managed provisioner deletes it with the group.
		if m := live.Spec.EKSManaged; m != nil && m.Configuration != nil && m.Configuration.ClusterName == f.cluster && eksmanaged.TemplateName(live) == f.name {
			return ""
		}
	}
	if p != v1alpha1.ProvisionerEKS && p != v1alpha1.ProvisionerEKSCF {
		return fmt.Sprintf("InstanceGroup %s now uses provisioner %q", o, p)
	}
	if live.Spec.EKS == nil || live.Spec.EKS.Configuration == nil {
		return ""
	}
	if c := live.Spec.EKS.Configuration.ClusterName; c != f.cluster {
		return fmt.Sprintf("InstanceGroup %s now builds in cluster %q", o, c)
	}
	if want := eks.GroupName(live); want != f.name {
		return fmt.Sprintf("InstanceGroup %s now uses %s", o, want)
	}
	return ""
}
