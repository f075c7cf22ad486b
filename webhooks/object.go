package webhooks

import (
	"encoding/json"
	"fmt"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"

	"github.com/instancemgr/instance-manager/api/v1alpha1"
)

// object is an admitted object kept as decoded JSON, so that what the
// tenant wrote (and did not write) survives untouched by Go defaults.
type object map[string]any

func decodeObject(raw []byte) (object, error) {
	var o object
	if err := json.Unmarshal(raw, &o); err != nil {
		return nil, fmt.Errorf("the object is not valid JSON: %w", err)
	}
	if o == nil {
		return nil, fmt.Errorf("the request carries no object")
	}
	return o, nil
}

func (o object) metadata() map[string]any {
	md, _ := o["metadata"].(map[string]any)
	if md == nil {
		md = map[string]any{}
		o["metadata"] = md
	}
	return md
}

func (o object) name() string {
	md := o.metadata()
	if n, _ := md["name"].(string); n != "" {
		return n
	}
	if g, _ := md["generateName"].(string); g != "" {
		return g + "*"
	}
	return "<unnamed>"
}

func (o object) annotations() map[string]string {
	out := map[string]string{}
	a, _ := o.metadata()["annotations"].(map[string]any)
	for k, v := range a {
		if s, ok := v.(string); ok {
			out[k] = s
		}
	}
	return out
}

func (o object) setAnnotation(key, value string) {
	md := o.metadata()
	a, _ := md["annotations"].(map[string]any)
	if a == nil {
		a = map[string]any{}
		md["annotations"] = a
	}
	a[key] = value
}

func (o object) deleteAnnotation(key string) {
	if a, _ := o.metadata()["annotations"].(map[string]any); a != nil {
		delete(a, key)
	}
}

// deleting reports whether metadata.deletionTimestamp is set.
func (o object) deleting() bool {
	ts, _ := o.metadata()["deletionTimestamp"].(string)
	return ts != ""
}

func (o object) spec() map[string]any {
	s, _ := o["spec"].(map[string]any)
	return s
}

func (o object) setSpec(spec map[string]any) {
	if spec == nil {
		spec = map[string]any{}
	}
	o["spec"] = spec
}

// reference is what Events about the object point at; the UID is absent on
// CREATE, which the Events API accepts.
func (o object) reference(namespace string) *corev1.ObjectReference {
	md := o.metadata()
	uid, _ := md["uid"].(string)
	rv, _ := md["resourceVersion"].(string)
	return &corev1.ObjectReference{
		APIVersion: v1alpha1.GroupVersion.String(), Kind: "InstanceGroup",
		Namespace: namespace, Name: o.name(), UID: types.UID(uid), ResourceVersion: rv,
	}
}
