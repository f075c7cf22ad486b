package integration

// Nodes and labels, eks-managed hardening (issue 25 items 4 and 6; review
// security-2026-11-26 N8, N13, N14, N16), through the real API server, as
// tenants whose RBAC covers InstanceGroups in their own namespace only.

import (
	"context"
	"strings"
	"testing"

	. "github.com/onsi/gomega"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/instancemgr/instance-manager/api/v1alpha1"
)

func managedIG(namespace, name string, c v1alpha1.EKSManagedConfiguration) *v1alpha1.InstanceGroup {
	return &v1alpha1.InstanceGroup{
		ObjectMeta: metav1.ObjectMeta{Namespace: namespace, Name: name},
		Spec: v1alpha1.InstanceGroupSpec{Provisioner: v1alpha1.ProvisionerEKSManaged, Strategy: v1alpha1.AwsUpgradeStrategy{Type: v1alpha1.StrategyManaged},
			EKSManaged: &v1alpha1.EKSManagedSpec{MinSize: 1, MaxSize: 2, Configuration: &c}},
	}
}

// Attack 11 (N8): node labels that make a tenant's node pass for another node,
// zone or type, or attract another pool owner's pods (N8).
func TestTenantCannotSpoofNodeLabels(t *testing.T) {
	requireEnv(t)
	ns := uniqueNamespace("team-labels")
	g, ctx, tn := underBoundaries(t, nil, "labels-tenant", ns)
	for label, want := range map[string]string{
		"kubernetes.io/hostname":                 "the kubelet derives this label from the instance",
		"topology.kubernetes.io/zone":            "the kubelet derives this label from the instance",
		"node.kubernetes.io/instance-type":       "the kubelet derives this label from the instance",
		"kubernetes.io/os":                       "the kubelet derives this label from the instance",
		"kubernetes.io/arch":                     "the kubelet derives this label from the instance",
		"beta.kubernetes.io/arch":                "the kubelet derives this label from the instance",
		"failure-domain.beta.kubernetes.io/zone": "the kubelet derives this label from the instance",
		"eks.amazonaws.com/nodegroup":            "belong to other node-pool owners",
		"karpenter.sh/nodepool":                  "belong to other node-pool owners",
		"karpenter.k8s.aws/instance-family":      "belong to other node-pool owners",
		"node-role.kubernetes.io/system":         "the kubernetes.io/ and k8s.io/ prefixes are reserved",
	} {
		t.Run(label, func(t *testing.T) {
			g := NewWithT(t)
			ig := shortIG(ns, "spoof")
			ig.Spec.EKS.Configuration.Labels = map[string]string{label: "x"}
			err := tn.client.Create(ctx, ig)
			g.Expect(err).To(MatchError(And(ContainSubstring("InstanceGroup "+ns+"/spoof"),
				ContainSubstring("spec.eks.configuration.labels["+label+"]: Forbidden"), ContainSubstring(want))))

			// The same under eks-managed, labels and the deprecated nodeLabels.
			m := managedIG(ns, "spoof-managed", v1alpha1.EKSManagedConfiguration{InstanceType: "m5.large", NodeLabels: map[string]string{label: "x"}})
			err = tn.client.Create(ctx, m)
			g.Expect(err).To(MatchError(And(ContainSubstring("spec.eks-managed.configuration.nodeLabels["+label+"]: Forbidden"), ContainSubstring(want))))
		})
	}
	// A label of a domain the kubelet may set, and a plain one, are fine.
	ig := shortIG(ns, "fine")
	ig.Spec.EKS.Configuration.Labels = map[string]string{"node.kubernetes.io/exclude-from-external-load-balancers": "true", "team": "a"}
	g.Expect(tn.client.Create(ctx, ig)).To(Succeed())
	t.Cleanup(func() { _ = admin.Delete(context.Background(), ig) }) // left, it would make later tests' ConfigMaps invalid
}

