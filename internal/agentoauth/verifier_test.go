package agentoauth

import (
	"context"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/rsa"
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	jose "github.com/go-jose/go-jose/v4"

	"github.com/actgate/actgate/internal/ef"
)

// provider is a scripted issuer of the test's own: its discovery document and key set over
// TLS, counting key set fetches; keys and the served set can be changed, and it can be down.
type provider struct {
	t       *testing.T
	srv     *httptest.Server
	mu      sync.Mutex
	keys    []jose.JSONWebKey // served
	rawSet  []byte            // served instead of keys when set
	down    bool
	fetches atomic.Int32
}

func newProvider(t *testing.T) *provider {
	p := &provider{t: t}
	p.srv = httptest.NewTLSServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		p.mu.Lock()
		defer p.mu.Unlock()
		if p.down {
			http.Error(w, "down", http.StatusBadGateway)
			return
		}
		switch r.URL.Path {
		case "/.well-known/openid-configuration":
			_ = json.NewEncoder(w).Encode(map[string]string{"issuer": p.srv.URL, "jwks_uri": p.srv.URL + "/keys"})
		case "/keys":
			p.fetches.Add(1)
			if p.rawSet != nil {
				_, _ = w.Write(p.rawSet)
				return
			}
			_ = json.NewEncoder(w).Encode(jose.JSONWebKeySet{Keys: p.keys})
		default:
			http.NotFound(w, r)
		}
	}))
	t.Cleanup(p.srv.Close)
	return p
}

type signer struct {
	kid string
	key any
	alg jose.SignatureAlgorithm
}

func newRSA(t *testing.T, kid string) signer {
	k, err := rsa.GenerateKey(rand.Reader, 2048)
	if err != nil {
		t.Fatal(err)
	}
	return signer{kid: kid, key: k, alg: jose.RS256}
}

func (p *provider) publish(ss ...signer) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.keys = nil
	for _, s := range ss {
		var pub any
		switch k := s.key.(type) {
		case *rsa.PrivateKey:
			pub = &k.PublicKey
		case *ecdsa.PrivateKey:
			pub = &k.PublicKey
		}
		p.keys = append(p.keys, jose.JSONWebKey{Key: pub, KeyID: s.kid, Algorithm: string(s.alg), Use: "sig"})
	}
}

func (s signer) sign(t testing.TB, claims map[string]any) string {
	t.Helper()
	js, err := jose.NewSigner(jose.SigningKey{Algorithm: s.alg, Key: s.key}, (&jose.SignerOptions{}).WithHeader("kid", s.kid))
	if err != nil {
		t.Fatal(err)
	}
	b, _ := json.Marshal(claims)
	obj, err := js.Sign(b)
	if err != nil {
		t.Fatal(err)
	}
	out, err := obj.CompactSerialize()
	if err != nil {
		t.Fatal(err)
	}
	return out
}

const testGate = "https://gate.example"

func (p *provider) verifier(t *testing.T, mod func(*Options)) *Verifier {
	t.Helper()
	o := Options{Issuer: p.srv.URL, ExternalURL: testGate, Algorithms: []string{"RS256", "ES256"}, AgentClaim: "sub",
		Reserved: []string{"alice", "sink"}, JWKSRefresh: time.Minute, JWKSMaxAge: time.Hour,
		Transport: p.srv.Client().Transport}
	if mod != nil {
		mod(&o)
	}
	v, err := New(o)
	if err != nil {
		t.Fatal(err)
	}
	return v
}

func (p *provider) claims(mod func(map[string]any)) map[string]any {
	now := time.Now()
	c := map[string]any{"iss": p.srv.URL, "sub": "agent-7", "aud": testGate, "exp": now.Add(time.Minute).Unix(), "iat": now.Unix()}
	if mod != nil {
		mod(c)
	}
	return c
}

