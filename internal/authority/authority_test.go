package authority

import (
	"bytes"
	"crypto/ecdsa"
	"crypto/ed25519"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/rsa"
	"errors"
	"strings"
	"testing"
	"time"

	gowebpkijcs "github.com/gowebpki/jcs"

	"github.com/actgate/actgate/internal/journal"
)

var t0 = time.Date(2026, 7, 27, 12, 0, 0, 0, time.UTC)

func testBinding() Binding {
	return Binding{
		ActID:           "act-7f3a",
		ArgumentsDigest: "sha256:" + strings.Repeat("a", 64),
		ActionDigest:    "sha256:" + strings.Repeat("b", 64),
		Tool:            "payout",
		Destination:     "https://payments.example/mcp",
		SinkID:          "sink-a",
		PolicyEpoch:     "7",
		Namespace:       "agents",
	}
}

func ed25519Signer(t testing.TB) *Signer {
	t.Helper()
	_, priv, err := ed25519.GenerateKey(rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	s, err := NewSigner(priv)
	if err != nil {
		t.Fatal(err)
	}
	return s
}

func ecdsaSigner(t testing.TB) *Signer {
	t.Helper()
	priv, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	s, err := NewSigner(priv)
	if err != nil {
		t.Fatal(err)
	}
	return s
}

func TestBindingValidate(t *testing.T) {
	with := func(f func(*Binding)) Binding { b := testBinding(); f(&b); return b }
	cases := []struct {
		name string
		b    Binding
		ok   bool
	}{
		{"complete", testBinding(), true},
		{"embedded mode has no namespace", with(func(b *Binding) { b.Namespace = "" }), true},
		{"no act", with(func(b *Binding) { b.ActID = "" }), false},
		{"no tool", with(func(b *Binding) { b.Tool = "" }), false},
		{"no destination", with(func(b *Binding) { b.Destination = "" }), false},
		{"no sink", with(func(b *Binding) { b.SinkID = "" }), false},
		{"no epoch", with(func(b *Binding) { b.PolicyEpoch = "" }), false},
		{"arguments digest missing", with(func(b *Binding) { b.ArgumentsDigest = "" }), false},
		{"arguments digest uppercase", with(func(b *Binding) { b.ArgumentsDigest = "sha256:" + strings.Repeat("A", 64) }), false},
		{"action digest other algorithm", with(func(b *Binding) { b.ActionDigest = "sha512:" + strings.Repeat("b", 64) }), false},
		{"action digest short", with(func(b *Binding) { b.ActionDigest = "sha256:" + strings.Repeat("b", 63) }), false},
		{"act too long", with(func(b *Binding) { b.ActID = strings.Repeat("x", MaxIDLength+1) }), false},
		{"destination too long", with(func(b *Binding) { b.Destination = strings.Repeat("x", MaxFieldLength+1) }), false},
		{"namespace too long", with(func(b *Binding) { b.Namespace = strings.Repeat("x", MaxNamespace+1) }), false},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			err := tc.b.Validate()
			if tc.ok != (err == nil) {
				t.Fatalf("Validate = %v, want ok=%v", err, tc.ok)
			}
			if err != nil && !errors.Is(err, ErrInvalid) {
				t.Fatalf("%v does not wrap ErrInvalid", err)
			}
		})
	}
}

