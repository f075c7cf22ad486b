// Package ownership decides which AWS resources instance-manager may
// change or delete: those whose tags name this cluster and this
// InstanceGroup (namespace/name, and its UID where the resource takes
// tags). Every provisioner and the garbage collector ask it before acting;
// a resource with the expected name but another owner is a *ForeignError
// and is never touched.
package ownership

import (
	"errors"
	"fmt"
	"sort"
	"strings"
	"sync/atomic"

	"k8s.io/apimachinery/pkg/types"

	awsp "github.com/instancemgr/instance-manager/providers/aws"
)

// Tag keys of ownership. Every resource the controller creates carries all
// three (IAM roles, instance profiles, launch templates, Auto Scaling
// groups and their instances, node groups, Fargate profiles, access entries).
const (
	// TagInstanceGroup is "<namespace>/<name>" of the InstanceGroup that
	// created the resource.
	TagInstanceGroup = "instancemgr.keikoproj.io/instancegroup"
	// TagUID is the metadata.uid of that InstanceGroup: a group deleted and
	// created again under the same name is another owner.
	TagUID = "instancemgr.keikoproj.io/uid"
	// TagClusterPrefix + <cluster> = "owned" names the EKS cluster the
	// resource was created for (awsp.ClusterTagKey).
	TagClusterPrefix = awsp.ClusterTagKeyPrefix
	// TagInstallation is the installation of instance-manager that created
	// the resource: the UID of the kube-system Namespace of the Kubernetes
	// cluster it runs in. Two installations sharing an AWS account (and
	// even a cluster name) never take each other's resources.
	TagInstallation = "instancemgr.keikoproj.io/installation"
)

var installation atomic.Value // string

// SetInstallation sets this process's installation id (TagInstallation),
// once at start, before any resource is created.
func SetInstallation(id string) { installation.Store(id) }

// Installation is the id set by SetInstallation, or "".
func Installation() string {
	id, _ := installation.Load().(string)
	return id
}

// Owner identifies an InstanceGroup on one cluster.
type Owner struct {
	Cluster   string
	Namespace string
	Name      string
	UID       types.UID
}

// String is "<namespace>/<name>", the TagInstanceGroup value.
func (o Owner) String() string { return o.Namespace + "/" + o.Name }

// Tags are the ownership tags to put on a resource o creates.
func (o Owner) Tags() map[string]string {
	t := map[string]string{TagInstanceGroup: o.String(), awsp.ClusterTagKey(o.Cluster): "owned"}
	if o.UID != "" {
		t[TagUID] = string(o.UID)
	}
	if id := Installation(); id != "" {
		t[TagInstallation] = id
	}
	return t
}

// Check returns nil when tags (of the resource `kind` called name) mark it
// as o's, else a *ForeignError describing the owner found. A resource is
// o's when its TagInstanceGroup is o, it names no other cluster, and its
// TagUID (when present) is o's UID. Resources made by controller versions
// that did not write TagUID or the cluster tag pass on TagInstanceGroup
// alone (LegacyTagged tells the caller to add the missing tags).
func (o Owner) Check(kind, name string, tags map[string]string) error {
	foreign := &ForeignError{Kind: kind, Name: name, Want: o, Found: Describe(tags)}
	if tags[TagInstanceGroup] != o.String() {
		return foreign
	}
	for k := range tags {
		if strings.HasPrefix(k, TagClusterPrefix) && k != awsp.ClusterTagKey(o.Cluster) {
			return foreign
		}
	}
	if uid := tags[TagUID]; uid != "" && o.UID != "" && uid != string(o.UID) {
		return foreign
	}
	if id := tags[TagInstallation]; id != "" && Installation() != "" && id != Installation() {
		return foreign
	}
	return nil
}

// Missing returns the ownership tags of o that tags lacks (a resource of
// an older controller version that Check accepted).
func (o Owner) Missing(tags map[string]string) map[string]string {
	out := map[string]string{}
	for k, v := range o.Tags() {
		if tags[k] != v {
			out[k] = v
		}
	}
	return out
}

// Describe names the owner that tags record, for messages: "InstanceGroup
// team/web (uid 1234) of cluster prod", or "someone else (it has no
// instance-manager ownership tags)" for a resource someone else made.
func Describe(tags map[string]string) string {
	ig := tags[TagInstanceGroup]
	var clusters []string
	for k := range tags {
		if strings.HasPrefix(k, TagClusterPrefix) {
			clusters = append(clusters, strings.TrimPrefix(k, TagClusterPrefix))
		}
	}
	sort.Strings(clusters)
	if ig == "" && len(clusters) == 0 {
		return "someone else (it has no instance-manager ownership tags)"
	}
	s := "InstanceGroup " + orNone(ig)
	if uid := tags[TagUID]; uid != "" {
		s += " (uid " + uid + ")"
	}
	if id := tags[TagInstallation]; id != "" && id != Installation() {
		s += " of another instance-manager installation (" + id + ")"
	}
	if len(clusters) > 0 {
		s += " of cluster " + strings.Join(clusters, ", ")
	}
	return s
}

func orNone(s string) string {
	if s == "" {
		return "<none>"
	}
	return s
}

// ForeignError says a resource with the name the controller expected
// belongs to someone else; the controller leaves it alone.
type ForeignError struct {
	Kind  string // "Auto Scaling group", "launch template", "IAM role", ...
	Name  string
	Want  Owner
	Found string // Describe of its tags
}

func (e *ForeignError) Error() string {
	return fmt.Sprintf("%s %q exists but belongs to %s, not to InstanceGroup %s of cluster %s; instance-manager will not change or delete it (rename or delete it, or rename the InstanceGroup)",
		e.Kind, e.Name, e.Found, e.Want, e.Want.Cluster)
}

// IsForeign reports whether err is or wraps a *ForeignError.
func IsForeign(err error) bool {
	var fe *ForeignError
	return errors.As(err, &fe)
}

// Reserved reports whether a tag key is the controller's own and may not be
// set from a spec: the ownership tags (instancemgr.keikoproj.io/*), the
// cluster's ownership tag (kubernetes.io/cluster/*) and keys AWS reserves
// (aws:*).
func Reserved(key string) bool {
	k := strings.ToLower(key)
	return strings.HasPrefix(k, "instancemgr.keikoproj.io/") || strings.HasPrefix(k, "kubernetes.io/cluster/") || strings.HasPrefix(k, "aws:")
}

// TagMap turns an AWS SDK tag list (any service's tag type) into a map,
// with key and value reading a tag's fields.
func TagMap[T any](tags []T, key, value func(T) *string) map[string]string {
	out := make(map[string]string, len(tags))
	for _, t := range tags {
		k, v := key(t), value(t)
		if k != nil {
			out[*k] = ""
			if v != nil {
				out[*k] = *v
			}
		}
	}
	return out
}
