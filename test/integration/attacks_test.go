package integration

// The remaining tenant attacks of the 2026-11-26 security review
// (/work/shared/reviews/security-2026-11-26.md section 2; docs/security.md,
// "Security", table "Attacks and their tests"), through the real API
// server as impersonated tenants, and against moto where the outcome is
// what the controller builds.

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	awssdk "github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/ec2"
	ec2types "github.com/aws/aws-sdk-go-v2/service/ec2/types"
	"github.com/aws/aws-sdk-go-v2/service/eks"
	ekstypes "github.com/aws/aws-sdk-go-v2/service/eks/types"
	"github.com/aws/aws-sdk-go-v2/service/iam"
	iamtypes "github.com/aws/aws-sdk-go-v2/service/iam/types"
	. "github.com/onsi/gomega"
	"k8s.io/client-go/util/retry"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/instancemgr/instance-manager/api/v1alpha1"
	"github.com/instancemgr/instance-manager/providers/aws/iamrole"
	"github.com/instancemgr/instance-manager/providers/aws/ownership"
	eksprov "github.com/instancemgr/instance-manager/providers/eks"
	"github.com/instancemgr/instance-manager/providers/eksmanaged"
	"github.com/instancemgr/instance-manager/reconciler/instancegroup"
	"github.com/instancemgr/instance-manager/test/harness"
)

// awaitReadyReason waits until the group's Ready condition has reason and
// returns its message.
func awaitReadyReason(t *testing.T, namespace, name, reason string) string {
	t.Helper()
	var msg string
	NewWithT(t).Eventually(func() string {
		c := findCondition(getIG(t, namespace, name), v1alpha1.ConditionReady)
		if c == nil {
			return ""
		}
		msg = c.Message
		return c.Reason
	}, 3*harness.ConvergeTimeout, time.Second).Should(Equal(reason), func() string { return "last Ready message: " + msg })
	return msg
}

// Attack 06 (N4): an eks-managed group used to get EKS's generated launch
// template (IMDS hop limit 2 reported for AL2) and a node role with
// AmazonEKS_CNI_Policy, so a plain pod could read credentials with ENI
// rights. As a tenant, in moto: the node group the controller builds has
// the controller's launch template (IMDSv2 required, hop limit 1) and its
// created role carries no CNI policy.
func TestAttack06ManagedNodeGroupIsHardened(t *testing.T) {
	requireEnv(t)
	g := NewWithT(t)
	ctx := context.Background()
	subnet, _ := lpMotoNetwork(t)
	mustSetConfigMap(t, map[string]string{"boundaries": lpShared})
	tn := newTenant(t, "attack06-tenant", uniqueNamespace("team-attack06"))

	ig := managedIG(tn.namespace, "workers", v1alpha1.EKSManagedConfiguration{ClusterName: lpMotoCluster, Subnets: []string{subnet}, InstanceType: "m5.large"})
	ig.Spec.EKSManaged.MinSize, ig.Spec.EKSManaged.MaxSize = 0, 1
	g.Expect(tn.client.Create(ctx, ig)).To(Succeed())
	t.Cleanup(func() { deleteAndWait(t, tn.namespace, ig.Name) })

	name := ownership.Name(ownership.LimitNodegroup, lpMotoCluster, tn.namespace, ig.Name)
	var ng *ekstypes.Nodegroup
	g.Eventually(func() error {
		out, err := eks.NewFromConfig(environment.AWS).DescribeNodegroup(ctx, &eks.DescribeNodegroupInput{ClusterName: awssdk.String(lpMotoCluster), NodegroupName: awssdk.String(name)})
		if err == nil {
			ng = out.Nodegroup
		}
		return err
	}, 3*harness.ConvergeTimeout, time.Second).Should(Succeed(), func() string {
		return fmt.Sprintf("awaited node group %s in moto; group status %+v", name, getIG(t, tn.namespace, ig.Name).Status)
	})
	g.Expect(ng.LaunchTemplate).NotTo(BeNil(), "the node group has no launch template of the controller: EKS's IMDS settings apply")
	g.Expect(awssdk.ToString(ng.LaunchTemplate.Name)).To(Equal(eksmanaged.TemplateName(getIG(t, tn.namespace, ig.Name))))
	versions, err := ec2.NewFromConfig(environment.AWS).DescribeLaunchTemplateVersions(ctx, &ec2.DescribeLaunchTemplateVersionsInput{
		LaunchTemplateName: ng.LaunchTemplate.Name, Versions: []string{"$Latest"}})
	g.Expect(err).NotTo(HaveOccurred())
	meta := versions.LaunchTemplateVersions[0].LaunchTemplateData.MetadataOptions
	g.Expect(meta).NotTo(BeNil())
	g.Expect(meta.HttpTokens).To(Equal(ec2types.LaunchTemplateHttpTokensStateRequired))
	g.Expect(awssdk.ToInt32(meta.HttpPutResponseHopLimit)).To(Equal(int32(1)), "a pod's request to IMDS must not get past the node")

	role := awssdk.ToString(ng.NodeRole)
	role = role[strings.LastIndex(role, "/")+1:]
	out, err := iam.NewFromConfig(environment.AWS).ListAttachedRolePolicies(ctx, &iam.ListAttachedRolePoliciesInput{RoleName: awssdk.String(role)})
	g.Expect(err).NotTo(HaveOccurred())
	var arns []string
	for _, p := range out.AttachedPolicies {
		arns = append(arns, awssdk.ToString(p.PolicyArn))
	}
	g.Expect(arns).To(ConsistOf(iamrole.PolicyWorkerNode, iamrole.PolicyECR), "no AmazonEKS_CNI_Policy on a created node role without --node-role-cni-policy")
}

