package receipt

import (
	"bytes"
	"crypto"
	"crypto/ecdsa"
	"crypto/ed25519"
	"crypto/elliptic"
	"crypto/sha256"
	"crypto/x509"
	"encoding/base64"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"strconv"
	"time"

	"github.com/sigstore/sigstore/pkg/cryptoutils"
	"github.com/sigstore/sigstore/pkg/signature"

	"github.com/actgate/actgate/internal/jcs"
)

// CheckpointType is the type member of every checkpoint. It is inside the signed bytes, so a
// signature over a checkpoint can never be taken for a signature over another kind of object
// made with the same key (an authority, say), and vice versa.
const CheckpointType = "actgate.dev/receipt-checkpoint/v1"

// maxSignatureBytes bounds a decoded signature (ECDSA P-256 DER is at most 72, Ed25519 64).
const maxSignatureBytes = 512

// Checkpoint is the signed statement a group commit ends with: "receipts PrevSeq+1..Seq follow
// the receipts of the previous checkpoint, and the receipt with seq Seq has digest Head". Head
// commits to every receipt before it through the prev chain, so one signature covers the batch
// and everything before it. On the wire a checkpoint line is
//
//	{"checkpoint":<canonical checkpoint>,"signature":"<standard base64>"}
//
// and the signature is over the canonical checkpoint bytes exactly as they appear in the line.
type Checkpoint struct {
	Type    string    `json:"type"`
	Seq     uint64    `json:"seq"`
	PrevSeq uint64    `json:"prev_seq"`
	Head    string    `json:"head"`
	Time    time.Time `json:"time"`
	KeyID   string    `json:"key_id"`
}

// appendCanonical appends the RFC 8785 canonical form of c (members sorted: head, key_id,
// prev_seq, seq, time, type).
func (c *Checkpoint) appendCanonical(dst []byte) ([]byte, error) {
	var err error
	dst = append(dst, `{"head":`...)
	if dst, err = jcs.AppendString(dst, c.Head); err != nil {
		return dst, err
	}
	dst = append(dst, `,"key_id":`...)
	if dst, err = jcs.AppendString(dst, c.KeyID); err != nil {
		return dst, err
	}
	dst = append(dst, `,"prev_seq":`...)
	dst = strconv.AppendUint(dst, c.PrevSeq, 10)
	dst = append(dst, `,"seq":`...)
	dst = strconv.AppendUint(dst, c.Seq, 10)
	dst = append(dst, `,"time":"`...)
	dst = c.Time.UTC().AppendFormat(dst, time.RFC3339Nano)
	dst = append(dst, `","type":`...)
	if dst, err = jcs.AppendString(dst, c.Type); err != nil {
		return dst, err
	}
	return append(dst, '}'), nil
}

// appendCheckpointLine appends a whole checkpoint line, newline included, given the canonical
// checkpoint bytes and the signature over them.
func appendCheckpointLine(dst, body, sig []byte) []byte {
	dst = append(dst, `{"checkpoint":`...)
	dst = append(dst, body...)
	dst = append(dst, `,"signature":"`...)
	dst = base64.StdEncoding.AppendEncode(dst, sig)
	return append(dst, "\"}\n"...)
}

func (c *Checkpoint) validate() error {
	switch {
	case c.Type != CheckpointType:
		return fmt.Errorf("%w: type is not %s", ErrInvalid, CheckpointType)
	case c.Seq > jcs.MaxSafeInteger:
		return fmt.Errorf("%w: seq is above 2^53-1", ErrInvalid)
	case c.Seq <= c.PrevSeq:
		return fmt.Errorf("%w: seq %d is not after prev_seq %d", ErrInvalid, c.Seq, c.PrevSeq)
	case !jcs.IsDigest(c.Head):
		return fmt.Errorf("%w: head is not a sha256: digest", ErrInvalid)
	case c.KeyID == "" || len(c.KeyID) > MaxFieldBytes:
		return fmt.Errorf("%w: key_id is empty or longer than %d bytes", ErrInvalid, MaxFieldBytes)
	case c.Time.IsZero() || c.Time.Year() > 9999:
		return fmt.Errorf("%w: time is zero or after year 9999", ErrInvalid)
	}
	return nil
}

// SignedCheckpoint is a checkpoint and its signature: what Options.OnCheckpoint receives and
// what is anchored outside the log.
type SignedCheckpoint struct {
	Checkpoint
	Signature []byte
}

