package chaos

import (
	"context"
	"fmt"
	"sort"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/instancemgr/instance-manager/api/v1alpha1"
	"github.com/instancemgr/instance-manager/test/harness"
)

func ensureNamespace(t *testing.T, name string) {
	t.Helper()
	ns := &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: name}}
	if err := admin.Create(context.Background(), ns); err != nil && !apierrors.IsAlreadyExists(err) {
		t.Fatal(err)
	}
}

// shortGroup is a tenant's short InstanceGroup under the fixture's
// boundaries: one node.
func shortGroup(namespace, name, instanceType string) *v1alpha1.InstanceGroup {
	return &v1alpha1.InstanceGroup{
		ObjectMeta: metav1.ObjectMeta{Namespace: namespace, Name: name},
		Spec: v1alpha1.InstanceGroupSpec{EKS: &v1alpha1.EKSSpec{
			MinSize: 1, MaxSize: 1,
			Configuration: &v1alpha1.EKSConfiguration{
				InstanceType: instanceType,
				Labels:       map[string]string{"team": namespace},
			},
		}},
	}
}

func key(ig *v1alpha1.InstanceGroup) string { return ig.Namespace + "/" + ig.Name }

func conditionOf(ig *v1alpha1.InstanceGroup, typ string) *metav1.Condition {
	for i := range ig.Status.Conditions {
		if ig.Status.Conditions[i].Type == typ {
			return &ig.Status.Conditions[i]
		}
	}
	return nil
}

// ready reports whether ig is Ready for its current spec, and if not,
// what it shows.
func ready(ig *v1alpha1.InstanceGroup) (bool, string) {
	if ig.Status.ObservedGeneration != ig.Generation {
		return false, fmt.Sprintf("observed generation %d of %d", ig.Status.ObservedGeneration, ig.Generation)
	}
	c := conditionOf(ig, v1alpha1.ConditionReady)
	if ig.Status.CurrentState == v1alpha1.StateReady && c != nil && c.Status == metav1.ConditionTrue {
		if u := conditionOf(ig, v1alpha1.ConditionUpgrading); u != nil && u.Status == metav1.ConditionTrue {
			return false, "upgrading: " + u.Message
		}
		return true, ""
	}
	msg := ig.Status.CurrentState
	if c != nil {
		msg += ": " + c.Message
	}
	return false, msg
}

// groupsByKey lists the InstanceGroups of the given namespaces.
func groupsByKey(ctx context.Context, namespaces []string) (map[string]*v1alpha1.InstanceGroup, error) {
	out := map[string]*v1alpha1.InstanceGroup{}
	for _, ns := range namespaces {
		list := &v1alpha1.InstanceGroupList{}
		if err := admin.List(ctx, list, client.InNamespace(ns)); err != nil {
			return nil, err
		}
		for i := range list.Items {
			out[key(&list.Items[i])] = &list.Items[i]
		}
	}
	return out, nil
}

// waitGroups polls until done holds for every key, or timeout; it returns
// the keys for which it never held, each with what was seen last.
func waitGroups(ctx context.Context, namespaces, keys []string, timeout time.Duration, done func(key string, ig *v1alpha1.InstanceGroup) (bool, string)) []string {
	deadline := time.Now().Add(timeout)
	var pending []string
	for {
		pending = pending[:0]
		groups, err := groupsByKey(ctx, namespaces)
		for _, k := range keys {
			if err != nil {
				pending = append(pending, k+": listing failed: "+err.Error())
				continue
			}
			if ok, why := done(k, groups[k]); !ok {
				pending = append(pending, k+": "+why)
			}
		}
		if len(pending) == 0 || time.Now().After(deadline) {
			sort.Strings(pending)
			return pending
		}
		time.Sleep(harness.PollInterval * 5)
	}
}

// summarize shortens a list for a failure message.
func summarize(list []string, n int) string {
	if len(list) <= n {
		return strings.Join(list, "\n  ")
	}
	return strings.Join(list[:n], "\n  ") + fmt.Sprintf("\n  … and %d more", len(list)-n)
}

// deleteGroups deletes the groups (keys namespace/name, in namespaces)
// and waits (up to timeout) until they are gone with their cloud
// resources, so that the next test starts from none.
func deleteGroups(t *testing.T, namespaces, keys []string, timeout time.Duration) {
	t.Helper()
	ctx := context.Background()
	for _, k := range keys {
		ns, name, _ := strings.Cut(k, "/")
		ig := &v1alpha1.InstanceGroup{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name}}
		if err := admin.Delete(ctx, ig); err != nil && !apierrors.IsNotFound(err) {
			t.Errorf("deleting %s: %v", k, err)
		}
	}
	if pending := waitGroups(ctx, namespaces, keys, timeout, func(_ string, ig *v1alpha1.InstanceGroup) (bool, string) {
		if ig == nil {
			return true, ""
		}
		_, why := ready(ig)
		return false, "still there: " + why
	}); len(pending) > 0 {
		t.Errorf("%d groups not deleted:\n  %s", len(pending), summarize(pending, 10))
	}
}
