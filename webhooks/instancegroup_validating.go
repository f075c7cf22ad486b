package webhooks

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"strings"

	admissionv1 "k8s.io/api/admission/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/validation/field"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/webhook/admission"

	"github.com/instancemgr/instance-manager/api/v1alpha1"
	"github.com/instancemgr/instance-manager/boundaries"
	"github.com/instancemgr/instance-manager/boundaries/store"
)

// InstanceGroupValidator is the validating admission webhook for
// InstanceGroups: it rejects an effective spec that cannot be built (see
// ValidateInstanceGroup), provenance annotations that are missing or not
// what the mutating webhook wrote, and, with Boundaries set, what breaks
// tenant confinement (tenancy.go): a final spec that differs from the
// boundaries on a restricted path, a crd template outside the group's
// namespace or kinds, Fargate selectors naming other namespaces, a quota
// exceeded, spec changes to a group being deleted, and, with Allowlists
// set, AWS identities and data the admin has not allowed (allowlist.go),
// a tenant's change of a label a rollout wave selects on
// (wavelabels.go), and a tenant's rollout choice the admin does not allow
// (tenantrollout.go).
type InstanceGroupValidator struct {
	// Boundaries is the last valid boundary ConfigMap; nil skips the
	// boundary, crd, Fargate and quota checks (unit tests of the rest).
	Boundaries *store.Store
	// Reader lists InstanceGroups for the quotas: the manager's cache, so
	// that an admission costs the API server no LIST. The cache may lag
	// behind a create of a moment ago; the reconciler re-checks the quotas
	// before it builds a group (instancegroup.QuotaCheck).
	Reader client.Reader
	// ConfigMap names the boundary ConfigMap; its namespace is the
	// admin's, like the ConfigMap's excludedNamespaces.
	ConfigMap types.NamespacedName
	// Mapper, when set, tells whether the crd strategy's kind is
	// namespaced.
	Mapper meta.RESTMapper
	// Cloud, when set, checks the cloud references the tenant sets
	// (cluster, subnets, security groups, image and its architecture
	// against the instance types, role, profile) when they are new.
	Cloud CloudChecker
	// Allowlists, when set, refuses AWS identities and data the admin has
	// not allowed, and clusters other than the controller's.
	Allowlists *Allowlists
	// ControllerUser is the controller's username; its requests may
	// change any label.
	ControllerUser string
	// Authority says whether a requester may write the labels rollout
	// waves select on (whoever may update the boundary ConfigMap); nil
	// refuses every tenant's change of them (wavelabels.go).
	Authority BoundaryAuthority
}

