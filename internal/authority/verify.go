package authority

import (
	"bytes"
	"crypto"
	"crypto/ecdsa"
	"crypto/ed25519"
	"crypto/elliptic"
	"fmt"
	"time"

	"github.com/sigstore/sigstore/pkg/signature"
)

// DefaultSkew is how far in the future an issue time may lie before an authority is refused as
// not yet valid (issuer and sink clocks differ). Expiry gets no such grace: an expired authority
// is refused at the first moment the sink's clock passes it.
const DefaultSkew = 30 * time.Second

// Verifier checks authorities against a fixed set of trusted public keys. The keys come from
// the relying party's configuration, never from the authority (AEB "Relying-Party Inputs and
// Pins"): the authority's key ID only selects among them.
type Verifier struct {
	keys map[string]signature.Verifier
	skew time.Duration
}

// NewVerifier trusts the given public keys (Ed25519 or ECDSA P-256).
func NewVerifier(pubs ...crypto.PublicKey) (*Verifier, error) {
	v := &Verifier{keys: map[string]signature.Verifier{}, skew: DefaultSkew}
	for _, pub := range pubs {
		switch k := pub.(type) {
		case ed25519.PublicKey:
		case *ecdsa.PublicKey:
			if k.Curve != elliptic.P256() {
				return nil, fmt.Errorf("authority: ECDSA key on %s: only P-256 is accepted", k.Curve.Params().Name)
			}
		default:
			return nil, fmt.Errorf("authority: public key type %T: only Ed25519 and ECDSA P-256 are accepted", pub)
		}
		id, err := KeyID(pub)
		if err != nil {
			return nil, err
		}
		sv, err := signature.LoadVerifier(pub, crypto.SHA256)
		if err != nil {
			return nil, fmt.Errorf("authority: loading verifier: %w", err)
		}
		v.keys[id] = sv
	}
	if len(v.keys) == 0 {
		return nil, fmt.Errorf("authority: a verifier needs at least one trusted key")
	}
	return v, nil
}

// VerifySignature checks that a is well formed and signed by a trusted key. It checks nothing
// about the binding or time: that is Verify.
func (v *Verifier) VerifySignature(a Authority) error {
	sv, ok := v.keys[a.KeyID]
	if !ok {
		return fmt.Errorf("%w: key %q is not trusted", ErrBadSignature, clip(a.KeyID))
	}
	payload, err := a.Payload()
	if err != nil {
		return err
	}
	if len(a.Signature) == 0 {
		return fmt.Errorf("%w: no signature", ErrBadSignature)
	}
	if err := sv.VerifySignature(bytes.NewReader(a.Signature), bytes.NewReader(payload)); err != nil {
		return fmt.Errorf("%w: %v", ErrBadSignature, err)
	}
	return nil
}

// Verify checks a for the sink (tool-use-binding §16 MUST 1–3, 5): a well-formed authority
// (ErrInvalid), signed by a trusted key (ErrBadSignature), bound to exactly the expected binding
// (a *MismatchError unwrapping to ErrScopeMismatch, ErrArgumentsMismatch, ErrDestinationMismatch,
// ErrSinkMismatch or ErrEpochMismatch), issued no later than now+skew (ErrNotYetValid) and not
// expired at now (ErrExpired). expect must itself be a valid binding: a sink that cannot say
// what it expects is refused (ErrInvalid), never waved through.
//
// Verify says nothing about consumption; only the Store knows that, at consume time.
func (v *Verifier) Verify(a Authority, expect Binding, now time.Time) error {
	if err := expect.Validate(); err != nil {
		return fmt.Errorf("expected binding: %w", err)
	}
	if err := v.VerifySignature(a); err != nil {
		return err
	}
	if err := Match(a.Binding, expect); err != nil {
		return err
	}
	return CheckTime(a, now, v.skew)
}

// Match compares a bound binding with the expected one, field by field, and reports the first
// difference as a *MismatchError. Order: the act and its scope first, then the arguments, then
// where and by whom it may run.
func Match(got, expect Binding) error {
	for _, f := range []struct {
		field     string
		got, want string
		err       error
	}{
		{"namespace", got.Namespace, expect.Namespace, ErrScopeMismatch},
		{"act_id", got.ActID, expect.ActID, ErrScopeMismatch},
		{"tool", got.Tool, expect.Tool, ErrScopeMismatch},
		{"arguments_digest", got.ArgumentsDigest, expect.ArgumentsDigest, ErrArgumentsMismatch},
		{"action_digest", got.ActionDigest, expect.ActionDigest, ErrArgumentsMismatch},
		{"destination", got.Destination, expect.Destination, ErrDestinationMismatch},
		{"sink_id", got.SinkID, expect.SinkID, ErrSinkMismatch},
		{"policy_epoch", got.PolicyEpoch, expect.PolicyEpoch, ErrEpochMismatch},
	} {
		if f.got != f.want {
			return &MismatchError{Field: f.field, Got: f.got, Expected: f.want, Err: f.err}
		}
	}
	return nil
}

// CheckTime refuses an authority issued after now+skew or expired at now. Times are taken at the
// signed millisecond precision.
func CheckTime(a Authority, now time.Time, skew time.Duration) error {
	issued := time.UnixMilli(a.IssuedAt.UnixMilli())
	expires := time.UnixMilli(a.ExpiresAt.UnixMilli())
	if issued.After(now.Add(skew)) {
		return fmt.Errorf("%w: issued at %s, now %s", ErrNotYetValid, issued.UTC().Format(time.RFC3339Nano), now.UTC().Format(time.RFC3339Nano))
	}
	if !now.Before(expires) {
		return fmt.Errorf("%w: expired at %s, now %s", ErrExpired, expires.UTC().Format(time.RFC3339Nano), now.UTC().Format(time.RFC3339Nano))
	}
	return nil
}
