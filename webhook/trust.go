package webhook

import (
	"crypto/x509"
	"encoding/pem"
	"errors"
	"fmt"
	"os"
)

// ErrTrust: the authority's CA bundle or public key file is missing or holds something else.
// Pods are refused until it is right (fail closed): a sidecar without them cannot reach or
// believe the authority service.
var ErrTrust = errors.New("webhook: authority trust material")

// MaxTrustBytes bounds the CA bundle and the public keys, each as the sidecar receives it: the
// value of one environment variable (ACTGATE_AUTHORITY_CA, ACTGATE_AUTHORITY_PUBLIC_KEY), which
// Linux caps at 128 KiB per string.
const MaxTrustBytes = 64 << 10

// AuthorityTrust names the files the injector reads, for every pod, to give the sidecar the
// authority service's CA bundle and the public key(s) verifying its authorities, as the
// sidecar container's environment (see inject.Config.AuthorityCA). Both are optional; the
// chart sets both.
type AuthorityTrust struct {
	// CAFile is a PEM bundle of CERTIFICATE blocks: the CA of the authority's serving
	// certificate (the chart: ca.crt of the webhook certificate Secret, which also covers the
	// authority's Service name).
	CAFile string `json:"caFile,omitempty"`
	// PublicKeyFile holds PEM PUBLIC KEY blocks, or CERTIFICATE blocks whose public keys are
	// taken (the chart's signing-key Secret carries a self-signed certificate of the signing
	// key, since Helm cannot derive a public key). A private key in it is refused: it would
	// otherwise be copied into every agent pod.
	PublicKeyFile string `json:"publicKeyFile,omitempty"`
}

// load reads both files; an unset name gives "".
func (a AuthorityTrust) load() (ca, publicKeys string, err error) {
	if a.CAFile != "" {
		raw, err := os.ReadFile(a.CAFile)
		if err != nil {
			return "", "", fmt.Errorf("%w: CA file: %w", ErrTrust, err)
		}
		if ca, err = certificatesOnly(raw); err != nil {
			return "", "", fmt.Errorf("%w: CA file %s: %w", ErrTrust, a.CAFile, err)
		}
	}
	if a.PublicKeyFile != "" {
		raw, err := os.ReadFile(a.PublicKeyFile)
		if err != nil {
			return "", "", fmt.Errorf("%w: public key file: %w", ErrTrust, err)
		}
		if publicKeys, err = PublicKeysPEM(raw); err != nil {
			return "", "", fmt.Errorf("%w: public key file %s: %w", ErrTrust, a.PublicKeyFile, err)
		}
	}
	if len(ca) > MaxTrustBytes || len(publicKeys) > MaxTrustBytes {
		return "", "", fmt.Errorf("%w: the CA bundle (%d bytes) or public keys (%d bytes) exceed %d bytes, more than a sidecar's environment can carry",
			ErrTrust, len(ca), len(publicKeys), MaxTrustBytes)
	}
	return ca, publicKeys, nil
}

// certificatesOnly returns raw's CERTIFICATE blocks re-encoded, refusing anything else.
func certificatesOnly(raw []byte) (string, error) {
	var out []byte
	for rest := raw; ; {
		var b *pem.Block
		b, rest = pem.Decode(rest)
		if b == nil {
			break
		}
		if b.Type != "CERTIFICATE" {
			return "", fmt.Errorf("holds a %q block; only CERTIFICATE blocks belong in a CA bundle", b.Type)
		}
		if _, err := x509.ParseCertificate(b.Bytes); err != nil {
			return "", fmt.Errorf("certificate: %w", err)
		}
		out = append(out, pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: b.Bytes})...)
	}
	if len(out) == 0 {
		return "", errors.New("no CERTIFICATE block")
	}
	return string(out), nil
}

// PublicKeysPEM turns PEM PUBLIC KEY and CERTIFICATE blocks into PUBLIC KEY blocks (the format
// `actgate sidecar --authority-public-key-file` reads), in order. Any other block, a private
// key above all, is an error.
func PublicKeysPEM(raw []byte) (string, error) {
	var out []byte
	for rest := raw; ; {
		var b *pem.Block
		b, rest = pem.Decode(rest)
		if b == nil {
			break
		}
		var der []byte
		switch b.Type {
		case "PUBLIC KEY":
			if _, err := x509.ParsePKIXPublicKey(b.Bytes); err != nil {
				return "", fmt.Errorf("public key: %w", err)
			}
			der = b.Bytes
		case "CERTIFICATE":
			c, err := x509.ParseCertificate(b.Bytes)
			if err != nil {
				return "", fmt.Errorf("certificate: %w", err)
			}
			if der, err = x509.MarshalPKIXPublicKey(c.PublicKey); err != nil {
				return "", fmt.Errorf("certificate's public key: %w", err)
			}
		default:
			return "", fmt.Errorf("holds a %q block; only PUBLIC KEY or CERTIFICATE blocks may be given to pods", b.Type)
		}
		out = append(out, pem.EncodeToMemory(&pem.Block{Type: "PUBLIC KEY", Bytes: der})...)
	}
	if len(out) == 0 {
		return "", errors.New("no PUBLIC KEY or CERTIFICATE block")
	}
	return string(out), nil
}