// Canonical returns the canonical checkpoint bytes the signature covers.
func (c *Checkpoint) Canonical() ([]byte, error) {
	b, err := c.appendCanonical(nil)
	if err != nil {
		return nil, fmt.Errorf("%w: encoding checkpoint: %v", ErrInvalid, err)
	}
	return b, nil
}

// Validate checks the checkpoint's fields as a verification of a log does
// (CHECKPOINT_INVALID): type, seq after prev_seq and below 2^53, a head digest, a key ID, a
// time.
func (c *Checkpoint) Validate() error { return c.validate() }

// VerifyCheckpoint checks a checkpoint held outside a log (an anchor): its fields, and its
// signature under v over its canonical bytes. The error wraps ErrInvalid for a malformed
// checkpoint, ErrBadSignature for a signature that does not verify.
func VerifyCheckpoint(v signature.Verifier, sc SignedCheckpoint) error {
	if v == nil {
		return fmt.Errorf("%w: no verifier", ErrInvalid)
	}
	if err := sc.validate(); err != nil {
		return err
	}
	if len(sc.Signature) == 0 || len(sc.Signature) > maxSignatureBytes {
		return fmt.Errorf("%w: signature is empty or longer than %d bytes", ErrInvalid, maxSignatureBytes)
	}
	body, err := sc.Canonical()
	if err != nil {
		return err
	}
	if err := v.VerifySignature(bytes.NewReader(sc.Signature), bytes.NewReader(body)); err != nil {
		return fmt.Errorf("%w: checkpoint %d", ErrBadSignature, sc.Seq)
	}
	return nil
}

type checkpointWire struct {
	Checkpoint *Checkpoint `json:"checkpoint"`
	Signature  []byte      `json:"signature"`
}

// decodeCheckpoint decodes a checkpoint line and returns the checkpoint, its signature and its
// canonical re-encoding (line without the trailing newline must equal it).
func decodeCheckpoint(line []byte) (Checkpoint, []byte, error) {
	var c Checkpoint
	w := checkpointWire{Checkpoint: &c}
	dec := json.NewDecoder(bytes.NewReader(line))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&w); err != nil || w.Checkpoint != &c {
		return Checkpoint{}, nil, errSyntax
	}
	if len(w.Signature) == 0 || len(w.Signature) > maxSignatureBytes {
		return Checkpoint{}, nil, errSyntax
	}
	return c, w.Signature, nil
}

// KeyID returns the default key ID of a public key: "sha256:" + hex SHA-256 of its PKIX DER
// encoding, the same form internal/authority uses, so one key has one ID across the project.
func KeyID(pub crypto.PublicKey) (string, error) {
	der, err := x509.MarshalPKIXPublicKey(pub)
	if err != nil {
		return "", fmt.Errorf("%w: encoding public key: %v", ErrInvalid, err)
	}
	sum := sha256.Sum256(der)
	return jcs.DigestPrefix + hex.EncodeToString(sum[:]), nil
}

// checkKey accepts Ed25519 and ECDSA P-256 public keys only, the two the project signs with.
func checkKey(pub crypto.PublicKey) error {
	switch k := pub.(type) {
	case ed25519.PublicKey:
		return nil
	case *ecdsa.PublicKey:
		if k.Curve == elliptic.P256() {
			return nil
		}
		return fmt.Errorf("%w: ECDSA key on %s: only P-256 is accepted", ErrInvalid, k.Curve.Params().Name)
	}
	return fmt.Errorf("%w: public key type %T: only Ed25519 and ECDSA P-256 are accepted", ErrInvalid, pub)
}

// NewVerifier returns the signature.Verifier for checkpoints signed by pub (Ed25519, or ECDSA
// P-256 with SHA-256).
func NewVerifier(pub crypto.PublicKey) (signature.Verifier, error) {
	if err := checkKey(pub); err != nil {
		return nil, err
	}
	v, err := signature.LoadVerifier(pub, crypto.SHA256)
	if err != nil {
		return nil, fmt.Errorf("%w: loading verifier: %v", ErrInvalid, err)
	}
	return v, nil
}

// NewVerifierPEM is NewVerifier for a PEM-encoded public key (the receipts.pub.pem a gate or a
// sidecar writes beside its log).
func NewVerifierPEM(pemBytes []byte) (signature.Verifier, error) {
	pub, err := cryptoutils.UnmarshalPEMToPublicKey(pemBytes)
	if err != nil {
		return nil, fmt.Errorf("%w: not a PEM public key: %v", ErrInvalid, err)
	}
	return NewVerifier(pub)
}
