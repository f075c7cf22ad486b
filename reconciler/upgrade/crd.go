package upgrade

import (
	"context"
	"encoding/json"
	"fmt"
	"strings"

	"github.com/tidwall/gjson"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/client-go/tools/events"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/instancemgr/instance-manager/api/v1alpha1"
	"github.com/instancemgr/instance-manager/boundaries"
	"github.com/instancemgr/instance-manager/boundaries/crdtemplate"
	"github.com/instancemgr/instance-manager/boundaries/store"
	"github.com/instancemgr/instance-manager/providers"
)

// Labels on resources submitted by the crd strategy.
const (
	LabelStrategyGroup   = "instancemgr.keikoproj.io/instancegroup"
	LabelTemplateVersion = "instancemgr.keikoproj.io/template-version"
)

// Event reasons of the crd strategy.
const (
	ReasonCRDSubmitted = "UpgradeResourceSubmitted"
	ReasonCRDSucceeded = "UpgradeResourceSucceeded"
	ReasonCRDFailed    = "UpgradeResourceFailed"
	ReasonCRDMissing   = "UpgradeKindMissing"
)

// CRDStrategy hands a rotation to a custom resource: it renders
// spec.strategy.crd.spec (YAML with ${...} placeholders, crdtemplate),
// submits it
// once per launch template version, and follows the string at
// statusJSONPath (gjson syntax; the seed's leading-dot form is accepted)
// until it equals statusSuccessString or statusFailureString (compared
// case-insensitively). concurrencyPolicy decides what happens to a resource
// still running for an older version: forbid waits, replace deletes it,
// allow lets both run. A failed resource is deleted and resubmitted up to
// maxRetries times (default 3, -1 forever).
//
// Tenants write the template, so the strategy is confined (issues 11 and
// 25): the object is created in the group's namespace only, of a
// namespaced kind the boundary ConfigMap's crdStrategy.allowedKinds names
// (none unless the admin opts in), with only the fields the admin lets
// tenants set, none its controller executes and the group's own Auto
// Scaling group where it names one (crdtemplate.Prepare), with an
// ownerReference to the group; only objects carrying that ownerReference
// are ever deleted or replaced. Rendering is substitution, bounded in size
// by construction.
type CRDStrategy struct {
	Client   client.Client
	Recorder events.EventRecorder
	// Boundaries holds the allowed kinds; nil allows none.
	Boundaries *store.Store
}

// owned reports whether o carries an ownerReference to ig (by UID).
func owned(o client.Object, ig *v1alpha1.InstanceGroup) bool {
	for _, r := range o.GetOwnerReferences() {
		if r.UID == ig.UID && r.Kind == "InstanceGroup" {
			return true
		}
	}
	return false
}

