// Package nodeargs parses an InstanceGroup's bootstrapArguments into
// structured, allowlisted flags, and holds the patterns other values
// interpolated into node user data must match. Admission validates with it
// and the eks provisioner renders from it, so that no tenant text reaches a
// shell line unchecked (issue 11, "No tenant shell on nodes").
package nodeargs

import (
	"fmt"
	"regexp"
	"slices"
	"strconv"
	"strings"
)

// Args are parsed bootstrapArguments: flags of the bootstrap script and
// kubelet flags, each "--name" or "--name=value" and shell-safe.
type Args struct {
	Bootstrap []string
	Kubelet   []string
}

// BootstrapWords are the bootstrap script's flags as its command line
// takes them: "--name" then, for a flag with a value, the value as the
// next word (AL2's bootstrap.sh reads "--name value" only; "--name=value"
// is an unknown positional word to it).
func (a Args) BootstrapWords() []string {
	var out []string
	for _, f := range a.Bootstrap {
		name, value, ok := strings.Cut(f, "=")
		out = append(out, name)
		if ok {
			out = append(out, value)
		}
	}
	return out
}

// BootstrapFlags are the bootstrap script (AL2 bootstrap.sh) flags a
// group may pass. Cluster, endpoint, CA and kubelet arguments are the
// controller's, and so are those of reservedBootstrapFlags.
var BootstrapFlags = []string{"container-runtime", "enable-docker-bridge", "ip-family",
	"pause-container-version", "use-max-pods"}

// reservedBootstrapFlags are bootstrap.sh flags that reach every pod on
// the node, with why they are refused (issue 25, N16).
var reservedBootstrapFlags = map[string]string{
	"pause-container-account": "it chooses the account of the pod sandbox (pause) image every pod on the node runs",
	"dns-cluster-ip":          "it chooses the DNS server of every pod on the node",
}

// MaxKubeletVerbosity is the highest kubelet --v a group may set: from 6
// on the kubelet logs the URLs, then headers and bodies of its API
// requests and responses, Secrets included.
const MaxKubeletVerbosity = 4

// KubeletFlags are the kubelet flags a group may pass through
// --kubelet-extra-args: tuning only. Node identity, registration, labels,
// taints, credentials and serving flags are not among them.
var KubeletFlags = []string{"container-log-max-files", "container-log-max-size", "cpu-cfs-quota", "cpu-manager-policy",
	"event-qps", "eviction-hard", "eviction-max-pod-grace-period", "eviction-minimum-reclaim", "eviction-soft",
	"eviction-soft-grace-period", "image-gc-high-threshold", "image-gc-low-threshold", "kube-api-burst", "kube-api-qps",
	"kube-reserved", "max-open-files", "max-pods", "pods-per-core", "registry-burst", "registry-qps",
	"serialize-image-pulls", "system-reserved", "topology-manager-policy", "v"}

// set through the spec, with a hint where.
var reservedKubeletFlags = map[string]string{
	"node-labels":          "set node labels in spec.eks.configuration.labels",
	"register-with-taints": "set taints in spec.eks.configuration.taints",
	"register-node":        "node registration is the controller's",
	"provider-id":          "the node's provider ID comes from its instance",
	"hostname-override":    "the node name comes from its instance",
}

var (
	flagName  = regexp.MustCompile(`^--([a-z0-9][a-z0-9-]*)$`)
	safeValue = regexp.MustCompile(`^[A-Za-z0-9._:=,/%+@<>-]*$`)
	// DeviceName is a block device name, e.g. /dev/xvdb or /dev/nvme1n1.
	DeviceName = regexp.MustCompile(`^/dev/[a-z0-9]+$`)
	// MountPath is an absolute path of plain path characters.
	MountPath = regexp.MustCompile(`^/[A-Za-z0-9._/-]*$`)
	// FileSystem is a file system type, e.g. xfs or ext4.
	FileSystem = regexp.MustCompile(`^[a-z][a-z0-9]*$`)
)

