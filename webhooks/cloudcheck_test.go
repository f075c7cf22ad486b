package webhooks

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/instancemgr/instance-manager/api/v1alpha1"
	"github.com/instancemgr/instance-manager/boundaries"
	"github.com/instancemgr/instance-manager/providers/aws/refcheck"
)

// fakeCloud reports every reference named in missing as a problem and
// records what it was asked.
type fakeCloud struct {
	missing map[string]bool
	asked   []string
}

func (f *fakeCloud) Check(_ context.Context, r refcheck.Refs) ([]refcheck.Problem, error) {
	var out []refcheck.Problem
	for key := range refKeys([]refcheck.Refs{r}) {
		f.asked = append(f.asked, key)
		field, value, _ := strings.Cut(key, "=")
		if f.missing[value] {
			out = append(out, refcheck.Problem{Field: field, Ref: value, Detail: "does not exist"})
		}
	}
	return out, nil
}

func parse(t *testing.T, defaults string) *boundaries.Config {
	t.Helper()
	cfg, err := boundaries.Parse(map[string]string{"defaults": defaults})
	if err != nil {
		t.Fatal(err)
	}
	return cfg
}

func TestOnlyIntroducedReferencesAreChecked(t *testing.T) {
	current := parse(t, "spec:\n  provisioner: eks\n  eks:\n    configuration:\n      clusterName: prod\n      image: ami-old\n      subnets: [subnet-a]\n")
	next := parse(t, "spec:\n  provisioner: eks\n  eks:\n    configuration:\n      clusterName: prod\n      image: ami-windows\n      subnets: [subnet-a, subnet-z]\n")
	groups := &affected{groups: map[string][]string{}, types: map[string][]string{}}
	for _, name := range []string{"web", "api"} {
		ig := &v1alpha1.InstanceGroup{ObjectMeta: metav1.ObjectMeta{Namespace: "team", Name: name}}
		spec := &v1alpha1.InstanceGroupSpec{Provisioner: "eks", EKS: &v1alpha1.EKSSpec{Configuration: &v1alpha1.EKSConfiguration{
			ClusterName: "prod", Image: "ami-windows", Subnets: []string{"subnet-a", "subnet-z"}, InstanceType: "m5.large"}}}
		groups.add(ig, spec)
	}
	cloud := &fakeCloud{missing: map[string]bool{"ami-windows": true, "subnet-z": true}}
	lines, err := checkIntroducedRefs(context.Background(), cloud, next, current, groups)
	if err != nil {
		t.Fatal(err)
	}
	joined := strings.Join(lines, "\n")
	for _, want := range []string{`spec.eks.configuration.image "ami-windows" does not exist (affects 2 InstanceGroup(s): team/web, team/api)`,
		`spec.eks.configuration.subnets "subnet-z" does not exist (affects 2 InstanceGroup(s)`} {
		if !strings.Contains(joined, want) {
			t.Errorf("problems:\n%s\nwant a line containing %q", joined, want)
		}
	}
	for _, a := range cloud.asked {
		if strings.HasSuffix(a, "=ami-old") || strings.HasSuffix(a, "subnets=subnet-a") {
			t.Errorf("checked %s, which the change does not introduce", a)
		}
	}
}

func TestTenantReferencesCheckedWhenNew(t *testing.T) {
	ig := func(submitted, subnet string) *v1alpha1.InstanceGroup {
		return &v1alpha1.InstanceGroup{ObjectMeta: metav1.ObjectMeta{Namespace: "team", Name: "web",
			Annotations: map[string]string{v1alpha1.AnnotationSubmittedSpec: submitted}},
			Spec: v1alpha1.InstanceGroupSpec{Provisioner: "eks", EKS: &v1alpha1.EKSSpec{Configuration: &v1alpha1.EKSConfiguration{
				ClusterName: "prod", Image: "ami-admin", Subnets: []string{subnet}, InstanceType: "m5.large"}}}}
	}
	cloud := &fakeCloud{missing: map[string]bool{"subnet-z": true, "ami-admin": true}}
	created := ig(`{"eks":{"configuration":{"subnets":["subnet-z"]}}}`, "subnet-z")
	lines, err := tenantRefProblems(context.Background(), cloud, created, nil)
	if err != nil {
		t.Fatal(err)
	}
	if len(lines) != 1 || !strings.Contains(lines[0], `subnets "subnet-z" does not exist`) {
		t.Fatalf("problems %v, want only the tenant's subnet (the admin's image is not the tenant's to answer for)", lines)
	}
	cloud.asked = nil
	if lines, _ := tenantRefProblems(context.Background(), cloud, created, created); len(lines) != 0 {
		t.Fatalf("an unchanged reference was judged again: %v", lines)
	}
	// A tenant's instance type is judged against the image it runs.
	typed := ig(`{"eks":{"configuration":{"instanceType":"m5.large"}}}`, "subnet-a")
	lines, err = tenantRefProblems(context.Background(), cloud, typed, nil)
	if err != nil {
		t.Fatal(err)
	}
	if len(lines) != 1 || !strings.Contains(lines[0], `image "ami-admin"`) {
		t.Fatalf("problems %v, want the image checked against the tenant's instance type", lines)
	}
}

// slowCloud answers only when its context ends, as AWS does when it
// throttles every retry.
type slowCloud struct{}

func (slowCloud) Check(ctx context.Context, _ refcheck.Refs) ([]refcheck.Problem, error) {
	<-ctx.Done()
	return nil, fmt.Errorf("operation error EC2: DescribeImages, %w", ctx.Err())
}

// A cloud check that AWS does not answer in time ends within its budget,
// under the webhook's timeout, with an answer that says so.
func TestCloudCheckEndsWithinItsBudget(t *testing.T) {
	ig := &v1alpha1.InstanceGroup{ObjectMeta: metav1.ObjectMeta{Namespace: "team", Name: "web",
		Annotations: map[string]string{v1alpha1.AnnotationSubmittedSpec: `{"eks":{"configuration":{"subnets":["subnet-z"]}}}`}},
		Spec: v1alpha1.InstanceGroupSpec{Provisioner: "eks", EKS: &v1alpha1.EKSSpec{Configuration: &v1alpha1.EKSConfiguration{
			ClusterName: "prod", Subnets: []string{"subnet-z"}}}}}
	start := time.Now()
	_, err := withCloudDeadline(context.Background(), 200*time.Millisecond, func(ctx context.Context) ([]string, error) {
		return tenantRefProblems(ctx, slowCloud{}, ig, nil)
	})
	if err == nil || !strings.Contains(err.Error(), "AWS did not answer within 200ms") {
		t.Fatalf("got %v, want an error saying AWS did not answer within the budget", err)
	}
	if d := time.Since(start); d > 2*time.Second {
		t.Errorf("answered after %s", d)
	}
	if instanceGroupCloudCheckTimeout >= 10*time.Second || configMapCloudCheckTimeout >= 15*time.Second {
		t.Errorf("the budgets (%s, %s) must stay under the webhooks' timeouts (10s, 15s)", instanceGroupCloudCheckTimeout, configMapCloudCheckTimeout)
	}
	// A caller that went away is not blamed on AWS.
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	_, err = withCloudDeadline(ctx, time.Minute, func(ctx context.Context) ([]string, error) {
		return tenantRefProblems(ctx, slowCloud{}, ig, nil)
	})
	if err == nil || strings.Contains(err.Error(), "did not answer") {
		t.Errorf("got %v, want the caller's cancellation", err)
	}
}