// Step advances the crd strategy for ig; it may change
// ig.Status.StrategyResourceName and StrategyRetryCount, which the caller
// persists. Errors: a template that does not render, a kind that is not
// served (or whose plural differs from crdName), API errors, and running
// out of retries.
func (s *CRDStrategy) Step(ctx context.Context, ig *v1alpha1.InstanceGroup, obs *providers.Observation) (Progress, error) {
	p := Counted(obs)
	c := ig.Spec.Strategy.CRD
	if c == nil {
		return p, fmt.Errorf("spec.strategy.crd: required for strategy type crd")
	}
	var cfg *boundaries.Config
	if s.Boundaries != nil {
		cfg = s.Boundaries.Get().Config
	}
	tmpl, err := crdtemplate.Prepare(ig, cfg)
	if err != nil {
		return p, err
	}
	// The placeholders stand for the group's cloud names as observed now,
	// not as status says (status is not trusted as input).
	desired, err := tmpl.Render(crdtemplate.Values{
		Name: ig.Name, Namespace: ig.Namespace,
		ScalingGroupName: obs.GroupName, LaunchTemplateName: obs.LaunchTemplateName, LatestTemplateVersion: obs.LatestTemplateVersion,
	})
	if err != nil {
		return p, err
	}
	version := obs.LatestTemplateVersion
	labels := desired.GetLabels()
	if labels == nil {
		labels = map[string]string{}
	}
	labels[LabelStrategyGroup] = ig.Name
	labels[LabelTemplateVersion] = version
	desired.SetLabels(labels)
	desired.SetNamespace(ig.Namespace)
	desired.SetOwnerReferences([]metav1.OwnerReference{{
		APIVersion: v1alpha1.GroupVersion.String(), Kind: "InstanceGroup", Name: ig.Name, UID: ig.UID, Controller: ptr.To(true),
	}})
	gvk := desired.GroupVersionKind()
	mapping, err := s.Client.RESTMapper().RESTMapping(gvk.GroupKind(), gvk.Version)
	if err != nil {
		s.Recorder.Eventf(ig, nil, corev1.EventTypeWarning, ReasonCRDMissing, "Upgrade", "%s is not served by the API server: %v", gvk, err)
		return p, fmt.Errorf("spec.strategy.crd.spec: kind %s is not served by the API server (is the CRD %s installed?): %w", gvk, c.CRDName, err)
	}
	if mapping.Scope.Name() != meta.RESTScopeNameNamespace {
		return p, fmt.Errorf("spec.strategy.crd.spec: kind %s is cluster-scoped; the crd strategy creates namespaced objects in the group's namespace only", gvk.Kind)
	}
	if c.CRDName != "" && !strings.EqualFold(mapping.Resource.Resource, c.CRDName) && !strings.EqualFold(mapping.Resource.GroupResource().String(), c.CRDName) {
		return p, fmt.Errorf("spec.strategy.crd.crdName %q does not match the resource %q of kind %s", c.CRDName, mapping.Resource.Resource, gvk.Kind)
	}

	list := &unstructured.UnstructuredList{}
	list.SetGroupVersionKind(gvk.GroupVersion().WithKind(gvk.Kind + "List"))
	if err := s.Client.List(ctx, list, client.InNamespace(desired.GetNamespace()), client.MatchingLabels{LabelStrategyGroup: ig.Name}); err != nil {
		return p, fmt.Errorf("listing %s of InstanceGroup %s: %w", gvk.Kind, ig.Name, err)
	}
	var current *unstructured.Unstructured
	var running []*unstructured.Unstructured
	for i := range list.Items {
		item := &list.Items[i]
		if item.GetDeletionTimestamp() != nil || !owned(item, ig) {
			// Not ours (a label is no proof): never followed, replaced or deleted.
			continue
		}
		if item.GetLabels()[LabelTemplateVersion] == version {
			current = item
			continue
		}
		if statusOf(item, c) == "" {
			running = append(running, item)
		}
	}
	if current != nil {
		return s.follow(ctx, ig, current, p, Leaving(obs))
	}
	policy := strings.ToLower(c.ConcurrencyPolicy)
	if len(running) > 0 {
		switch policy {
		case v1alpha1.ConcurrencyReplace:
			for _, old := range running {
				if err := s.Client.Delete(ctx, old); client.IgnoreNotFound(err) != nil {
					return p, fmt.Errorf("replacing %s %s: %w", gvk.Kind, old.GetName(), err)
				}
			}
		case v1alpha1.ConcurrencyAllow:
		default: // forbid
			p.Message = fmt.Sprintf("waiting for %s %s (an earlier upgrade) to finish; concurrencyPolicy forbid", gvk.Kind, running[0].GetName())
			return p, nil
		}
	}
	// A fixed name may still be taken by a finished resource of an older
	// version: it is replaced.
	if name := desired.GetName(); name != "" {
		old := &unstructured.Unstructured{}
		old.SetGroupVersionKind(gvk)
		if err := s.Client.Get(ctx, client.ObjectKey{Namespace: desired.GetNamespace(), Name: name}, old); err == nil {
			if !owned(old, ig) {
				return p, fmt.Errorf("spec.strategy.crd.spec: %s %s/%s exists and is not owned by InstanceGroup %s; it is left alone (choose another name, or generateName)",
					gvk.Kind, desired.GetNamespace(), name, ig.Name)
			}
			if old.GetDeletionTimestamp() == nil {
				if err := s.Client.Delete(ctx, old); client.IgnoreNotFound(err) != nil {
					return p, err
				}
			}
			p.Message = fmt.Sprintf("waiting for the previous %s %s to be deleted", gvk.Kind, name)
			return p, nil
		} else if !apierrors.IsNotFound(err) {
			return p, err
		}
	}
	if err := s.Client.Create(ctx, desired); err != nil {
		return p, fmt.Errorf("submitting %s for InstanceGroup %s: %w", gvk.Kind, ig.Name, err)
	}
	ig.Status.StrategyResourceName = desired.GetName()
	s.Recorder.Eventf(ig, nil, corev1.EventTypeNormal, ReasonCRDSubmitted, "Upgrade",
		"Submitted %s %s/%s for launch template version %s", gvk.Kind, desired.GetNamespace(), desired.GetName(), version)
	p.Message = fmt.Sprintf("submitted %s %s", gvk.Kind, desired.GetName())
	return p, nil
}