// Attack 07 (N5) and Attack 08 (N5): TestDefaultQuotasApply (quota_test.go)
// refuses 500 x p5.48xlarge and the 11th group of a namespace under the
// default quotas. Attack 08's other half: the cluster's AWS limits. The
// 11th eks-fargate group of a cluster is refused by the default
// fargateProfilesPerCluster (EKS allows 10), and the Auto Scaling groups
// of the region are bounded by awsLimits.autoScalingGroupsPerRegion (500
// by default; set here just above what the cluster holds), as a tenant.
func TestAttack08AWSLimitsBoundZeroCostGroups(t *testing.T) {
	requireEnv(t)
	ns := uniqueNamespace("team-attack08")
	data := exampleConfigMapData(t)
	data["quotas"] = "perNamespace: {maxGroups: 50}\n"
	g, ctx, tn := underBoundaries(t, data, "attack08-tenant", ns)
	deleteGroupsAtEnd(t, ns)

	fargate := func(name string) *v1alpha1.InstanceGroup {
		return &v1alpha1.InstanceGroup{ObjectMeta: shortIG(ns, name).ObjectMeta, Spec: v1alpha1.InstanceGroupSpec{
			Provisioner: v1alpha1.ProvisionerEKSFargate, Strategy: v1alpha1.AwsUpgradeStrategy{Type: v1alpha1.StrategyManaged},
			EKSFargate: &v1alpha1.EKSFargateSpec{Selectors: []v1alpha1.EKSFargateSelector{{Namespace: ns}}}}}
	}
	admitted := 0
	var refusal error
	for i := 0; i < 12 && refusal == nil; i++ {
		// The webhook counts from the manager's cache: a create waits until
		// the cache holds the ones before it (a dry run shows it).
		g.Eventually(func() int {
			list := &v1alpha1.InstanceGroupList{}
			_ = admin.List(ctx, list, client.InNamespace(ns))
			return len(list.Items)
		}, 10*time.Second, 100*time.Millisecond).Should(Equal(admitted))
		time.Sleep(300 * time.Millisecond)
		if refusal = tn.client.Create(ctx, fargate(fmt.Sprintf("profile-%02d", i))); refusal == nil {
			admitted++
		}
	}
	g.Expect(refusal).To(MatchError(ContainSubstring(`eks-fargate groups of cluster "a-managed-cluster" would be above quotas.awsLimits.fargateProfilesPerCluster (10, EKS's limit of Fargate profiles per cluster)`)))
	g.Expect(admitted).To(BeNumerically("<=", 10))

	// Auto Scaling groups: two more than the installation holds.
	list := &v1alpha1.InstanceGroupList{}
	g.Expect(admin.List(ctx, list)).To(Succeed())
	onASGs := 0
	for _, o := range list.Items {
		if o.Spec.Provisioner != v1alpha1.ProvisionerEKSFargate {
			onASGs++
		}
	}
	data["quotas"] = fmt.Sprintf("perNamespace: {maxGroups: 50}\nawsLimits: {autoScalingGroupsPerRegion: %d}\n", onASGs+2)
	mustSetConfigMap(t, data)
	for i := 0; i < 2; i++ {
		ig := shortIG(ns, fmt.Sprintf("empty-%d", i))
		ig.Spec.EKS.MinSize, ig.Spec.EKS.MaxSize = 0, 0
		g.Expect(tn.client.Create(ctx, ig)).To(Succeed())
	}
	g.Eventually(func() error {
		ig := shortIG(ns, "one-too-many")
		ig.Spec.EKS.MinSize, ig.Spec.EKS.MaxSize = 0, 0
		return tn.client.Create(ctx, ig, client.DryRunAll)
	}, 10*time.Second, 200*time.Millisecond).Should(MatchError(ContainSubstring(fmt.Sprintf("would be above quotas.awsLimits.autoScalingGroupsPerRegion (%d, the account's Auto Scaling groups per region)", onASGs+2))))
}