// TestVerifyClaims: the agent is the configured claim with its prefix; aud may be the gate or
// the server's own resource; a reserved identity, a non-printable or overlong agent, a missing
// scope (scope string or scp list), an ES256 token whose key is published as RS256, and any
// other server's resource are refused with the EF code and OAuth error the challenge carries.
func TestVerifyClaims(t *testing.T) {
	p := newProvider(t)
	rs, es := newRSA(t, "r1"), signer{kid: "e1", alg: jose.ES256}
	ek, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	es.key = ek
	p.publish(rs, es)
	v := p.verifier(t, func(o *Options) { o.Scopes = []string{"mcp.call"}; o.AgentPrefix = "idp:" })
	ctx := context.Background()
	withScope := func(c map[string]any) { c["scope"] = "openid mcp.call" }
	for _, tc := range []struct {
		name, token, server, agent string
		status                     int
		oauthErr                   string
	}{
		{"sub with prefix", rs.sign(t, p.claims(withScope)), "finance", "idp:agent-7", 0, ""},
		{"ES256", es.sign(t, p.claims(withScope)), "finance", "idp:agent-7", 0, ""},
		{"scp list", rs.sign(t, p.claims(func(c map[string]any) { c["scp"] = []string{"mcp.call"} })), "finance", "idp:agent-7", 0, ""},
		{"the server's own resource", rs.sign(t, p.claims(func(c map[string]any) { withScope(c); c["aud"] = testGate + "/mcp/finance" })), "finance", "idp:agent-7", 0, ""},
		{"another server's resource", rs.sign(t, p.claims(func(c map[string]any) { withScope(c); c["aud"] = testGate + "/mcp/hr" })), "finance", "", 401, "invalid_token"},
		{"no scope", rs.sign(t, p.claims(nil)), "finance", "", 403, "insufficient_scope"},
		{"scope as a prefix only", rs.sign(t, p.claims(func(c map[string]any) { c["scope"] = "mcp.callx" })), "finance", "", 403, "insufficient_scope"},
		{"no agent claim", rs.sign(t, p.claims(func(c map[string]any) { withScope(c); delete(c, "sub") })), "", "", 401, "invalid_token"},
		{"control character", rs.sign(t, p.claims(func(c map[string]any) { withScope(c); c["sub"] = "a\nb" })), "", "", 401, "invalid_token"},
		{"overlong agent", rs.sign(t, p.claims(func(c map[string]any) { withScope(c); c["sub"] = strings.Repeat("a", 300) })), "", "", 401, "invalid_token"},
		{"iat in the future", rs.sign(t, p.claims(func(c map[string]any) { withScope(c); c["iat"] = time.Now().Add(time.Hour).Unix() })), "", "", 401, "invalid_token"},
		{"ES256 header on an RSA key id", signer{kid: "r1", key: ek, alg: jose.ES256}.sign(t, p.claims(withScope)), "", "", 401, "invalid_token"},
		{"unknown key id", newRSA(t, "r9").sign(t, p.claims(withScope)), "", "", 401, "invalid_token"},
		{"two dots only", "a.b.c", "", "", 401, "invalid_token"},
		{"oversized", strings.Repeat("a.", MaxTokenBytes), "", "", 401, "invalid_token"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			agent, rf := v.Verify(ctx, tc.token, tc.server)
			switch {
			case tc.status == 0 && (rf != nil || agent != tc.agent):
				t.Fatalf("agent %q refusal %v, want %q", agent, rf, tc.agent)
			case tc.status != 0 && (rf == nil || rf.Status != tc.status || rf.OAuthError != tc.oauthErr || rf.Code != ef.EFAgentUnauthenticated || agent != ""):
				t.Fatalf("agent %q refusal %+v, want %d %s", agent, rf, tc.status, tc.oauthErr)
			}
		})
	}
	reserved := p.verifier(t, nil)
	if agent, rf := reserved.Verify(ctx, rs.sign(t, p.claims(func(c map[string]any) { c["sub"] = "alice" })), ""); rf == nil || agent != "" {
		t.Fatalf("an agent named as the principal alice was admitted: %q", agent)
	}
}

