package app

import (
	"fmt"
	"net/http"

	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/healthz"

	"github.com/instancemgr/instance-manager/boundaries/store"
)

// boundariesLoaded is the readiness check "boundaries": a replica is
// ready (its Service endpoint receives admission requests) only once it
// has read the boundary ConfigMap, or found that there is none. Before
// that its mutating webhook answers 503 "has not been loaded yet", so a
// replica that just started would fail tenants' requests the other
// replicas would admit.
func boundariesLoaded(st *store.Store, configMap types.NamespacedName) healthz.Checker {
	return func(*http.Request) error {
		if !st.Get().Loaded {
			return fmt.Errorf("the boundary ConfigMap %s has not been loaded yet", configMap)
		}
		return nil
	}
}
