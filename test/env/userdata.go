package env

import (
	"bufio"
	"bytes"
	"compress/gzip"
	"encoding/base64"
	"errors"
	"fmt"
	"io"
	"mime"
	"mime/multipart"
	"mime/quotedprintable"
	"net/mail"
	"regexp"
	"slices"
	"strings"

	"github.com/BurntSushi/toml"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/util/validation"
	"sigs.k8s.io/yaml"
)

// Registration is what a kubelet adds to its Node from its own configuration:
// the labels of --node-labels and the taints of --register-with-taints (or the
// Bottlerocket settings.kubernetes.node-labels / node-taints tables).
type Registration struct {
	// Labels maps label key to value. Never nil after a successful parse.
	Labels map[string]string
	// Taints in the order they were first seen; a later taint with the same
	// key and effect replaces an earlier one.
	Taints []corev1.Taint
}

// maxUserData bounds what a decompressed user data document may grow to
// (EC2 allows 16 KiB of encoded user data; gzip can expand it a lot).
const maxUserData = 8 << 20

// maxNesting bounds gzip-in-MIME-in-gzip recursion.
const maxNesting = 8

// ParseUserData reads the kubelet registration out of launch template or
// launch configuration user data as EC2 returns it: base64 text (whitespace is
// ignored). The decoded document may be gzip-compressed and may be
//
//   - a shell script or cloud-config (e.g. AL2 `/etc/eks/bootstrap.sh <cluster>
//     --kubelet-extra-args '--node-labels=a=b,c=d --register-with-taints=k=v:NoSchedule'`),
//   - a MIME multipart document whose parts are any of these (parts may be
//     base64 or quoted-printable encoded, and gzip-compressed),
//   - an AL2023 nodeadm NodeConfig (YAML; spec.kubelet.flags and
//     spec.kubelet.config.registerWithTaints),
//   - Bottlerocket TOML ([settings.kubernetes.node-labels] key = "value" and
//     [settings.kubernetes.node-taints] key = ["value:Effect", ...]).
//
// Kubelet flags are found wherever they appear, in either `--flag=value` or
// `--flag value` form, quoted or not. Empty user data gives an empty
// Registration. The error names the part of the document that is malformed
// (bad base64, truncated gzip, a label or taint that a kubelet would reject).
func ParseUserData(encoded string) (Registration, error) {
	reg := Registration{Labels: map[string]string{}}
	compact := strings.Map(func(r rune) rune {
		if r == ' ' || r == '\n' || r == '\r' || r == '\t' {
			return -1
		}
		return r
	}, encoded)
	if compact == "" {
		return reg, nil
	}
	raw, err := base64.StdEncoding.DecodeString(compact)
	if err != nil {
		return reg, fmt.Errorf("user data is not base64 (EC2 returns it base64-encoded): %w", err)
	}
	if err := reg.parseDocument(raw, 0); err != nil {
		return Registration{Labels: map[string]string{}}, err
	}
	return reg, nil
}

var gzipMagic = []byte{0x1f, 0x8b}

// parseDocument dispatches one decoded document to the parser for its format.
func (r *Registration) parseDocument(doc []byte, depth int) error {
	if depth > maxNesting {
		return fmt.Errorf("user data nests more than %d levels of gzip/MIME", maxNesting)
	}
	switch {
	case bytes.HasPrefix(doc, gzipMagic):
		plain, err := gunzip(doc)
		if err != nil {
			return err
		}
		return r.parseDocument(plain, depth+1)
	case looksLikeMIME(doc):
		return r.parseMIME(doc, depth)
	case nodeConfigKind.Match(doc):
		return r.parseNodeConfig(doc)
	}
	if settings, ok := bottlerocketSettings(doc); ok {
		return r.parseBottlerocket(settings)
	}
	return r.scanKubeletFlags(string(doc))
}

