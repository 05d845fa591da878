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
)

// ErrNoKey is returned by ParsePublicKeys for input without a PUBLIC KEY block.
var ErrNoKey = errors.New("sidecar: no PUBLIC KEY block")

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
	var keys []crypto.PublicKey
	for rest := trimSpace(data); len(rest) > 0; rest = trimSpace(rest) {
		if !bytes.HasPrefix(rest, []byte("-----BEGIN ")) {
			return nil, errors.New("sidecar: public-key file has content that is not a PEM block")
		}
		var b *pem.Block
		b, rest = pem.Decode(rest)
		switch {
		case b == nil:
			return nil, errors.New("sidecar: public-key file has a PEM block that does not decode")
		case b.Type != "PUBLIC KEY":
			return nil, fmt.Errorf("sidecar: PEM block %q is not a PUBLIC KEY", clip(b.Type))
		case len(b.Headers) > 0:
			return nil, errors.New("sidecar: a PUBLIC KEY block has headers")
		}
		pub, err := x509.ParsePKIXPublicKey(b.Bytes)
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