// Attack 12 (N8): maxPods far above what the instance type can address
// (the scheduler would pack other tenants' pods there, ContainerCreating
// for ever). Refused at admission while bootstrapOptions is sensitive
// (TestTenantCannotPinManagedAMIsOrSetMaxPods); here the admin shares it,
// and the controller refuses to build, in moto, naming the field and the
// type's bound, before it creates anything.
func TestAttack12MaxPodsBoundedByTheInstanceType(t *testing.T) {
	requireEnv(t)
	g := NewWithT(t)
	ctx := context.Background()
	image, _ := firstMotoImage(t)
	subnet, sg := lpMotoNetwork(t)
	mustSetConfigMap(t, map[string]string{"boundaries": lpShared + "  - spec.eks.configuration.bootstrapOptions\n"})
	tn := newTenant(t, "attack12-tenant", uniqueNamespace("team-attack12"))

	ig := fullIG(tn.namespace, "packed")
	c := ig.Spec.EKS.Configuration
	c.ClusterName, c.Image, c.Subnets, c.SecurityGroups = lpMotoCluster, image, []string{subnet}, []string{sg}
	c.BootstrapOptions = &v1alpha1.BootstrapOptions{MaxPods: 100000}
	ig.Spec.EKS.MinSize, ig.Spec.EKS.MaxSize = 0, 1
	g.Expect(tn.client.Create(ctx, ig)).To(Succeed(), "the admin shares bootstrapOptions")
	t.Cleanup(func() { deleteAndWait(t, tn.namespace, ig.Name) })

	msg := awaitReadyReason(t, tn.namespace, ig.Name, "InvalidSpec")
	g.Expect(msg).To(And(ContainSubstring("spec.eks.configuration.bootstrapOptions.maxPods"),
		ContainSubstring("max pods 100000 is more than instance type m5.large can give addresses to"), ContainSubstring("set at most")))
	_, err := iam.NewFromConfig(environment.AWS).GetRole(ctx, &iam.GetRoleInput{RoleName: awssdk.String(eksprov.RoleName(ig))})
	g.Expect(err).To(MatchError(ContainSubstring("NoSuchEntity")), "nothing is built for a refused spec")
}

