package eks

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"time"

	awssdk "github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/eks"
	ekstypes "github.com/aws/aws-sdk-go-v2/service/eks/types"

	"github.com/instancemgr/instance-manager/providers"
	awsp "github.com/instancemgr/instance-manager/providers/aws"
)

// clusters caches EKS DescribeCluster answers: the endpoint, CA, version
// and authentication mode change rarely and every group of a cluster needs
// them.
type clusters struct {
	api awsp.EKSAPI
	ttl time.Duration
	now func() time.Time

	mu    sync.Mutex
	cache map[string]clusterEntry
}

type clusterEntry struct {
	info ClusterInfo
	at   time.Time
}

// get returns the cluster's information from EKS DescribeCluster (cached
// for ttl). A missing cluster is a *providers.SpecError on clusterName.
func (c *clusters) get(ctx context.Context, name string) (ClusterInfo, error) {
	c.mu.Lock()
	e, ok := c.cache[name]
	c.mu.Unlock()
	if ok && c.now().Sub(e.at) < c.ttl {
		return e.info, nil
	}
	out, err := c.api.DescribeCluster(ctx, &eks.DescribeClusterInput{Name: awssdk.String(name)})
	if err != nil {
		var nf *ekstypes.ResourceNotFoundException
		if errors.As(err, &nf) {
			return ClusterInfo{}, &providers.SpecError{Field: "spec.eks.configuration.clusterName",
				Detail: fmt.Sprintf("EKS cluster %q does not exist in this account and region", name)}
		}
		return ClusterInfo{}, fmt.Errorf("eks DescribeCluster %s: %w", name, err)
	}
	cl := out.Cluster
	info := ClusterInfo{Name: name, Endpoint: awssdk.ToString(cl.Endpoint), Version: awssdk.ToString(cl.Version), AuthenticationMode: "CONFIG_MAP"}
	if cl.CertificateAuthority != nil {
		info.CertificateAuthority = awssdk.ToString(cl.CertificateAuthority.Data)
	}
	if cl.KubernetesNetworkConfig != nil {
		info.ServiceCIDR = awssdk.ToString(cl.KubernetesNetworkConfig.ServiceIpv4Cidr)
	}
	if cl.AccessConfig != nil && cl.AccessConfig.AuthenticationMode != "" {
		info.AuthenticationMode = string(cl.AccessConfig.AuthenticationMode)
	}
	c.mu.Lock()
	if c.cache == nil {
		c.cache = map[string]clusterEntry{}
	}
	c.cache[name] = clusterEntry{info: info, at: c.now()}
	c.mu.Unlock()
	return info, nil
}
