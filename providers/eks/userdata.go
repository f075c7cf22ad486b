package eks

import (
	"encoding/base64"
	"fmt"
	"sort"
	"strings"

	corev1 "k8s.io/api/core/v1"

	"github.com/instancemgr/instance-manager/api/v1alpha1"
	"github.com/instancemgr/instance-manager/providers/nodeargs"
)

// psQuote quotes s for PowerShell: single quotes, each inside doubled.
func psQuote(s string) string { return "'" + strings.ReplaceAll(s, "'", "''") + "'" }

// ClusterInfo is what nodes need to know about their EKS cluster to join it
// (from EKS DescribeCluster).
type ClusterInfo struct {
	Name                 string
	Endpoint             string // https URL of the API server
	CertificateAuthority string // base64 PEM
	ServiceCIDR          string // e.g. 10.100.0.0/16
	Version              string // e.g. 1.31
	AuthenticationMode   string // CONFIG_MAP, API or API_AND_CONFIG_MAP
}

// bootstrap is the input of the user data for one group.
type bootstrap struct {
	cluster   ClusterInfo
	osFamily  string
	labels    map[string]string
	taints    []corev1.Taint
	maxPods   int64
	extraArgs string // spec...bootstrapArguments
	stages    []v1alpha1.UserDataStage
	volumes   []v1alpha1.NodeVolume
	// waitInService makes the node join only once Auto Scaling puts its
	// instance in service (the group has a warm pool; see warmjoin.go).
	waitInService bool
}

// UserData renders the launch template user data (plain text, not yet
// base64) for the OS family of the group (annotation
// instancemgr.keikoproj.io/os-family): amazonlinux2 runs
// /etc/eks/bootstrap.sh, amazonlinux2023 a nodeadm NodeConfig in a MIME
// multipart document, bottlerocket TOML settings, windows
// Start-EKSBootstrap.ps1. Labels and taints are registered by the kubelet.
func (b bootstrap) UserData() string {
	switch b.osFamily {
	case v1alpha1.OSFamilyAmazonLinux2023:
		return b.al2023()
	case v1alpha1.OSFamilyBottlerocket:
		return b.bottlerocket()
	case v1alpha1.OSFamilyWindows:
		return b.windows()
	default:
		return b.al2()
	}
}