func TestDeriveID(t *testing.T) {
	base, err := DeriveID(testBinding())
	if err != nil {
		t.Fatal(err)
	}
	if !ValidID(base) || len(base) > 253 || strings.ToLower(base) != base {
		t.Fatalf("ID %q is not a valid Lease name", base)
	}
	again, _ := DeriveID(testBinding())
	if again != base {
		t.Fatal("DeriveID is not deterministic")
	}
	// Every bound field changes the ID.
	for name, f := range map[string]func(*Binding){
		"act":         func(b *Binding) { b.ActID = "act-other" },
		"arguments":   func(b *Binding) { b.ArgumentsDigest = "sha256:" + strings.Repeat("c", 64) },
		"action":      func(b *Binding) { b.ActionDigest = "sha256:" + strings.Repeat("c", 64) },
		"tool":        func(b *Binding) { b.Tool = "refund" },
		"destination": func(b *Binding) { b.Destination = "https://evil.example/mcp" },
		"sink":        func(b *Binding) { b.SinkID = "sink-b" },
		"epoch":       func(b *Binding) { b.PolicyEpoch = "8" },
		"namespace":   func(b *Binding) { b.Namespace = "other" },
	} {
		t.Run(name, func(t *testing.T) {
			b := testBinding()
			f(&b)
			id, err := DeriveID(b)
			if err != nil {
				t.Fatal(err)
			}
			if id == base {
				t.Fatalf("changing %s did not change the ID", name)
			}
		})
	}
}

// TestVerify is the table of tool-use-binding §16: every bound field, the signature and the
// validity window, each failing with its own sentinel.
func TestVerify(t *testing.T) {
	for _, alg := range []struct {
		name   string
		signer func(testing.TB) *Signer
	}{{"ed25519", ed25519Signer}, {"ecdsa-p256", ecdsaSigner}} {
		t.Run(alg.name, func(t *testing.T) {
			s := alg.signer(t)
			v := s.Verifier()
			other := alg.signer(t)
			good, err := s.Sign(testBinding(), t0, 5*time.Minute)
			if err != nil {
				t.Fatal(err)
			}
			expect := func(f func(*Binding)) Binding { b := testBinding(); f(&b); return b }
			tamper := func(f func(*Authority)) Authority {
				a := good
				a.Signature = bytes.Clone(good.Signature)
				f(&a)
				return a
			}
			byOther, err := other.Sign(testBinding(), t0, 5*time.Minute)
			if err != nil {
				t.Fatal(err)
			}
			cases := []struct {
				name    string
				a       Authority
				expect  Binding
				now     time.Time
				wantErr error
				field   string
			}{
				{"valid", good, testBinding(), t0.Add(time.Minute), nil, ""},
				{"valid at issue time", good, testBinding(), t0, nil, ""},
				{"valid within skew before issue", good, testBinding(), t0.Add(-DefaultSkew), nil, ""},
				{"other act", good, expect(func(b *Binding) { b.ActID = "act-other" }), t0, ErrScopeMismatch, "act_id"},
				{"other tool", good, expect(func(b *Binding) { b.Tool = "refund" }), t0, ErrScopeMismatch, "tool"},
				{"other namespace", good, expect(func(b *Binding) { b.Namespace = "other" }), t0, ErrScopeMismatch, "namespace"},
				{"other arguments", good, expect(func(b *Binding) { b.ArgumentsDigest = "sha256:" + strings.Repeat("c", 64) }), t0, ErrArgumentsMismatch, "arguments_digest"},
				{"other action", good, expect(func(b *Binding) { b.ActionDigest = "sha256:" + strings.Repeat("c", 64) }), t0, ErrArgumentsMismatch, "action_digest"},
				{"swapped server (T-D)", good, expect(func(b *Binding) { b.Destination = "https://evil.example/mcp" }), t0, ErrDestinationMismatch, "destination"},
				{"other sink", good, expect(func(b *Binding) { b.SinkID = "sink-b" }), t0, ErrSinkMismatch, "sink_id"},
				{"other epoch", good, expect(func(b *Binding) { b.PolicyEpoch = "8" }), t0, ErrEpochMismatch, "policy_epoch"},
				{"expired at expiry", good, testBinding(), t0.Add(5 * time.Minute), ErrExpired, ""},
				{"expired after", good, testBinding(), t0.Add(time.Hour), ErrExpired, ""},
				{"issued in the future", good, testBinding(), t0.Add(-DefaultSkew - time.Millisecond), ErrNotYetValid, ""},
				{"signature flipped", tamper(func(a *Authority) { a.Signature[len(a.Signature)-1] ^= 1 }), testBinding(), t0, ErrBadSignature, ""},
				{"signature missing", tamper(func(a *Authority) { a.Signature = nil }), testBinding(), t0, ErrBadSignature, ""},
				{"untrusted key", byOther, testBinding(), t0, ErrBadSignature, ""},
				{"untrusted key relabelled", tamper(func(a *Authority) { a.KeyID = other.KeyID() }), testBinding(), t0, ErrBadSignature, ""},
				{"expiry extended", tamper(func(a *Authority) { a.ExpiresAt = a.ExpiresAt.Add(time.Hour) }), testBinding(), t0, ErrBadSignature, ""},
				{"issue moved", tamper(func(a *Authority) { a.IssuedAt = a.IssuedAt.Add(-time.Second) }), testBinding(), t0, ErrBadSignature, ""},
				// Rebinding the authority changes its derived ID, so the authority is malformed
				// before the signature is even checked; rebinding and re-deriving the ID breaks
				// the signature.
				{"binding rewritten", tamper(func(a *Authority) { a.Binding.Destination = "https://evil.example/mcp" }), testBinding(), t0, ErrInvalid, ""},
				{"binding and ID rewritten", tamper(func(a *Authority) {
					a.Binding.Destination = "https://evil.example/mcp"
					a.ID, _ = DeriveID(a.Binding)
				}), expect(func(b *Binding) { b.Destination = "https://evil.example/mcp" }), t0, ErrBadSignature, ""},
				{"sink expects nothing", good, Binding{}, t0, ErrInvalid, ""},
				{"sink expects malformed digest", good, expect(func(b *Binding) { b.ArgumentsDigest = "abc" }), t0, ErrInvalid, ""},
			}
			for _, tc := range cases {
				t.Run(tc.name, func(t *testing.T) {
					err := v.Verify(tc.a, tc.expect, tc.now)
					if !errors.Is(err, tc.wantErr) {
						t.Fatalf("Verify = %v, want %v", err, tc.wantErr)
					}
					if tc.field != "" {
						var me *MismatchError
						if !errors.As(err, &me) || me.Field != tc.field {
							t.Fatalf("Verify = %v, want a mismatch on %s", err, tc.field)
						}
					}
					if tc.wantErr != nil && CodeOf(err) == "" {
						t.Fatalf("error %v has no code", err)
					}
				})
			}
		})
	}
}

