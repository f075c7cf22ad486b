// Package fakeeviction makes a fake clientset (k8s.io/client-go/kubernetes/
// fake) answer pod lists by spec.nodeName and labels and the Eviction API
// (pods/eviction, policy/v1) the way the API server does, for unit tests
// of drains: each eviction is refused (429, a PodDisruptionBudget that
// allows no disruption), deletes the pod at once, or starts its graceful
// termination (metadata.deletionTimestamp = now + its grace period), as
// the test says per pod. A pod already terminating is evicted without
// effect, as the API server does (no budget applies to it).
package fakeeviction

import (
	"errors"
	"sync"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/fields"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/runtime"
	kubefake "k8s.io/client-go/kubernetes/fake"
	clienttesting "k8s.io/client-go/testing"
)

// Outcome is what an eviction of a pod that is not terminating does.
type Outcome int

const (
	// Delete deletes the pod at once (its kubelet stops it quickly).
	Delete Outcome = iota
	// Terminate marks it for deletion with its grace period
	// (spec.terminationGracePeriodSeconds, default 30) and leaves it there.
	Terminate
	// Refuse answers 429 TooManyRequests, as a PodDisruptionBudget that
	// allows no disruption does.
	Refuse
	// Fail answers 500 InternalError, as the API server does for a pod
	// that more than one PodDisruptionBudget selects.
	Fail
)

// FailureMessage is the message of a failed eviction (Fail), the API
// server's for a pod under two budgets.
const FailureMessage = "This pod has more than one PodDisruptionBudget, which the eviction subresource does not support."

// RefusalMessage is the message of a refused eviction, the API server's.
const RefusalMessage = "Cannot evict pod as it would violate the pod's disruption budget."

var pods = corev1.SchemeGroupVersion.WithResource("pods")

// Server is the fake clientset Kube with the reactors installed.
type Server struct {
	Kube *kubefake.Clientset
	// AfterEviction, when set, is called after each accepted eviction with
	// the pod as it was (tests: a replacement landing on the same node).
	AfterEviction func(pod *corev1.Pod)

	now     func() time.Time
	outcome func(*corev1.Pod) Outcome
	mu      sync.Mutex
	tried   map[string]int // "namespace/name" -> eviction requests
	nodes   map[string]bool
}

// New returns a Server holding objects whose evictions do what outcome
// says for each pod; now dates graceful terminations.
func New(now func() time.Time, outcome func(*corev1.Pod) Outcome, objects ...runtime.Object) *Server {
	return serve(kubefake.NewClientset(objects...), now, outcome)
}

// NewSimple is New over kubefake.NewSimpleClientset: the plain object
// tracker, without the field management (server-side apply) of
// kubefake.NewClientset, which builds a REST mapper on every write (about
// 7 ms). For simulations that evict thousands of pods (test/bench's fleet
// rollout); apply patches are not served.
func NewSimple(now func() time.Time, outcome func(*corev1.Pod) Outcome, objects ...runtime.Object) *Server {
	return serve(kubefake.NewSimpleClientset(objects...), now, outcome) //nolint:staticcheck // the plain tracker is the point
}

func serve(kube *kubefake.Clientset, now func() time.Time, outcome func(*corev1.Pod) Outcome) *Server {
	s := &Server{Kube: kube, now: now, outcome: outcome, tried: map[string]int{}, nodes: map[string]bool{}}
	s.Kube.Resources = []*metav1.APIResourceList{{GroupVersion: "v1", APIResources: []metav1.APIResource{
		{Name: "pods/eviction", Kind: "Eviction", Group: "policy", Version: "v1"}}}}
	s.Kube.PrependReactor("list", "pods", s.list)
	s.Kube.PrependReactor("create", "pods", s.evict)
	return s
}

// Evictions returns how many evictions of pod ("namespace/name") were
// requested.
func (s *Server) Evictions(pod string) int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.tried[pod]
}

// Nodes returns the nodes of the pods evictions were requested for.
func (s *Server) Nodes() map[string]bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	out := make(map[string]bool, len(s.nodes))
	for k, v := range s.nodes {
		out[k] = v
	}
	return out
}

// Add stores a pod (or any object) as if created.
func (s *Server) Add(obj runtime.Object) error { return s.Kube.Tracker().Add(obj) }

func (s *Server) list(a clienttesting.Action) (bool, runtime.Object, error) {
	la := a.(clienttesting.ListAction)
	objs, err := s.Kube.Tracker().List(pods, corev1.SchemeGroupVersion.WithKind("Pod"), la.GetNamespace())
	if err != nil {
		return true, nil, err
	}
	out := &corev1.PodList{}
	for _, p := range objs.(*corev1.PodList).Items {
		r := la.GetListRestrictions()
		if (r.Fields == nil || r.Fields.Matches(fields.Set{"spec.nodeName": p.Spec.NodeName})) && (r.Labels == nil || r.Labels.Matches(labels.Set(p.Labels))) {
			out.Items = append(out.Items, p)
		}
	}
	return true, out, nil
}

func (s *Server) evict(a clienttesting.Action) (bool, runtime.Object, error) {
	if a.GetSubresource() != "eviction" {
		return false, nil, nil
	}
	name := a.(clienttesting.CreateAction).GetObject().(metav1.Object).GetName()
	obj, err := s.Kube.Tracker().Get(pods, a.GetNamespace(), name)
	if err != nil {
		return true, nil, err
	}
	pod := obj.(*corev1.Pod).DeepCopy()
	s.mu.Lock()
	s.tried[pod.Namespace+"/"+pod.Name]++
	s.nodes[pod.Spec.NodeName] = true
	s.mu.Unlock()
	if pod.DeletionTimestamp != nil {
		return true, nil, nil
	}
	switch s.outcome(pod) {
	case Refuse:
		return true, nil, apierrors.NewTooManyRequests(RefusalMessage, 1)
	case Fail:
		return true, nil, apierrors.NewInternalError(errors.New(FailureMessage))
	case Terminate:
		grace := int64(30)
		if g := pod.Spec.TerminationGracePeriodSeconds; g != nil {
			grace = *g
		}
		marked := pod.DeepCopy()
		at := metav1.NewTime(s.now().Add(time.Duration(grace) * time.Second))
		marked.DeletionTimestamp, marked.DeletionGracePeriodSeconds = &at, &grace
		err = s.Kube.Tracker().Update(pods, marked, pod.Namespace)
	default:
		err = s.Kube.Tracker().Delete(pods, pod.Namespace, pod.Name)
	}
	if err == nil && s.AfterEviction != nil {
		s.AfterEviction(pod)
	}
	return true, nil, err
}
