package webhooks

import (
	"context"
	"fmt"
	"math"
	"net/http"
	"slices"
	"strings"
	"time"

	admissionv1 "k8s.io/api/admission/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/webhook/admission"
)

// Defaults of the admission limits, in reviews per second per webhook (an
// InstanceGroup create or update is one review for the mutating webhook
// and one for the validating one); bursts are AdmissionBurstFactor times
// as many. docs/performance.md's bursts of 50 creates in flight fit one
// user's burst; a GitOps tool applying hundreds of groups at once is held
// back, not refused for good: clients built on client-go (kubectl,
// controllers) wait for the Retry-After and send again.
const (
	DefaultUserRate      = 10
	DefaultNamespaceRate = 20
	AdmissionBurstFactor = 5
	maxTrackedNamespaces = 4096
)

// mastersGroup is Kubernetes' superuser group: its members pass RBAC
// unconditionally, and only someone who already is one can hand it out.
const mastersGroup = "system:masters"

// AdmissionLimits bound the admission reviews each webhook answers, per
// requester (request.userInfo.username, as the API server authenticated
// it: every service account is a user of its own) and per namespace of
// the object (the bound on a tenant that mints service accounts to get
// more buckets). A review past either bound is refused with code 429
// (TooManyRequests), a message naming the user or the namespace, and
// Details.RetryAfterSeconds, which the API server returns to the client
// as a Retry-After header. One user's flood therefore slows that user,
// and at worst its own namespace, never the others
// (docs/security.md, N28).
//
// Never limited: ExemptUsers (the controller, whose re-admissions after a
// boundary change run in every namespace and must not be held back by a
// tenant's flood there) and members of system:masters (the cluster's
// administrators, who cannot be impersonated without already being one).
type AdmissionLimits struct {
	// UserRate and UserBurst bound each user's reviews per second per
	// webhook; UserRate <= 0: no per-user bound.
	UserRate  float64
	UserBurst int
	// NamespaceRate and NamespaceBurst bound the reviews of objects of one
	// namespace, every user's together, per second per webhook;
	// NamespaceRate <= 0: no per-namespace bound.
	NamespaceRate  float64
	NamespaceBurst int
	// ExemptUsers are usernames never limited (the controller's own).
	ExemptUsers []string
}

// admissionLimiter holds one webhook's buckets.
type admissionLimiter struct {
	limits     AdmissionLimits
	webhook    string
	users      *keyedLimiter
	namespaces *keyedLimiter
}

func (a AdmissionLimits) limiter(webhook string) *admissionLimiter {
	return &admissionLimiter{
		limits: a, webhook: webhook,
		users:      newKeyedLimiter(a.UserRate, a.UserBurst, maxTrackedRequesters),
		namespaces: newKeyedLimiter(a.NamespaceRate, a.NamespaceBurst, maxTrackedNamespaces),
	}
}

// wrap returns h behind the limits of webhook (a metric label: the path
// it is served on, without the slash).
func (a AdmissionLimits) wrap(webhook string, h admission.Handler) admission.Handler {
	l := a.limiter(webhook)
	return admission.HandlerFunc(func(ctx context.Context, req admission.Request) admission.Response {
		if refused := l.refusal(req, time.Now()); refused != nil {
			return *refused
		}
		return h.Handle(ctx, req)
	})
}

// refusal takes req's tokens at now and returns nil, or the response
// refusing it: the user's bucket first, so that a user refused for its
// own flood does not spend its namespace's budget.
func (l *admissionLimiter) refusal(req admission.Request, now time.Time) *admission.Response {
	user := req.UserInfo.Username
	if slices.Contains(l.limits.ExemptUsers, user) || slices.Contains(req.UserInfo.Groups, mastersGroup) {
		return nil
	}
	if ok, wait := l.users.take(user, now); !ok {
		throttled.WithLabelValues(l.webhook, "user").Inc()
		return tooManyRequests(wait, fmt.Sprintf("too many admission requests from user %q (at most %g per second, bursts of %d, per user)",
			user, l.limits.UserRate, l.limits.UserBurst))
	}
	if req.Namespace == "" {
		return nil
	}
	if ok, wait := l.namespaces.take(req.Namespace, now); !ok {
		throttled.WithLabelValues(l.webhook, "namespace").Inc()
		return tooManyRequests(wait, fmt.Sprintf("too many admission requests for namespace %q (at most %g per second, bursts of %d, per namespace; this one from user %q)",
			req.Namespace, l.limits.NamespaceRate, l.limits.NamespaceBurst, user))
	}
	return nil
}

// tooManyRequests is a 429 refusal to retry after wait, at least a second
// (Retry-After counts whole seconds).
func tooManyRequests(wait time.Duration, why string) *admission.Response {
	secs := max(int32(math.Ceil(wait.Seconds())), 1)
	return &admission.Response{AdmissionResponse: admissionv1.AdmissionResponse{Result: &metav1.Status{
		Status: metav1.StatusFailure, Code: http.StatusTooManyRequests, Reason: metav1.StatusReasonTooManyRequests,
		Message: fmt.Sprintf("%s: retry in %ds", why, secs),
		Details: &metav1.StatusDetails{RetryAfterSeconds: secs},
	}}}
}

// webhookLabel is the metric label of a webhook path: one of the paths
// Register serves, else "other" (the label stays bounded whatever a
// caller asks for).
func webhookLabel(path string) string {
	switch path {
	case PathMutateInstanceGroup, PathValidateInstanceGroup, PathValidateConfigMap:
		return strings.TrimPrefix(path, "/")
	}
	return "other"
}