func TestSignBounds(t *testing.T) {
	s := ed25519Signer(t)
	for _, ttl := range []time.Duration{0, -time.Second, MaxTTL + time.Millisecond} {
		if _, err := s.Sign(testBinding(), t0, ttl); !errors.Is(err, ErrInvalid) {
			t.Fatalf("Sign with ttl %s: %v, want ErrInvalid", ttl, err)
		}
	}
	if _, err := s.Sign(Binding{}, t0, time.Minute); !errors.Is(err, ErrInvalid) {
		t.Fatalf("Sign of an empty binding: %v", err)
	}
	a, err := s.Sign(testBinding(), t0.Add(123456789*time.Nanosecond), time.Minute)
	if err != nil {
		t.Fatal(err)
	}
	if a.IssuedAt.Nanosecond()%int(time.Millisecond) != 0 || a.ExpiresAt.Sub(a.IssuedAt) != time.Minute {
		t.Fatalf("times not at millisecond precision: %v %v", a.IssuedAt, a.ExpiresAt)
	}
}

func TestNewSignerRejectsOtherKeys(t *testing.T) {
	rsaKey, err := rsa.GenerateKey(rand.Reader, 2048)
	if err != nil {
		t.Fatal(err)
	}
	p384, err := ecdsa.GenerateKey(elliptic.P384(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	for name, k := range map[string]any{"rsa": rsaKey, "p384": p384} {
		if _, err := NewSigner(k); err == nil {
			t.Errorf("NewSigner(%s) accepted the key", name)
		}
	}
	for name, k := range map[string]any{"rsa": &rsaKey.PublicKey, "p384": &p384.PublicKey} {
		if _, err := NewVerifier(k); err == nil {
			t.Errorf("NewVerifier(%s) accepted the key", name)
		}
	}
	if _, err := NewVerifier(); err == nil {
		t.Error("NewVerifier() with no key succeeded")
	}
}

func TestVerifierWithSeveralKeys(t *testing.T) {
	a, b := ed25519Signer(t), ecdsaSigner(t)
	v, err := NewVerifier(a.PublicKey(), b.PublicKey())
	if err != nil {
		t.Fatal(err)
	}
	for _, s := range []*Signer{a, b} {
		auth, err := s.Sign(testBinding(), t0, time.Minute)
		if err != nil {
			t.Fatal(err)
		}
		if err := v.Verify(auth, testBinding(), t0); err != nil {
			t.Fatalf("key %s: %v", s.KeyID(), err)
		}
	}
}

func TestPayloadRoundTrip(t *testing.T) {
	s := ed25519Signer(t)
	b := testBinding()
	b.Destination = `https://x.example/mcp?a=1&b=<2> "q" ü` + "\u2028"
	a, err := s.Sign(b, t0, time.Minute)
	if err != nil {
		t.Fatal(err)
	}
	payload, err := a.Payload()
	if err != nil {
		t.Fatal(err)
	}
	if want := referenceJCSBytes(t, payload); !bytes.Equal(payload, want) {
		t.Fatalf("payload is not RFC 8785 canonical:\n%s\n%s", payload, want)
	}
	back, err := ParsePayload(payload)
	if err != nil {
		t.Fatal(err)
	}
	back.Signature = a.Signature
	if err := s.Verifier().Verify(back, b, t0); err != nil {
		t.Fatalf("parsed authority does not verify: %v", err)
	}
	if back.ID != a.ID || back.Binding != a.Binding || !back.IssuedAt.Equal(a.IssuedAt) || !back.ExpiresAt.Equal(a.ExpiresAt) || back.KeyID != a.KeyID {
		t.Fatalf("round trip changed the authority:\n%+v\n%+v", a, back)
	}
}

func TestParsePayloadRejects(t *testing.T) {
	s := ed25519Signer(t)
	a, err := s.Sign(testBinding(), t0, time.Minute)
	if err != nil {
		t.Fatal(err)
	}
	good, _ := a.Payload()
	replace := func(old, new string) []byte { return []byte(strings.Replace(string(good), old, new, 1)) }
	cases := []struct {
		name    string
		payload []byte
	}{
		{"empty", nil},
		{"not JSON", []byte("authz")},
		{"array", []byte("[]")},
		{"whitespace added", replace(`{"act_id"`, `{ "act_id"`)},
		{"trailing data", append(bytes.Clone(good), []byte(" {}")...)},
		{"unknown member", replace(`{"act_id"`, `{"aaa":"x","act_id"`)},
		{"duplicate member", replace(`{"act_id":"act-7f3a"`, `{"act_id":"act-7f3a","act_id":"act-7f3a"`)},
		{"missing member", replace(`"namespace":"agents",`, ``)},
		{"wrong type marker", replace(`actgate.dev/authority/v1`, `actgate.dev/authority/v2`)},
		{"ID not derived", replace(a.ID, IDPrefix+strings.Repeat("0", 64))},
		{"number as float", replace(`"issued_at_ms":1785153600000`, `"issued_at_ms":1785153600000.0`)},
		{"number as string", replace(`"issued_at_ms":1785153600000`, `"issued_at_ms":"1785153600000"`)},
		{"escaped where JCS is literal", replace(`"tool":"payout"`, `"tool":"p\u0061yout"`)},
		{"expiry before issue", replace(`"issued_at_ms":1785153600000`, `"issued_at_ms":1785153700000`)},
		{"member out of order", []byte(strings.Replace(strings.Replace(string(good), `"act_id":"act-7f3a",`, ``, 1), `"tool"`, `"act_id":"act-7f3a","tool"`, 1))},
		{"oversized", bytes.Repeat([]byte(" "), MaxPayloadBytes+1)},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			if _, err := ParsePayload(tc.payload); !errors.Is(err, ErrInvalid) {
				t.Fatalf("ParsePayload(%q) = %v, want ErrInvalid", tc.payload, err)
			}
		})
	}
}

