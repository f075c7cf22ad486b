// Package iam holds the controller's IAM policy (controller-policy.json);
// this test keeps it in step with the AWS calls the code can make.
package iam

import (
	"encoding/json"
	"maps"
	"os"
	"reflect"
	"regexp"
	"slices"
	"sort"
	"strings"
	"testing"

	awsp "github.com/instancemgr/instance-manager/providers/aws"
	"github.com/instancemgr/instance-manager/providers/aws/ownership"
)

// placeholders are the ${NAME}s of controller-policy.json, each with a
// sample value for the test; docs/security.md documents what each stands for.
var placeholders = map[string]string{
	"AWS_ACCOUNT_ID":           "111122223333",
	"AWS_REGION":               "us-west-2",
	"CLUSTER_NAME":             "prod",
	"CLUSTER_VPC_ID":           "vpc-0123456789abcdef0",
	"IAM_PATH":                 "/instance-manager/",
	"BYO_ROLE_PATH":            "/instance-manager-byo/",
	"PERMISSIONS_BOUNDARY_ARN": "arn:aws:iam::111122223333:policy/instance-manager-node-boundary",
	"SSM_PARAMETER_PREFIX":     "/instance-manager/images/",
	"INTERRUPTION_QUEUE_NAME":  "instance-manager-interruptions",
}

// servicePrefix maps each narrow client interface to its IAM service prefix.
var servicePrefix = map[reflect.Type]string{
	reflect.TypeFor[awsp.EC2API]():         "ec2",
	reflect.TypeFor[awsp.AutoScalingAPI](): "autoscaling",
	reflect.TypeFor[awsp.IAMAPI]():         "iam",
	reflect.TypeFor[awsp.EKSAPI]():         "eks",
	reflect.TypeFor[awsp.SSMAPI]():         "ssm",
	reflect.TypeFor[awsp.STSAPI]():         "sts",
	reflect.TypeFor[awsp.SQSAPI]():         "sqs",
}

// noPermission are operations AWS authorizes without any policy.
var noPermission = map[string]string{
	"sts:GetCallerIdentity": "STS answers it for every caller, whatever its policies",
}

// implicit are actions no client method names but AWS checks on the
// caller during one of them.
var implicit = map[string]string{
	"ec2:RunInstances":            "CreateAutoScalingGroup/UpdateAutoScalingGroup with a launch template check that the caller may launch from it",
	"iam:PassRole":                "the launch template's instance profile (ASG), the node role (CreateNodegroup), the pod execution role (CreateFargateProfile), a lifecycle hook's role (PutLifecycleHook) and AddRoleToInstanceProfile pass a role",
	"eks:TagResource":             "CreateNodegroup, CreateFargateProfile and CreateAccessEntry with tags authorize tagging on creation",
	"iam:TagInstanceProfile":      "CreateInstanceProfile with the ownership tags authorizes tagging on creation",
	"iam:CreateServiceLinkedRole": "the first Auto Scaling group, managed node group, Fargate profile or Spot request of an account creates the service's linked role",
}

// readPrefixes mark actions that change nothing.
var readPrefixes = []string{"Describe", "Get", "List"}

type statement struct {
	Sid       string
	Effect    string
	Action    stringOrList
	Resource  stringOrList
	Condition map[string]map[string]stringOrList
}

type stringOrList []string

func (s *stringOrList) UnmarshalJSON(b []byte) error {
	var one string
	if json.Unmarshal(b, &one) == nil {
		*s = []string{one}
		return nil
	}
	var many []string
	if err := json.Unmarshal(b, &many); err != nil {
		return err
	}
	*s = many
	return nil
}

var placeholder = regexp.MustCompile(`\$\{([A-Z_]+)\}`)

// loadPolicy renders controller-policy.json with the sample values and
// fails on a placeholder the test (and docs/security.md) does not know.
func loadPolicy(t *testing.T) []statement {
	t.Helper()
	var doc struct {
		Version   string
		Statement []statement
	}
	dec := json.NewDecoder(strings.NewReader(renderedPolicy(t)))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&doc); err != nil {
		t.Fatalf("controller-policy.json: %v", err)
	}
	if doc.Version != "2012-10-17" {
		t.Errorf("Version = %q, want 2012-10-17", doc.Version)
	}
	return doc.Statement
}

// renderedPolicy is controller-policy.json with its placeholders filled
// with the sample values.
func renderedPolicy(t *testing.T) string {
	t.Helper()
	raw, err := os.ReadFile("controller-policy.json")
	if err != nil {
		t.Fatal(err)
	}
	for _, m := range placeholder.FindAllStringSubmatch(string(raw), -1) {
		if _, ok := placeholders[m[1]]; !ok {
			t.Errorf("controller-policy.json uses ${%s}, which is neither documented nor known to this test", m[1])
		}
	}
	return placeholder.ReplaceAllStringFunc(string(raw), func(s string) string {
		return placeholders[placeholder.FindStringSubmatch(s)[1]]
	})
}

