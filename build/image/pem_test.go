package image

import (
	"crypto/x509"
	"encoding/pem"
	"testing"
)

// nextCert decodes the first PEM certificate of data; nil at the end.
func nextCert(t *testing.T, data []byte) (*x509.Certificate, []byte) {
	t.Helper()
	block, rest := pem.Decode(data)
	if block == nil {
		return nil, nil
	}
	c, err := x509.ParseCertificate(block.Bytes)
	if err != nil {
		t.Fatalf("a certificate of the CA bundle does not parse: %v", err)
	}
	return c, rest
}
