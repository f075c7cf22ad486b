package app

import (
	"strings"
	"testing"

	"k8s.io/apimachinery/pkg/types"

	"github.com/instancemgr/instance-manager/boundaries/store"
)

func TestBoundariesLoadedCheck(t *testing.T) {
	st := &store.Store{}
	check := boundariesLoaded(st, types.NamespacedName{Namespace: "instance-manager", Name: ConfigMapName})
	if err := check(nil); err == nil || !strings.Contains(err.Error(), "instance-manager/instance-manager has not been loaded yet") {
		t.Fatalf("before the first load: %v; want not ready, naming the ConfigMap", err)
	}
	st.SetValid(nil, "") // no ConfigMap: loaded, nothing in force
	if err := check(nil); err != nil {
		t.Fatalf("after the first load: %v", err)
	}
}
