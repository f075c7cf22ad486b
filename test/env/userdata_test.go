package env

import (
	"bytes"
	"compress/gzip"
	"encoding/base64"
	"strings"
	"testing"

	"github.com/onsi/gomega"
	corev1 "k8s.io/api/core/v1"
)

func b64(s string) string { return base64.StdEncoding.EncodeToString([]byte(s)) }

func gz(t *testing.T, s string) []byte {
	t.Helper()
	var buf bytes.Buffer
	zw := gzip.NewWriter(&buf)
	if _, err := zw.Write([]byte(s)); err != nil {
		t.Fatal(err)
	}
	if err := zw.Close(); err != nil {
		t.Fatal(err)
	}
	return buf.Bytes()
}

func taint(key, value string, effect corev1.TaintEffect) corev1.Taint {
	return corev1.Taint{Key: key, Value: value, Effect: effect}
}

const al2Script = `#!/bin/bash
set -o xtrace
/etc/eks/bootstrap.sh my-cluster --kubelet-extra-args '--node-labels=team=a,tier=web --register-with-taints=dedicated=web:NoSchedule,k2=:NoExecute'
`

const nodeadmYAML = `---
apiVersion: node.eks.aws/v1alpha1
kind: NodeConfig
spec:
  cluster:
    name: my-cluster
  kubelet:
    config:
      registerWithTaints:
      - key: gpu
        value: "true"
        effect: NoSchedule
    flags:
    - --node-labels=team=b,node.kubernetes.io/role=worker
    - "--register-with-taints=spot=:PreferNoSchedule"
`

const bottlerocketTOML = `[settings.kubernetes]
cluster-name = "my-cluster"
api-server = "https://example"

[settings.kubernetes.node-labels]
"team" = "c"
"example.com/tier" = "db"

[settings.kubernetes.node-taints]
"dedicated" = ["db:NoSchedule", "db:NoExecute"]
"legacy" = "x:PreferNoSchedule"
`

func mimeDoc(parts ...string) string {
	var b strings.Builder
	b.WriteString("MIME-Version: 1.0\r\nContent-Type: multipart/mixed; boundary=\"==BOUNDARY==\"\r\n\r\n")
	for _, p := range parts {
		b.WriteString("--==BOUNDARY==\r\n")
		b.WriteString(p)
		b.WriteString("\r\n")
	}
	b.WriteString("--==BOUNDARY==--\r\n")
	return b.String()
}

