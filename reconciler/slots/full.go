package slots

import "k8s.io/apimachinery/pkg/types"

// Full reports whether a group of namespace may not take an upgrade
// slot while the groups held hold one each: true when len(held) reaches
// max() (the cluster-wide cap: --max-concurrent-upgrades or the boundary
// ConfigMap's rollout.maxConcurrentUpgrades), or when the holders of
// namespace reach perNamespace(namespace) (the namespace's quota
// maxConcurrentUpgrades, so that one tenant cannot hold every slot). A
// limit of 0 or less, or a nil function, is no limit. Every Keeper
// judges with it, so the cap means the same whichever keeps the slots.
func Full(held []types.NamespacedName, namespace string, max func() int, perNamespace func(string) int) bool {
	if max != nil {
		if m := max(); m > 0 && len(held) >= m {
			return true
		}
	}
	if perNamespace == nil {
		return false
	}
	m := perNamespace(namespace)
	if m <= 0 {
		return false
	}
	n := 0
	for _, k := range held {
		if k.Namespace == namespace && k.Name != "" {
			n++
		}
	}
	return n >= m
}