// Attack 21 (N13) and Attack 12 (N8): a managed node group's AMI fields and the
// kubelet's max-pods are sensitive: refused in deny mode unless shared; a
// rule on image shares the AMI fields too.
func TestTenantCannotPinManagedAMIsOrSetMaxPods(t *testing.T) {
	requireEnv(t)
	ns := uniqueNamespace("team-ami")
	data := exampleConfigMapData(t)
	data["enforcement"] = "deny"
	g, ctx, tn := underBoundaries(t, data, "ami-tenant", ns)

	m := managedIG(ns, "pinned", v1alpha1.EKSManagedConfiguration{InstanceType: "m5.large", AmiType: "AL2_x86_64", Version: "1.20", ReleaseVersion: "1.20.4-20210621"})
	err := tn.client.Create(ctx, m)
	g.Expect(err).To(MatchError(And(
		ContainSubstring("spec.eks-managed.configuration.amiType is restricted by ConfigMap instance-manager/instance-manager"),
		ContainSubstring("spec.eks-managed.configuration.version is restricted"),
		ContainSubstring("spec.eks-managed.configuration.releaseVersion is restricted"))))

	ig := shortIG(ns, "packed")
	ig.Spec.EKS.Configuration.BootstrapOptions = &v1alpha1.BootstrapOptions{MaxPods: 100000}
	err = tn.client.Create(ctx, ig)
	g.Expect(err).To(MatchError(ContainSubstring("spec.eks.configuration.bootstrapOptions is restricted by ConfigMap instance-manager/instance-manager")))

	// The admin shares the image: the AMI fields follow the image's rule.
	shared := withShared(t, "spec.eks.configuration.image")
	shared["boundaries"] = strings.Replace(shared["boundaries"], "\n- spec.eks.configuration.image\n", "\n", 1)
	shared["enforcement"] = "deny"
	mustSetConfigMap(t, shared)
	g.Expect(tn.client.Create(ctx, m)).To(Succeed())
	t.Cleanup(func() { _ = admin.Delete(context.Background(), m) })
	c := getIG(t, ns, "pinned").Spec.EKSManaged.Configuration
	g.Expect([]string{c.AmiType, c.Version, c.ReleaseVersion}).To(Equal([]string{"AL2_x86_64", "1.20", "1.20.4-20210621"}))
}

// Attack 22 (N14): an SSH key on a managed node group without source
// security groups (EKS would open port 22 to the internet) is refused,
// also where the admin shares keyPairName.
func TestTenantManagedSSHKeyNeedsSources(t *testing.T) {
	requireEnv(t)
	ns := uniqueNamespace("team-ssh")
	g, ctx, tn := underBoundaries(t, withShared(t, "spec.eks-managed.configuration.keyPairName"), "ssh-tenant", ns)
	m := managedIG(ns, "open-ssh", v1alpha1.EKSManagedConfiguration{InstanceType: "m5.large", KeyPairName: "my-key"})
	err := tn.client.Create(ctx, m)
	g.Expect(err).To(MatchError(And(ContainSubstring("InstanceGroup "+ns+"/open-ssh"),
		ContainSubstring("spec.eks-managed.configuration.securityGroups: Required value"), ContainSubstring("port 22"))))
}

// Attack 24 (N16): where the admin shares bootstrapArguments, flags that
// reach every pod of the node and verbose kubelet logs are still refused.
func TestTenantBootstrapFlagsAreBounded(t *testing.T) {
	requireEnv(t)
	ns := uniqueNamespace("team-flags")
	_, ctx, tn := underBoundaries(t, withShared(t, "spec.eks.configuration.bootstrapArguments"), "flags-tenant", ns)
	for args, want := range map[string]string{
		"--pause-container-account 111122223333":  "bootstrap flag --pause-container-account is not allowed",
		"--dns-cluster-ip 10.0.0.10":              "bootstrap flag --dns-cluster-ip is not allowed",
		"--kubelet-extra-args '--v=10'":           "kubelet flag --v=10: the log level must be 0 to 4",
		"--kubelet-extra-args=--max-pods=100 --x": "bootstrap flag --x is not allowed",
	} {
		t.Run(args, func(t *testing.T) {
			g := NewWithT(t)
			ig := shortIG(ns, "flags")
			ig.Spec.EKS.Configuration.BootstrapArguments = args
			err := tn.client.Create(ctx, ig)
			g.Expect(err).To(MatchError(And(ContainSubstring("spec.eks.configuration.bootstrapArguments"), ContainSubstring(want))))
		})
	}
}