// follow reads the status of res, the resource submitted for the latest
// version, with p the group's progress and leaving its drifted instances
// being terminated (Leaving).
func (s *CRDStrategy) follow(ctx context.Context, ig *v1alpha1.InstanceGroup, res *unstructured.Unstructured, p Progress, leaving []string) (Progress, error) {
	c := ig.Spec.Strategy.CRD
	ig.Status.StrategyResourceName = res.GetName()
	switch statusOf(res, c) {
	case "success":
		// The resource's controller replaced the instances itself, and the
		// listing may predate its work (or Auto Scaling still holds the old
		// instances in Terminating:Wait while they are drained): the group
		// is done when the cloud says so, not the resource.
		if p.Updated < p.Total {
			p.Message = fmt.Sprintf("%s %s reports %q; waiting for the group's instances to run launch template version %s (%d of %d do)",
				res.GetKind(), res.GetName(), c.StatusSuccessString, res.GetLabels()[LabelTemplateVersion], p.Updated, p.Total)
			return p, nil
		}
		if len(leaving) > 0 {
			p.Message = fmt.Sprintf("%s %s reports %q; %s", res.GetKind(), res.GetName(), c.StatusSuccessString, leavingMessage(leaving))
			return p, nil
		}
		if ig.Status.StrategyRetryCount != 0 || ig.Status.CurrentState == v1alpha1.StateUpgrading {
			s.Recorder.Eventf(ig, nil, corev1.EventTypeNormal, ReasonCRDSucceeded, "Upgrade", "%s %s succeeded", res.GetKind(), res.GetName())
		}
		ig.Status.StrategyRetryCount = 0
		p.Done = true
		return p, nil
	case "failure":
		max := v1alpha1.DefaultCRDRetries
		if c.MaxRetries != nil {
			max = *c.MaxRetries
		}
		if max >= 0 && ig.Status.StrategyRetryCount >= max {
			s.Recorder.Eventf(ig, nil, corev1.EventTypeWarning, ReasonCRDFailed, "Upgrade",
				"%s %s failed; no retries left (maxRetries %d)", res.GetKind(), res.GetName(), max)
			return p, fmt.Errorf("upgrade resource %s %s failed after %d retries; delete it to retry", res.GetKind(), res.GetName(), ig.Status.StrategyRetryCount)
		}
		// The count is stored before the failed resource goes: the
		// caller's status write may lose to a newer version of the group
		// (it tolerates that and recomputes), and a count lost after the
		// delete would resubmit past maxRetries.
		before := ig.DeepCopy()
		ig.Status.StrategyRetryCount++
		if err := s.Client.Status().Patch(ctx, ig, client.MergeFromWithOptions(before, client.MergeFromWithOptimisticLock{})); err != nil {
			ig.Status.StrategyRetryCount--
			return p, fmt.Errorf("recording retry %d of %s %s before resubmitting: %w", ig.Status.StrategyRetryCount+1, res.GetKind(), res.GetName(), err)
		}
		s.Recorder.Eventf(ig, nil, corev1.EventTypeWarning, ReasonCRDFailed, "Upgrade",
			"%s %s failed; resubmitting (retry %d)", res.GetKind(), res.GetName(), ig.Status.StrategyRetryCount)
		if err := s.Client.Delete(ctx, res); client.IgnoreNotFound(err) != nil {
			return p, err
		}
		p.Message = fmt.Sprintf("%s %s failed; resubmitting", res.GetKind(), res.GetName())
		return p, nil
	default:
		p.Message = fmt.Sprintf("waiting for %s %s to report %q at %s", res.GetKind(), res.GetName(), c.StatusSuccessString, c.StatusJSONPath)
		return p, nil
	}
}

// statusOf returns "success", "failure" or "" (running) for res.
func statusOf(res *unstructured.Unstructured, c *v1alpha1.CRDUpgradeStrategy) string {
	raw, err := json.Marshal(res.Object)
	if err != nil {
		return ""
	}
	v := gjson.GetBytes(raw, strings.TrimPrefix(c.StatusJSONPath, ".")).String()
	switch {
	case v == "":
		return ""
	case strings.EqualFold(v, c.StatusSuccessString):
		return "success"
	case strings.EqualFold(v, c.StatusFailureString):
		return "failure"
	}
	return ""
}
