package boundaries

import (
	"errors"
	"strings"
	"testing"

	"k8s.io/apimachinery/pkg/util/intstr"
)

func TestDecodeSpec(t *testing.T) {
	spec, err := DecodeSpec(specOf(t, `
provisioner: eks
strategy: {type: rollingUpdate, rollingUpdate: {maxUnavailable: 30%}}
eks:
  minSize: 1
  maxSize: 3
  configuration:
    image: ami-1
    labels: {a: b}
    tags: [{key: k, value: v}]
    taints: [{key: t, value: v, effect: NoSchedule, timeAdded: "2024-01-02T03:04:05Z"}]
    volumes: [{name: /dev/xvda, size: 50, encrypted: true}]
    mixedInstancesPolicy: {spotRatio: 60, instanceTypes: [{type: m5.large, weight: 2}]}
`))
	if err != nil {
		t.Fatal(err)
	}
	cfg := spec.EKS.Configuration
	if spec.Provisioner != "eks" || spec.EKS.MaxSize != 3 || cfg.Image != "ami-1" || cfg.Labels["a"] != "b" ||
		cfg.Tags[0]["key"] != "k" || cfg.Taints[0].TimeAdded == nil || !*cfg.Volumes[0].Encrypted ||
		cfg.MixedInstancesPolicy.InstanceTypes[0].Weight != 2 ||
		*cfg.MixedInstancesPolicy.SpotRatio != intstr.FromInt32(60) ||
		*spec.Strategy.RollingUpdate.MaxUnavailable != intstr.FromString("30%") {
		t.Errorf("decoded %+v", spec)
	}
	if spec, err := DecodeSpec(nil); err != nil || spec == nil || spec.EKS != nil {
		t.Errorf("nil spec: %v %v", spec, err)
	}
}

func TestDecodeSpecRejects(t *testing.T) {
	for _, tc := range []struct {
		name string
		spec map[string]any
		want []string
	}{
		{"unknown fields, all of them", specOf(t, "provisoner: eks\neks: {configuration: {imag: x, volumes: [{nme: a}]}}"), []string{
			`spec.eks.configuration: unknown field "imag" (valid: image, `,
			`spec.eks.configuration.volumes[0]: unknown field "nme" (valid: name, `,
			`spec: unknown field "provisoner" (valid: provisioner, `,
		}},
		{"field names are case-sensitive", specOf(t, "Provisioner: eks"), []string{`spec: unknown field "Provisioner"`}},
		{"wrong types", specOf(t, "eks: {minSize: '1', configuration: {tags: {key: a}, labels: {a: true}}}\nstrategy: []"), []string{
			"spec.eks.configuration.labels[a]: expected a string, got a boolean",
			"spec.eks.configuration.tags: expected a list, got an object",
			"spec.eks.minSize: expected an integer, got a string",
			"spec.strategy: expected an object, got a list",
		}},
		{"integer out of range", map[string]any{"eks": map[string]any{"minSize": 1e19}}, []string{"spec.eks.minSize: expected an integer, got a number"}},
		{"int-or-string", specOf(t, "strategy: {rollingUpdate: {maxSurge: {a: 1}}}"), []string{"spec.strategy.rollingUpdate.maxSurge: not a value of type intstr.IntOrString"}},
		{"no JSON form", map[string]any{"eks": func() {}}, []string{"spec.eks: value of type func() has no JSON form"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			spec, err := DecodeSpec(tc.spec)
			var se *SpecError
			if !errors.As(err, &se) || spec != nil {
				t.Fatalf("DecodeSpec = %v, %v; want a *SpecError", spec, err)
			}
			if len(se.Problems) != len(tc.want) {
				t.Fatalf("problems:\n%s", strings.Join(se.Problems, "\n"))
			}
			if want := strings.Join(se.Problems, "; "); !strings.HasPrefix(err.Error(), "invalid spec") || !strings.HasSuffix(err.Error(), want) {
				t.Errorf("Error() = %q, want the problems joined", err)
			}
			for i, w := range tc.want {
				if !strings.Contains(se.Problems[i], w) {
					t.Errorf("problem %d = %q, want it to contain %q", i, se.Problems[i], w)
				}
			}
		})
	}
}

// The schema walk and the API types agree: every field the walk accepts
// decodes. A spec using every field of the API is accepted and round-trips.
func TestDecodeSpecEveryField(t *testing.T) {
	full := specOf(t, `
provisioner: eks
strategy:
  type: crd
  rollingUpdate: {maxUnavailable: 1, maxSurge: 10%}
  crd: {crdName: a, spec: b, statusJSONPath: c, statusSuccessString: d, statusFailureString: e, concurrencyPolicy: forbid, maxRetries: -1}
eks:
  minSize: 1
  maxSize: 2
  type: LaunchTemplate
  warmPool: {minSize: 0, maxSize: -1}
  configuration:
    clusterName: c
    image: i
    instanceType: t
    keyPairName: k
    subnets: [s]
    securityGroups: [g]
    volSize: 3
    volumes: [{name: nm, type: gp3, size: 1, iops: 2, throughput: 3, snapshotId: s, deleteOnTermination: true, encrypted: false, mountOptions: {fileSystem: xfs, mount: /m, persistance: true}}]
    taints: [{key: k, value: v, effect: NoSchedule, timeAdded: "2024-01-02T03:04:05Z"}]
    labels: {a: b}
    tags: [{key: k, value: v}]
    bootstrapArguments: a
    bootstrapOptions: {maxPods: 3, containerRuntime: containerd}
    userData: [{name: nm, stage: PreBootstrap, data: d}]
    spotPrice: "0.5"
    roleName: r
    instanceProfileName: p
    managedPolicies: [m]
    mixedInstancesPolicy: {strategy: LowestPrice, spotPools: 2, baseCapacity: 1, spotRatio: 50%, instancePool: SubFamilyFlexible, instanceTypes: [{type: t, weight: 1}]}
    lifecycleHooks: [{name: nm, lifecycle: launch, defaultResult: abandon, heartbeatTimeout: 30, notificationArn: a, roleArn: r, metadata: m}]
    metricsCollection: [All]
    suspendProcesses: [Launch]
    metadataOptions: {httpEndpoint: enabled, httpTokens: required, httpPutResponseHopLimit: 2}
    licenseSpecifications: [l]
    placement: {availabilityZone: a, hostResourceGroupArn: h, tenancy: host}
eks-managed:
  minSize: 1
  maxSize: 2
  configuration: {clusterName: c, instanceType: t, instanceTypes: [t], volSize: 1, labels: {a: b}, nodeLabels: {a: b}, taints: [{key: k, effect: NoSchedule}], nodeRole: r, keyPairName: k, securityGroups: [s], subnets: [s], tags: [{key: k, value: v}], amiType: a, releaseVersion: r, version: v, capacityType: SPOT}
eks-fargate: {clusterName: c, podExecutionRoleArn: r, subnets: [s], selectors: [{namespace: ns, labels: {a: b}}], tags: {a: b}}
`)
	spec, err := DecodeSpec(full)
	if err != nil {
		t.Fatal(err)
	}
	back := canon(t, spec).(map[string]any)
	// Zero values are dropped by omitempty on the way back; restore them for the comparison.
	delete(full["eks"].(map[string]any)["warmPool"].(map[string]any), "minSize")
	if d := diff(t, full, back); d != "" {
		t.Errorf("round trip (-in +out):\n%s", d)
	}
}
