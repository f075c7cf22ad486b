package reconciler

import (
	"strings"

	"k8s.io/apimachinery/pkg/api/equality"
	"k8s.io/apimachinery/pkg/types"

	"github.com/instancemgr/instance-manager/api/v1alpha1"
)

// equalStatus ignores condition transition times, which SetStatusCondition
// only changes with the status.
func equalStatus(a, b *v1alpha1.InstanceGroup) bool {
	return equality.Semantic.DeepEqual(a.Status, b.Status)
}

func joinKeys(keys []types.NamespacedName) string {
	s := make([]string, len(keys))
	for i, k := range keys {
		s[i] = k.String()
	}
	return strings.Join(s, ", ")
}
