package app

import (
	"context"
	"fmt"

	authorizationv1 "k8s.io/api/authorization/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"
)

// deniedVerbs asks the API server (one SelfSubjectAccessReview per verb)
// which of verbs the controller may not do on the resource attrs names
// (attrs.Verb is set per verb). It returns the verbs denied, in order;
// an error names the verb and resource whose review failed.
func deniedVerbs(ctx context.Context, c client.Client, attrs authorizationv1.ResourceAttributes, verbs ...string) ([]string, error) {
	var denied []string
	for _, verb := range verbs {
		a := attrs
		a.Verb = verb
		review := &authorizationv1.SelfSubjectAccessReview{Spec: authorizationv1.SelfSubjectAccessReviewSpec{ResourceAttributes: &a}}
		if err := c.Create(ctx, review); err != nil {
			return nil, fmt.Errorf("checking whether the controller may %s %s %s in namespace %s (SelfSubjectAccessReview): %w",
				verb, a.Resource, a.Name, a.Namespace, err)
		}
		if !review.Status.Allowed {
			denied = append(denied, verb)
		}
	}
	return denied, nil
}