// clientActions returns "<prefix>:<Method>" for every method of the
// narrow client interfaces: the SDK method names are the IAM action names.
func clientActions() []string {
	var out []string
	for typ, prefix := range servicePrefix {
		for i := range typ.NumMethod() {
			out = append(out, prefix+":"+typ.Method(i).Name)
		}
	}
	sort.Strings(out)
	return out
}

func TestPolicyAllowsEveryClientOperation(t *testing.T) {
	allowed := map[string]bool{}
	for _, s := range loadPolicy(t) {
		for _, a := range s.Action {
			allowed[a] = allowed[a] || s.Effect == "Allow"
		}
	}
	for _, a := range clientActions() {
		if _, ok := noPermission[a]; ok {
			if allowed[a] {
				t.Errorf("%s needs no permission (%s); the policy should not list it", a, noPermission[a])
			}
			continue
		}
		if !allowed[a] {
			t.Errorf("the client interfaces (providers/aws/interfaces.go) call %s, which controller-policy.json does not allow", a)
		}
	}
	for a := range implicit {
		if !allowed[a] {
			t.Errorf("%s is needed implicitly (%s) but not allowed", a, implicit[a])
		}
	}
}

func TestPolicyAllowsNothingElse(t *testing.T) {
	known := map[string]bool{}
	for _, a := range clientActions() {
		known[a] = true
	}
	for a := range implicit {
		known[a] = true
	}
	for _, s := range loadPolicy(t) {
		if s.Effect != "Allow" {
			continue
		}
		for _, a := range s.Action {
			if strings.Contains(a, "*") {
				t.Errorf("statement %s: action %q has a wildcard; name each action", s.Sid, a)
			}
			if !known[a] {
				t.Errorf("statement %s allows %s, which no client interface method calls and which is not a listed implicit action", s.Sid, a)
			}
		}
	}
}

func TestPolicyScopesEveryWrite(t *testing.T) {
	sids := map[string]bool{}
	for _, s := range loadPolicy(t) {
		if s.Sid == "" || sids[s.Sid] {
			t.Errorf("statement Sid %q is empty or repeated; each statement needs a unique Sid saying why it exists", s.Sid)
		}
		sids[s.Sid] = true
		if s.Effect != "Allow" {
			continue
		}
		for _, a := range s.Action {
			if isRead(a) {
				continue
			}
			for _, r := range s.Resource {
				if r == "*" {
					t.Errorf("statement %s: write action %s on Resource \"*\"; scope it to ARNs", s.Sid, a)
				}
				if strings.Count(r, ":") < 5 {
					t.Errorf("statement %s: resource %q is not an ARN", s.Sid, r)
				}
			}
			if len(s.Condition) == 0 && !pathScoped(s.Resource) && !oneQueue(s.Resource) {
				t.Errorf("statement %s: write action %s has neither a Condition nor a path-scoped resource", s.Sid, a)
			}
		}
	}
}

func TestPolicyRoleRules(t *testing.T) {
	for _, s := range loadPolicy(t) {
		actions := slices.Clone([]string(s.Action))
		for _, a := range actions {
			switch a {
			case "iam:CreateRole", "iam:AttachRolePolicy", "iam:DetachRolePolicy":
				if got := s.Condition["StringEquals"]["iam:PermissionsBoundary"]; !slices.Equal(got, []string{placeholders["PERMISSIONS_BOUNDARY_ARN"]}) {
					t.Errorf("statement %s: %s must require iam:PermissionsBoundary = the boundary, got %v", s.Sid, a, got)
				}
				fallthrough
			case "iam:DeleteRole", "iam:TagRole":
				for _, r := range s.Resource {
					if !strings.HasPrefix(r, "arn:aws:iam::111122223333:role"+placeholders["IAM_PATH"]) {
						t.Errorf("statement %s: %s on %s, outside the controller's IAM path", s.Sid, a, r)
					}
				}
			case "iam:PassRole":
				got := s.Condition["StringEquals"]["iam:PassedToService"]
				for _, svc := range got {
					if !slices.Contains([]string{"ec2.amazonaws.com", "eks.amazonaws.com", "eks-fargate-pods.amazonaws.com", "autoscaling.amazonaws.com"}, svc) {
						t.Errorf("statement %s: PassRole to %s", s.Sid, svc)
					}
				}
				if len(got) == 0 {
					t.Errorf("statement %s: PassRole without iam:PassedToService", s.Sid)
				}
			case "ssm:GetParameter":
				for _, r := range s.Resource {
					if !strings.Contains(r, ":parameter/aws/service/") && !strings.Contains(r, ":parameter"+placeholders["SSM_PARAMETER_PREFIX"]) {
						t.Errorf("statement %s: GetParameter on %s, outside /aws/service/ and the admin's prefix", s.Sid, r)
					}
				}
			}
		}
	}
}

