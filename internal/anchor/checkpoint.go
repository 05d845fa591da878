package anchor

import (
	"bytes"
	"crypto/x509"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"time"

	"github.com/sigstore/sigstore/pkg/cryptoutils"
	"github.com/sigstore/sigstore/pkg/signature"

	"github.com/actgate/actgate/api/v1alpha1"
	"github.com/actgate/actgate/internal/jcs"
	"github.com/actgate/actgate/internal/receipt"
)

// Bounds of what an anchor holds, as the CRD states them.
const (
	// MaxPublicKeyBytes bounds spec.publicKey (a PEM Ed25519 or P-256 key is under 200 bytes).
	MaxPublicKeyBytes = 4096
	// MaxObjectBytes bounds a ReceiptAnchor object read from a file (kubectl's JSON of one
	// object, managed fields included).
	MaxObjectBytes = 1 << 20
)

// ErrInvalid is wrapped by every error of FromAPI, ParsePublicKey and ParseObject.
var ErrInvalid = errors.New("anchor: invalid")

// ToAPI converts a signed checkpoint to the API's form, keeping every signed field exactly.
func ToAPI(sc receipt.SignedCheckpoint) v1alpha1.AnchoredCheckpoint {
	return v1alpha1.AnchoredCheckpoint{
		Seq:       int64(sc.Seq),
		PrevSeq:   int64(sc.PrevSeq),
		Head:      sc.Head,
		Time:      sc.Time.UTC().Format(time.RFC3339Nano),
		KeyID:     sc.KeyID,
		Signature: base64.StdEncoding.EncodeToString(sc.Signature),
	}
}

// FromAPI converts an anchored checkpoint back to the checkpoint its signature covers. The
// time must be in the canonical form the log signs (UTC, RFC 3339 with nanoseconds trimmed)
// and the signature standard base64: anything else could not rebuild the signed bytes. It
// checks the checkpoint's fields (receipt.Checkpoint.Validate), not its signature.
func FromAPI(ac v1alpha1.AnchoredCheckpoint) (receipt.SignedCheckpoint, error) {
	if ac.Seq < 1 || ac.Seq > jcs.MaxSafeInteger || ac.PrevSeq < 0 || ac.PrevSeq >= ac.Seq {
		return receipt.SignedCheckpoint{}, fmt.Errorf("%w: seq %d, prevSeq %d: want 0 <= prevSeq < seq <= 2^53-1", ErrInvalid, ac.Seq, ac.PrevSeq)
	}
	t, err := time.Parse(time.RFC3339Nano, ac.Time)
	if err != nil || t.UTC().Format(time.RFC3339Nano) != ac.Time {
		return receipt.SignedCheckpoint{}, fmt.Errorf("%w: time is not a canonical UTC RFC 3339 time", ErrInvalid)
	}
	sig, err := base64.StdEncoding.Strict().DecodeString(ac.Signature)
	if err != nil || len(sig) == 0 || len(sig) > 512 {
		return receipt.SignedCheckpoint{}, fmt.Errorf("%w: signature is not standard base64 of 1 to 512 bytes", ErrInvalid)
	}
	sc := receipt.SignedCheckpoint{Checkpoint: receipt.Checkpoint{
		Type: receipt.CheckpointType, Seq: uint64(ac.Seq), PrevSeq: uint64(ac.PrevSeq),
		Head: ac.Head, Time: t.UTC(), KeyID: ac.KeyID,
	}, Signature: sig}
	if err := sc.Validate(); err != nil {
		return receipt.SignedCheckpoint{}, fmt.Errorf("%w: %v", ErrInvalid, err)
	}
	return sc, nil
}

// PublicKey is a parsed anchored public key.
type PublicKey struct {
	// DER is its PKIX encoding: two PEMs of one key compare equal by it.
	DER []byte
	// KeyID is receipt.KeyID of the key.
	KeyID string
	// Verifier checks checkpoints signed with it.
	Verifier signature.Verifier
}

// ParsePublicKey reads a PEM public key of a receipt log (Ed25519 or ECDSA P-256).
func ParsePublicKey(pemText string) (PublicKey, error) {
	if len(pemText) == 0 || len(pemText) > MaxPublicKeyBytes {
		return PublicKey{}, fmt.Errorf("%w: public key is empty or longer than %d bytes", ErrInvalid, MaxPublicKeyBytes)
	}
	pub, err := cryptoutils.UnmarshalPEMToPublicKey([]byte(pemText))
	if err != nil {
		return PublicKey{}, fmt.Errorf("%w: not a PEM public key", ErrInvalid)
	}
	v, err := receipt.NewVerifier(pub)
	if err != nil {
		return PublicKey{}, fmt.Errorf("%w: %v", ErrInvalid, err)
	}
	der, err := x509.MarshalPKIXPublicKey(pub)
	if err != nil {
		return PublicKey{}, fmt.Errorf("%w: encoding public key: %v", ErrInvalid, err)
	}
	id, err := receipt.KeyID(pub)
	if err != nil {
		return PublicKey{}, fmt.Errorf("%w: %v", ErrInvalid, err)
	}
	return PublicKey{DER: der, KeyID: id, Verifier: v}, nil
}

