package app

import (
	"flag"
	"slices"
	"strings"
	"time"

	ctrl "sigs.k8s.io/controller-runtime"

	"github.com/instancemgr/instance-manager/boundaries"
	"github.com/instancemgr/instance-manager/boundaries/store"
	awsp "github.com/instancemgr/instance-manager/providers/aws"
	"github.com/instancemgr/instance-manager/providers/aws/resolve"
	"github.com/instancemgr/instance-manager/webhooks"
)

// LeastPrivilege are the settings that keep the controller's AWS identity
// from being borrowed by tenants (docs/security.md, "IAM permissions of the
// controller").
type LeastPrivilege struct {
	// ClusterName is the EKS cluster this installation manages node groups
	// of; groups naming another cluster are refused at admission. Empty:
	// any cluster (the behaviour before the flag existed), with a warning
	// at start.
	ClusterName string
	// AdditionalClusterNames are further clusters the admin lets this
	// installation manage (cross-cluster management is opt-in).
	AdditionalClusterNames []string
	// IAMPath is the path of every IAM role and instance profile the
	// controller creates (default awsp.DefaultIAMPath).
	IAMPath string
	// IAMPermissionsBoundary is the managed policy ARN set as permissions
	// boundary on every role the controller creates.
	IAMPermissionsBoundary string
	// NodeRoleCNIPolicy keeps AmazonEKS_CNI_Policy on the node roles the
	// controller creates (see iamrole.CNIPolicy), for clusters whose VPC CNI
	// still takes its ENI rights from the node role. Off: the VPC CNI
	// needs its own role (IRSA or EKS Pod Identity for aws-node).
	NodeRoleCNIPolicy bool
}

func (l *LeastPrivilege) bindFlags(fs *flag.FlagSet) {
	fs.StringVar(&l.ClusterName, "cluster-name", "", "EKS cluster whose node groups this installation manages; InstanceGroups naming another cluster are refused at admission (empty: any cluster, not recommended).")
	fs.Func("additional-cluster-names", "Comma-separated EKS clusters this installation may manage besides --cluster-name (cross-cluster management, opt-in).", func(v string) error {
		for _, c := range strings.Split(v, ",") {
			if c = strings.TrimSpace(c); c != "" {
				l.AdditionalClusterNames = append(l.AdditionalClusterNames, c)
			}
		}
		return nil
	})
	fs.StringVar(&l.IAMPath, "iam-path", awsp.DefaultIAMPath, "IAM path of every role and instance profile the controller creates; the controller's IAM policy allows creating and passing roles under it only.")
	fs.BoolVar(&l.NodeRoleCNIPolicy, "node-role-cni-policy", false, "Attach AmazonEKS_CNI_Policy to the node roles the controller creates (left off a group with the irsa-enabled annotation), for clusters whose VPC CNI (aws-node) still uses the node role: every pod that reaches the node's credentials then has the CNI's ENI rights. Off (default): give aws-node its own role through IRSA or EKS Pod Identity before upgrading, as the policy is detached from existing created roles.")
	fs.StringVar(&l.IAMPermissionsBoundary, "iam-permissions-boundary", "", "ARN of the managed policy set as permissions boundary on every role the controller creates (the shipped controller IAM policy refuses CreateRole without it).")
}

// clusters returns the clusters admission accepts; empty: any.
func (l LeastPrivilege) clusters() []string {
	if l.ClusterName == "" && len(l.AdditionalClusterNames) == 0 {
		return nil
	}
	var out []string
	if l.ClusterName != "" {
		out = append(out, l.ClusterName)
	}
	return append(out, l.AdditionalClusterNames...)
}

// clusterAllowed is the EKS client's guard (awsp.ClusterGuard): nil (any
// cluster) without --cluster-name, else the flags' clusters and the
// boundary ConfigMap's allowlists.clusters in force.
func (l LeastPrivilege) clusterAllowed(st *store.Store) func(string) bool {
	own := l.clusters()
	if len(own) == 0 {
		return nil
	}
	return func(name string) bool {
		if slices.Contains(own, name) {
			return true
		}
		if cfg := st.Get().Config; cfg != nil {
			listed, written, _ := cfg.Allowlists.List(boundaries.AllowClusters)
			return written && slices.Contains(listed, name)
		}
		return false
	}
}

// roleLimits validates and returns the limits of created roles.
func (l LeastPrivilege) roleLimits() (awsp.RoleLimits, error) {
	r := awsp.RoleLimits{Path: l.IAMPath, PermissionsBoundary: l.IAMPermissionsBoundary}
	if r.Path == "" {
		r.Path = awsp.DefaultIAMPath
	}
	return r, r.Validate()
}

// allowlists returns the admission check of allowlists and clusters, and
// warns when the controller is not pinned to a cluster. An image's owner
// is looked up through clients into references, the resolver's cache
// (one DescribeImages per distinct AMI a minute, shared with refcheck).
func (l LeastPrivilege) allowlists(opts Options, clients *awsp.Clients, references *resolve.Cache, st *store.Store) *webhooks.Allowlists {
	if l.ClusterName == "" {
		ctrl.Log.WithName("setup").Info("WARNING: --cluster-name is not set: InstanceGroups may name any EKS cluster this controller's AWS identity can reach; set it (chart value clusterName)")
	}
	return &webhooks.Allowlists{Boundaries: st, ConfigNamespace: opts.ConfigNamespace, Clusters: l.clusters(),
		Images: resolve.Images{Resolver: resolve.Resolver{EC2: clients.EC2, Cache: references}, Fresh: resolve.Within(time.Minute)}}
}
