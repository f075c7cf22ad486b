package install

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"time"

	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	utilyaml "k8s.io/apimachinery/pkg/util/yaml"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/rest"
)

// CRDDir returns the chart's crds/ directory: the CRDs of this checkout.
func CRDDir() string { return filepath.Join(ChartDir(), "crds") }

var crdResource = schema.GroupVersionResource{Group: "apiextensions.k8s.io", Version: "v1", Resource: "customresourcedefinitions"}

// ApplyCRDs is the upgrade step docs/install.md documents before `helm
// upgrade` (Helm never changes a CRD it installed from crds/):
//
//	kubectl apply --server-side --force-conflicts -f charts/instance-manager/crds/
//
// It server-side applies every CRD of the YAML files in dir as field
// manager "kubectl", taking over the fields Helm's install set, and waits
// up to a minute for each to be Established. It returns their names.
// Errors: a file that is not CRD YAML, the API server refusing one, or a
// CRD not Established in time.
func ApplyCRDs(ctx context.Context, cfg *rest.Config, dir string) ([]string, error) {
	dyn, err := dynamic.NewForConfig(cfg)
	if err != nil {
		return nil, err
	}
	files, err := filepath.Glob(filepath.Join(dir, "*.yaml"))
	if err != nil || len(files) == 0 {
		return nil, fmt.Errorf("no CRD YAML files in %s (%v)", dir, err)
	}
	var names []string
	for _, file := range files {
		f, err := os.Open(file)
		if err != nil {
			return nil, err
		}
		dec := utilyaml.NewYAMLOrJSONDecoder(f, 4096)
		for {
			u := &unstructured.Unstructured{}
			err := dec.Decode(&u.Object)
			if errors.Is(err, io.EOF) {
				break
			}
			if err != nil {
				_ = f.Close()
				return nil, fmt.Errorf("%s: %w", file, err)
			}
			if len(u.Object) == 0 {
				continue
			}
			if u.GetKind() != "CustomResourceDefinition" {
				_ = f.Close()
				return nil, fmt.Errorf("%s holds a %s %q; want CustomResourceDefinitions only", file, u.GetKind(), u.GetName())
			}
			if _, err := dyn.Resource(crdResource).Apply(ctx, u.GetName(), u, metav1.ApplyOptions{FieldManager: "kubectl", Force: true}); err != nil {
				_ = f.Close()
				return nil, fmt.Errorf("server-side applying CRD %s from %s: %w", u.GetName(), file, err)
			}
			names = append(names, u.GetName())
		}
		_ = f.Close()
	}
	for _, name := range names {
		if err := waitEstablished(ctx, dyn, name, time.Minute); err != nil {
			return nil, err
		}
	}
	return names, nil
}

// waitEstablished waits until the CRD's Established condition is True.
func waitEstablished(ctx context.Context, dyn dynamic.Interface, name string, timeout time.Duration) error {
	deadline := time.Now().Add(timeout)
	for {
		u, err := dyn.Resource(crdResource).Get(ctx, name, metav1.GetOptions{})
		if err == nil {
			crd := &apiextensionsv1.CustomResourceDefinition{}
			if err = runtime.DefaultUnstructuredConverter.FromUnstructured(u.Object, crd); err == nil {
				for _, c := range crd.Status.Conditions {
					if c.Type == apiextensionsv1.Established && c.Status == apiextensionsv1.ConditionTrue {
						return nil
					}
				}
				err = errors.New("not Established yet")
			}
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("CRD %s not Established after %s: %v", name, timeout, err)
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(200 * time.Millisecond):
		}
	}
}