// Equal reports whether k and o are the same key.
func (k PublicKey) Equal(o PublicKey) bool { return bytes.Equal(k.DER, o.DER) }

// Object is a ReceiptAnchor read and checked: its key, and its checkpoint verified under it.
type Object struct {
	Anchor     *v1alpha1.ReceiptAnchor
	Key        PublicKey
	Checkpoint receipt.SignedCheckpoint
}

// ParseObject reads one ReceiptAnchor as `kubectl get receiptanchor UID -o json` (or -o yaml
// converted to JSON) prints it, and checks it: kind and apiVersion, a public key, a checkpoint
// in canonical form whose key ID is the anchor's, signed by that key. A checkpoint whose
// signature does not verify wraps receipt.ErrBadSignature; anything else malformed ErrInvalid.
func ParseObject(data []byte) (*Object, error) {
	if len(data) > MaxObjectBytes {
		return nil, fmt.Errorf("%w: more than %d bytes", ErrInvalid, MaxObjectBytes)
	}
	var ra v1alpha1.ReceiptAnchor
	dec := json.NewDecoder(bytes.NewReader(data))
	if err := dec.Decode(&ra); err != nil {
		return nil, fmt.Errorf("%w: not a JSON ReceiptAnchor object", ErrInvalid)
	}
	if dec.More() {
		return nil, fmt.Errorf("%w: more than one JSON value", ErrInvalid)
	}
	if ra.Kind != "ReceiptAnchor" || ra.APIVersion != v1alpha1.GroupVersion.String() {
		return nil, fmt.Errorf("%w: kind %q apiVersion %q: want a single ReceiptAnchor of %s (kubectl get receiptanchor UID -o json)",
			ErrInvalid, clip(ra.Kind), clip(ra.APIVersion), v1alpha1.GroupVersion)
	}
	key, err := ParsePublicKey(ra.Spec.PublicKey)
	if err != nil {
		return nil, fmt.Errorf("spec.publicKey: %w", err)
	}
	if ra.Status.Checkpoint == nil {
		return nil, fmt.Errorf("%w: status.checkpoint is missing: nothing was anchored", ErrInvalid)
	}
	sc, err := FromAPI(*ra.Status.Checkpoint)
	if err != nil {
		return nil, fmt.Errorf("status.checkpoint: %w", err)
	}
	if sc.KeyID != ra.Spec.KeyID {
		return nil, fmt.Errorf("%w: status.checkpoint.keyID is not spec.keyID", ErrInvalid)
	}
	if err := receipt.VerifyCheckpoint(key.Verifier, sc); err != nil {
		return nil, fmt.Errorf("status.checkpoint: %w", err)
	}
	return &Object{Anchor: &ra, Key: key, Checkpoint: sc}, nil
}

func clip(s string) string {
	if len(s) > 64 {
		return s[:64] + "…"
	}
	return s
}

// VerifyStream verifies a receipt stream (receipt.VerifyStream) against an anchor: under the
// anchored key, the records of the anchored log (its key ID, unless o.LogID names another),
// and requiring that the stream holds the anchored checkpoint's receipt with its head digest.
// A stream that ends before it lost receipts the anchor proves were written
// (RECEIPT_ANCHOR_MISSING); one holding another receipt at that seq is another chain
// (RECEIPT_ANCHOR_MISMATCH). o.Anchors are checked too.
func VerifyStream(r io.Reader, obj *Object, o receipt.StreamOptions) (receipt.StreamReport, error) {
	if obj == nil {
		return receipt.StreamReport{}, fmt.Errorf("%w: no anchor", ErrInvalid)
	}
	if o.LogID == "" {
		o.LogID = obj.Anchor.Spec.KeyID
	}
	o.Anchors = append(append([]receipt.Anchor(nil), o.Anchors...), receipt.Anchor{Seq: obj.Checkpoint.Seq, Digest: obj.Checkpoint.Head})
	return receipt.VerifyStream(r, obj.Key.Verifier, o)
}