// FuzzParsePayload: arbitrary bytes never panic, and anything accepted re-encodes to the same
// bytes.
func FuzzParsePayload(f *testing.F) {
	s := ed25519Signer(f)
	a, err := s.Sign(testBinding(), t0, time.Minute)
	if err != nil {
		f.Fatal(err)
	}
	good, _ := a.Payload()
	f.Add(good)
	f.Add([]byte(`{}`))
	f.Add([]byte(`{"act_id":1}`))
	f.Add([]byte(strings.Replace(string(good), "payout", "pay\\u006fut", 1)))
	f.Fuzz(func(t *testing.T, payload []byte) {
		a, err := ParsePayload(payload)
		if err != nil {
			if !errors.Is(err, ErrInvalid) {
				t.Fatalf("error %v does not wrap ErrInvalid", err)
			}
			return
		}
		again, err := a.Payload()
		if err != nil || !bytes.Equal(again, payload) {
			t.Fatalf("accepted payload does not re-encode to itself: %v", err)
		}
	})
}

func referenceJCSBytes(t *testing.T, raw []byte) []byte {
	t.Helper()
	out, err := gowebpkijcs.Transform(raw)
	if err != nil {
		t.Fatal(err)
	}
	return out
}

func TestCodesRoundTrip(t *testing.T) {
	for _, cs := range codeSentinels {
		t.Run(string(cs.code), func(t *testing.T) {
			err := ErrorOf(cs.code, "peer said so")
			if !errors.Is(err, cs.err) || CodeOf(err) != cs.code || err.Error() != "peer said so" {
				t.Fatalf("ErrorOf(%s) = %v (code %s)", cs.code, err, CodeOf(err))
			}
		})
	}
	if err := ErrorOf("NOPE", "x"); !errors.Is(err, ErrStoreUnavailable) {
		t.Fatalf("unknown code: %v", err)
	}
	me := &MismatchError{Field: "sink_id", Got: "a", Expected: "b", Err: ErrSinkMismatch}
	if CodeOf(me) != CodeSinkMismatch || !strings.Contains(me.Error(), "sink_id") {
		t.Fatalf("mismatch error %v code %s", me, CodeOf(me))
	}
}