// Attack 14 (N10): a provisioner switch once the group may have
// resources, in the full scenario: the status naming them never landed
// (lost to a tenant's edits, or the cloud write failed after creating
// something). As a tenant: the controller records status.identity before
// its first cloud write; here the build then fails (the example's cluster
// is not in moto), so the status names nothing, and the switch to
// eks-fargate is refused, naming spec.provisioner, the recorded identity
// and what to do. The record is the controller's: the tenant cannot
// write it (no instancegroups/status rights).
func TestAttack14ProvisionerSwitchWithResourcesIsRefused(t *testing.T) {
	requireEnv(t)
	ns := uniqueNamespace("team-attack14")
	g, ctx, tn := underBoundaries(t, nil, "attack14-tenant", ns)
	deleteGroupsAtEnd(t, ns)
	g.Expect(tn.client.Create(ctx, shortIG(ns, "built"))).To(Succeed())
	var cur *v1alpha1.InstanceGroup
	g.Eventually(func() *v1alpha1.GroupIdentity {
		cur = getIG(t, ns, "built")
		return cur.Status.Identity
	}, 3*harness.ConvergeTimeout, 200*time.Millisecond).ShouldNot(BeNil(), "the controller records the identity before it builds")
	g.Expect(*cur.Status.Identity).To(Equal(v1alpha1.SpecIdentity(&cur.Spec)))
	g.Expect(cur.Status.ActiveScalingGroupName).To(BeEmpty(), "the scenario: no status names the resources")

	forged := cur.DeepCopy()
	forged.Status.Identity = nil
	g.Expect(tn.client.Status().Update(ctx, forged)).To(MatchError(ContainSubstring("forbidden")), "tenants cannot clear the record")

	patch := client.RawPatch("application/merge-patch+json", []byte(`{"spec":{"provisioner":"eks-fargate","strategy":{"type":"managed"},"eks-fargate":{"selectors":[{"namespace":"`+ns+`"}]}}}`))
	err := tn.client.Patch(ctx, shortIG(ns, "built"), patch)
	g.Expect(err).To(MatchError(And(ContainSubstring("InstanceGroup "+ns+"/built"),
		ContainSubstring(`spec.provisioner: cannot change from "eks" to "eks-fargate" because status.identity records that its cloud resources were built (or may have been, if the write that followed failed) by provisioner eks in cluster "`+cur.Status.Identity.ClusterName+`"`),
		ContainSubstring("create a new InstanceGroup with the new value, move the workloads, then delete this one"))))
}

// Attack 15 (N10): spotPrice with a warm pool used to build the Auto
// Scaling group and then fail PutWarmPool, leaving a half-built group with
// no status name. As a tenant: refused at admission, naming the field.
func TestAttack15SpotPriceWithWarmPoolIsRefused(t *testing.T) {
	requireEnv(t)
	ns := uniqueNamespace("team-attack15")
	g, ctx, tn := underBoundaries(t, nil, "attack15-tenant", ns)
	ig := shortIG(ns, "spot-warm")
	ig.Spec.EKS.Configuration.SpotPrice = "0.5"
	ig.Spec.EKS.WarmPool = &v1alpha1.WarmPoolSpec{MinSize: 1, MaxSize: 2}
	err := tn.client.Create(ctx, ig)
	g.Expect(err).To(MatchError(And(ContainSubstring("InstanceGroup "+ns+"/spot-warm"), ContainSubstring("spec.eks.warmPool: Forbidden"),
		ContainSubstring("Auto Scaling does not support a warm pool for a group that launches Spot Instances (spotPrice); remove warmPool or spotPrice"))))
}

// Attack 19 (N13): an eks-managed group used to veto moving spec.strategy
// to restricted (the dry run found the default rollingUpdate invalid for
// it). As a tenant, then as admin: the tightening is admitted.
func TestAttack19ManagedGroupsDoNotVetoRestrictingTheStrategy(t *testing.T) {
	requireEnv(t)
	ns := uniqueNamespace("team-attack19")
	g, ctx, tn := underBoundaries(t, nil, "attack19-tenant", ns)
	deleteGroupsAtEnd(t, ns)
	g.Expect(tn.client.Create(ctx, managedIG(ns, "veto", v1alpha1.EKSManagedConfiguration{InstanceType: "m5.large"}))).To(Succeed())

	data := exampleConfigMapData(t)
	b := strings.Replace(data["boundaries"], "  replace:\n  - spec.strategy\n", "", 1)
	b = strings.Replace(b, "restricted:\n", "restricted:\n- spec.strategy\n", 1)
	g.Expect(b).NotTo(Equal(data["boundaries"]), "the example's rules moved")
	data["boundaries"] = b
	t.Cleanup(func() { mustSetConfigMap(t, exampleConfigMapData(t)) })
	g.Expect(setConfigMap(ctx, data)).To(Succeed(), "a tenant's eks-managed group must not veto restricting spec.strategy")
}