func isRead(action string) bool {
	_, name, _ := strings.Cut(action, ":")
	for _, p := range readPrefixes {
		if strings.HasPrefix(name, p) {
			return true
		}
	}
	return false
}

// pathScoped reports whether every resource is an IAM ARN under a path
// (the controller's or the admin's BYO path): the path is the scope.
func pathScoped(resources []string) bool {
	for _, r := range resources {
		if !strings.HasPrefix(r, "arn:aws:iam::") || (!strings.Contains(r, placeholders["IAM_PATH"]) && !strings.Contains(r, placeholders["BYO_ROLE_PATH"])) {
			return false
		}
	}
	return len(resources) > 0
}

// oneQueue reports whether resources name exactly one SQS queue, without
// a wildcard: the interruption queue, which the controller only reads and
// deletes from.
func oneQueue(resources []string) bool {
	return len(resources) == 1 && strings.HasPrefix(resources[0], "arn:aws:sqs:") && !strings.Contains(resources[0], "*")
}

// Every tag a condition asks for (aws:ResourceTag/<key>, aws:RequestTag/<key>)
// is one of the ownership tags the controller puts on what it creates, with
// the value it puts there: a condition on any other tag denies every write
// on real AWS (the emulator does not enforce IAM, so only this test sees it).
func TestPolicyConditionsNameTheOwnershipTags(t *testing.T) {
	owner := ownership.Owner{Cluster: placeholders["CLUSTER_NAME"], Namespace: "team-a", Name: "web", UID: "uid-1"}
	tags := owner.Tags()
	checked := 0
	for _, s := range loadPolicy(t) {
		for _, byKey := range s.Condition {
			for key, values := range byKey {
				tag, ok := strings.CutPrefix(key, "aws:ResourceTag/")
				if !ok {
					tag, ok = strings.CutPrefix(key, "aws:RequestTag/")
				}
				if !ok {
					continue
				}
				checked++
				want, set := tags[tag]
				if !set {
					t.Errorf("statement %s: condition on tag %q, which the controller's ownership tags (%v) do not include", s.Sid, tag, slices.Sorted(maps.Keys(tags)))
					continue
				}
				if tag == ownership.TagInstanceGroup {
					continue // its value is the group's; conditions only require it to be present
				}
				for _, v := range values {
					if v != want && v != "*" {
						t.Errorf("statement %s: condition %s = %q, but the controller sets %q", s.Sid, key, v, want)
					}
				}
			}
		}
	}
	if checked == 0 {
		t.Fatal("no tag condition found in the policy")
	}
}

// TestPolicyDrainHook pins what the termination lifecycle hook needs
// (providers/eks puts instance-manager-drain on every group it builds;
// reconciler/termination completes it): each action allowed, and the
// writes only on Auto Scaling groups tagged for the cluster, so the
// controller cannot complete or extend another owner's lifecycle actions.
func TestPolicyDrainHook(t *testing.T) {
	owned := "aws:ResourceTag/instancemgr.keikoproj.io/cluster/" + placeholders["CLUSTER_NAME"]
	for _, action := range []string{"autoscaling:PutLifecycleHook", "autoscaling:DescribeLifecycleHooks", "autoscaling:DeleteLifecycleHook",
		"autoscaling:CompleteLifecycleAction", "autoscaling:RecordLifecycleActionHeartbeat"} {
		allowed := false
		for _, s := range loadPolicy(t) {
			if s.Effect != "Allow" || !slices.Contains(s.Action, action) {
				continue
			}
			allowed = true
			if isRead(action) {
				continue
			}
			if got := s.Condition["StringEquals"][owned]; !slices.Equal(got, []string{"owned"}) {
				t.Errorf("statement %s allows %s without requiring %s = owned (got %v)", s.Sid, action, owned, got)
			}
			for _, r := range s.Resource {
				if !strings.HasPrefix(r, "arn:aws:autoscaling:") || !strings.Contains(r, ":autoScalingGroup:") {
					t.Errorf("statement %s allows %s on %s, not only on Auto Scaling groups", s.Sid, action, r)
				}
			}
		}
		if !allowed {
			t.Errorf("controller-policy.json does not allow %s, which the termination lifecycle hook needs", action)
		}
	}
}
