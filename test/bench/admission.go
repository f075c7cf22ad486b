package main

import (
	"bytes"
	"context"
	"crypto/tls"
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"sort"
	"sync"
	"syscall"
	"time"

	admissionv1 "k8s.io/api/admission/v1"
	authenticationv1 "k8s.io/api/authentication/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client/fake"
	"sigs.k8s.io/controller-runtime/pkg/webhook/admission"

	jsonpatch "github.com/evanphx/json-patch/v5"

	"github.com/instancemgr/instance-manager/api/v1alpha1"
	"github.com/instancemgr/instance-manager/app"
	"github.com/instancemgr/instance-manager/boundaries"
	"github.com/instancemgr/instance-manager/boundaries/store"
	"github.com/instancemgr/instance-manager/webhooks"
)

// admissionConfigMap is a realistic boundary ConfigMap: the repository's
// example plus conditionals, so that selectors are evaluated per request.
func admissionConfigMap() map[string]string {
	data := exampleBoundaries()
	data["conditionals"] = `- annotationSelector: 'instancemgr.keikoproj.io/os-family = windows'
  defaults:
    spec:
      eks:
        configuration:
          image: ami-windows
- annotationSelector: 'team in (payments, search), tier != batch'
  defaults:
    spec:
      eks:
        configuration:
          labels: {priority: high}
`
	return data
}

// benchAdmission serves the InstanceGroup mutating and validating handlers
// over TLS on loopback (the API server's path to them, minus the network)
// and has `clients` concurrent clients send CREATE reviews of short
// InstanceGroups, alternating mutate and validate, for d. It reports the
// p99 latency of one review, the reviews answered per second and the CPU
// time the process spent per review (getrusage: user + system, both ends
// of the TLS connection and the handlers, as they share this process).
func benchAdmission(clients int, d time.Duration) (p99 time.Duration, rps float64, cpuPerReview time.Duration, err error) {
	cfg, err := boundaries.Parse(admissionConfigMap())
	if err != nil {
		return 0, 0, 0, fmt.Errorf("parsing the benchmark ConfigMap: %w", err)
	}
	st := &store.Store{}
	st.SetValid(cfg, "1")
	kube := fake.NewClientBuilder().WithScheme(app.Scheme()).
		WithObjects(&corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: "team-a"}}).Build()
	cmRef := types.NamespacedName{Namespace: "instance-manager", Name: "instance-manager"}
	mutator := &webhooks.InstanceGroupMutator{Boundaries: st, ControllerUser: "system:serviceaccount:instance-manager:instance-manager", ConfigMap: cmRef}
	validator := &webhooks.InstanceGroupValidator{Boundaries: st, Reader: kube, ConfigMap: cmRef}
	mux := http.NewServeMux()
	mux.Handle(webhooks.PathMutateInstanceGroup, &admission.Webhook{Handler: mutator})
	mux.Handle(webhooks.PathValidateInstanceGroup, &admission.Webhook{Handler: validator})
	srv := httptest.NewUnstartedServer(mux)
	srv.EnableHTTP2 = false
	srv.StartTLS()
	defer srv.Close()

	// The reviews the clients send, made beforehand: a tenant's short
	// group for the mutating webhook, and what the mutating webhook made of
	// it for the validating one.
	const distinct = 200
	bodies := map[string][][]byte{}
	for i := range distinct {
		short, err := json.Marshal(shortInstanceGroup(i))
		if err != nil {
			return 0, 0, 0, err
		}
		req := reviewRequest(i, short)
		resp := mutator.Handle(context.Background(), admission.Request{AdmissionRequest: *req})
		if !resp.Allowed {
			return 0, 0, 0, fmt.Errorf("the mutating webhook refused the benchmark's group: %+v", resp.Result)
		}
		ops, err := json.Marshal(resp.Patches)
		if err != nil {
			return 0, 0, 0, err
		}
		patch, err := jsonpatch.DecodePatch(ops)
		if err != nil {
			return 0, 0, 0, err
		}
		effective, err := patch.Apply(short)
		if err != nil {
			return 0, 0, 0, err
		}
		for path, obj := range map[string][]byte{webhooks.PathMutateInstanceGroup: short, webhooks.PathValidateInstanceGroup: effective} {
			b, err := json.Marshal(admissionv1.AdmissionReview{
				TypeMeta: metav1.TypeMeta{APIVersion: "admission.k8s.io/v1", Kind: "AdmissionReview"},
				Request:  reviewRequest(i, obj),
			})
			if err != nil {
				return 0, 0, 0, err
			}
			bodies[path] = append(bodies[path], b)
		}
	}

	transport := &http.Transport{TLSClientConfig: &tls.Config{InsecureSkipVerify: true}, MaxIdleConnsPerHost: clients} //nolint:gosec // loopback test server
	httpc := &http.Client{Transport: transport, Timeout: 10 * time.Second}
	ctx, cancel := context.WithTimeout(context.Background(), d)
	defer cancel()
	var mu sync.Mutex
	var lat []time.Duration
	var firstErr error
	var wg sync.WaitGroup
	start := time.Now()
	cpu0 := processCPU()
	for c := range clients {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := c; ctx.Err() == nil; i += clients {
				path := webhooks.PathMutateInstanceGroup
				if i%2 == 1 {
					path = webhooks.PathValidateInstanceGroup
				}
				t0 := time.Now()
				err := post(httpc, srv.URL+path, bodies[path][i%distinct])
				mu.Lock()
				lat = append(lat, time.Since(t0))
				mu.Unlock()
				if err != nil {
					mu.Lock()
					if firstErr == nil {
						firstErr = err
					}
					mu.Unlock()
					return
				}
			}
		}()
	}
	wg.Wait()
	elapsed := time.Since(start)
	cpu := processCPU() - cpu0
	if firstErr != nil {
		return 0, 0, 0, firstErr
	}
	return percentile(lat, 0.99), float64(len(lat)) / elapsed.Seconds(), cpu / time.Duration(max(len(lat), 1)), nil
}

