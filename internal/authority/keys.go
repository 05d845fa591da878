package authority

import (
	"bytes"
	"crypto"
	"crypto/ecdsa"
	"crypto/ed25519"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/sha256"
	"crypto/x509"
	"encoding/hex"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"time"

	"github.com/sigstore/sigstore/pkg/cryptoutils"
	"github.com/sigstore/sigstore/pkg/signature"
)

// MaxTTL bounds the lifetime of an authority. Authorities are for one imminent call; a longer
// window is a standing permission, which this type is not.
const MaxTTL = 24 * time.Hour

// Signer issues authorities with one private key: Ed25519, or ECDSA P-256 with SHA-256.
type Signer struct {
	sv    signature.SignerVerifier
	pub   crypto.PublicKey
	keyID string
}

// NewSigner wraps a private key. Other key types and curves are refused.
func NewSigner(priv crypto.PrivateKey) (*Signer, error) {
	var (
		sv  signature.SignerVerifier
		err error
	)
	switch k := priv.(type) {
	case ed25519.PrivateKey:
		sv, err = signature.LoadED25519SignerVerifier(k)
	case *ecdsa.PrivateKey:
		if k.Curve != elliptic.P256() {
			return nil, fmt.Errorf("authority: ECDSA key on %s: only P-256 is accepted", k.Curve.Params().Name)
		}
		sv, err = signature.LoadECDSASignerVerifier(k, crypto.SHA256)
	default:
		return nil, fmt.Errorf("authority: private key type %T: only Ed25519 and ECDSA P-256 are accepted", priv)
	}
	if err != nil {
		return nil, fmt.Errorf("authority: loading signer: %w", err)
	}
	pub, err := sv.PublicKey()
	if err != nil {
		return nil, fmt.Errorf("authority: public key: %w", err)
	}
	id, err := KeyID(pub)
	if err != nil {
		return nil, err
	}
	return &Signer{sv: sv, pub: pub, keyID: id}, nil
}

// KeyID returns "sha256:" + hex SHA-256 of the PKIX DER encoding of pub.
func KeyID(pub crypto.PublicKey) (string, error) {
	der, err := x509.MarshalPKIXPublicKey(pub)
	if err != nil {
		return "", fmt.Errorf("authority: encoding public key: %w", err)
	}
	sum := sha256.Sum256(der)
	return "sha256:" + hex.EncodeToString(sum[:]), nil
}

// KeyID returns the ID of the signer's key.
func (s *Signer) KeyID() string { return s.keyID }

// SignerVerifier returns the key as a sigstore SignerVerifier (Ed25519, or ECDSA P-256 with
// SHA-256), for signing other things than authorities with the same key file: the receipt
// log's checkpoints (receipt.LoadOrCreateSigner).
func (s *Signer) SignerVerifier() signature.SignerVerifier { return s.sv }

// PublicKey returns the signer's public key.
func (s *Signer) PublicKey() crypto.PublicKey { return s.pub }

// Verifier returns a Verifier that trusts this signer's key.
func (s *Signer) Verifier() *Verifier {
	return &Verifier{keys: map[string]signature.Verifier{s.keyID: s.sv}, skew: DefaultSkew}
}

// Sign returns a new authority for b, issued at issuedAt (truncated to the millisecond) and
// valid for ttl (0 < ttl <= MaxTTL). It does not store it: that is Store.Issue.
func (s *Signer) Sign(b Binding, issuedAt time.Time, ttl time.Duration) (Authority, error) {
	if ttl <= 0 || ttl > MaxTTL {
		return Authority{}, fmt.Errorf("%w: ttl %s outside (0, %s]", ErrInvalid, ttl, MaxTTL)
	}
	id, err := DeriveID(b)
	if err != nil {
		return Authority{}, err
	}
	issued := time.UnixMilli(issuedAt.UnixMilli()).UTC()
	a := Authority{
		ID:        id,
		Binding:   b,
		IssuedAt:  issued,
		ExpiresAt: time.UnixMilli(issued.Add(ttl).UnixMilli()).UTC(),
		KeyID:     s.keyID,
	}
	payload, err := a.Payload()
	if err != nil {
		return Authority{}, err
	}
	sig, err := s.sv.SignMessage(bytes.NewReader(payload))
	if err != nil {
		return Authority{}, fmt.Errorf("authority: signing: %w", err)
	}
	a.Signature = sig
	return a, nil
}