// Attack 20 (N13), Section 3 (rollout waves): rollout waves that select
// groups by their labels let a tenant put its group in the canary wave
// (and halt the rollout by failing there), or take it out. The label keys
// a wave selects on are admin data: as a tenant, adding one at create,
// adding, changing or removing one at update are refused, naming
// metadata.labels[<key>] and the wave; other labels still change. The
// admin (who may update the boundary ConfigMap) sets it. The ConfigMap
// webhook still warns about label-only waves (groups labelled before keep
// their label); a wave that names its namespaces gets no warning.
func TestAttack20TenantsCannotChooseTheirWave(t *testing.T) {
	requireEnv(t)
	data := exampleConfigMapData(t)
	data["rollout"] = "waves:\n- {name: canary, selector: rollout=canary}\n- {name: all}\n"
	ns := uniqueNamespace("team-attack20")
	g, ctx, tn := underBoundaries(t, data, "attack20-tenant", ns)

	joining := shortIG(ns, "joins-canary")
	joining.Labels = map[string]string{"rollout": "canary"}
	err := tn.client.Create(ctx, joining)
	g.Expect(err).To(HaveOccurred(), "a tenant's group created in the canary wave")
	g.Expect(err.Error()).To(And(ContainSubstring("metadata.labels[rollout]"), ContainSubstring("adding rollout=canary is refused"), ContainSubstring("wave(s) canary")))

	ig := shortIG(ns, "plain")
	g.Expect(tn.client.Create(ctx, ig)).To(Succeed())
	t.Cleanup(func() { deleteAndWait(t, ns, ig.Name) })
	relabel := func(c client.Client, change func(map[string]string)) error {
		return retry.RetryOnConflict(retry.DefaultRetry, func() error {
			cur := &v1alpha1.InstanceGroup{}
			if err := c.Get(ctx, client.ObjectKeyFromObject(ig), cur); err != nil {
				return err
			}
			if cur.Labels == nil {
				cur.Labels = map[string]string{}
			}
			change(cur.Labels)
			return c.Update(ctx, cur)
		})
	}
	err = relabel(tn.client, func(l map[string]string) { l["rollout"] = "canary" })
	g.Expect(err).To(HaveOccurred(), "a tenant joined the canary by update")
	g.Expect(err.Error()).To(ContainSubstring("metadata.labels[rollout]: Forbidden: adding rollout=canary is refused"))
	g.Expect(relabel(tn.client, func(l map[string]string) { l["cost-center"] = "42" })).To(Succeed(), "other labels stay the tenant's")

	g.Expect(relabel(admin, func(l map[string]string) { l["rollout"] = "canary" })).To(Succeed(), "the admin chooses the wave")
	err = relabel(tn.client, func(l map[string]string) { delete(l, "rollout") })
	g.Expect(err).To(HaveOccurred(), "a tenant left the canary")
	g.Expect(err.Error()).To(ContainSubstring("removing rollout=canary is refused"))
	err = relabel(tn.client, func(l map[string]string) { l["rollout"] = "later" })
	g.Expect(err).To(HaveOccurred(), "a tenant moved its group to another wave")
	g.Expect(err.Error()).To(ContainSubstring("changing rollout from canary to later is refused"))
	g.Expect(getIG(t, ns, ig.Name).Labels).To(HaveKeyWithValue("rollout", "canary"))

	asAdmin, warnings := adminWithWarnings(t)
	warnings.take()
	g.Expect(harness.WriteBoundaries(ctx, asAdmin, data)).To(Succeed())
	g.Expect(strings.Join(warnings.take(), "\n")).To(ContainSubstring(`data.rollout.waves[0] (canary) selects InstanceGroups by their labels (selector "rollout=canary"): tenants may no longer add, change or remove the labels it selects on`))
	data["rollout"] = "waves:\n- {name: canary, namespaces: [team-canary], selector: rollout=canary}\n- {name: all}\n"
	g.Expect(harness.WriteBoundaries(ctx, asAdmin, data)).To(Succeed())
	g.Expect(strings.Join(warnings.take(), "\n")).NotTo(ContainSubstring("data.rollout.waves"))
	// The wave no longer takes this namespace's groups: its label is the tenant's again.
	g.Expect(relabel(tn.client, func(l map[string]string) { delete(l, "rollout") })).To(Succeed())
}