// shortInstanceGroup is a tenant's short group, annotated so that the
// ConfigMap's conditionals are evaluated.
func shortInstanceGroup(i int) *v1alpha1.InstanceGroup {
	return &v1alpha1.InstanceGroup{
		TypeMeta:   metav1.TypeMeta{APIVersion: v1alpha1.GroupVersion.String(), Kind: "InstanceGroup"},
		ObjectMeta: metav1.ObjectMeta{Namespace: "team-a", Name: fmt.Sprintf("group-%d", i), Annotations: map[string]string{"team": "payments", "tier": "web"}},
		Spec: v1alpha1.InstanceGroupSpec{EKS: &v1alpha1.EKSSpec{MinSize: 1, MaxSize: 3, Configuration: &v1alpha1.EKSConfiguration{
			InstanceType: "m5.large", Labels: map[string]string{"team": "a"}, Tags: []map[string]string{{"key": "team", "value": "a"}},
		}}},
	}
}

// reviewRequest is a tenant's CREATE of obj (JSON).
func reviewRequest(i int, obj []byte) *admissionv1.AdmissionRequest {
	return &admissionv1.AdmissionRequest{
		UID:       types.UID(fmt.Sprint(i)),
		Kind:      metav1.GroupVersionKind{Group: v1alpha1.GroupVersion.Group, Version: "v1alpha1", Kind: "InstanceGroup"},
		Resource:  metav1.GroupVersionResource{Group: v1alpha1.GroupVersion.Group, Version: "v1alpha1", Resource: "instancegroups"},
		Namespace: "team-a", Name: fmt.Sprintf("group-%d", i), Operation: admissionv1.Create,
		UserInfo: authenticationv1.UserInfo{Username: "alice"}, Object: runtime.RawExtension{Raw: obj},
	}
}

// post sends one AdmissionReview and checks that it was allowed.
func post(c *http.Client, url string, body []byte) error {
	resp, err := c.Post(url, "application/json", bytes.NewReader(body))
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	var review admissionv1.AdmissionReview
	if err := json.NewDecoder(resp.Body).Decode(&review); err != nil {
		return fmt.Errorf("%s: decoding the review: %w", url, err)
	}
	if review.Response == nil || !review.Response.Allowed {
		return fmt.Errorf("%s: review not allowed: %+v", url, review.Response)
	}
	return nil
}

// percentile returns the q-quantile (0..1) of d, nearest rank.
func percentile(d []time.Duration, q float64) time.Duration {
	if len(d) == 0 {
		return 0
	}
	s := append([]time.Duration(nil), d...)
	sort.Slice(s, func(i, j int) bool { return s[i] < s[j] })
	i := int(q*float64(len(s))+0.5) - 1
	return s[max(0, min(i, len(s)-1))]
}

// processCPU is the CPU time (user + system) this process has used
// (getrusage RUSAGE_SELF).
func processCPU() time.Duration {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		return 0
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}
