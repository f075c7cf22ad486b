package boundaries

import (
	"fmt"
	"strings"
	"testing"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/instancemgr/instance-manager/api/v1alpha1"
)

func managed(ns, name, cluster string, maxSize int64, types ...string) v1alpha1.InstanceGroup {
	return v1alpha1.InstanceGroup{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name},
		Spec: v1alpha1.InstanceGroupSpec{Provisioner: v1alpha1.ProvisionerEKSManaged, EKSManaged: &v1alpha1.EKSManagedSpec{MaxSize: maxSize,
			Configuration: &v1alpha1.EKSManagedConfiguration{ClusterName: cluster, InstanceTypes: types}}},
	}
}

func fargate(ns, name, cluster string) v1alpha1.InstanceGroup {
	return v1alpha1.InstanceGroup{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name},
		Spec:       v1alpha1.InstanceGroupSpec{Provisioner: v1alpha1.ProvisionerEKSFargate, EKSFargate: &v1alpha1.EKSFargateSpec{ClusterName: cluster}},
	}
}

func many(n int, group func(i int) v1alpha1.InstanceGroup) []v1alpha1.InstanceGroup {
	out := make([]v1alpha1.InstanceGroup, 0, n)
	for i := 0; i < n; i++ {
		out = append(out, group(i))
	}
	return out
}

func TestDefaultQuotas(t *testing.T) {
	var none *Config
	q := none.EffectiveQuotas()
	ten := many(10, func(i int) v1alpha1.InstanceGroup { return ig("a", fmt.Sprint("g", i), "m5.large", 1) })
	for _, tc := range []struct {
		name   string
		group  v1alpha1.InstanceGroup
		others []v1alpha1.InstanceGroup
		want   []string
	}{
		{"a small group", ig("a", "new", "m5.large", 5), nil, nil},
		{"the 11th group of a namespace", ig("a", "new", "m5.large", 1), ten, []string{"11 InstanceGroups in namespace a would be above quotas.perNamespace.maxGroups (10)"}},
		{"another namespace has its own", ig("b", "new", "m5.large", 1), ten, nil},
		{"500 x p5.48xlarge", ig("a", "new", "p5.48xlarge", 500), nil, []string{"spec.eks.maxSize: 500 is above quotas.perNamespace.maxSize (50)", "96000 vCPUs at maxSize in namespace a would be above quotas.perNamespace.maxTotalVCPU (512)", "quotas.total.maxTotalVCPU (4096)"}},
		{"the cluster's groups", ig("z", "new", "m5.large", 1), many(200, func(i int) v1alpha1.InstanceGroup { return ig(fmt.Sprint("ns", i), "g", "m5.large", 1) }), []string{"201 InstanceGroups in the cluster would be above quotas.total.maxGroups (200)"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got := q.Check(&tc.group, tc.others)
			if len(got) != len(tc.want) {
				t.Fatalf("Check = %q, want %q", got, tc.want)
			}
			for i := range got {
				if !strings.Contains(got[i], tc.want[i]) {
					t.Errorf("problem %d = %q, want it to contain %q", i, got[i], tc.want[i])
				}
			}
		})
	}
	// A namespace past maxGroups (the admin lowered it, or parallel creates
	// got through) still gets its groups' updates; their sizes are checked.
	eleven := append(ten, ig("a", "g10", "m5.large", 1))
	if got := q.CheckUpdate(&eleven[0], eleven); len(got) != 0 {
		t.Errorf("CheckUpdate past maxGroups = %q, want nothing", got)
	}
	grown := ig("a", "g0", "m5.large", 51)
	if got := q.CheckUpdate(&grown, eleven); len(got) != 1 || !strings.Contains(got[0], "spec.eks.maxSize: 51 is above quotas.perNamespace.maxSize (50)") {
		t.Errorf("CheckUpdate of a size past maxSize = %q", got)
	}
	if c := mustParse(t, map[string]string{"quotas": "{}"}); len(c.EffectiveQuotas().Check(&ten[0], ten)) != 0 {
		t.Error(`quotas "{}" should turn the default bounds off`)
	}
	if c := mustParse(t, map[string]string{"quotas": "perNamespace: {maxGroups: 3}"}); c.EffectiveQuotas().PerNamespace.MaxSize != nil {
		t.Error("a written quotas key should replace the defaults, not merge with them")
	}
}