// Handle implements admission.Handler.
func (v *InstanceGroupValidator) Handle(ctx context.Context, req admission.Request) admission.Response {
	if req.Operation != admissionv1.Create && req.Operation != admissionv1.Update {
		return admission.Allowed("")
	}
	obj, err := decodeObject(req.Object.Raw)
	if err != nil {
		return admission.Errored(http.StatusBadRequest, err)
	}
	ig, err := toInstanceGroup(obj)
	if err != nil {
		return admission.Denied(fmt.Sprintf("InstanceGroup %s/%s: %v", req.Namespace, obj.name(), err))
	}
	if req.Operation == admissionv1.Update {
		old, err := decodeObject(req.OldObject.Raw)
		if err != nil {
			return admission.Errored(http.StatusBadRequest, err)
		}
		if old.deleting() || ig.DeletionTimestamp != nil {
			// Metadata (finalizer removal) goes through; the spec of a
			// group being deleted is what its deletion cleans up after.
			if !boundaries.SameJSON(old.spec(), obj.spec()) {
				return admission.Denied(fmt.Sprintf("InstanceGroup %s/%s is being deleted: spec changes are refused (only metadata such as finalizers may change)", req.Namespace, obj.name()))
			}
			return admission.Allowed("")
		}
	}
	errs, warnings := ValidateInstanceGroup(ig)
	errs = append(errs, validateProvenance(ig.Annotations)...)
	errs = append(errs, boundaries.CheckSpellings(obj.spec())...)
	var old *v1alpha1.InstanceGroup
	if req.Operation == admissionv1.Update {
		old = &v1alpha1.InstanceGroup{}
		if err := json.Unmarshal(req.OldObject.Raw, old); err == nil {
			for _, why := range IdentityChanges(old, &ig.Spec) {
				errs = append(errs, field.Forbidden(field.NewPath("spec"), why))
			}
			warnings = append(warnings, replacementWarnings(old, &ig.Spec)...)
		}
	}
	if v.Boundaries != nil {
		var oldLabels map[string]string
		if old != nil {
			oldLabels = old.Labels
		}
		more, err := v.waveLabels(ctx, v.Boundaries.Get().Config, req.UserInfo, req.Namespace, oldLabels, ig.Labels)
		if err != nil {
			return admission.Errored(http.StatusServiceUnavailable, fmt.Errorf("InstanceGroup %s/%s: could not tell whether its rollout-wave labels may change; retry: %w", req.Namespace, ig.Name, err))
		}
		errs = append(errs, more...)
		var oldAnnotations map[string]string
		if old != nil {
			oldAnnotations = old.Annotations
		}
		more, warned, err := v.rolloutChoice(ctx, v.Boundaries.Get().Config, req.UserInfo, req.Namespace, oldAnnotations, ig.Annotations)
		if err != nil {
			return admission.Errored(http.StatusServiceUnavailable, fmt.Errorf("InstanceGroup %s/%s: could not tell whether its rollout choice may change; retry: %w", req.Namespace, ig.Name, err))
		}
		errs, warnings = append(errs, more...), append(warnings, warned...)
	}
	if v.Boundaries != nil && len(errs) == 0 {
		more, err := v.tenancy(ctx, obj, ig, old)
		if err != nil {
			return admission.Errored(http.StatusInternalServerError, fmt.Errorf("InstanceGroup %s/%s: %w", req.Namespace, ig.Name, err))
		}
		errs = append(errs, more...)
	}
	if v.Allowlists != nil {
		errs = append(errs, v.Allowlists.Check(ctx, ig)...)
	}
	if len(errs) == 0 && v.Cloud != nil {
		problems, err := withCloudDeadline(ctx, instanceGroupCloudCheckTimeout, func(ctx context.Context) ([]string, error) {
			return tenantRefProblems(ctx, v.Cloud, ig, old)
		})
		if err != nil {
			return admission.Errored(http.StatusServiceUnavailable, fmt.Errorf("InstanceGroup %s/%s: could not check its cloud references; retry: %w", req.Namespace, ig.Name, err))
		}
		if len(problems) > 0 {
			return admission.Denied(fmt.Sprintf("InstanceGroup %s/%s refers to cloud resources that do not work: %s", req.Namespace, ig.Name, strings.Join(problems, "; "))).WithWarnings(warnings...)
		}
	}
	if len(errs) > 0 {
		return admission.Denied(fmt.Sprintf("InstanceGroup %s/%s is invalid: %s", req.Namespace, ig.Name, errs.ToAggregate().Error())).WithWarnings(warnings...)
	}
	return admission.Allowed("").WithWarnings(warnings...)
}

func toInstanceGroup(obj object) (*v1alpha1.InstanceGroup, error) {
	spec, err := boundaries.DecodeSpec(obj.spec())
	if err != nil {
		return nil, err
	}
	raw, err := json.Marshal(map[string]any{"metadata": obj.metadata()})
	if err != nil {
		return nil, err
	}
	ig := &v1alpha1.InstanceGroup{}
	if err := json.Unmarshal(raw, ig); err != nil {
		return nil, fmt.Errorf("metadata: %w", err)
	}
	ig.Spec = *spec
	return ig, nil
}

func validateProvenance(a map[string]string) field.ErrorList {
	path := field.NewPath("metadata", "annotations")
	var errs field.ErrorList
	raw, ok := a[v1alpha1.AnnotationSubmittedSpec]
	if !ok {
		return append(errs, field.Required(path.Key(v1alpha1.AnnotationSubmittedSpec),
			"written by the instance-manager mutating webhook; is its MutatingWebhookConfiguration installed?"))
	}
	var m map[string]any
	if err := json.Unmarshal([]byte(raw), &m); err != nil {
		errs = append(errs, field.Invalid(path.Key(v1alpha1.AnnotationSubmittedSpec), raw, "must be the JSON object of the submitted spec"))
	}
	if a[v1alpha1.AnnotationBoundariesHash] == "" {
		errs = append(errs, field.Required(path.Key(v1alpha1.AnnotationBoundariesHash), "written by the instance-manager mutating webhook"))
	}
	return errs
}
