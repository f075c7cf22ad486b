package webhooks

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"strings"

	admissionv1 "k8s.io/api/admission/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/webhook/admission"

	"github.com/instancemgr/instance-manager/api/v1alpha1"
	"github.com/instancemgr/instance-manager/boundaries"
	"github.com/instancemgr/instance-manager/boundaries/record"
)

// maxReportedGroups caps how many broken InstanceGroups a rejection names.
const maxReportedGroups = 10

// ConfigMapValidator is the validating admission webhook for the boundary
// ConfigMap (BOUNDARIES.md "Bad input gets a clear error"). It rejects a
// ConfigMap that does not parse strictly, a shared rule on an ancestor of
// sensitive paths it does not name (boundaries.Config.AncestorSharings),
// a change that would make any existing InstanceGroup's effective spec
// invalid, naming up to 10 of them, and its deletion while InstanceGroups
// exist (the boundaries would go with it). It warns when a change would
// make groups' kept submissions effective again on sensitive paths the
// boundaries in force replace (boundaries.Resurrected), when it would
// refuse groups' crd strategy templates that the ConfigMap in force admits
// (crdRefusals), and about settings that give tenants more than they seem
// to (boundaries.Config.AdminWarnings).
type ConfigMapValidator struct {
	// Client lists InstanceGroups for the dry run: the manager's cache, so
	// that an admission costs the API server no LIST.
	Client client.Reader
	// ConfigMap is the one boundary ConfigMap; others are allowed untouched.
	ConfigMap types.NamespacedName
	// Cloud, when set, checks the cloud references the new defaults
	// introduce (cluster, subnets, security groups, image, role, profile).
	Cloud CloudChecker
}

// Handle implements admission.Handler.
func (v *ConfigMapValidator) Handle(ctx context.Context, req admission.Request) admission.Response {
	if req.Namespace != v.ConfigMap.Namespace || req.Name != v.ConfigMap.Name {
		return admission.Allowed("not the boundary ConfigMap")
	}
	if req.Operation == admissionv1.Delete {
		return v.deny(ctx)
	}
	if req.Operation != admissionv1.Create && req.Operation != admissionv1.Update {
		return admission.Allowed("")
	}
	cm := &corev1.ConfigMap{}
	if err := json.Unmarshal(req.Object.Raw, cm); err != nil {
		return admission.Errored(http.StatusBadRequest, err)
	}
	cfg, err := boundaries.Parse(cm.Data)
	if err != nil {
		return admission.Denied(fmt.Sprintf("ConfigMap %s is invalid: %v", v.ConfigMap, err))
	}
	if sharings := cfg.AncestorSharings(); len(sharings) > 0 {
		var each []string
		for _, a := range sharings {
			each = append(each, a.String())
		}
		return admission.Denied(fmt.Sprintf("ConfigMap %s is refused: %s. A rule on an ancestor would hand these sensitive paths to every tenant; "+
			"name each one in data.boundaries: in shared to share it, in restricted to keep it the admin's", v.ConfigMap, strings.Join(each, "; ")))
	}
	warnings := cfg.AdminWarnings()
	if action, ok := cm.Annotations[record.AnnotationAction]; ok {
		// A common slip: the action goes on the rollout record.
		warnings = append(warnings, fmt.Sprintf("metadata.annotations[%s]=%q does nothing on the boundary ConfigMap; annotate ConfigMap %s/%s-rollout (the rollout record) instead",
			record.AnnotationAction, action, v.ConfigMap.Namespace, v.ConfigMap.Name))
	}
	// Groups already broken under the ConfigMap being replaced do not
	// block the change: only what this change breaks does.
	var current *boundaries.Config
	if req.Operation == admissionv1.Update {
		old := &corev1.ConfigMap{}
		if err := json.Unmarshal(req.OldObject.Raw, old); err == nil {
			current, _ = boundaries.Parse(old.Data)
		}
	}
	resurrected, err := resurrections(ctx, v.Client, current, cfg, v.ConfigMap.Namespace)
	if err != nil {
		return admission.Errored(http.StatusInternalServerError, fmt.Errorf("ConfigMap %s: checking existing InstanceGroups: %w", v.ConfigMap, err))
	}
	warnings = append(warnings, resurrected...)
	refusedTemplates, err := crdRefusals(ctx, v.Client, current, cfg)
	if err != nil {
		return admission.Errored(http.StatusInternalServerError, fmt.Errorf("ConfigMap %s: checking existing InstanceGroups: %w", v.ConfigMap, err))
	}
	warnings = append(warnings, refusedTemplates...)
	broken, total, err := DryRun(ctx, v.Client, cfg, current, v.ConfigMap.Namespace)
	if err != nil {
		return admission.Errored(http.StatusInternalServerError, fmt.Errorf("ConfigMap %s: checking existing InstanceGroups: %w", v.ConfigMap, err))
	}
	if total > 0 {
		return admission.Denied(fmt.Sprintf("ConfigMap %s would make %d InstanceGroup(s) invalid: %s", v.ConfigMap, total, andMore(broken, total)))
	}
	if v.Cloud != nil {
		groups, err := collectAffected(ctx, v.Client, cfg, v.ConfigMap.Namespace)
		if err != nil {
			return admission.Errored(http.StatusInternalServerError, fmt.Errorf("ConfigMap %s: listing InstanceGroups: %w", v.ConfigMap, err))
		}
		problems, err := withCloudDeadline(ctx, configMapCloudCheckTimeout, func(ctx context.Context) ([]string, error) {
			return checkIntroducedRefs(ctx, v.Cloud, cfg, current, groups)
		})
		if err != nil {
			return admission.Errored(http.StatusServiceUnavailable, fmt.Errorf("ConfigMap %s: could not check its cloud references, nothing was changed; retry: %w", v.ConfigMap, err))
		}
		if len(problems) > 0 {
			return admission.Denied(fmt.Sprintf("ConfigMap %s refers to cloud resources that do not work, nothing was changed: %s", v.ConfigMap, strings.Join(problems, "; ")))
		}
	}
	return admission.Allowed("").WithWarnings(warnings...)
}

