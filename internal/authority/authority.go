package authority

import (
	"bytes"
	"encoding/json"
	"fmt"
	"time"
)

// Authority is a signed, single-use permission to dispatch exactly one bound action.
//
// What is signed is Payload(): the RFC 8785 canonical bytes of a flat JSON object
//
//	{"act_id","action_digest","arguments_digest","destination","expires_at_ms","id",
//	 "issued_at_ms","key_id","namespace","policy_epoch","sink_id","tool","type"}
//
// of strings and integers (times as Unix milliseconds, "type" = "actgate.dev/authority/v1").
// ParsePayload accepts only those exact bytes, so an authority read back from a store or a Lease
// is the one that was signed.
type Authority struct {
	// ID is DeriveID(Binding).
	ID string
	// Binding is what the authority is bound to.
	Binding Binding
	// IssuedAt and ExpiresAt bound its validity; millisecond precision, UTC.
	IssuedAt  time.Time
	ExpiresAt time.Time
	// KeyID names the signing key: "sha256:" + hex SHA-256 of its PKIX public key.
	KeyID string
	// Signature is over Payload(). Ed25519, or ECDSA P-256 with SHA-256 (ASN.1 DER).
	Signature []byte
}

// MaxPayloadBytes bounds a payload accepted by ParsePayload.
const MaxPayloadBytes = 16 << 10

// Payload returns the canonical bytes the signature covers, after checking the authority is
// well formed (valid binding, ID derived from it, expiry after issue, key ID present).
func (a Authority) Payload() ([]byte, error) {
	want, err := DeriveID(a.Binding)
	if err != nil {
		return nil, err
	}
	if a.ID != want {
		return nil, fmt.Errorf("%w: ID %q is not derived from the binding", ErrInvalid, clip(a.ID))
	}
	if a.IssuedAt.IsZero() || a.IssuedAt.UnixMilli() <= 0 {
		return nil, fmt.Errorf("%w: no issue time", ErrInvalid)
	}
	if a.ExpiresAt.UnixMilli() <= a.IssuedAt.UnixMilli() {
		return nil, fmt.Errorf("%w: expiry is not after issue", ErrInvalid)
	}
	if a.KeyID == "" || len(a.KeyID) > MaxIDLength {
		return nil, fmt.Errorf("%w: key ID missing or too long", ErrInvalid)
	}
	return canonicalObject(append(a.Binding.members(),
		num("expires_at_ms", a.ExpiresAt.UnixMilli()),
		str("id", a.ID),
		num("issued_at_ms", a.IssuedAt.UnixMilli()),
		str("key_id", a.KeyID),
		str("type", payloadType),
	))
}

// payloadJSON mirrors the payload object for decoding; pointers detect missing members.
type payloadJSON struct {
	ActID           *string `json:"act_id"`
	ActionDigest    *string `json:"action_digest"`
	ArgumentsDigest *string `json:"arguments_digest"`
	Destination     *string `json:"destination"`
	ExpiresAtMS     *int64  `json:"expires_at_ms"`
	ID              *string `json:"id"`
	IssuedAtMS      *int64  `json:"issued_at_ms"`
	KeyID           *string `json:"key_id"`
	Namespace       *string `json:"namespace"`
	PolicyEpoch     *string `json:"policy_epoch"`
	SinkID          *string `json:"sink_id"`
	Tool            *string `json:"tool"`
	Type            *string `json:"type"`
}

// ParsePayload decodes the canonical bytes of an authority (without its signature; set
// Signature before verifying). It accepts only the exact bytes Payload() produces for a well
// formed authority: unknown, missing or duplicate members, non-canonical form, a wrong type
// marker or an ID not derived from the binding are ErrInvalid.
func ParsePayload(payload []byte) (Authority, error) {
	if len(payload) > MaxPayloadBytes {
		return Authority{}, fmt.Errorf("%w: payload of %d bytes exceeds %d", ErrInvalid, len(payload), MaxPayloadBytes)
	}
	var p payloadJSON
	dec := json.NewDecoder(bytes.NewReader(payload))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&p); err != nil {
		return Authority{}, fmt.Errorf("%w: payload: %v", ErrInvalid, err)
	}
	if dec.More() {
		return Authority{}, fmt.Errorf("%w: payload: trailing data", ErrInvalid)
	}
	for _, f := range []struct {
		name string
		set  bool
	}{
		{"act_id", p.ActID != nil}, {"action_digest", p.ActionDigest != nil},
		{"arguments_digest", p.ArgumentsDigest != nil}, {"destination", p.Destination != nil},
		{"expires_at_ms", p.ExpiresAtMS != nil}, {"id", p.ID != nil},
		{"issued_at_ms", p.IssuedAtMS != nil}, {"key_id", p.KeyID != nil},
		{"namespace", p.Namespace != nil}, {"policy_epoch", p.PolicyEpoch != nil},
		{"sink_id", p.SinkID != nil}, {"tool", p.Tool != nil}, {"type", p.Type != nil},
	} {
		if !f.set {
			return Authority{}, fmt.Errorf("%w: payload: member %s missing", ErrInvalid, f.name)
		}
	}
	if *p.Type != payloadType {
		return Authority{}, fmt.Errorf("%w: payload: type %q is not %q", ErrInvalid, clip(*p.Type), payloadType)
	}
	a := Authority{
		ID: *p.ID,
		Binding: Binding{
			ActID:           *p.ActID,
			ArgumentsDigest: *p.ArgumentsDigest,
			ActionDigest:    *p.ActionDigest,
			Tool:            *p.Tool,
			Destination:     *p.Destination,
			SinkID:          *p.SinkID,
			PolicyEpoch:     *p.PolicyEpoch,
			Namespace:       *p.Namespace,
		},
		IssuedAt:  time.UnixMilli(*p.IssuedAtMS).UTC(),
		ExpiresAt: time.UnixMilli(*p.ExpiresAtMS).UTC(),
		KeyID:     *p.KeyID,
	}
	again, err := a.Payload()
	if err != nil {
		return Authority{}, err
	}
	if !bytes.Equal(again, payload) {
		return Authority{}, fmt.Errorf("%w: payload is not in canonical form", ErrInvalid)
	}
	return a, nil
}

// State is the consumption state of a stored authority.
type State string

// Authority states in a Store.
const (
	StateIssued   State = "ISSUED"
	StateConsumed State = "CONSUMED"
)

// Record is an authority as a Store holds it.
type Record struct {
	Authority Authority
	State     State
	// ConsumedAt is the store-clock time of consumption (zero while ISSUED).
	ConsumedAt time.Time
	// ConsumedBy is the operation ID of the dispatch that consumed it (the Lease's holderIdentity).
	ConsumedBy string
}
