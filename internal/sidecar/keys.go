package sidecar

import (
	"bytes"
	"crypto"
	"crypto/x509"
	"encoding/pem"
	"errors"
	"fmt"
	"os"

	"github.com/actgate/actgate/internal/authority"
	"github.com/actgate/actgate/internal/fileutil"
)

// ErrNoKey is returned by ParsePublicKeys for input without a PUBLIC KEY block.
var ErrNoKey = errors.New("sidecar: no PUBLIC KEY block")

// ErrTrustAnchor is matched by every error about the authority's trust anchors (its public
// keys and CA bundle): missing, given twice, unreadable or not exactly what they must be. The
// sidecar does not start then, so no call is forwarded (fail closed); `actgate sidecar` prints
// it on a line starting SIDECAR_CONFIG.
var ErrTrustAnchor = errors.New("sidecar: authority trust anchor")

// maxCABytes bounds a CA bundle.
const maxCABytes = 1 << 20

// maxKeyFileBytes bounds a public-key file.
const maxKeyFileBytes = 1 << 20

// ParsePublicKeys parses the authority service's public keys: one or more PEM "PUBLIC KEY"
// blocks (PKIX, Ed25519 or ECDSA P-256), e.g. the old and the new key during a rotation. Any
// other block, or trailing bytes that are not PEM, is an error: a key file that does not say
// exactly which keys to trust is not used.
func ParsePublicKeys(data []byte) ([]crypto.PublicKey, error) {
	if len(data) > maxKeyFileBytes {
		return nil, fmt.Errorf("sidecar: public-key file larger than %d bytes", maxKeyFileBytes)
	}
	ders, err := strictPEM(data, "public-key file", "PUBLIC KEY")
	if err != nil {
		return nil, err
	}
	var keys []crypto.PublicKey
	for _, der := range ders {
		pub, err := x509.ParsePKIXPublicKey(der)
		if err != nil {
			return nil, fmt.Errorf("sidecar: public key %d: %w", len(keys)+1, err)
		}
		keys = append(keys, pub)
	}
	if len(keys) == 0 {
		return nil, ErrNoKey
	}
	// The verifier refuses key types it does not accept; check here so the error names the file.
	if _, err := authority.NewVerifier(keys...); err != nil {
		return nil, err
	}
	return keys, nil
}

// LoadVerifier reads a public-key file (ParsePublicKeys) into an authority.Verifier.
func LoadVerifier(path string) (*authority.Verifier, error) {
	data, err := os.ReadFile(path)
	if err != nil {
		return nil, err
	}
	keys, err := ParsePublicKeys(data)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", path, err)
	}
	return authority.NewVerifier(keys...)
}

// verifierFrom is the authority.Verifier of the PEM public keys pem (the sidecar's
// ACTGATE_AUTHORITY_PUBLIC_KEY) or, when pem is empty, of the file path.
func verifierFrom(pemText, path string) (*authority.Verifier, error) {
	switch {
	case pemText != "" && path != "":
		return nil, fmt.Errorf("%w: public keys given both inline and as file %s; give one", ErrTrustAnchor, path)
	case pemText != "":
		keys, err := ParsePublicKeys([]byte(pemText))
		if err != nil {
			return nil, fmt.Errorf("%w: inline public keys: %w", ErrTrustAnchor, err)
		}
		return authority.NewVerifier(keys...)
	case path != "":
		v, err := LoadVerifier(path)
		if err != nil {
			return nil, fmt.Errorf("%w: public key file: %w", ErrTrustAnchor, err)
		}
		return v, nil
	}
	return nil, fmt.Errorf("%w: no public key: authorities could not be verified", ErrTrustAnchor)
}

// ParseCABundle parses a CA bundle strictly: one or more PEM CERTIFICATE blocks that parse,
// nothing else (no other block type, no headers, no text between blocks). A bundle that does
// not say exactly which CAs to trust is not used.
func ParseCABundle(data []byte) ([]*x509.Certificate, error) {
	if len(data) > maxCABytes {
		return nil, fmt.Errorf("sidecar: CA bundle larger than %d bytes", maxCABytes)
	}
	ders, err := strictPEM(data, "CA bundle", "CERTIFICATE")
	if err != nil {
		return nil, err
	}
	var certs []*x509.Certificate
	for _, der := range ders {
		c, err := x509.ParseCertificate(der)
		if err != nil {
			return nil, fmt.Errorf("sidecar: certificate %d: %w", len(certs)+1, err)
		}
		certs = append(certs, c)
	}
	if len(certs) == 0 {
		return nil, errors.New("sidecar: CA bundle has no CERTIFICATE block")
	}
	return certs, nil
}

// caPoolFrom is the pool of the PEM CA bundle pemText (the sidecar's ACTGATE_AUTHORITY_CA) or,
// when it is empty, of the file path; nil (the system roots) when both are empty.
func caPoolFrom(pemText, path string) (*x509.CertPool, error) {
	switch {
	case pemText != "" && path != "":
		return nil, fmt.Errorf("%w: CA bundle given both inline and as file %s; give one", ErrTrustAnchor, path)
	case pemText != "":
		certs, err := ParseCABundle([]byte(pemText))
		if err != nil {
			return nil, fmt.Errorf("%w: inline CA bundle: %w", ErrTrustAnchor, err)
		}
		pool := x509.NewCertPool()
		for _, c := range certs {
			pool.AddCert(c)
		}
		return pool, nil
	case path != "":
		pool, err := fileutil.ReadCertPool(path, false)
		if err != nil {
			return nil, fmt.Errorf("%w: CA file: %w", ErrTrustAnchor, err)
		}
		return pool, nil
	}
	return nil, nil
}

// EncodePublicKey returns pub as a PEM "PUBLIC KEY" block, the format ParsePublicKeys reads.
func EncodePublicKey(pub crypto.PublicKey) ([]byte, error) {
	der, err := x509.MarshalPKIXPublicKey(pub)
	if err != nil {
		return nil, err
	}
	return pem.EncodeToMemory(&pem.Block{Type: "PUBLIC KEY", Bytes: der}), nil
}

func trimSpace(b []byte) []byte {
	for len(b) > 0 && (b[0] == ' ' || b[0] == '\n' || b[0] == '\r' || b[0] == '\t') {
		b = b[1:]
	}
	return b
}

// strictPEM returns the contents of the PEM blocks of data in order, after checking that data
// is nothing but blocks of type typ without headers (surrounding whitespace aside). what names
// the input in errors ("CA bundle").
func strictPEM(data []byte, what, typ string) ([][]byte, error) {
	var ders [][]byte
	for rest := trimSpace(data); len(rest) > 0; rest = trimSpace(rest) {
		if !bytes.HasPrefix(rest, []byte("-----BEGIN ")) {
			return nil, fmt.Errorf("sidecar: %s has content that is not a PEM block", what)
		}
		var b *pem.Block
		b, rest = pem.Decode(rest)
		switch {
		case b == nil:
			return nil, fmt.Errorf("sidecar: %s has a PEM block that does not decode", what)
		case b.Type != typ:
			return nil, fmt.Errorf("sidecar: PEM block %q in the %s is not a %s", clip(b.Type), what, typ)
		case len(b.Headers) > 0:
			return nil, fmt.Errorf("sidecar: a %s block has headers", typ)
		}
		ders = append(ders, b.Bytes)
	}
	return ders, nil
}

// clip bounds an untrusted string for errors and logs.
func clip(s string) string {
	if len(s) > 128 {
		return s[:128] + "…"
	}
	return s
}