// LoadKey reads a PEM private key (PKCS#8 "PRIVATE KEY", or SEC 1 "EC PRIVATE KEY") from path:
// the form of a key mounted from a Kubernetes Secret. Encrypted keys are refused.
func LoadKey(path string) (*Signer, error) {
	pemBytes, err := os.ReadFile(path)
	if err != nil {
		return nil, fmt.Errorf("authority: reading key: %w", err)
	}
	priv, err := cryptoutils.UnmarshalPEMToPrivateKey(pemBytes, nil)
	if err != nil {
		return nil, fmt.Errorf("authority: parsing key %s: %w", path, err)
	}
	return NewSigner(priv)
}

// LoadOrCreateKey is LoadKey for the embedded mode: on first start, when path does not exist,
// it generates an Ed25519 key and writes it there as PKCS#8 PEM with mode 0600 (atomically: a
// concurrent starter either wins the create or loads the winner's key). An existing key file
// readable or writable by group or others is refused, as ssh refuses such keys.
func LoadOrCreateKey(path string) (*Signer, error) {
	fi, err := os.Stat(path)
	switch {
	case err == nil:
		if fi.Mode().Perm()&0o077 != 0 {
			return nil, fmt.Errorf("authority: key %s has mode %v: it must not be accessible to group or others (chmod 600)", path, fi.Mode().Perm())
		}
		return LoadKey(path)
	case !errors.Is(err, fs.ErrNotExist):
		return nil, fmt.Errorf("authority: key: %w", err)
	}
	_, priv, err := ed25519.GenerateKey(rand.Reader)
	if err != nil {
		return nil, fmt.Errorf("authority: generating key: %w", err)
	}
	pemBytes, err := cryptoutils.MarshalPrivateKeyToPEM(priv)
	if err != nil {
		return nil, fmt.Errorf("authority: encoding key: %w", err)
	}
	if err := createExclusive(path, pemBytes); err != nil {
		if errors.Is(err, fs.ErrExist) {
			return LoadKey(path) // another process created it first
		}
		return nil, err
	}
	return NewSigner(priv)
}

// createExclusive writes data to a temporary file in path's directory, syncs it and links it to
// path, failing with fs.ErrExist if path exists; readers never see a partial key.
func createExclusive(path string, data []byte) error {
	dir := filepath.Dir(path)
	tmp, err := os.CreateTemp(dir, ".authority-key-*")
	if err != nil {
		return fmt.Errorf("authority: creating key: %w", err)
	}
	defer os.Remove(tmp.Name())
	if err := tmp.Chmod(0o600); err != nil {
		tmp.Close()
		return fmt.Errorf("authority: creating key: %w", err)
	}
	if _, err := tmp.Write(data); err != nil {
		tmp.Close()
		return fmt.Errorf("authority: writing key: %w", err)
	}
	if err := tmp.Sync(); err != nil {
		tmp.Close()
		return fmt.Errorf("authority: syncing key: %w", err)
	}
	if err := tmp.Close(); err != nil {
		return fmt.Errorf("authority: writing key: %w", err)
	}
	if err := os.Link(tmp.Name(), path); err != nil {
		return fmt.Errorf("authority: installing key: %w", err)
	}
	if d, err := os.Open(dir); err == nil {
		_ = d.Sync() // make the new directory entry durable; best effort on filesystems without it
		d.Close()
	}
	return nil
}