// Attack 21 (N13): see TestTenantCannotPinManagedAMIsOrSetMaxPods
// (nodes_test.go).

// Attack 23 (N15): a name pre-squatted for another group's future node
// role (a second preimage of the 40-bit name hash, found offline, or any
// role of that name). In moto: a role with the victim's name, owned by
// another group, is never used or changed: the victim's group waits with
// Ready False, reason ForeignResource, naming the role and its owner.
func TestAttack23PreSquattedNameIsNotTakenOver(t *testing.T) {
	requireEnv(t)
	g := NewWithT(t)
	ctx := context.Background()
	image, _ := firstMotoImage(t)
	subnet, sg := lpMotoNetwork(t)
	mustSetConfigMap(t, map[string]string{"boundaries": lpShared})
	tn := newTenant(t, "attack23-victim", uniqueNamespace("team-attack23"))

	ig := fullIG(tn.namespace, "victim")
	c := ig.Spec.EKS.Configuration
	c.ClusterName, c.Image, c.Subnets, c.SecurityGroups = lpMotoCluster, image, []string{subnet}, []string{sg}
	ig.Spec.EKS.MinSize, ig.Spec.EKS.MaxSize = 0, 1
	squatter := ownership.Owner{Cluster: lpMotoCluster, Namespace: "team-squatter", Name: "collides", UID: "u-squatter"}
	var tags []iamtypes.Tag
	for k, v := range squatter.Tags() {
		tags = append(tags, iamtypes.Tag{Key: awssdk.String(k), Value: awssdk.String(v)})
	}
	iamc := iam.NewFromConfig(environment.AWS)
	roleName := eksprov.RoleName(ig)
	_, err := iamc.CreateRole(ctx, &iam.CreateRoleInput{RoleName: awssdk.String(roleName), Path: awssdk.String("/instance-manager/"), Tags: tags,
		AssumeRolePolicyDocument: awssdk.String(`{"Version":"2012-10-17","Statement":[{"Effect":"Allow","Principal":{"Service":"ec2.amazonaws.com"},"Action":"sts:AssumeRole"}]}`)})
	g.Expect(err).NotTo(HaveOccurred())
	t.Cleanup(func() {
		_, _ = iamc.DeleteRole(context.Background(), &iam.DeleteRoleInput{RoleName: awssdk.String(roleName)})
	})

	g.Expect(tn.client.Create(ctx, ig)).To(Succeed())
	t.Cleanup(func() { deleteAndWait(t, tn.namespace, ig.Name) })
	msg := awaitReadyReason(t, tn.namespace, ig.Name, instancegroup.ReasonForeignResource)
	g.Expect(msg).To(And(ContainSubstring(roleName), ContainSubstring("team-squatter/collides")))
	attached, err := iamc.ListAttachedRolePolicies(ctx, &iam.ListAttachedRolePoliciesInput{RoleName: awssdk.String(roleName)})
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(attached.AttachedPolicies).To(BeEmpty(), "the squatter's role got no policy from the victim's group")
	role, err := iamc.GetRole(ctx, &iam.GetRoleInput{RoleName: awssdk.String(roleName)})
	g.Expect(err).NotTo(HaveOccurred())
	for _, tg := range role.Role.Tags {
		if awssdk.ToString(tg.Key) == ownership.TagInstanceGroup {
			g.Expect(awssdk.ToString(tg.Value)).To(Equal("team-squatter/collides"), "the role's owner is unchanged")
		}
	}
}

