package review

import (
	"bytes"
	"context"
	"crypto/ecdsa"
	"crypto/ed25519"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/sha256"
	"encoding/json"
	"errors"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/sigstore/sigstore/pkg/cryptoutils"
	"github.com/sigstore/sigstore/pkg/signature"

	"github.com/actgate/actgate/api/v1alpha1"
	"github.com/actgate/actgate/internal/anchor"
	"github.com/actgate/actgate/internal/jcs"
	"github.com/actgate/actgate/internal/receipt"
)

// anchorKey returns a deterministic Ed25519 receipt-log key and its PEM.
func anchorKey(t testing.TB, seed string) (signature.SignerVerifier, string) {
	t.Helper()
	s := sha256.Sum256([]byte(seed))
	sv, err := signature.LoadED25519SignerVerifier(ed25519.NewKeyFromSeed(s[:]))
	if err != nil {
		t.Fatal(err)
	}
	pub, _ := sv.PublicKey()
	pemBytes, err := cryptoutils.MarshalPublicKeyToPEM(pub)
	if err != nil {
		t.Fatal(err)
	}
	return sv, string(pemBytes)
}

// signedCheckpoint signs a checkpoint at seq the way a receipt log does.
func signedCheckpoint(t testing.TB, sv signature.SignerVerifier, seq, prev uint64, head string) receipt.SignedCheckpoint {
	t.Helper()
	pub, _ := sv.PublicKey()
	id, _ := receipt.KeyID(pub)
	c := receipt.Checkpoint{Type: receipt.CheckpointType, Seq: seq, PrevSeq: prev, Head: head,
		Time: time.Date(2026, 12, 1, 13, 0, 0, 123400000, time.UTC), KeyID: id}
	body, err := c.Canonical()
	if err != nil {
		t.Fatal(err)
	}
	sig, err := sv.SignMessage(bytes.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	return receipt.SignedCheckpoint{Checkpoint: c, Signature: sig}
}

func anchorBody(t testing.TB, pemText string, cp v1alpha1.AnchoredCheckpoint) []byte {
	t.Helper()
	b, err := json.Marshal(map[string]any{"apiVersion": APIVersion, "kind": AnchorKind, "publicKey": pemText, "checkpoint": cp})
	if err != nil {
		t.Fatal(err)
	}
	return b
}

func TestDecodeAnchorRequestAccepts(t *testing.T) {
	sv, pemText := anchorKey(t, "log")
	sc := signedCheckpoint(t, sv, 6, 3, jcs.Digest([]byte("head")))
	req, key, got, err := DecodeAnchorRequest(anchorBody(t, pemText, anchor.ToAPI(sc)))
	if err != nil {
		t.Fatal(err)
	}
	if req.PublicKey != pemText || key.KeyID != sc.KeyID || got.Seq != 6 || got.PrevSeq != 3 || got.Head != sc.Head ||
		!got.Time.Equal(sc.Time) || !bytes.Equal(got.Signature, sc.Signature) {
		t.Fatalf("decoded %+v, key %s", got, key.KeyID)
	}
}

func TestDecodeAnchorRequestRefuses(t *testing.T) {
	sv, pemText := anchorKey(t, "log")
	_, otherPEM := anchorKey(t, "other")
	sc := signedCheckpoint(t, sv, 6, 3, jcs.Digest([]byte("head")))
	good := anchor.ToAPI(sc)
	with := func(mod func(*v1alpha1.AnchoredCheckpoint)) []byte {
		cp := good
		mod(&cp)
		return anchorBody(t, pemText, cp)
	}
	p384, _ := ecdsa.GenerateKey(elliptic.P384(), rand.Reader)
	p384PEM, _ := cryptoutils.MarshalPublicKeyToPEM(p384.Public())
	goodJSON := string(anchorBody(t, pemText, good))
	for _, tc := range []struct {
		name, field string
		body        []byte
	}{
		{"empty", "$", nil},
		{"not JSON", "$", []byte("checkpoint 6")},
		{"two values", "$", []byte(goodJSON + " {}")},
		{"unknown member", "$", []byte(strings.Replace(goodJSON, `"kind"`, `"namespace":"billing","kind"`, 1))},
		{"unknown checkpoint member", "$", []byte(strings.Replace(goodJSON, `"seq":6`, `"seq":6,"pod":"agent-1"`, 1))},
		{"duplicate member", "$", []byte(strings.Replace(goodJSON, `"seq":6`, `"seq":6,"seq":9`, 1))},
		{"case-folded member", "$", []byte(strings.Replace(goodJSON, `"seq":6`, `"Seq":6`, 1))},
		{"wrong kind", "kind", []byte(strings.Replace(goodJSON, AnchorKind, "ActReview", 1))},
		{"wrong apiVersion", "kind", []byte(strings.Replace(goodJSON, APIVersion, "v1", 1))},
		{"too large", "$", append([]byte(goodJSON), bytes.Repeat([]byte(" "), MaxAnchorBytes)...)},
		{"no public key", "publicKey", anchorBody(t, "", good)},
		{"public key not PEM", "publicKey", anchorBody(t, "ssh-ed25519 AAAA", good)},
		{"public key on P-384", "publicKey", anchorBody(t, string(p384PEM), good)},
		{"public key too long", "publicKey", anchorBody(t, strings.Repeat("A", anchor.MaxPublicKeyBytes+1), good)},
		{"another key", "checkpoint.signature", anchorBody(t, otherPEM, good)},
		{"seq 0", "checkpoint", with(func(c *v1alpha1.AnchoredCheckpoint) { c.Seq, c.PrevSeq = 0, 0 })},
		{"negative prevSeq", "checkpoint", with(func(c *v1alpha1.AnchoredCheckpoint) { c.PrevSeq = -1 })},
		{"prevSeq not before seq", "checkpoint", with(func(c *v1alpha1.AnchoredCheckpoint) { c.PrevSeq = 6 })},
		{"seq above 2^53-1", "checkpoint", with(func(c *v1alpha1.AnchoredCheckpoint) { c.Seq = 1 << 53 })},
		{"head not a digest", "checkpoint", with(func(c *v1alpha1.AnchoredCheckpoint) { c.Head = "sha256:ABC" })},
		{"no key id", "checkpoint", with(func(c *v1alpha1.AnchoredCheckpoint) { c.KeyID = "" })},
		{"time with an offset", "checkpoint", with(func(c *v1alpha1.AnchoredCheckpoint) { c.Time = "2026-12-01T14:00:00.1234+01:00" })},
		{"time not canonical", "checkpoint", with(func(c *v1alpha1.AnchoredCheckpoint) { c.Time = "2026-12-01T13:00:00.123400Z" })},
		{"time not a time", "checkpoint", with(func(c *v1alpha1.AnchoredCheckpoint) { c.Time = "yesterday" })},
		{"signature not base64", "checkpoint", with(func(c *v1alpha1.AnchoredCheckpoint) { c.Signature = "not base64!" })},
		{"signature URL base64", "checkpoint", with(func(c *v1alpha1.AnchoredCheckpoint) {
			c.Signature = strings.NewReplacer("+", "-", "/", "_").Replace(c.Signature) + "_-"
		})},
		{"signature empty", "checkpoint", with(func(c *v1alpha1.AnchoredCheckpoint) { c.Signature = "" })},
		{"signature too long", "checkpoint", with(func(c *v1alpha1.AnchoredCheckpoint) { c.Signature = strings.Repeat("AAAA", 200) })},
		{"seq changed after signing", "checkpoint.signature", with(func(c *v1alpha1.AnchoredCheckpoint) { c.Seq = 7 })},
		{"head changed after signing", "checkpoint.signature", with(func(c *v1alpha1.AnchoredCheckpoint) { c.Head = jcs.Digest([]byte("other")) })},
		{"time changed after signing", "checkpoint.signature", with(func(c *v1alpha1.AnchoredCheckpoint) { c.Time = "2026-12-01T13:00:00.1235Z" })},
	} {
		t.Run(tc.name, func(t *testing.T) {
			req, _, _, err := DecodeAnchorRequest(tc.body)
			var fe *FieldError
			if req != nil || !errors.As(err, &fe) || !errors.Is(err, ErrBadReview) {
				t.Fatalf("got %+v, %v; want a FieldError", req, err)
			}
			if fe.Field != tc.field {
				t.Errorf("field %q (%s), want %q", fe.Field, fe.Detail, tc.field)
			}
			if tc.field == "checkpoint.signature" && !strings.HasPrefix(fe.Detail, string(ReasonAnchorBadSignature)) {
				t.Errorf("detail %q does not start with %s", fe.Detail, ReasonAnchorBadSignature)
			}
		})
	}
}

func FuzzDecodeAnchorRequest(f *testing.F) {
	sv, pemText := anchorKey(f, "log")
	good := anchor.ToAPI(signedCheckpoint(f, sv, 6, 3, jcs.Digest([]byte("head"))))
	f.Add(anchorBody(f, pemText, good))
	f.Add([]byte(`{}`))
	f.Add([]byte(`{"apiVersion":"review.actgate.io/v1alpha1","kind":"ReceiptAnchorRequest","publicKey":"","checkpoint":null}`))
	f.Fuzz(func(t *testing.T, body []byte) {
		req, key, sc, err := DecodeAnchorRequest(body)
		if err != nil {
			if req != nil || !errors.Is(err, ErrBadReview) {
				t.Fatalf("error %v with request %v", err, req)
			}
			return
		}
		// Whatever is accepted is a checkpoint the key signed, and converts back unchanged.
		if err := receipt.VerifyCheckpoint(key.Verifier, sc); err != nil {
			t.Fatalf("accepted a checkpoint that does not verify: %v", err)
		}
		if anchor.ToAPI(sc) != req.Checkpoint {
			t.Fatalf("accepted a checkpoint that does not round-trip: %+v", req.Checkpoint)
		}
	})
}

// PostAnchor: accepted answers are nil, 4xx refusals wrap anchor.ErrRefused, and the rest
// (5xx, 429, an answer that is not a Status) ErrUnavailable, to be retried.
func TestPostAnchorClassifies(t *testing.T) {
	sv, pemText := anchorKey(t, "log")
	cp := anchor.ToAPI(signedCheckpoint(t, sv, 6, 3, jcs.Digest([]byte("head"))))
	for _, tc := range []struct {
		name   string
		status int
		body   string
		want   error
	}{
		{"anchored", 200, `{"kind":"Status","apiVersion":"v1","status":"Success","reason":"Anchored"}`, nil},
		{"unchanged", 200, `{"kind":"Status","apiVersion":"v1","status":"Success","reason":"AnchorUnchanged"}`, nil},
		{"200 of another reason", 200, `{"kind":"Status","apiVersion":"v1","reason":"Other"}`, ErrUnavailable},
		{"size decreased", 409, `{"kind":"Status","apiVersion":"v1","status":"Failure","reason":"AnchorSizeDecreased"}`, anchor.ErrRefused},
		{"unauthenticated", 401, `{"kind":"Status","apiVersion":"v1","status":"Failure","reason":"Unauthenticated"}`, anchor.ErrRefused},
		{"too many requests", 429, `{"kind":"Status","apiVersion":"v1","status":"Failure","reason":"TooMany"}`, ErrUnavailable},
		{"unavailable", 503, `{"kind":"Status","apiVersion":"v1","status":"Failure","reason":"Unavailable"}`, ErrUnavailable},
		{"not a Status", 200, `{"allowed":true}`, ErrUnavailable},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var got AnchorRequest
			srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
				if r.URL.Path != AnchorPath || r.Header.Get("Authorization") != "Bearer tk" {
					http.Error(w, "wrong request", 400)
					return
				}
				_ = json.NewDecoder(r.Body).Decode(&got)
				SetLevel(w.Header(), Level)
				w.WriteHeader(tc.status)
				_, _ = w.Write([]byte(tc.body))
			}))
			defer srv.Close()
			c := &Client{URL: srv.URL, HTTP: srv.Client(), Token: func() (string, error) { return "tk", nil }}
			err := c.PostAnchor(context.Background(), pemText, cp)
			if (tc.want == nil) != (err == nil) || (tc.want != nil && !errors.Is(err, tc.want)) {
				t.Fatalf("err %v, want %v", err, tc.want)
			}
			if got.Kind != AnchorKind || got.PublicKey != pemText || got.Checkpoint != cp {
				t.Errorf("posted %+v", got)
			}
		})
	}
}