func TestCheckAWSLimits(t *testing.T) {
	thirtyManaged := many(30, func(i int) v1alpha1.InstanceGroup { return managed(fmt.Sprint("ns", i), "g", "prod", 1) })
	tenFargate := many(10, func(i int) v1alpha1.InstanceGroup { return fargate(fmt.Sprint("ns", i), "g", "prod") })
	asgs := many(499, func(i int) v1alpha1.InstanceGroup { return ig(fmt.Sprint("ns", i), "g", "m5.large", 0) })
	custom := mustParse(t, map[string]string{"quotas": "awsLimits: {autoScalingGroupsPerRegion: 1000, fargateProfilesPerCluster: 2}"}).Quotas
	for _, tc := range []struct {
		name   string
		q      *Quotas
		group  v1alpha1.InstanceGroup
		others []v1alpha1.InstanceGroup
		want   []string
	}{
		{"the 31st node group of a cluster", nil, managed("x", "new", "prod", 1), thirtyManaged, []string{`31 eks-managed groups of cluster "prod" would be above quotas.awsLimits.managedNodeGroupsPerCluster (30`}},
		{"another cluster", nil, managed("x", "new", "dev", 1), thirtyManaged, nil},
		{"an update of one of the 30", nil, thirtyManaged[0], thirtyManaged, nil},
		{"the 11th Fargate profile", nil, fargate("x", "new", "prod"), tenFargate, []string{`11 eks-fargate groups of cluster "prod" would be above quotas.awsLimits.fargateProfilesPerCluster (10`}},
		{"the 501st Auto Scaling group", nil, ig("x", "new", "m5.large", 0), append(asgs, managed("y", "g", "prod", 1)), []string{"501 groups built on Auto Scaling groups (eks and eks-managed) would be above quotas.awsLimits.autoScalingGroupsPerRegion (500"}},
		{"a node group is an Auto Scaling group too", nil, managed("x", "new", "prod", 1), append(asgs, ig("y", "g", "m5.large", 0)), []string{"501 groups built on Auto Scaling groups"}},
		{"Fargate profiles are not Auto Scaling groups", nil, ig("x", "new", "m5.large", 0), append(many(498, func(i int) v1alpha1.InstanceGroup { return ig(fmt.Sprint("ns", i), "g", "m5.large", 0) }), tenFargate...), nil},
		{"the account's raised quota", custom, ig("x", "new", "m5.large", 0), append(asgs, managed("y", "g", "prod", 1)), nil},
		{"a lower one", custom, fargate("x", "new", "prod"), tenFargate[:2], []string{"3 eks-fargate groups of cluster \"prod\" would be above quotas.awsLimits.fargateProfilesPerCluster (2"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got := tc.q.CheckAWSLimits(&tc.group, tc.others)
			if len(got) != len(tc.want) {
				t.Fatalf("CheckAWSLimits = %q, want %q", got, tc.want)
			}
			for i := range got {
				if !strings.Contains(got[i], tc.want[i]) {
					t.Errorf("problem %d = %q, want it to contain %q", i, got[i], tc.want[i])
				}
			}
		})
	}
	if _, err := Parse(map[string]string{"quotas": "awsLimits: {managedNodeGroupsPerCluster: 0}"}); err == nil || !strings.Contains(err.Error(), "data.quotas.awsLimits.managedNodeGroupsPerCluster: 0") {
		t.Errorf("awsLimits of 0: %v", err)
	}
}

// Review 2026-11-26 N17: the quotas see the types instancePool
// SubFamilyFlexible derives and the type EKS picks for a node group that
// names none.
func TestQuotasSeeDerivedTypes(t *testing.T) {
	flexible := func(base string) v1alpha1.InstanceGroup {
		g := ig("a", "new", base, 4)
		g.Spec.EKS.Configuration.MixedInstancesPolicy = &v1alpha1.MixedInstancesPolicySpec{InstancePool: v1alpha1.InstancePoolSubFamilyFlexible}
		return g
	}
	for _, tc := range []struct {
		name   string
		quotas string
		group  v1alpha1.InstanceGroup
		want   string
	}{
		{"listed types only", `perNamespace: {instanceTypes: [m5.large, m5a.large]}`, flexible("m5.large"), "launches any type of the m5 sub-family at size large"},
		{"the sub-family allowed", `perNamespace: {instanceTypes: ["m5*.large"]}`, flexible("m5.large"), ""},
		{"every large", `perNamespace: {instanceTypes: ["*.large"]}`, flexible("m5.large"), ""},
		{"the base not allowed", `perNamespace: {instanceTypes: ["c5*"]}`, flexible("m5.large"), `instance type "m5.large" is not allowed`},
		{"a node group without a type is t3.medium", `perNamespace: {maxTotalVCPU: 10}`, managed("a", "new", "prod", 10), "20 vCPUs at maxSize in namespace a would be above quotas.perNamespace.maxTotalVCPU (10)"},
		{"and must be allowed", `perNamespace: {instanceTypes: ["m5.*"]}`, managed("a", "new", "prod", 1), `instance type "t3.medium" is not allowed`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got := mustParse(t, map[string]string{"quotas": tc.quotas}).Quotas.Check(&tc.group, nil)
			if tc.want == "" {
				if len(got) != 0 {
					t.Errorf("Check = %q, want nothing", got)
				}
				return
			}
			if len(got) != 1 || !strings.Contains(got[0], tc.want) {
				t.Errorf("Check = %q, want one problem containing %q", got, tc.want)
			}
		})
	}
}
