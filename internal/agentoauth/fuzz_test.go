package agentoauth

import (
	"context"
	"crypto/rand"
	"crypto/rsa"
	"encoding/json"
	"net/http"
	"testing"
	"time"

	jose "github.com/go-jose/go-jose/v4"
)

// fuzzVerifier is a Verifier whose key set is loaded already and is never fetched again
// (jwksRefresh and jwksMaxAge of a day), so fuzzing reaches the parser, not the network.
func fuzzVerifier(f *testing.F) (*Verifier, signer) {
	k, err := rsa.GenerateKey(rand.Reader, 2048)
	if err != nil {
		f.Fatal(err)
	}
	v, err := New(Options{Issuer: "https://idp.example", ExternalURL: testGate, Algorithms: []string{"RS256", "ES256", "EdDSA"}, AgentClaim: "sub",
		Scopes: []string{"mcp.call"}, JWKSRefresh: 24 * time.Hour, JWKSMaxAge: 24 * time.Hour,
		Transport: http.DefaultTransport})
	if err != nil {
		f.Fatal(err)
	}
	v.keys.keys = map[string]jose.JSONWebKey{"k1": {Key: &k.PublicKey, KeyID: "k1", Algorithm: "RS256"}}
	v.keys.fetched, v.keys.lastTry = time.Now(), time.Now()
	return v, signer{kid: "k1", key: k, alg: jose.RS256}
}

// FuzzVerify: whatever bytes an agent sends as its token, Verify answers an agent only for a
// token the key signed, and otherwise a Refusal with a 401/403 status — never a panic, never
// a network fetch (the set is fresh and refreshes are a day apart).
func FuzzVerify(f *testing.F) {
	v, s := fuzzVerifier(f)
	now := time.Now()
	valid := s.sign(f, map[string]any{"iss": "https://idp.example", "sub": "a", "aud": testGate, "exp": now.Add(time.Hour).Unix(), "scope": "mcp.call"})
	for _, seed := range []string{valid, valid[:len(valid)-2], "", ".", "..", "a.b.c", "eyJhbGciOiJub25lIn0.e30.", "eyJhbGciOiJSUzI1NiIsImtpZCI6ImsxIn0.e30.AAAA",
		`{"payload":"e30","signatures":[]}`} {
		f.Add(seed)
	}
	f.Fuzz(func(t *testing.T, tok string) {
		agent, rf := v.Verify(context.Background(), tok, "finance")
		if rf == nil {
			if tok != valid || agent != "a" {
				t.Fatalf("admitted %q as %q", tok, agent)
			}
			return
		}
		if agent != "" || (rf.Status != 401 && rf.Status != 403) {
			t.Fatalf("agent %q refusal %+v", agent, rf)
		}
	})
}

// FuzzParseKeySet: a key set of any bytes parses into at most MaxKeys public, non-symmetric
// keys, or an error — never a panic.
func FuzzParseKeySet(f *testing.F) {
	k, _ := rsa.GenerateKey(rand.Reader, 1024)
	b, _ := json.Marshal(jose.JSONWebKeySet{Keys: []jose.JSONWebKey{{Key: &k.PublicKey, KeyID: "a", Use: "sig"}}})
	for _, seed := range [][]byte{b, []byte(`{"keys":[]}`), []byte(`{"keys":[{"kty":"oct","k":"AA"}]}`), []byte(`{"keys":[{"kty":"EC"}]}`), []byte(`null`), []byte(`{"keys":[{"kty":"RSA","n":"AQAB","e":"AQAB"},{"kty":"RSA","n":"AQAB","e":"AQAB"}]}`)} {
		f.Add(seed)
	}
	f.Fuzz(func(t *testing.T, b []byte) {
		keys, err := ParseKeySet(b)
		if err != nil {
			return
		}
		if len(keys) > MaxKeys {
			t.Fatalf("%d keys", len(keys))
		}
		for kid, key := range keys {
			if _, sym := key.Key.([]byte); sym || !key.IsPublic() || key.KeyID != kid {
				t.Fatalf("key %q: %T", kid, key.Key)
			}
		}
	})
}

// FuzzBearerToken: a token is returned only from one well-formed Bearer header, and holds only
// visible ASCII.
func FuzzBearerToken(f *testing.F) {
	for _, seed := range []string{"Bearer abc", "bearer  x", "Basic x", "", "Bearer \x00", "Bearer é"} {
		f.Add(seed)
	}
	f.Fuzz(func(t *testing.T, h string) {
		tok, rf := BearerToken([]string{h})
		if rf != nil {
			if tok != "" || rf.Status != 401 {
				t.Fatalf("token %q refusal %+v", tok, rf)
			}
			return
		}
		if tok == "" || len(h) != len("Bearer ")+len(tok) {
			t.Fatalf("header %q gave token %q", h, tok)
		}
		for _, r := range tok {
			if r <= ' ' || r > '~' {
				t.Fatalf("token %q holds %q", tok, r)
			}
		}
	})
}
