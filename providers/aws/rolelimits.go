package aws

import (
	"context"
	"fmt"
	"strings"

	awssdk "github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/iam"
)

// DefaultIAMPath is the IAM path of every role and instance profile the
// controller creates unless --iam-path says otherwise. The controller's
// IAM policy (charts/instance-manager/iam/controller-policy.json) lets it
// create, change and pass roles under this path only.
const DefaultIAMPath = "/instance-manager/"

// RoleLimits are what every IAM role and instance profile the controller
// creates carries, whoever asks for it.
type RoleLimits struct {
	// Path is the IAM path ("/a/b/": starts and ends with "/").
	Path string
	// PermissionsBoundary is the ARN of the managed policy set as the
	// permissions boundary of every created role; "" sets none (the
	// controller's IAM policy then refuses CreateRole).
	PermissionsBoundary string
}

// reservedIAMPaths are IAM paths the controller must not own: the root
// (the policy's role${IAM_PATH}* would then match every role of the
// account) and the prefixes AWS keeps for roles it creates itself
// (service-linked roles under /aws-service-role/, IAM Identity Center's
// under /aws-reserved/, console-created service roles under
// /service-role/; IAM User Guide, "IAM identifiers", "Paths").
var reservedIAMPaths = []string{"/aws-service-role/", "/aws-reserved/", "/service-role/"}

// Validate returns an error naming the flag when Path is not an IAM path,
// is the root "/" or under a prefix AWS reserves (reservedIAMPaths), or
// PermissionsBoundary is set but not a policy ARN.
func (l RoleLimits) Validate() error {
	if !strings.HasPrefix(l.Path, "/") || !strings.HasSuffix(l.Path, "/") || len(l.Path) > 512 {
		return fmt.Errorf("--iam-path %q: an IAM path starts and ends with \"/\" (e.g. %s), at most 512 characters", l.Path, DefaultIAMPath)
	}
	if l.Path == "/" {
		return fmt.Errorf("--iam-path \"/\": the controller's IAM policy lets it create, pass and delete roles under its path, and \"/\" is every role of the account; use a path of its own (e.g. %s)", DefaultIAMPath)
	}
	for _, r := range reservedIAMPaths {
		if strings.HasPrefix(l.Path, r) {
			return fmt.Errorf("--iam-path %q: %s is where AWS keeps the roles it creates itself; use a path of its own (e.g. %s)", l.Path, r, DefaultIAMPath)
		}
	}
	if b := l.PermissionsBoundary; b != "" && (!strings.HasPrefix(b, "arn:") || !strings.Contains(b, ":policy/")) {
		return fmt.Errorf("--iam-permissions-boundary %q: must be the ARN of a managed policy, arn:aws:iam::<account>:policy/<name>", b)
	}
	return nil
}

// WithRoleLimits returns api with CreateRole and CreateInstanceProfile
// forced onto l.Path, and CreateRole given l.PermissionsBoundary: doing it
// here, at the client, means no provisioner can create a role outside
// them. Every other call passes through unchanged.
func WithRoleLimits(api IAMAPI, l RoleLimits) IAMAPI {
	return &limitedIAM{IAMAPI: api, limits: l}
}

type limitedIAM struct {
	IAMAPI
	limits RoleLimits
}

// CreateRole calls IAM CreateRole with Path and PermissionsBoundary set
// from the limits, overriding whatever the caller set.
func (c *limitedIAM) CreateRole(ctx context.Context, in *iam.CreateRoleInput, optFns ...func(*iam.Options)) (*iam.CreateRoleOutput, error) {
	cp := *in
	cp.Path = awssdk.String(c.limits.Path)
	cp.PermissionsBoundary = nil
	if c.limits.PermissionsBoundary != "" {
		cp.PermissionsBoundary = awssdk.String(c.limits.PermissionsBoundary)
	}
	return c.IAMAPI.CreateRole(ctx, &cp, optFns...)
}

// CreateInstanceProfile calls IAM CreateInstanceProfile with Path set from
// the limits.
func (c *limitedIAM) CreateInstanceProfile(ctx context.Context, in *iam.CreateInstanceProfileInput, optFns ...func(*iam.Options)) (*iam.CreateInstanceProfileOutput, error) {
	cp := *in
	cp.Path = awssdk.String(c.limits.Path)
	return c.IAMAPI.CreateInstanceProfile(ctx, &cp, optFns...)
}