func TestParseUserData(t *testing.T) {
	tests := []struct {
		name       string
		userData   string // base64 as EC2 returns it
		wantLabels map[string]string
		wantTaints []corev1.Taint
		wantErr    string
	}{
		{
			name:       "empty",
			userData:   "",
			wantLabels: map[string]string{},
		},
		{
			name:       "AL2 bootstrap.sh with kubelet extra args",
			userData:   b64(al2Script),
			wantLabels: map[string]string{"team": "a", "tier": "web"},
			wantTaints: []corev1.Taint{taint("dedicated", "web", corev1.TaintEffectNoSchedule), taint("k2", "", corev1.TaintEffectNoExecute)},
		},
		{
			name:       "base64 wrapped over lines",
			userData:   strings.Join(chunk(b64(al2Script), 60), "\n"),
			wantLabels: map[string]string{"team": "a", "tier": "web"},
			wantTaints: []corev1.Taint{taint("dedicated", "web", corev1.TaintEffectNoSchedule), taint("k2", "", corev1.TaintEffectNoExecute)},
		},
		{
			name:       "flags separated by a space and double-quoted, escaped quotes",
			userData:   b64(`KUBELET_EXTRA_ARGS="--node-labels \"a=1\" --register-with-taints=\"t:NoSchedule\""`),
			wantLabels: map[string]string{"a": "1"},
			wantTaints: []corev1.Taint{taint("t", "", corev1.TaintEffectNoSchedule)},
		},
		{
			name:       "instance-manager style bootstrapArguments without extra-args wrapper",
			userData:   b64("#!/bin/bash\n/etc/eks/bootstrap.sh c --register-with-taints=my-taint-key=my-taint-value:NoSchedule --node-labels=my-label=true\n"),
			wantLabels: map[string]string{"my-label": "true"},
			wantTaints: []corev1.Taint{taint("my-taint-key", "my-taint-value", corev1.TaintEffectNoSchedule)},
		},
		{
			name:       "repeated flags merge; later label value and same key+effect taint win",
			userData:   b64("--node-labels=a=1,b=2\n--node-labels=b=3 --register-with-taints=k=v1:NoSchedule --register-with-taints=k=v2:NoSchedule,k=v3:NoExecute"),
			wantLabels: map[string]string{"a": "1", "b": "3"},
			wantTaints: []corev1.Taint{taint("k", "v2", corev1.TaintEffectNoSchedule), taint("k", "v3", corev1.TaintEffectNoExecute)},
		},
		{
			name:       "script without kubelet flags",
			userData:   b64("#!/bin/bash\necho hello\n"),
			wantLabels: map[string]string{},
		},
		{
			name:       "gzip-compressed script",
			userData:   base64.StdEncoding.EncodeToString(gz(t, al2Script)),
			wantLabels: map[string]string{"team": "a", "tier": "web"},
			wantTaints: []corev1.Taint{taint("dedicated", "web", corev1.TaintEffectNoSchedule), taint("k2", "", corev1.TaintEffectNoExecute)},
		},
		{
			name:       "AL2023 nodeadm NodeConfig",
			userData:   b64(nodeadmYAML),
			wantLabels: map[string]string{"team": "b", "node.kubernetes.io/role": "worker"},
			wantTaints: []corev1.Taint{taint("spot", "", corev1.TaintEffectPreferNoSchedule), taint("gpu", "true", corev1.TaintEffectNoSchedule)},
		},
		{
			name: "MIME multipart: nodeadm config, base64 shell part, gzip part",
			userData: b64(mimeDoc(
				"Content-Type: application/node.eks.aws\r\n\r\n"+nodeadmYAML,
				"Content-Type: text/x-shellscript\r\nContent-Transfer-Encoding: base64\r\n\r\n"+b64("echo --node-labels=extra=yes"),
				"Content-Type: application/x-gzip\r\nContent-Transfer-Encoding: base64\r\n\r\n"+base64.StdEncoding.EncodeToString(gz(t, "--register-with-taints=z=1:NoExecute")),
			)),
			wantLabels: map[string]string{"team": "b", "node.kubernetes.io/role": "worker", "extra": "yes"},
			wantTaints: []corev1.Taint{
				taint("spot", "", corev1.TaintEffectPreferNoSchedule),
				taint("gpu", "true", corev1.TaintEffectNoSchedule),
				taint("z", "1", corev1.TaintEffectNoExecute),
			},
		},
		{
			name: "MIME quoted-printable shell part",
			userData: b64(mimeDoc(
				"Content-Type: text/x-shellscript\r\nContent-Transfer-Encoding: quoted-printable\r\n\r\n" +
					"/etc/eks/bootstrap.sh c --kubelet-extra-args '--node-labels=qp=3D' --register-with-taints=q=3Dv:NoSchedule",
			)),
			wantLabels: map[string]string{"qp": ""},
			wantTaints: []corev1.Taint{taint("q", "v", corev1.TaintEffectNoSchedule)},
		},
		{
			name:       "gzip of a MIME document",
			userData:   base64.StdEncoding.EncodeToString(gz(t, mimeDoc("Content-Type: text/x-shellscript\r\n\r\n"+al2Script))),
			wantLabels: map[string]string{"team": "a", "tier": "web"},
			wantTaints: []corev1.Taint{taint("dedicated", "web", corev1.TaintEffectNoSchedule), taint("k2", "", corev1.TaintEffectNoExecute)},
		},
		{
			name:       "Bottlerocket TOML",
			userData:   b64(bottlerocketTOML),
			wantLabels: map[string]string{"team": "c", "example.com/tier": "db"},
			wantTaints: []corev1.Taint{
				taint("dedicated", "db", corev1.TaintEffectNoSchedule),
				taint("dedicated", "db", corev1.TaintEffectNoExecute),
				taint("legacy", "x", corev1.TaintEffectPreferNoSchedule),
			},
		},
		{
			name:       "Bottlerocket TOML with dotted keys and no kubernetes labels",
			userData:   b64("settings.host-containers.admin.enabled = true\n"),
			wantLabels: map[string]string{},
		},
		{
			name:     "not base64",
			userData: "#!/bin/bash --node-labels=a=b",
			wantErr:  "not base64",
		},
		{
			name:     "label without value separator",
			userData: b64("--node-labels=team"),
			wantErr:  `--node-labels=team: label "team" needs the form key=value`,
		},
		{
			name:     "label value a kubelet rejects",
			userData: b64("--node-labels=team=a_b_"),
			wantErr:  `label "team" value "a_b_" is invalid`,
		},
		{
			name:     "taint with unknown effect",
			userData: b64("--register-with-taints=k=v:Sometimes"),
			wantErr:  `taint "k" effect "Sometimes" is not one of`,
		},
		{
			name:     "taint without effect",
			userData: b64("--register-with-taints=k=v"),
			wantErr:  "needs the form key=value:Effect",
		},
		{
			name:     "Bottlerocket taint without effect",
			userData: b64("[settings.kubernetes.node-taints]\nk = [\"v\"]\n"),
			wantErr:  `node-taints."k" entry "v" needs the form`,
		},
		{
			name:     "Bottlerocket label that is not a string",
			userData: b64("[settings.kubernetes.node-labels]\nk = 1\n"),
			wantErr:  `node-labels."k" must be a string`,
		},
		{
			name:     "corrupt gzip",
			userData: base64.StdEncoding.EncodeToString(gz(t, al2Script)[:20]),
			wantErr:  "gzip",
		},
		{
			name:     "MIME multipart without boundary",
			userData: b64("MIME-Version: 1.0\r\nContent-Type: multipart/mixed\r\n\r\nbody"),
			wantErr:  "no boundary",
		},
		{
			name:     "MIME part with bad base64",
			userData: b64(mimeDoc("Content-Type: text/x-shellscript\r\nContent-Transfer-Encoding: base64\r\n\r\n!!!")),
			wantErr:  "MIME part 1: base64",
		},
		{
			name:     "invalid NodeConfig YAML",
			userData: b64("kind: NodeConfig\nspec: [\n"),
			wantErr:  "nodeadm NodeConfig YAML",
		},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			g := gomega.NewWithT(t)
			got, err := ParseUserData(tc.userData)
			if tc.wantErr != "" {
				g.Expect(err).To(gomega.MatchError(gomega.ContainSubstring(tc.wantErr)))
				return
			}
			g.Expect(err).NotTo(gomega.HaveOccurred())
			g.Expect(got.Labels).To(gomega.Equal(tc.wantLabels))
			g.Expect(got.Taints).To(gomega.Equal(tc.wantTaints))
		})
	}
}

func chunk(s string, n int) []string {
	var out []string
	for len(s) > n {
		out = append(out, s[:n])
		s = s[n:]
	}
	return append(out, s)
}
