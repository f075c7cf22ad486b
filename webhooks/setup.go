package webhooks

import (
	"net/http"

	admissionregistrationv1 "k8s.io/api/admissionregistration/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/webhook"
	"sigs.k8s.io/controller-runtime/pkg/webhook/admission"

	"github.com/instancemgr/instance-manager/api/v1alpha1"
)

// Paths the webhook server serves.
const (
	PathMutateInstanceGroup   = "/mutate-instancegroup"
	PathValidateInstanceGroup = "/validate-instancegroup"
	PathValidateConfigMap     = "/validate-boundaries-configmap"
)

// Names of the webhook configurations and of their webhooks.
const (
	MutatingConfigurationName   = "instance-manager"
	ValidatingConfigurationName = "instance-manager"
	mutateIGWebhook             = "instancegroups.mutate.instancemgr.keikoproj.io"
	validateIGWebhook           = "instancegroups.validate.instancemgr.keikoproj.io"
	validateCMWebhook           = "boundaries.validate.instancemgr.keikoproj.io"
)

// Register serves the three handlers on the manager's webhook server,
// each behind door (nil: none), then behind limits (buckets of its own per
// webhook), and charging the AWS calls it makes to the request's user
// (AWSBudget).
func Register(server webhook.Server, door *FrontDoor, limits AdmissionLimits, m *InstanceGroupMutator, v *InstanceGroupValidator, c *ConfigMapValidator) {
	for path, h := range map[string]admission.Handler{PathMutateInstanceGroup: m, PathValidateInstanceGroup: v, PathValidateConfigMap: c} {
		var served http.Handler = &admission.Webhook{Handler: withRequester(limits.wrap(webhookLabel(path), h))}
		if door != nil {
			served = door.Wrap(served)
		}
		server.Register(path, served)
	}
}

// ClientConfig says where the API server reaches the webhook server: either
// a Service (in-cluster) or a URL (out of cluster); the path is filled in.
type ClientConfig struct {
	Service  *types.NamespacedName
	Port     int32
	URL      string
	CABundle []byte
}

func (c ClientConfig) forPath(path string) admissionregistrationv1.WebhookClientConfig {
	if c.Service != nil {
		return admissionregistrationv1.WebhookClientConfig{
			Service: &admissionregistrationv1.ServiceReference{
				Namespace: c.Service.Namespace, Name: c.Service.Name, Path: ptr.To(path), Port: ptr.To(c.Port),
			},
			CABundle: c.CABundle,
		}
	}
	return admissionregistrationv1.WebhookClientConfig{URL: ptr.To(c.URL + path), CABundle: c.CABundle}
}

// Configurations returns the webhook configurations of instance-manager:
// the InstanceGroup webhooks (mutating and validating) and the validating
// webhook of the one boundary ConfigMap, all failurePolicy Fail and scoped
// so that an outage never blocks other objects (Pods, Nodes, other
// ConfigMaps) nor the deletion of a group (notMetadataOnDeleting). The
// Helm chart renders the same rules.
func Configurations(cc ClientConfig, configMap types.NamespacedName) (*admissionregistrationv1.MutatingWebhookConfiguration, *admissionregistrationv1.ValidatingWebhookConfiguration) {
	igRules := []admissionregistrationv1.RuleWithOperations{{
		Operations: []admissionregistrationv1.OperationType{admissionregistrationv1.Create, admissionregistrationv1.Update},
		Rule: admissionregistrationv1.Rule{
			APIGroups: []string{v1alpha1.GroupVersion.Group}, APIVersions: []string{v1alpha1.GroupVersion.Version},
			Resources: []string{"instancegroups"}, Scope: ptr.To(admissionregistrationv1.NamespacedScope),
		},
	}}
	sideEffects := ptr.To(admissionregistrationv1.SideEffectClassNoneOnDryRun)
	fail := ptr.To(admissionregistrationv1.Fail)
	mutating := &admissionregistrationv1.MutatingWebhookConfiguration{
		TypeMeta:   metav1.TypeMeta{APIVersion: "admissionregistration.k8s.io/v1", Kind: "MutatingWebhookConfiguration"},
		ObjectMeta: metav1.ObjectMeta{Name: MutatingConfigurationName},
		Webhooks: []admissionregistrationv1.MutatingWebhook{{
			Name: mutateIGWebhook, ClientConfig: cc.forPath(PathMutateInstanceGroup), Rules: igRules,
			MatchConditions: []admissionregistrationv1.MatchCondition{notMetadataOnDeleting},
			FailurePolicy:   fail, SideEffects: sideEffects, AdmissionReviewVersions: []string{"v1"},
			TimeoutSeconds: ptr.To[int32](10), ReinvocationPolicy: ptr.To(admissionregistrationv1.NeverReinvocationPolicy),
		}},
	}
	validating := &admissionregistrationv1.ValidatingWebhookConfiguration{
		TypeMeta:   metav1.TypeMeta{APIVersion: "admissionregistration.k8s.io/v1", Kind: "ValidatingWebhookConfiguration"},
		ObjectMeta: metav1.ObjectMeta{Name: ValidatingConfigurationName},
		Webhooks: []admissionregistrationv1.ValidatingWebhook{{
			Name: validateIGWebhook, ClientConfig: cc.forPath(PathValidateInstanceGroup), Rules: igRules,
			MatchConditions: []admissionregistrationv1.MatchCondition{notMetadataOnDeleting},
			FailurePolicy:   fail, SideEffects: sideEffects, AdmissionReviewVersions: []string{"v1"},
			TimeoutSeconds: ptr.To[int32](10),
		}, {
			Name: validateCMWebhook, ClientConfig: cc.forPath(PathValidateConfigMap),
			Rules: []admissionregistrationv1.RuleWithOperations{{
				// DELETE too: removing the boundaries is refused while
				// InstanceGroups exist.
				Operations: []admissionregistrationv1.OperationType{admissionregistrationv1.Create, admissionregistrationv1.Update, admissionregistrationv1.Delete},
				Rule: admissionregistrationv1.Rule{
					APIGroups: []string{""}, APIVersions: []string{"v1"},
					Resources: []string{"configmaps"}, Scope: ptr.To(admissionregistrationv1.NamespacedScope),
				},
			}},
			// Only the boundary ConfigMap: its namespace, then its name.
			NamespaceSelector: &metav1.LabelSelector{MatchLabels: map[string]string{"kubernetes.io/metadata.name": configMap.Namespace}},
			MatchConditions: []admissionregistrationv1.MatchCondition{{
				// request.name, not object: a DELETE has no object.
				Name: "boundary-configmap-only", Expression: `request.name == "` + configMap.Name + `"`,
			}},
			FailurePolicy: fail, SideEffects: ptr.To(admissionregistrationv1.SideEffectClassNone), AdmissionReviewVersions: []string{"v1"},
			TimeoutSeconds: ptr.To[int32](15),
		}},
	}
	return mutating, validating
}
