package eks

import (
	"strings"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/service/ec2"

	"github.com/instancemgr/instance-manager/api/v1alpha1"
	"github.com/instancemgr/instance-manager/providers"
	"github.com/instancemgr/instance-manager/test/env"
)

func TestENIMaxPods(t *testing.T) {
	for _, tc := range []struct {
		enis, ipv4 int32
		want       int64
	}{
		{3, 10, 29},   // m5.large
		{15, 50, 737}, // m5.24xlarge
		{2, 2, 4},     // t3.nano
	} {
		if got := ENIMaxPods(tc.enis, tc.ipv4); got != tc.want {
			t.Errorf("ENIMaxPods(%d, %d) = %d, want %d", tc.enis, tc.ipv4, got, tc.want)
		}
	}
}

// TestMaxPodsBoundedOnMoto checks maxPods against the instance type data
// EC2 DescribeInstanceTypes gives (moto carries AWS's): m5.large has 3
// network interfaces of 10 IPv4 addresses, 29 pods.
func TestMaxPodsBoundedOnMoto(t *testing.T) {
	e := env.Start(t, env.Options{AWS: true})
	capacity := &podCapacity{api: ec2.NewFromConfig(e.AWS), ttl: time.Hour, now: time.Now}
	for _, tc := range []struct {
		name string
		c    v1alpha1.EKSConfiguration
		want string // substring of the SpecError; "" for none
	}{
		{"at the bound", v1alpha1.EKSConfiguration{InstanceType: "m5.large", BootstrapOptions: &v1alpha1.BootstrapOptions{MaxPods: 29}}, ""},
		{"unset", v1alpha1.EKSConfiguration{InstanceType: "m5.large"}, ""},
		{"past the bound", v1alpha1.EKSConfiguration{InstanceType: "m5.large", BootstrapOptions: &v1alpha1.BootstrapOptions{MaxPods: 100000}},
			"spec.eks.configuration.bootstrapOptions.maxPods: max pods 100000 is more than instance type m5.large can give addresses to: 3 network interfaces × (10 IPv4 addresses − 1) + 2 = 29; set at most 29"},
		{"the smallest type of a mixed policy decides", v1alpha1.EKSConfiguration{InstanceType: "m5.24xlarge", BootstrapOptions: &v1alpha1.BootstrapOptions{MaxPods: 100},
			MixedInstancesPolicy: &v1alpha1.MixedInstancesPolicySpec{InstanceTypes: []v1alpha1.InstanceTypeSpec{{Type: "m5.24xlarge"}, {Type: "m5.large"}}}}, "instance type m5.large"},
		{"kubelet --max-pods in bootstrapArguments", v1alpha1.EKSConfiguration{InstanceType: "m5.large", BootstrapArguments: "--kubelet-extra-args '--max-pods=110'"},
			"spec.eks.configuration.bootstrapArguments: max pods 110"},
		{"an unknown type is left to other checks", v1alpha1.EKSConfiguration{InstanceType: "m5.enormous", BootstrapOptions: &v1alpha1.BootstrapOptions{MaxPods: 500}}, ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			ig := eksGroup(tc.c)
			var mixed []v1alpha1.InstanceTypeSpec
			if m := tc.c.MixedInstancesPolicy; m != nil {
				mixed = m.InstanceTypes
			}
			err := checkMaxPods(t.Context(), capacity, ig, typeNames(tc.c.InstanceType, mixed))
			switch {
			case tc.want == "" && err != nil:
				t.Errorf("unexpected error %v", err)
			case tc.want != "" && (err == nil || !providers.IsSpecError(err) || !strings.Contains(err.Error(), tc.want)):
				t.Errorf("error = %v, want a SpecError containing %q", err, tc.want)
			}
		})
	}
}