func (b bootstrap) nodeLabels() string {
	keys := make([]string, 0, len(b.labels))
	for k := range b.labels {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	parts := make([]string, len(keys))
	for i, k := range keys {
		parts[i] = k + "=" + b.labels[k]
	}
	return strings.Join(parts, ",")
}

func (b bootstrap) nodeTaints() string {
	parts := make([]string, len(b.taints))
	for i, t := range b.taints {
		parts[i] = fmt.Sprintf("%s=%s:%s", t.Key, t.Value, t.Effect)
	}
	return strings.Join(parts, ",")
}

// kubeletFlags are the kubelet flags every Linux bootstrap passes.
func (b bootstrap) kubeletFlags() []string {
	flags := []string{"--node-labels=" + b.nodeLabels()}
	if len(b.taints) > 0 {
		flags = append(flags, "--register-with-taints="+b.nodeTaints())
	}
	if b.maxPods > 0 && b.osFamily != v1alpha1.OSFamilyAmazonLinux2023 {
		flags = append(flags, fmt.Sprintf("--max-pods=%d", b.maxPods))
	}
	return flags
}

// Validate checks what the user data interpolates into shell and TOML:
// bootstrapArguments (nodeargs.Parse), volume device names, mount paths and
// file system types. Admission refuses the same; this guards groups
// stored before it did. The error names the field.
func (b bootstrap) Validate() error {
	if _, err := nodeargs.Parse(b.extraArgs); err != nil {
		return fmt.Errorf("spec.eks.configuration.bootstrapArguments: %w", err)
	}
	for i, v := range b.volumes {
		if !nodeargs.DeviceName.MatchString(v.Name) {
			return fmt.Errorf("spec.eks.configuration.volumes[%d].name: %q is not a device name like /dev/xvdb", i, v.Name)
		}
		if m := v.MountOptions; m != nil {
			if m.Mount != "" && !nodeargs.MountPath.MatchString(m.Mount) {
				return fmt.Errorf("spec.eks.configuration.volumes[%d].mountOptions.mount: %q is not a plain absolute path", i, m.Mount)
			}
			if m.FileSystem != "" && !nodeargs.FileSystem.MatchString(m.FileSystem) {
				return fmt.Errorf("spec.eks.configuration.volumes[%d].mountOptions.fileSystem: %q is not a file system type", i, m.FileSystem)
			}
		}
	}
	if b.waitInService && b.osFamily == v1alpha1.OSFamilyWindows {
		return fmt.Errorf("spec.eks.warmPool: %s", WarmPoolWindowsRefusal)
	}
	return nil
}

// splitExtraArgs parses the bootstrap arguments into bootstrap-script
// words (nodeargs.Args.BootstrapWords: "--name value") and kubelet flags (joined to ours: bootstrap.sh honours only one
// --kubelet-extra-args). Arguments that do not parse give nothing; Validate
// reports them.
func splitExtraArgs(args string) (rest []string, kubelet []string) {
	a, err := nodeargs.Parse(args)
	if err != nil {
		return nil, nil
	}
	return a.BootstrapWords(), a.Kubelet
}

func (b bootstrap) script(stage string) string {
	var sb strings.Builder
	for _, s := range b.stages {
		if s.Stage != stage {
			continue
		}
		data := s.Data
		if dec, err := base64.StdEncoding.DecodeString(data); err == nil && len(dec) > 0 {
			data = string(dec)
		}
		fmt.Fprintf(&sb, "# userData stage %q (%s)\n%s\n", s.Name, s.Stage, strings.TrimRight(data, "\n"))
	}
	return sb.String()
}

// mounts formats and mounts additional volumes that ask for it.
func (b bootstrap) mounts() string {
	var sb strings.Builder
	for _, v := range b.volumes {
		m := v.MountOptions
		if m == nil || m.Mount == "" || m.FileSystem == "" {
			continue
		}
		fs, dev, dir := nodeargs.ShellQuote(m.FileSystem), nodeargs.ShellQuote(v.Name), nodeargs.ShellQuote(m.Mount)
		fmt.Fprintf(&sb, "mkfs -t %s %s && mkdir -p %s && mount %s %s\n", fs, dev, dir, dev, dir)
		if m.Persistance == nil || *m.Persistance {
			fmt.Fprintf(&sb, "echo %s >> /etc/fstab\n", nodeargs.ShellQuote(v.Name+" "+m.Mount+" "+m.FileSystem+" defaults,nofail 0 2"))
		}
	}
	return sb.String()
}

func (b bootstrap) al2() string {
	rest, extra := splitExtraArgs(b.extraArgs)
	kubelet := strings.Join(append(b.kubeletFlags(), extra...), " ")
	var join strings.Builder
	join.WriteString(b.mounts())
	join.WriteString(b.script("PreBootstrap"))
	fmt.Fprintf(&join, "/etc/eks/bootstrap.sh %s --kubelet-extra-args %s", nodeargs.ShellQuote(b.cluster.Name), nodeargs.ShellQuote(kubelet))
	if b.cluster.Endpoint != "" && b.cluster.CertificateAuthority != "" {
		fmt.Fprintf(&join, " --apiserver-endpoint %s --b64-cluster-ca %s", nodeargs.ShellQuote(b.cluster.Endpoint), nodeargs.ShellQuote(b.cluster.CertificateAuthority))
	}
	for _, f := range rest {
		join.WriteString(" " + nodeargs.ShellQuote(f))
	}
	join.WriteString("\n")
	join.WriteString(b.script("PostBootstrap"))
	if b.waitInService {
		return "#!/bin/bash\nset -o xtrace\n" + warmJoin(join.String())
	}
	return "#!/bin/bash\nset -o xtrace\n" + join.String()
}

const mimeBoundary = "//instance-manager//"

func (b bootstrap) al2023() string {
	_, extra := splitExtraArgs(b.extraArgs)
	flags := append(b.kubeletFlags(), extra...)
	var sb strings.Builder
	fmt.Fprintf(&sb, "MIME-Version: 1.0\nContent-Type: multipart/mixed; boundary=\"%s\"\n\n", mimeBoundary)
	pre, post := b.mounts()+b.script("PreBootstrap"), b.script("PostBootstrap")
	if b.waitInService {
		// nodeadm-run.service starts the kubelet after cloud-final, which
		// runs this part: holding it until InService holds the join.
		pre, post = warmJoin(pre+post), ""
	}
	if pre != "" {
		fmt.Fprintf(&sb, "--%s\nContent-Type: text/x-shellscript; charset=\"us-ascii\"\n\n#!/bin/bash\n%s\n", mimeBoundary, pre)
	}
	fmt.Fprintf(&sb, "--%s\nContent-Type: application/node.eks.aws\n\n", mimeBoundary)
	sb.WriteString("apiVersion: node.eks.aws/v1alpha1\nkind: NodeConfig\nspec:\n  cluster:\n")
	fmt.Fprintf(&sb, "    name: %s\n    apiServerEndpoint: %s\n    certificateAuthority: %s\n    cidr: %s\n",
		b.cluster.Name, b.cluster.Endpoint, b.cluster.CertificateAuthority, b.cluster.ServiceCIDR)
	sb.WriteString("  kubelet:\n")
	if b.maxPods > 0 {
		fmt.Fprintf(&sb, "    config:\n      maxPods: %d\n", b.maxPods)
	}
	sb.WriteString("    flags:\n")
	for _, f := range flags {
		fmt.Fprintf(&sb, "    - %q\n", f)
	}
	if post != "" {
		fmt.Fprintf(&sb, "\n--%s\nContent-Type: text/x-shellscript; charset=\"us-ascii\"\n\n#!/bin/bash\n%s", mimeBoundary, post)
	}
	fmt.Fprintf(&sb, "\n--%s--\n", mimeBoundary)
	return sb.String()
}

func (b bootstrap) bottlerocket() string {
	var sb strings.Builder
	sb.WriteString("[settings.kubernetes]\n")
	fmt.Fprintf(&sb, "cluster-name = %q\napi-server = %q\ncluster-certificate = %q\n", b.cluster.Name, b.cluster.Endpoint, b.cluster.CertificateAuthority)
	if b.maxPods > 0 {
		fmt.Fprintf(&sb, "max-pods = %d\n", b.maxPods)
	}
	if b.waitInService {
		// Bottlerocket's own warm-pool wait: the kubelet starts once the
		// instance's target lifecycle state is InService.
		sb.WriteString("\n[settings.autoscaling]\nshould-wait = true\n")
	}
	sb.WriteString("\n[settings.kubernetes.node-labels]\n")
	keys := make([]string, 0, len(b.labels))
	for k := range b.labels {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	for _, k := range keys {
		fmt.Fprintf(&sb, "%q = %q\n", k, b.labels[k])
	}
	if len(b.taints) > 0 {
		sb.WriteString("\n[settings.kubernetes.node-taints]\n")
		byKey := map[string][]string{}
		var tkeys []string
		for _, t := range b.taints {
			if _, ok := byKey[t.Key]; !ok {
				tkeys = append(tkeys, t.Key)
			}
			byKey[t.Key] = append(byKey[t.Key], fmt.Sprintf("%q", t.Value+":"+string(t.Effect)))
		}
		for _, k := range tkeys {
			fmt.Fprintf(&sb, "%q = [%s]\n", k, strings.Join(byKey[k], ", "))
		}
	}
	// Bottlerocket user data is TOML settings: stages are appended as TOML.
	for _, stage := range []string{"PreBootstrap", "PostBootstrap"} {
		if s := b.script(stage); s != "" {
			sb.WriteString("\n" + s)
		}
	}
	return sb.String()
}

func (b bootstrap) windows() string {
	args := "--node-labels=" + b.nodeLabels()
	if len(b.taints) > 0 {
		args += " --register-with-taints=" + b.nodeTaints()
	}
	rest, extra := splitExtraArgs(b.extraArgs)
	if len(extra) > 0 {
		args += " " + strings.Join(extra, " ")
	}
	var sb strings.Builder
	sb.WriteString("<powershell>\n")
	sb.WriteString(b.script("PreBootstrap"))
	sb.WriteString("[string]$EKSBootstrapScriptFile = \"$env:ProgramFiles\\Amazon\\EKS\\Start-EKSBootstrap.ps1\"\n")
	fmt.Fprintf(&sb, "& $EKSBootstrapScriptFile -EKSClusterName %s -KubeletExtraArgs %s", psQuote(b.cluster.Name), psQuote(args))
	if len(rest) > 0 {
		// bootstrap.sh flags have no Start-EKSBootstrap.ps1 equivalent;
		// admission accepts them for Linux only.
		sb.WriteString(" # bootstrap flags ignored on Windows")
	}
	sb.WriteString(" 3>&1 4>&1 5>&1 6>&1\n")
	sb.WriteString(b.script("PostBootstrap"))
	sb.WriteString("</powershell>\n")
	return sb.String()
}