// deny answers a DELETE: refused while any InstanceGroup exists.
func (v *ConfigMapValidator) deny(ctx context.Context) admission.Response {
	igs := &v1alpha1.InstanceGroupList{}
	if err := v.Client.List(ctx, igs); err != nil {
		return admission.Errored(http.StatusInternalServerError, fmt.Errorf("ConfigMap %s: listing InstanceGroups: %w", v.ConfigMap, err))
	}
	if len(igs.Items) == 0 {
		return admission.Allowed("")
	}
	var names []string
	for i := range igs.Items {
		if len(names) == maxReportedGroups {
			names = append(names, fmt.Sprintf("and %d more", len(igs.Items)-maxReportedGroups))
			break
		}
		names = append(names, igs.Items[i].Namespace+"/"+igs.Items[i].Name)
	}
	return admission.Denied(fmt.Sprintf("ConfigMap %s holds the boundaries of %d InstanceGroup(s) (%s) and cannot be deleted while they exist; "+
		"delete them first, or edit the ConfigMap instead", v.ConfigMap, len(igs.Items), strings.Join(names, ", ")))
}

// DryRun computes every existing InstanceGroup's effective spec under cfg
// and validates it. It returns "namespace/name: reasons" for at most 10
// groups that cfg makes invalid while current (the boundaries in force; nil
// for none) leaves them valid, and the total number of such groups. Groups
// being deleted are skipped; each Config's excludedNamespaces apply, and
// groups in adminNamespace (the ConfigMap's) get its rules as written. Errors
// come from listing InstanceGroups.
func DryRun(ctx context.Context, c client.Reader, cfg, current *boundaries.Config, adminNamespace string) ([]string, int, error) {
	return reportGroups(ctx, c, func(ig *v1alpha1.InstanceGroup) string {
		reason := dryRunOne(cfg, ig, adminNamespace)
		if reason == "" || dryRunOne(current, ig, adminNamespace) != "" {
			return ""
		}
		return ": " + reason
	})
}

// reportGroups lists the InstanceGroups not being deleted and asks judge
// of each what this ConfigMap change does to it ("" for nothing). It
// returns up to maxReportedGroups entries "namespace/name<what judge
// said>" and how many groups judge named in all. Errors come from listing
// InstanceGroups.
func reportGroups(ctx context.Context, c client.Reader, judge func(*v1alpha1.InstanceGroup) string) ([]string, int, error) {
	igs := &v1alpha1.InstanceGroupList{}
	if err := c.List(ctx, igs); err != nil {
		return nil, 0, err
	}
	var named []string
	total := 0
	for i := range igs.Items {
		ig := &igs.Items[i]
		if ig.DeletionTimestamp != nil {
			continue
		}
		if what := judge(ig); what != "" {
			total++
			if len(named) < maxReportedGroups {
				named = append(named, ig.Namespace+"/"+ig.Name+what)
			}
		}
	}
	return named, total, nil
}

// andMore joins named with "; " and says how many of total it leaves out.
func andMore(named []string, total int) string {
	msg := strings.Join(named, "; ")
	if total > len(named) {
		msg += fmt.Sprintf("; and %d more", total-len(named))
	}
	return msg
}

// dryRunOne returns why the effective spec ig gets under cfg
// (boundaries.Recompute) is invalid, or "".
func dryRunOne(cfg *boundaries.Config, ig *v1alpha1.InstanceGroup, adminNamespace string) string {
	effective, err := boundaries.Recompute(cfg, ig, adminNamespace)
	if err != nil {
		return err.Error()
	}
	spec, err := boundaries.DecodeSpec(effective)
	if err != nil {
		return err.Error()
	}
	candidate := ig.DeepCopy()
	candidate.Spec = *spec
	errs, _ := ValidateInstanceGroup(candidate)
	if errs = append(errs, boundaries.CheckSpellings(effective)...); len(errs) > 0 {
		return errs.ToAggregate().Error()
	}
	return strings.Join(IdentityChanges(ig, &candidate.Spec), "; ")
}

// resurrections returns the admission warning, if any, for the groups whose
// kept submission next makes effective again on sensitive paths that
// current replaces (boundaries.Resurrected): up to 10 groups named with
// their paths, and how many more. Errors come from listing InstanceGroups.
func resurrections(ctx context.Context, c client.Reader, current, next *boundaries.Config, adminNamespace string) ([]string, error) {
	if current == nil {
		return nil, nil
	}
	named, total, err := reportGroups(ctx, c, func(ig *v1alpha1.InstanceGroup) string {
		submitted, err := boundaries.Submitted(ig)
		if err != nil {
			return "" // the dry run reports it
		}
		if paths := boundaries.Resurrected(current, next, submitted, ig.Annotations, ig.Namespace, ig.Namespace == adminNamespace); len(paths) > 0 {
			return " (" + strings.Join(paths, ", ") + ")"
		}
		return ""
	})
	if err != nil || total == 0 {
		return nil, err
	}
	return []string{fmt.Sprintf("this change makes %d InstanceGroup(s) take values their tenants submitted on sensitive paths that the boundaries in force replace "+
		"(kept in the submission by warn mode), at their next admission: %s", total, andMore(named, total))}, nil
}