func TestPendingMatches(t *testing.T) {
	b := testBinding()
	id, err := DeriveID(b)
	if err != nil {
		t.Fatal(err)
	}
	good := journal.DispatchRecord{
		OperationID: "op-1", AuthorityID: id, ActID: b.ActID, ActionDigest: b.ActionDigest,
		ArgumentsDigest: b.ArgumentsDigest, Tool: b.Tool, Upstream: b.Destination,
	}
	if err := PendingMatches(good, id, b); err != nil {
		t.Fatalf("matching record refused: %v", err)
	}
	for name, f := range map[string]func(*journal.DispatchRecord){
		"authority": func(r *journal.DispatchRecord) { r.AuthorityID = IDPrefix + strings.Repeat("0", 64) },
		"act":       func(r *journal.DispatchRecord) { r.ActID = "act-other" },
		"action":    func(r *journal.DispatchRecord) { r.ActionDigest = b.ArgumentsDigest },
		"arguments": func(r *journal.DispatchRecord) { r.ArgumentsDigest = b.ActionDigest },
		"tool":      func(r *journal.DispatchRecord) { r.Tool = "refund" },
		"upstream":  func(r *journal.DispatchRecord) { r.Upstream = "https://evil.example/mcp" },
	} {
		t.Run(name, func(t *testing.T) {
			rec := good
			f(&rec)
			if err := PendingMatches(rec, id, b); !errors.Is(err, ErrInvalid) {
				t.Fatalf("PendingMatches = %v, want ErrInvalid", err)
			}
		})
	}
}