// Parse parses bootstrapArguments: whitespace-separated bootstrap flags
// ("--name", "--name=value" or "--name value") and --kubelet-extra-args
// with its kubelet flags ("--kubelet-extra-args=--v=2" or
// "--kubelet-extra-args '--v=2 --max-pods=20'"). Single and double quotes
// group words; there are no escapes. It returns an error naming the first
// problem and what is allowed: a shell metacharacter, a flag outside
// BootstrapFlags or KubeletFlags, a value with characters outside
// [A-Za-z0-9._:=,/%+@<>-], or unbalanced quotes.
func Parse(s string) (Args, error) {
	var out Args
	words, err := split(s)
	if err != nil {
		return out, err
	}
	for i := 0; i < len(words); i++ {
		name, value, hasValue := strings.Cut(words[i], "=")
		m := flagName.FindStringSubmatch(name)
		if m == nil {
			return out, fmt.Errorf("%q is not a flag (expected --name or --name=value)", words[i])
		}
		// The kubelet flags after --kubelet-extra-args start with "--" too.
		if !hasValue && i+1 < len(words) && (m[1] == "kubelet-extra-args" || !strings.HasPrefix(words[i+1], "--")) {
			value, hasValue = words[i+1], true
			i++
		}
		if m[1] == "kubelet-extra-args" {
			if !hasValue {
				return out, fmt.Errorf("--kubelet-extra-args needs kubelet flags")
			}
			k, err := parseKubelet(value)
			if err != nil {
				return out, err
			}
			out.Kubelet = append(out.Kubelet, k...)
			continue
		}
		if why, ok := reservedBootstrapFlags[m[1]]; ok {
			return out, fmt.Errorf("bootstrap flag --%s is not allowed: %s (allowed: --kubelet-extra-args, --%s)", m[1], why, strings.Join(BootstrapFlags, ", --"))
		}
		if !slices.Contains(BootstrapFlags, m[1]) {
			return out, fmt.Errorf("bootstrap flag --%s is not allowed (allowed: --kubelet-extra-args, --%s)", m[1], strings.Join(BootstrapFlags, ", --"))
		}
		f, err := flag(name, value, hasValue)
		if err != nil {
			return out, err
		}
		out.Bootstrap = append(out.Bootstrap, f)
	}
	return out, nil
}

func parseKubelet(s string) ([]string, error) {
	var out []string
	for _, w := range strings.Fields(s) {
		name, value, hasValue := strings.Cut(w, "=")
		m := flagName.FindStringSubmatch(name)
		if m == nil {
			return nil, fmt.Errorf("kubelet argument %q is not a flag (expected --name=value)", w)
		}
		if hint, ok := reservedKubeletFlags[m[1]]; ok {
			return nil, fmt.Errorf("kubelet flag --%s cannot be set through bootstrapArguments: %s", m[1], hint)
		}
		if !slices.Contains(KubeletFlags, m[1]) {
			return nil, fmt.Errorf("kubelet flag --%s is not allowed (allowed: --%s)", m[1], strings.Join(KubeletFlags, ", --"))
		}
		f, err := flag(name, value, hasValue)
		if err != nil {
			return nil, err
		}
		if m[1] == "v" {
			if n, err := strconv.Atoi(value); !hasValue || err != nil || n < 0 || n > MaxKubeletVerbosity {
				return nil, fmt.Errorf("kubelet flag --v=%s: the log level must be 0 to %d (higher levels log API request and response bodies, Secrets included)", value, MaxKubeletVerbosity)
			}
		}
		out = append(out, f)
	}
	return out, nil
}

func flag(name, value string, hasValue bool) (string, error) {
	if !hasValue {
		return name, nil
	}
	if !safeValue.MatchString(value) {
		return "", fmt.Errorf("the value %q of %s has characters that are not allowed (allowed: letters, digits and ._:=,/%%+@<>-)", value, name)
	}
	return name + "=" + value, nil
}

// split splits s into words at whitespace, grouping quoted text. Any
// shell metacharacter outside quotes is an error; inside quotes the words
// are checked by the flag rules.
func split(s string) ([]string, error) {
	var words []string
	var cur strings.Builder
	in := false
	var quote rune
	for _, r := range s {
		switch {
		case quote != 0:
			if r == quote {
				quote = 0
				continue
			}
			cur.WriteRune(r)
		case r == '\'' || r == '"':
			quote, in = r, true
		case r == ' ' || r == '\t':
			if in {
				words = append(words, cur.String())
				cur.Reset()
				in = false
			}
		case strings.ContainsRune(";&|$`\\<>(){}!*?~#\n\r", r):
			return nil, fmt.Errorf("shell metacharacter %q is not allowed in bootstrapArguments", r)
		default:
			cur.WriteRune(r)
			in = true
		}
	}
	if quote != 0 {
		return nil, fmt.Errorf("unbalanced %c quote in bootstrapArguments", quote)
	}
	if in {
		words = append(words, cur.String())
	}
	return words, nil
}

// ShellQuote quotes s for a POSIX shell: in single quotes, where each
// single quote of s ends the quoting, is escaped with a backslash, and
// starts it again.
func ShellQuote(s string) string {
	return "'" + strings.ReplaceAll(s, "'", `'\''`) + "'"
}
