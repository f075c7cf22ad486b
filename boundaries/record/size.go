package record

import (
	"bytes"
	"compress/gzip"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"io"
	"strings"

	"sigs.k8s.io/yaml"
)

// MaxDataBytes bounds the record ConfigMap's data (keys and values): the
// API server refuses a ConfigMap over 1 MiB (Kubernetes, "ConfigMaps":
// "The data stored in a ConfigMap cannot exceed 1 MiB"), and 64 KiB are
// left to its metadata.
const MaxDataBytes = 1<<20 - 64<<10

// compressAbove is the size in bytes above which a revision's JSON is
// stored compressed; a status YAML above 16 times it is compacted.
const compressAbove = 4 << 10

// gzipPrefix marks a compressed value: "gzip:" then the base64 of the
// gzip stream.
const gzipPrefix = "gzip:"

// maxDecompressed bounds what one compressed value may expand to, in
// bytes.
const maxDecompressed = 64 << 20

// summaryText bounds each free text of the readable summary (the
// message, the halt's reason), in bytes.
const summaryText = 2 << 10

// TooLargeError is a record that does not fit in MaxDataBytes even
// compacted: more groups or larger revisions than one ConfigMap holds.
type TooLargeError struct {
	// Bytes is the compacted data's size; Groups and Revisions what it
	// holds.
	Bytes, Groups, Revisions int
}

func (e *TooLargeError) Error() string {
	return fmt.Sprintf("the rollout record would be %d bytes compressed (%d group(s) in its waves, %d revision(s) kept), above the %d bytes a ConfigMap's data may hold",
		e.Bytes, e.Groups, e.Revisions, MaxDataBytes)
}

// compact stores r compressed under KeyStatusCompressed and a summary of
// it under KeyStatus (the waves without their groups, free text cut to
// summaryText): what an admin reads with kubectl, while the webhooks and
// the controller read the compressed record.
func compact(r *Record, out map[string]string) error {
	raw, err := json.Marshal(r)
	if err != nil {
		return fmt.Errorf("encoding the rollout record: %w", err)
	}
	if out[KeyStatusCompressed], err = compress(raw); err != nil {
		return fmt.Errorf("encoding the rollout record: %w", err)
	}
	sum := *r
	sum.Message = cut(r.Message)
	sum.Waves = make([]Wave, len(r.Waves))
	for i, w := range r.Waves {
		w.Groups = nil
		sum.Waves[i] = w
	}
	if len(r.RolledBack) > 0 {
		sum.RolledBack = nil
	}
	sum.Early, sum.Late, sum.Deferred = firstGroups(r.Early), firstGroups(r.Late), r.Deferred[:min(len(r.Deferred), MaxPlanned)]
	if r.Halt != nil {
		h := *r.Halt
		h.Reason, h.Groups = cut(h.Reason), nil
		sum.Halt = &h
	}
	status, err := yaml.Marshal(sum)
	if err != nil {
		return fmt.Errorf("encoding the rollout record: %w", err)
	}
	out[KeyStatus] = fmt.Sprintf("# A summary: the waves' groups, the halted and rolled back groups of these %d group(s) are in data.%s (gzip, base64).\n%s",
		r.groupCount(), KeyStatusCompressed, status)
	return nil
}

// cut shortens s to summaryText bytes.
func cut(s string) string {
	if len(s) <= summaryText {
		return s
	}
	return s[:summaryText] + fmt.Sprintf("... (%d more bytes)", len(s)-summaryText)
}

// groupCount is how many groups r's waves hold.
func (r *Record) groupCount() int {
	n := 0
	for _, w := range r.Waves {
		n += len(w.Groups)
	}
	return n + len(r.Early) + len(r.Late) + len(r.Deferred)
}

// size is the bytes data takes: keys and values.
func size(data map[string]string) int {
	n := 0
	for k, v := range data {
		n += len(k) + len(v)
	}
	return n
}

func compress(raw []byte) (string, error) {
	var b bytes.Buffer
	z := gzip.NewWriter(&b)
	if _, err := z.Write(raw); err != nil {
		return "", err
	}
	if err := z.Close(); err != nil {
		return "", err
	}
	return gzipPrefix + base64.StdEncoding.EncodeToString(b.Bytes()), nil
}

func compressed(v string) bool { return strings.HasPrefix(v, gzipPrefix) }

func decompress(v string) ([]byte, error) {
	raw, err := base64.StdEncoding.DecodeString(strings.TrimPrefix(v, gzipPrefix))
	if err != nil {
		return nil, fmt.Errorf("not base64 after %q: %w", gzipPrefix, err)
	}
	z, err := gzip.NewReader(bytes.NewReader(raw))
	if err != nil {
		return nil, fmt.Errorf("not gzip: %w", err)
	}
	defer z.Close()
	// The controller writes these; the bound keeps a damaged or
	// hand-edited value from exhausting memory.
	return io.ReadAll(io.LimitReader(z, maxDecompressed))
}
