// Package v1alpha1 holds the InstanceGroup API, group instancemgr.keikoproj.io,
// version v1alpha1. Field names and shapes follow the keikoproj
// instance-manager API so manifests written for it are accepted unchanged.
//
// +kubebuilder:object:generate=true
// +groupName=instancemgr.keikoproj.io
package v1alpha1

import (
	"k8s.io/apimachinery/pkg/runtime/schema"
	"sigs.k8s.io/controller-runtime/pkg/scheme"
)

var (
	// GroupVersion is the API group and version of InstanceGroup.
	GroupVersion = schema.GroupVersion{Group: "instancemgr.keikoproj.io", Version: "v1alpha1"}

	// SchemeBuilder registers the types of this package with a runtime.Scheme.
	SchemeBuilder = &scheme.Builder{GroupVersion: GroupVersion}

	// AddToScheme adds the types of this package to a runtime.Scheme.
	AddToScheme = SchemeBuilder.AddToScheme
)

func init() {
	SchemeBuilder.Register(&InstanceGroup{}, &InstanceGroupList{})
}
