package aws

import (
	"context"
	"fmt"
	"reflect"

	awsmiddleware "github.com/aws/aws-sdk-go-v2/aws/middleware"
	"github.com/aws/smithy-go/middleware"
)

// ClusterGuard returns an API option (for aws.Config.APIOptions) that
// refuses, before anything is sent, every EKS call naming a cluster that
// allowed rejects: the input's ClusterName field, or Name for
// DescribeCluster. Admission refuses such groups already; this keeps the
// controller's identity off other clusters even for groups admitted before
// the controller was pinned, or past a bypassed webhook. A nil allowed
// allows every cluster. Other services pass through.
func ClusterGuard(allowed func(cluster string) bool) func(*middleware.Stack) error {
	return func(stack *middleware.Stack) error {
		return stack.Initialize.Add(middleware.InitializeMiddlewareFunc("instance-manager-cluster-guard",
			func(ctx context.Context, in middleware.InitializeInput, next middleware.InitializeHandler) (middleware.InitializeOutput, middleware.Metadata, error) {
				if allowed != nil && awsmiddleware.GetServiceID(ctx) == "EKS" {
					if name, ok := clusterOf(in.Parameters); ok && !allowed(name) {
						return middleware.InitializeOutput{}, middleware.Metadata{},
							fmt.Errorf("eks %s on cluster %q refused: this installation manages only its own cluster(s) (--cluster-name, --additional-cluster-names)",
								awsmiddleware.GetOperationName(ctx), name)
					}
				}
				return next.HandleInitialize(ctx, in)
			}), middleware.Before)
	}
}

// clusterOf returns the cluster an EKS input names, if any.
func clusterOf(params any) (string, bool) {
	v := reflect.ValueOf(params)
	if v.Kind() != reflect.Pointer || v.IsNil() || v.Elem().Kind() != reflect.Struct {
		return "", false
	}
	for _, f := range []string{"ClusterName", "Name"} {
		fv := v.Elem().FieldByName(f)
		if fv.IsValid() && fv.Type() == reflect.TypeFor[*string]() && !fv.IsNil() {
			return fv.Elem().String(), true
		}
	}
	return "", false
}