func gunzip(doc []byte) ([]byte, error) {
	zr, err := gzip.NewReader(bytes.NewReader(doc))
	if err != nil {
		return nil, fmt.Errorf("user data has a gzip header but cannot be decompressed: %w", err)
	}
	defer func() { _ = zr.Close() }()
	plain, err := io.ReadAll(io.LimitReader(zr, maxUserData+1))
	if err != nil {
		return nil, fmt.Errorf("user data gzip stream is corrupt: %w", err)
	}
	if len(plain) > maxUserData {
		return nil, fmt.Errorf("user data decompresses to more than %d bytes", maxUserData)
	}
	return plain, nil
}

// looksLikeMIME reports whether the document starts with MIME headers.
func looksLikeMIME(doc []byte) bool {
	head := strings.ToLower(string(bytes.TrimLeft(doc[:min(len(doc), 256)], " \t\r\n")))
	return strings.HasPrefix(head, "mime-version:") || strings.HasPrefix(head, "content-type: multipart/")
}

func (r *Registration) parseMIME(doc []byte, depth int) error {
	msg, err := mail.ReadMessage(bufio.NewReader(bytes.NewReader(doc)))
	if err != nil {
		return fmt.Errorf("user data looks like MIME but its headers do not parse: %w", err)
	}
	mediaType, params, err := mime.ParseMediaType(msg.Header.Get("Content-Type"))
	if err != nil {
		return fmt.Errorf("user data MIME Content-Type %q: %w", msg.Header.Get("Content-Type"), err)
	}
	if !strings.HasPrefix(mediaType, "multipart/") {
		body, err := decodeTransfer(msg.Body, msg.Header.Get("Content-Transfer-Encoding"))
		if err != nil {
			return err
		}
		return r.parseDocument(body, depth+1)
	}
	if params["boundary"] == "" {
		return fmt.Errorf("user data MIME %s has no boundary parameter", mediaType)
	}
	mr := multipart.NewReader(msg.Body, params["boundary"])
	for i := 1; ; i++ {
		part, err := mr.NextRawPart()
		if errors.Is(err, io.EOF) {
			return nil
		}
		if err != nil {
			return fmt.Errorf("user data MIME part %d: %w", i, err)
		}
		body, err := decodeTransfer(part, part.Header.Get("Content-Transfer-Encoding"))
		if err != nil {
			return fmt.Errorf("user data MIME part %d: %w", i, err)
		}
		if err := r.parseDocument(body, depth+1); err != nil {
			return fmt.Errorf("user data MIME part %d: %w", i, err)
		}
	}
}

func decodeTransfer(body io.Reader, encoding string) ([]byte, error) {
	limited := io.LimitReader(body, maxUserData)
	switch strings.ToLower(strings.TrimSpace(encoding)) {
	case "base64":
		text, err := io.ReadAll(limited)
		if err != nil {
			return nil, err
		}
		compact := strings.Join(strings.Fields(string(text)), "")
		out, err := base64.StdEncoding.DecodeString(compact)
		if err != nil {
			return nil, fmt.Errorf("base64 Content-Transfer-Encoding does not decode: %w", err)
		}
		return out, nil
	case "quoted-printable":
		out, err := io.ReadAll(quotedprintable.NewReader(limited))
		if err != nil {
			return nil, fmt.Errorf("quoted-printable Content-Transfer-Encoding does not decode: %w", err)
		}
		return out, nil
	default:
		return io.ReadAll(limited)
	}
}

var nodeConfigKind = regexp.MustCompile(`(?m)^kind:\s*["']?NodeConfig["']?\s*$`)

// nodeConfig is the part of nodeadm's NodeConfig (node.eks.aws/v1alpha1)
// that carries kubelet registration.
type nodeConfig struct {
	Kind string `json:"kind"`
	Spec struct {
		Kubelet struct {
			Flags  []string `json:"flags"`
			Config struct {
				RegisterWithTaints []corev1.Taint `json:"registerWithTaints"`
			} `json:"config"`
		} `json:"kubelet"`
	} `json:"spec"`
}

