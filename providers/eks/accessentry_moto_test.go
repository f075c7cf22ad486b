package eks

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	awssdk "github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/autoscaling"
	"github.com/aws/aws-sdk-go-v2/service/eks"
	ekstypes "github.com/aws/aws-sdk-go-v2/service/eks/types"
	"github.com/aws/aws-sdk-go-v2/service/iam"
	. "github.com/onsi/gomega"
	"sigs.k8s.io/controller-runtime/pkg/client/fake"

	"github.com/instancemgr/instance-manager/providers"
	awsp "github.com/instancemgr/instance-manager/providers/aws"
	"github.com/instancemgr/instance-manager/providers/aws/iamrole"
	"github.com/instancemgr/instance-manager/providers/aws/reads"
	"github.com/instancemgr/instance-manager/test/env"
)

// On a cluster in API authentication mode (test/env's access entries,
// bound to the IAM role's id as on AWS): the group's node role gets an
// access entry; a role deleted and created again under the same name by
// someone else leaves that entry unable to authenticate (EKS User Guide,
// "Create access entries"), and the next Apply replaces it (principal
// .stale, Event AccessEntryReplaced); the garbage collector, finishing an
// orphaned group (FinishOrphan), deletes the entry with the role.
func testAccessEntryLifecycle(t *testing.T, cfg awssdk.Config, e *env.Environment) {
	g := NewWithT(t)
	ctx := t.Context()
	w := newMotoWorldMode(t, cfg, ekstypes.AuthenticationModeApi)
	clients := awsp.NewClients(cfg)
	p := New(clients, fake.NewClientBuilder().WithScheme(scheme(t)).Build(), Options{})
	ig := w.group()
	var events []string
	ctx = providers.WithEvents(ctx, func(typ, reason, msg string) { events = append(events, reason+": "+msg) })

	obs, err := p.Apply(ctx, ig)
	g.Expect(err).NotTo(HaveOccurred())
	settle(ig, obs)
	role := RoleName(ig)
	got, err := clients.IAM.GetRole(ctx, &iam.GetRoleInput{RoleName: awssdk.String(role)})
	g.Expect(err).NotTo(HaveOccurred())
	arn := awssdk.ToString(got.Role.Arn)
	ig.Status.NodesInstanceRoleArn = arn
	g.Expect(e.AccessEntryAuthenticates(ctx, "prod", arn)).To(BeTrue(), "the entry created for the group's role")

	// Someone deletes the role and creates it again under the same name
	// (same ARN, same tags): a new role id.
	_, err = clients.IAM.RemoveRoleFromInstanceProfile(ctx, &iam.RemoveRoleFromInstanceProfileInput{InstanceProfileName: awssdk.String(role), RoleName: awssdk.String(role)})
	g.Expect(err).NotTo(HaveOccurred())
	attached, err := clients.IAM.ListAttachedRolePolicies(ctx, &iam.ListAttachedRolePoliciesInput{RoleName: awssdk.String(role)})
	g.Expect(err).NotTo(HaveOccurred())
	for _, pol := range attached.AttachedPolicies {
		_, err = clients.IAM.DetachRolePolicy(ctx, &iam.DetachRolePolicyInput{RoleName: awssdk.String(role), PolicyArn: pol.PolicyArn})
		g.Expect(err).NotTo(HaveOccurred())
	}
	_, err = clients.IAM.DeleteRole(ctx, &iam.DeleteRoleInput{RoleName: awssdk.String(role)})
	g.Expect(err).NotTo(HaveOccurred())
	again, err := clients.IAM.CreateRole(ctx, &iam.CreateRoleInput{RoleName: awssdk.String(role), Path: got.Role.Path,
		AssumeRolePolicyDocument: awssdk.String(iamrole.NodeTrustPolicy), Tags: got.Role.Tags})
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(awssdk.ToString(again.Role.Arn)).To(Equal(arn))
	g.Expect(awssdk.ToString(again.Role.RoleId)).NotTo(Equal(awssdk.ToString(got.Role.RoleId)))
	g.Expect(e.AccessEntryAuthenticates(ctx, "prod", arn)).To(BeFalse(), "the entry is bound to the earlier role's id")

	// The next reads (after the cloud resync period) see it and replace it.
	p.reads.Now = func() time.Time { return time.Now().Add(2 * reads.DefaultCloudResync) }
	_, err = p.Apply(ctx, ig)
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(e.AccessEntryAuthenticates(ctx, "prod", arn)).To(BeTrue(), "the stale entry was replaced")
	g.Expect(strings.Join(events, "\n")).To(ContainSubstring(providers.ReasonAccessEntryReplaced + ": Replaced the EKS access entry of cluster prod for " + arn))
	entry, err := clients.EKS.DescribeAccessEntry(ctx, &eks.DescribeAccessEntryInput{ClusterName: awssdk.String("prod"), PrincipalArn: awssdk.String(arn)})
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(entry.AccessEntry.Tags).To(HaveKeyWithValue(TagRoleID, awssdk.ToString(again.Role.RoleId)))

	// The group is gone without its finalizer; the GC swept its Auto
	// Scaling group, and finishes with the role and its access entry.
	_, err = clients.AutoScaling.DeleteAutoScalingGroup(ctx, &autoscaling.DeleteAutoScalingGroupInput{AutoScalingGroupName: awssdk.String(obs.GroupName), ForceDelete: awssdk.Bool(true)})
	g.Expect(err).NotTo(HaveOccurred())
	deleted, err := p.FinishOrphan(context.Background(), ownerOf(ig))
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(deleted).To(ConsistOf(KindRole + " " + role))
	_, err = clients.EKS.DescribeAccessEntry(ctx, &eks.DescribeAccessEntryInput{ClusterName: awssdk.String("prod"), PrincipalArn: awssdk.String(arn)})
	var nf *ekstypes.ResourceNotFoundException
	g.Expect(errors.As(err, &nf)).To(BeTrue(), "the access entry is deleted with the role: %v", err)
}