// TestKeySetBounds: a burst of tokens with unknown key ids fetches the key set once per
// jwksRefresh, not once per token; a rotated key is picked up by that one refresh and the
// removed key is refused after it; a set larger than MaxKeys, one with a symmetric key, and a
// discovery document naming another issuer make the provider unavailable (503
// EF_AGENT_IDP_UNAVAILABLE); a provider that goes down leaves the cached keys usable for
// another jwksMaxAge, then refuses.
func TestKeySetBounds(t *testing.T) {
	ctx := context.Background()
	p := newProvider(t)
	k1 := newRSA(t, "k1")
	p.publish(k1)
	now := time.Now()
	clock := func() time.Time { return now }
	v := p.verifier(t, func(o *Options) { o.JWKSRefresh = 30 * time.Second; o.JWKSMaxAge = time.Hour; o.Now = clock })
	good := k1.sign(t, p.claims(nil))
	if _, rf := v.Verify(ctx, good, ""); rf != nil {
		t.Fatal(rf)
	}
	stranger := newRSA(t, "nope")
	var wg sync.WaitGroup
	for i := range 50 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			s := stranger
			s.kid = fmt.Sprintf("unknown-%d", i)
			if _, rf := v.Verify(ctx, s.sign(t, p.claims(nil)), ""); rf == nil || rf.Status != 401 {
				t.Errorf("unknown kid: %+v", rf)
			}
		}()
	}
	wg.Wait()
	if n := p.fetches.Load(); n > 2 {
		t.Fatalf("50 unknown key ids fetched the key set %d times within jwksRefresh", n)
	}

	k2 := newRSA(t, "k2")
	p.publish(k2)
	now = now.Add(31 * time.Second)
	if _, rf := v.Verify(ctx, k2.sign(t, p.claims(nil)), ""); rf != nil {
		t.Fatalf("the rotated key: %v", rf)
	}
	if _, rf := v.Verify(ctx, good, ""); rf == nil || rf.Status != 401 {
		t.Fatalf("the removed key: %+v", rf)
	}

	// Down: the cached k2 verifies for jwksMaxAge past staleness, then the provider is unavailable.
	p.mu.Lock()
	p.down = true
	p.mu.Unlock()
	atNow := func(c map[string]any) { c["exp"], c["iat"] = now.Add(time.Minute).Unix(), now.Unix() }
	now = now.Add(90 * time.Minute)
	if _, rf := v.Verify(ctx, k2.sign(t, p.claims(atNow)), ""); rf != nil {
		t.Fatalf("a cached key while the provider is down: %v", rf)
	}
	now = now.Add(time.Hour)
	if _, rf := v.Verify(ctx, k2.sign(t, p.claims(atNow)), ""); rf == nil || rf.Status != 503 || rf.Code != ef.EFAgentIDPUnavailable {
		t.Fatalf("keys two jwksMaxAge old with the provider down: %+v", rf)
	}

	for name, set := range map[string]func() []byte{
		"more than MaxKeys": func() []byte {
			var ks []jose.JSONWebKey
			for i := range MaxKeys + 1 {
				ks = append(ks, jose.JSONWebKey{Key: &k1.key.(*rsa.PrivateKey).PublicKey, KeyID: fmt.Sprint(i)})
			}
			b, _ := json.Marshal(jose.JSONWebKeySet{Keys: ks})
			return b
		},
		"a symmetric key": func() []byte { return []byte(`{"keys":[{"kty":"oct","kid":"k1","k":"c2VjcmV0"}]}`) },
		"not JSON":        func() []byte { return []byte(`<html>`) },
	} {
		t.Run(name, func(t *testing.T) {
			q := newProvider(t)
			q.rawSet = set()
			w := q.verifier(t, nil)
			if _, rf := w.Verify(ctx, k1.sign(t, q.claims(nil)), ""); rf == nil || rf.Status != 503 || rf.Code != ef.EFAgentIDPUnavailable {
				t.Fatalf("refusal %+v", rf)
			}
		})
	}
	t.Run("a client that goes away does not fail the fetch for others", func(t *testing.T) {
		q := newProvider(t)
		q.publish(k1)
		w := q.verifier(t, nil)
		gone, cancel := context.WithCancel(ctx)
		cancel()
		_, _ = w.Verify(gone, k1.sign(t, q.claims(nil)), "")
		if agent, rf := w.Verify(ctx, k1.sign(t, q.claims(nil)), ""); rf != nil || agent != "agent-7" {
			t.Fatalf("after a cancelled request: %q %+v", agent, rf)
		}
	})
	t.Run("discovery names another issuer", func(t *testing.T) {
		q := newProvider(t)
		q.publish(k1)
		w := q.verifier(t, func(o *Options) { o.Issuer = q.srv.URL + "/tenant" })
		if _, rf := w.Verify(ctx, k1.sign(t, q.claims(func(c map[string]any) { c["iss"] = q.srv.URL + "/tenant" })), ""); rf == nil || rf.Status != 503 {
			t.Fatalf("refusal %+v", rf)
		}
	})
}

// TestBearerToken: the Authorization headers an agent can send: none (401 without an OAuth
// error), and malformed ones (401 invalid_token), never a token.
func TestBearerToken(t *testing.T) {
	for _, tc := range []struct {
		name    string
		headers []string
		token   string
		oauth   string
	}{
		{"bearer", []string{"Bearer abc.def.ghi"}, "abc.def.ghi", ""},
		{"scheme case", []string{"bEaReR abc"}, "abc", ""},
		{"none", nil, "", "-"},
		{"two headers", []string{"Bearer a", "Bearer b"}, "", "invalid_token"},
		{"basic", []string{"Basic YTpi"}, "", "invalid_token"},
		{"no token", []string{"Bearer "}, "", "invalid_token"},
		{"no space", []string{"Bearerabc"}, "", "invalid_token"},
		{"two spaces", []string{"Bearer  abc"}, "", "invalid_token"},
		{"inner space", []string{"Bearer a b"}, "", "invalid_token"},
		{"tab", []string{"Bearer a\tb"}, "", "invalid_token"},
		{"non-ASCII", []string{"Bearer aé"}, "", "invalid_token"},
		{"NUL", []string{"Bearer a\x00"}, "", "invalid_token"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			tok, rf := BearerToken(tc.headers)
			switch {
			case tc.token != "" && (tok != tc.token || rf != nil):
				t.Fatalf("token %q %v", tok, rf)
			case tc.token == "" && (rf == nil || rf.Status != 401 || tok != ""):
				t.Fatalf("token %q refusal %+v", tok, rf)
			case tc.oauth == "-" && rf.OAuthError != "":
				t.Fatalf("no header: OAuth error %q", rf.OAuthError)
			case tc.token == "" && tc.oauth != "-" && rf.OAuthError != tc.oauth:
				t.Fatalf("OAuth error %q", rf.OAuthError)
			}
		})
	}
}

// TestNewRefusesSymmetricAlgorithms: none and HS* cannot be configured.
func TestNewRefusesSymmetricAlgorithms(t *testing.T) {
	for _, alg := range []string{"none", "HS256", "HS512", ""} {
		if _, err := New(Options{Issuer: "https://i", ExternalURL: testGate, AgentClaim: "sub", Algorithms: []string{alg}}); err == nil {
			t.Errorf("algorithm %q accepted", alg)
		}
	}
}