// parseNodeConfig reads every YAML document separated by `---`; documents of
// another kind are skipped.
func (r *Registration) parseNodeConfig(doc []byte) error {
	for i, part := range splitYAMLDocuments(doc) {
		if len(bytes.TrimSpace(part)) == 0 {
			continue
		}
		var nc nodeConfig
		if err := yaml.Unmarshal(part, &nc); err != nil {
			return fmt.Errorf("nodeadm NodeConfig YAML (document %d): %w", i+1, err)
		}
		if nc.Kind != "NodeConfig" {
			continue
		}
		for _, flag := range nc.Spec.Kubelet.Flags {
			if err := r.scanKubeletFlags(flag); err != nil {
				return fmt.Errorf("nodeadm NodeConfig spec.kubelet.flags: %w", err)
			}
		}
		for _, t := range nc.Spec.Kubelet.Config.RegisterWithTaints {
			if err := validateTaint(t); err != nil {
				return fmt.Errorf("nodeadm NodeConfig spec.kubelet.config.registerWithTaints: %w", err)
			}
			r.addTaint(corev1.Taint{Key: t.Key, Value: t.Value, Effect: t.Effect})
		}
	}
	return nil
}

var yamlSeparator = regexp.MustCompile(`(?m)^---[ \t]*$`)

func splitYAMLDocuments(doc []byte) [][]byte {
	var docs [][]byte
	for _, part := range yamlSeparator.Split(string(doc), -1) {
		docs = append(docs, []byte(part))
	}
	return docs
}

// bottlerocketSettings decodes doc as TOML and returns its settings.kubernetes
// table; ok is false when doc is not TOML with a top-level settings table
// (then it is treated as a script).
func bottlerocketSettings(doc []byte) (map[string]any, bool) {
	var top map[string]any
	if _, err := toml.NewDecoder(bytes.NewReader(doc)).Decode(&top); err != nil {
		return nil, false
	}
	settings, ok := top["settings"].(map[string]any)
	if !ok {
		return nil, false
	}
	kube, _ := settings["kubernetes"].(map[string]any)
	return kube, true
}

// parseBottlerocket reads settings.kubernetes.node-labels (key = "value") and
// settings.kubernetes.node-taints (key = ["value:Effect", ...] or the older
// key = "value:Effect").
func (r *Registration) parseBottlerocket(kube map[string]any) error {
	if raw, ok := kube["node-labels"]; ok {
		labels, ok := raw.(map[string]any)
		if !ok {
			return fmt.Errorf("bottlerocket settings.kubernetes.node-labels must be a table, got %T", raw)
		}
		for _, key := range sortedKeys(labels) {
			value, ok := labels[key].(string)
			if !ok {
				return fmt.Errorf("bottlerocket settings.kubernetes.node-labels.%q must be a string, got %T", key, labels[key])
			}
			if err := validateLabel(key, value); err != nil {
				return fmt.Errorf("bottlerocket settings.kubernetes.node-labels: %w", err)
			}
			r.Labels[key] = value
		}
	}
	if raw, ok := kube["node-taints"]; ok {
		taints, ok := raw.(map[string]any)
		if !ok {
			return fmt.Errorf("bottlerocket settings.kubernetes.node-taints must be a table, got %T", raw)
		}
		for _, key := range sortedKeys(taints) {
			var specs []string
			switch v := taints[key].(type) {
			case string:
				specs = []string{v}
			case []any:
				for _, item := range v {
					s, ok := item.(string)
					if !ok {
						return fmt.Errorf("bottlerocket settings.kubernetes.node-taints.%q entries must be strings like \"value:NoSchedule\", got %T", key, item)
					}
					specs = append(specs, s)
				}
			default:
				return fmt.Errorf("bottlerocket settings.kubernetes.node-taints.%q must be a list of \"value:Effect\" strings, got %T", key, v)
			}
			for _, spec := range specs {
				value, effect, found := strings.Cut(spec, ":")
				if !found {
					return fmt.Errorf("bottlerocket settings.kubernetes.node-taints.%q entry %q needs the form \"value:Effect\"", key, spec)
				}
				t := corev1.Taint{Key: key, Value: value, Effect: corev1.TaintEffect(effect)}
				if err := validateTaint(t); err != nil {
					return fmt.Errorf("bottlerocket settings.kubernetes.node-taints: %w", err)
				}
				r.addTaint(t)
			}
		}
	}
	return nil
}

