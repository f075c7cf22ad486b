package boundaries

import (
	"errors"
	"strings"
	"testing"

	"github.com/instancemgr/instance-manager/api/v1alpha1"
)

func TestParseAllowlists(t *testing.T) {
	for _, tc := range []struct {
		name    string
		yaml    string
		wantErr string // substring; "" = valid
		check   func(t *testing.T, a *Allowlists)
	}{
		{name: "lists as written", yaml: "roles: [team-*]\nssmParameterPrefixes: [/platform/images/]\nsnapshots: []\n", check: func(t *testing.T, a *Allowlists) {
			if l, written, _ := a.List(AllowRoles); !written || len(l) != 1 || l[0] != "team-*" {
				t.Errorf("roles = %v (written %v)", l, written)
			}
			if l, written, checked := a.List(AllowSnapshots); !written || !checked || len(l) != 0 {
				t.Errorf("an empty list written stays empty: %v %v %v", l, written, checked)
			}
		}},
		{name: "unknown key", yaml: "role: [x]\n", wantErr: `data.allowlists: unknown field "role"`},
		{name: "not a list", yaml: "roles: x\n", wantErr: "data.allowlists.roles: expected a list of strings"},
		{name: "a wildcard that matches everything", yaml: "roles: ['*']\n", wantErr: `data.allowlists.roles[0]: "*" matches everything`},
		{name: "a prefix that is not a path", yaml: "ssmParameterPrefixes: [prod]\n", wantErr: "data.allowlists.ssmParameterPrefixes[0]"},
		{name: "a path where names are compared", yaml: "roles: [/byo/]\n", wantErr: "data.allowlists.roles[0]: \"/byo/\": roleName and instanceProfileName are names"},
		{name: "an owner that is not an account", yaml: "imageOwners: [someone]\n", wantErr: "12-digit account id"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			c, err := Parse(map[string]string{KeyAllowlists: tc.yaml})
			if tc.wantErr != "" {
				var ce *ConfigError
				if !errors.As(err, &ce) || !strings.Contains(err.Error(), tc.wantErr) {
					t.Fatalf("Parse error = %v, want one containing %q", err, tc.wantErr)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			tc.check(t, c.Allowlists)
		})
	}
}

func TestAllowlistDefaultsWhenAbsent(t *testing.T) {
	var a *Allowlists
	for key, want := range map[string]struct {
		n       int
		checked bool
	}{
		AllowRoles: {0, true}, AllowSnapshots: {0, true}, AllowManagedPolicies: {4, true}, AllowSSMParameterPrefixes: {1, true},
		AllowSubnets: {0, false}, AllowImageOwners: {0, false}, AllowClusters: {0, false},
	} {
		l, written, checked := a.List(key)
		if written || checked != want.checked || len(l) != want.n {
			t.Errorf("%s absent: %v written=%v checked=%v; want %d entries, checked=%v", key, l, written, checked, want.n, want.checked)
		}
	}
}

func TestAllowMatch(t *testing.T) {
	for _, tc := range []struct {
		entry, value string
		want         bool
	}{
		{"team-a-role", "team-a-role", true},
		{"team-a-role", "team-b-role", false},
		{"team-*", "team-b-role", true},
		{"arn:aws:iam::111122223333:role/byo/*", "arn:aws:iam::111122223333:role/byo/nodes", true},
		{"arn:aws:iam::111122223333:role/byo/*", "arn:aws:iam::999999999999:role/byo/nodes", false},
		{"/byo/", "arn:aws:iam::111122223333:role/byo/nodes", true},
		{"/byo/", "arn:aws:iam::111122223333:role/byo-evil/nodes", false},
		{"/byo/", "arn:aws:iam::111122223333:role/nodes", false},
		{"/byo/", "byo-role-name", false},
		{"snap-1*", "snap-0123", false},
	} {
		if got := allowMatch(tc.entry, tc.value); got != tc.want {
			t.Errorf("allowMatch(%q, %q) = %v, want %v", tc.entry, tc.value, got, tc.want)
		}
	}
}

func TestCheckAllowlists(t *testing.T) {
	exampleDefaults := `spec:
  eks:
    configuration:
      clusterName: a-managed-cluster
      roleName: a-managed-role
      instanceProfileName: a-managed-profile
`
	for _, tc := range []struct {
		name     string
		data     map[string]string
		clusters []string
		spec     string
		owners   map[string][]string
		admin    bool // the group is in the ConfigMap's namespace
		annots   map[string]string
		want     []string // substrings, one per expected error; none = allowed
	}{
		{name: "the admin's namespace: only the cluster is checked", admin: true, clusters: []string{"prod"},
			spec: `eks: {configuration: {clusterName: dev, roleName: anything}}`,
			want: []string{`spec.eks.configuration.clusterName: Forbidden: "dev"`}},
		{name: "no ConfigMap keys: no bring-your-own role", spec: `eks: {configuration: {roleName: admin, instanceProfileName: admin}}`,
			want: []string{`spec.eks.configuration.roleName: Forbidden: "admin" is not allowed by the boundary ConfigMap's data.allowlists.roles (the list is absent, so none is allowed)`,
				`spec.eks.configuration.instanceProfileName: Forbidden: "admin" is not allowed by the boundary ConfigMap's data.allowlists.instanceProfiles`}},
		{name: "the admin's defaults are implicitly allowed", data: map[string]string{KeyDefaults: exampleDefaults},
			spec: `eks: {configuration: {clusterName: a-managed-cluster, roleName: a-managed-role, instanceProfileName: a-managed-profile}}`, clusters: []string{"prod"}},
		{name: "listed roles pass", data: map[string]string{KeyAllowlists: "roles: [team-*]\ninstanceProfiles: [team-*]\n"},
			spec: `eks: {configuration: {roleName: team-a, instanceProfileName: team-a}}`},
		{name: "managed policies: worker policies by name or ARN pass, AdministratorAccess does not",
			spec: `eks: {configuration: {managedPolicies: [AmazonEKSWorkerNodePolicy, "arn:aws:iam::aws:policy/AmazonSSMManagedInstanceCore", AdministratorAccess]}}`,
			want: []string{`spec.eks.configuration.managedPolicies[2]: Forbidden: "arn:aws:iam::aws:policy/AdministratorAccess" is not allowed by the boundary ConfigMap's data.allowlists.managedPolicies (the list is absent, so only the default applies: arn:aws:iam::aws:policy/AmazonEKSWorkerNodePolicy`}},
		{name: "snapshots: none by default", spec: `eks: {configuration: {volumes: [{name: /dev/xvdb, snapshotId: snap-0123}]}}`,
			want: []string{`spec.eks.configuration.volumes[0].snapshotId: Forbidden: "snap-0123" is not allowed by the boundary ConfigMap's data.allowlists.snapshots`}},
		{name: "ssm: the public prefix only by default", spec: `eks: {configuration: {image: "ssm:///prod/db/password"}}`,
			want: []string{`spec.eks.configuration.image: Forbidden: "/prod/db/password" is not allowed by the boundary ConfigMap's data.allowlists.ssmParameterPrefixes (the list is absent, so only the default applies: /aws/service/)`}},
		{name: "ssm: the public EKS parameters pass", spec: `eks: {configuration: {image: "ssm:///aws/service/eks/optimized-ami/1.30/amazon-linux-2/recommended/image_id"}}`},
		{name: "another cluster is refused when the controller's is known", clusters: []string{"prod"}, spec: `eks: {configuration: {clusterName: dev}}`,
			want: []string{`spec.eks.configuration.clusterName: Forbidden: "dev" is not allowed by the boundary ConfigMap's data.allowlists.clusters (the controller's own clusters: prod)`}},
		{name: "no --cluster-name: any cluster, as before", spec: `eks: {configuration: {clusterName: dev}}`},
		{name: "eks-managed node role, fargate pod role, lifecycle hooks", data: map[string]string{KeyAllowlists: "nodeRoles: [/byo/]\nlifecycleHookTargets: ['arn:aws:sns:us-west-2:111122223333:team-*']\n"},
			spec: `{eks-managed: {configuration: {nodeRole: "arn:aws:iam::111122223333:role/byo/nodes"}}, eks-fargate: {podExecutionRoleArn: "arn:aws:iam::111122223333:role/byo/pods"},
  eks: {configuration: {lifecycleHooks: [{name: h, roleArn: "arn:aws:iam::111122223333:role/x", notificationArn: "arn:aws:sns:us-west-2:111122223333:team-a"}]}}}`,
			want: []string{`spec.eks.configuration.lifecycleHooks[0].roleArn: Forbidden`, `spec.eks-fargate.podExecutionRoleArn: Forbidden`}},
		{name: "subnets: listed ids or names", data: map[string]string{KeyAllowlists: "subnets: [subnet-a, nodes-*]\n"},
			spec: `eks: {configuration: {subnets: [subnet-a, nodes-private-1, subnet-other]}}`,
			want: []string{`spec.eks.configuration.subnets[2]: Forbidden: "subnet-other" is not allowed by the boundary ConfigMap's data.allowlists.subnets (allowed: subnet-a, nodes-*)`}},
		{name: "image owners", data: map[string]string{KeyAllowlists: "imageOwners: ['602401143452']\n"}, owners: map[string][]string{"ami-eks": {"602401143452"}, "ami-evil": {"999999999999"}},
			spec: `eks: {configuration: {image: ami-evil}}`,
			want: []string{`spec.eks.configuration.image: Forbidden: image "ami-evil" is owned by 999999999999, which is not in the boundary ConfigMap's data.allowlists.imageOwners (allowed: 602401143452)`}},
		{name: "a conditional's role is the admin's for the groups it matches", data: map[string]string{KeyConditionals: conditionalRole},
			annots: map[string]string{"team": "gpu"}, spec: `eks: {configuration: {roleName: gpu-nodes, instanceProfileName: gpu-nodes}}`},
		{name: "a conditional's role is not granted to the groups it does not match", data: map[string]string{KeyConditionals: conditionalRole},
			annots: map[string]string{"team": "web"}, spec: `eks: {configuration: {roleName: gpu-nodes, instanceProfileName: gpu-nodes}}`,
			want: []string{`spec.eks.configuration.roleName: Forbidden: "gpu-nodes"`, `spec.eks.configuration.instanceProfileName: Forbidden: "gpu-nodes"`}},
		{name: "image owners: an allowed owner", data: map[string]string{KeyAllowlists: "imageOwners: ['602401143452']\n"}, owners: map[string][]string{"ami-eks": {"602401143452"}},
			spec: `eks: {configuration: {image: ami-eks}}`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			cfg, err := Parse(tc.data)
			if err != nil {
				t.Fatal(err)
			}
			spec, err := DecodeSpec(specOf(t, tc.spec))
			if err != nil {
				t.Fatal(err)
			}
			ctx := AllowContext{Clusters: tc.clusters, AdminNamespace: tc.admin, Annotations: tc.annots}
			if tc.owners != nil {
				ctx.ImageOwner = func(id string) ([]string, error) { return tc.owners[id], nil }
			}
			errs := cfg.CheckAllowlists(spec, ctx)
			if len(errs) != len(tc.want) {
				t.Fatalf("got %d errors, want %d: %v", len(errs), len(tc.want), errs)
			}
			for i, w := range tc.want {
				if !strings.Contains(errs[i].Error(), w) {
					t.Errorf("error %d = %q\nwant it to contain %q", i, errs[i].Error(), w)
				}
			}
		})
	}
}

func TestCheckAllowlistsWithoutConfigMap(t *testing.T) {
	var c *Config
	spec := &v1alpha1.InstanceGroupSpec{EKS: &v1alpha1.EKSSpec{Configuration: &v1alpha1.EKSConfiguration{RoleName: "admin"}}}
	if errs := c.CheckAllowlists(spec, AllowContext{}); len(errs) != 1 {
		t.Errorf("no ConfigMap must still refuse a bring-your-own role: %v", errs)
	}
}

// conditionalRole grants a role to the groups annotated team=gpu only.
const conditionalRole = `- annotationSelector: team=gpu
  defaults:
    spec:
      eks:
        configuration:
          roleName: gpu-nodes
          instanceProfileName: gpu-nodes
`