// Attack 25 (N17): instance types the quota does not list, reached
// through instancePool SubFamilyFlexible (m5a, m5d, m5n... past
// instanceTypes [m5.large]) or an eks-managed group without a type (EKS's
// default type). As a tenant: both refused, naming the quota.
func TestAttack25DerivedInstanceTypesAreQuotaChecked(t *testing.T) {
	requireEnv(t)
	ns := uniqueNamespace("team-attack25")
	data := exampleConfigMapData(t)
	data["quotas"] = "namespaces:\n  " + ns + ": {maxGroups: 5, instanceTypes: [m5.large]}\n"
	g, ctx, tn := underBoundaries(t, data, "attack25-tenant", ns)

	flexible := shortIG(ns, "flexible")
	flexible.Spec.EKS.Configuration.MixedInstancesPolicy = &v1alpha1.MixedInstancesPolicySpec{InstancePool: v1alpha1.InstancePoolSubFamilyFlexible}
	g.Expect(tn.client.Create(ctx, flexible)).To(MatchError(And(ContainSubstring("spec.eks.configuration.mixedInstancesPolicy.instancePool: SubFamilyFlexible launches any type of the m5 sub-family at size large"),
		ContainSubstring("quotas.namespaces."+ns+".instanceTypes (m5.large) does not allow as a whole"))))

	untyped := managedIG(ns, "untyped", v1alpha1.EKSManagedConfiguration{})
	g.Expect(tn.client.Create(ctx, untyped)).To(MatchError(ContainSubstring(`instance type "t3.medium" is not allowed by quotas.namespaces.` + ns + `.instanceTypes (m5.large)`)))
}

// Attack 26 (N18): a value an admin grants through a conditional (here a
// role for groups annotated team=gpu) used to pass the allowlists for
// every group. As a tenant whose group does not match: refused, naming
// the allowlist. (A tenant can write team=gpu on its group: the ConfigMap
// webhook warns the admin of that, TestSection3ConditionalOnTenantAnnotationsIsWarned.)
func TestAttack26ConditionalValuesAreOnlyForMatchedGroups(t *testing.T) {
	requireEnv(t)
	ns := uniqueNamespace("team-attack26")
	data := withShared(t, "spec.eks.configuration.roleName", "spec.eks.configuration.instanceProfileName")
	for _, p := range []string{"roleName", "instanceProfileName"} {
		data["boundaries"] = strings.Replace(data["boundaries"], "\n- spec.eks.configuration."+p+"\n", "\n", 1)
	}
	data["enforcement"] = "deny"
	data["conditionals"] = gpuConditional
	g, ctx, tn := underBoundaries(t, data, "attack26-tenant", ns)

	ig := shortIG(ns, "borrowed-role")
	ig.Spec.EKS.Configuration.RoleName, ig.Spec.EKS.Configuration.InstanceProfileName = "gpu-nodes", "gpu-nodes"
	err := tn.client.Create(ctx, ig, client.DryRunAll)
	g.Expect(err).To(MatchError(And(ContainSubstring("InstanceGroup "+ns+"/borrowed-role"), ContainSubstring("spec.eks.configuration.roleName"),
		ContainSubstring(`"gpu-nodes" is not allowed by the boundary ConfigMap's data.allowlists.roles`))))
}

// gpuConditional grants a role to the groups annotated team=gpu.
const gpuConditional = `- annotationSelector: team=gpu
  defaults:
    spec:
      eks:
        configuration:
          roleName: gpu-nodes
          instanceProfileName: gpu-nodes
`

// Attack 27 (N19): a tag key with a comma would forge entries in the
// controller's comma-separated record of the tag keys it manages, and
// have it delete tags others added. As a tenant (tags are shared in the
// example): refused, naming the key.
func TestAttack27TagKeyWithACommaIsRefused(t *testing.T) {
	requireEnv(t)
	ns := uniqueNamespace("team-attack27")
	g, ctx, tn := underBoundaries(t, nil, "attack27-tenant", ns)
	ig := shortIG(ns, "forged-record")
	ig.Spec.EKS.Configuration.Tags = []map[string]string{{"key": "team,cost-center", "value": "x"}}
	err := tn.client.Create(ctx, ig)
	g.Expect(err).To(MatchError(And(ContainSubstring("InstanceGroup "+ns+"/forged-record"), ContainSubstring("spec.eks.configuration.tags["), ContainSubstring("].key: Forbidden"),
		ContainSubstring("tag keys may not contain a comma"))))
}