func sortedKeys(m map[string]any) []string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	return keys
}

// kubeletFlag matches --node-labels / --register-with-taints followed by "="
// or whitespace and an optionally quoted value. A value ends at whitespace, a
// quote or a backslash (an escaped quote in a nested shell string); label and
// taint syntax allows none of these.
var kubeletFlag = regexp.MustCompile(`--(node-labels|register-with-taints)(?:=|[ \t]+)\\?["']?([^\s"'\\]*)`)

// scanKubeletFlags finds every --node-labels and --register-with-taints in
// text and adds what they carry.
func (r *Registration) scanKubeletFlags(text string) error {
	for _, m := range kubeletFlag.FindAllStringSubmatch(text, -1) {
		flag, value := m[1], m[2]
		if value == "" {
			continue // e.g. a usage line or `--node-labels=""`
		}
		var err error
		if flag == "node-labels" {
			err = r.addLabelList(value)
		} else {
			err = r.addTaintList(value)
		}
		if err != nil {
			return fmt.Errorf("--%s=%s: %w", flag, value, err)
		}
	}
	return nil
}

// addLabelList parses the kubelet's `k1=v1,k2=v2` form.
func (r *Registration) addLabelList(list string) error {
	for _, item := range strings.Split(list, ",") {
		if item == "" {
			continue
		}
		key, value, found := strings.Cut(item, "=")
		if !found {
			return fmt.Errorf("label %q needs the form key=value", item)
		}
		if err := validateLabel(key, value); err != nil {
			return err
		}
		r.Labels[key] = value
	}
	return nil
}

// addTaintList parses the kubelet's `key=value:Effect,key2:Effect` form.
func (r *Registration) addTaintList(list string) error {
	for _, item := range strings.Split(list, ",") {
		if item == "" {
			continue
		}
		keyValue, effect, found := strings.Cut(item, ":")
		if !found {
			return fmt.Errorf("taint %q needs the form key=value:Effect or key:Effect", item)
		}
		key, value, _ := strings.Cut(keyValue, "=")
		t := corev1.Taint{Key: key, Value: value, Effect: corev1.TaintEffect(effect)}
		if err := validateTaint(t); err != nil {
			return err
		}
		r.addTaint(t)
	}
	return nil
}

func (r *Registration) addTaint(t corev1.Taint) {
	for i := range r.Taints {
		if r.Taints[i].Key == t.Key && r.Taints[i].Effect == t.Effect {
			r.Taints[i] = t
			return
		}
	}
	r.Taints = append(r.Taints, t)
}

func validateLabel(key, value string) error {
	if errs := validation.IsQualifiedName(key); len(errs) > 0 {
		return fmt.Errorf("label key %q is invalid: %s", key, strings.Join(errs, "; "))
	}
	if errs := validation.IsValidLabelValue(value); len(errs) > 0 {
		return fmt.Errorf("label %q value %q is invalid: %s", key, value, strings.Join(errs, "; "))
	}
	return nil
}

func validateTaint(t corev1.Taint) error {
	if errs := validation.IsQualifiedName(t.Key); len(errs) > 0 {
		return fmt.Errorf("taint key %q is invalid: %s", t.Key, strings.Join(errs, "; "))
	}
	if t.Value != "" {
		if errs := validation.IsValidLabelValue(t.Value); len(errs) > 0 {
			return fmt.Errorf("taint %q value %q is invalid: %s", t.Key, t.Value, strings.Join(errs, "; "))
		}
	}
	switch t.Effect {
	case corev1.TaintEffectNoSchedule, corev1.TaintEffectPreferNoSchedule, corev1.TaintEffectNoExecute:
		return nil
	}
	return fmt.Errorf("taint %q effect %q is not one of NoSchedule, PreferNoSchedule, NoExecute", t.Key, t.Effect)
}
