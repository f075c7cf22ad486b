package image

import (
	"bytes"
	"encoding/pem"
	"errors"

	"golang.org/x/crypto/x509roots/fallback/bundle"
)

// CABundle returns the image's CA certificates file: the Mozilla NSS roots
// that golang.org/x/crypto/x509roots/fallback/bundle (pinned in go.mod)
// carries, as PEM. Roots that NSS trusts only with a constraint (e.g.
// "distrust certificates issued after a date") are left out: a PEM file
// cannot express the constraint, and trusting them unconstrained would be
// wider than NSS. Errors: the bundle yields no root.
func CABundle() ([]byte, error) {
	var buf bytes.Buffer
	for r := range bundle.Roots() {
		if r.Constraint != nil {
			continue
		}
		if err := pem.Encode(&buf, &pem.Block{Type: "CERTIFICATE", Bytes: r.Certificate}); err != nil {
			return nil, err
		}
	}
	if buf.Len() == 0 {
		return nil, errors.New("golang.org/x/crypto/x509roots/fallback/bundle yielded no unconstrained root")
	}
	return buf.Bytes(), nil
}
