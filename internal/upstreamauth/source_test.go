package upstreamauth_test

import (
	"context"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/rsa"
	"crypto/x509"
	"encoding/pem"
	"errors"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/coreos/go-oidc/v3/oidc"
	jose "github.com/go-jose/go-jose/v4"
	"github.com/go-jose/go-jose/v4/jwt"

	"github.com/actgate/actgate/internal/upstreamauth"
	"github.com/actgate/actgate/test/testutil/idp"
)

const resource = "https://upstream.example/mcp"

func write(t *testing.T, name string, b []byte) string {
	t.Helper()
	f := filepath.Join(t.TempDir(), name)
	if err := os.WriteFile(f, b, 0o600); err != nil {
		t.Fatal(err)
	}
	return f
}

// verify checks tok is the provider's JWT for the upstream and returns its claims.
func verify(t *testing.T, p *idp.Provider, tok string) *oidc.IDToken {
	t.Helper()
	ctx := oidc.ClientContext(context.Background(), p.HTTPClient())
	idt, err := oidc.NewVerifier(p.Issuer(), oidc.NewRemoteKeySet(ctx, p.Issuer()+"/keys"), &oidc.Config{ClientID: resource}).Verify(ctx, tok)
	if err != nil {
		t.Fatalf("the token does not verify as the provider's for %s: %v", resource, err)
	}
	if !slices.Equal(idt.Audience, []string{resource}) {
		t.Fatalf("aud %v", idt.Audience)
	}
	return idt
}

func newSource(t *testing.T, cfg upstreamauth.Config) *upstreamauth.Source {
	t.Helper()
	s, err := upstreamauth.New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	return s
}

// TestClientCredentialsCached: a client-credentials token (client secret) verifies for the
// upstream; further calls get the cached token without a request to the provider; twenty
// concurrent callers on an empty cache share one request; Invalidate (the upstream refused the
// token) makes the next call ask again; a rotated secret file applies on the next request.
func TestClientCredentialsCached(t *testing.T) {
	p := idp.Start(t, idp.Options{Clients: []idp.Client{{ID: "gate", Secret: "s1", Audience: []string{resource}, AccessTokenLifetime: time.Minute}}})
	secret := write(t, "secret", []byte("s1\n"))
	s := newSource(t, upstreamauth.Config{Grant: upstreamauth.GrantClientCredentials, TokenURL: p.TokenURL(), ClientID: "gate",
		ClientSecretFile: secret, Resource: resource, HTTPClient: p.HTTPClient()})
	before := p.TokenRequests()
	var wg sync.WaitGroup
	toks := make([]string, 20)
	for i := range toks {
		wg.Go(func() {
			tok, err := s.Token(context.Background())
			if err != nil {
				t.Error(err)
			}
			toks[i] = tok
		})
	}
	wg.Wait()
	if n := p.TokenRequests() - before; n != 1 {
		t.Fatalf("twenty callers on an empty cache made %d token requests, want 1", n)
	}
	for _, tok := range toks {
		if tok != toks[0] {
			t.Fatal("callers got different tokens")
		}
	}
	idt := verify(t, p, toks[0])
	if idt.Subject != "gate" {
		t.Fatalf("sub %q", idt.Subject)
	}
	for range 5 {
		if tok, err := s.Token(context.Background()); err != nil || tok != toks[0] {
			t.Fatalf("cached: %v", err)
		}
	}
	if n := p.TokenRequests() - before; n != 1 {
		t.Fatalf("cached token: %d token requests, want 1", n)
	}
	s.Invalidate(toks[0])
	tok2, err := s.Token(context.Background())
	if err != nil || tok2 == toks[0] {
		t.Fatalf("after Invalidate: same token or %v", err)
	}
	if n := p.TokenRequests() - before; n != 2 {
		t.Fatalf("after Invalidate: %d token requests, want 2", n)
	}
	// A rotated secret that the provider does not know: the next request is refused, and the
	// error names neither the secret nor a token.
	if err := os.WriteFile(secret, []byte("s2-not-registered"), 0o600); err != nil {
		t.Fatal(err)
	}
	s.Invalidate(tok2)
	_, err = s.Token(context.Background())
	var ue *upstreamauth.Error
	if !errors.As(err, &ue) || strings.Contains(err.Error(), "s2-not-registered") || strings.Contains(err.Error(), tok2) {
		t.Fatalf("refused by the provider: %v", err)
	}
}

func pemKey(t *testing.T, k any) []byte {
	t.Helper()
	der, err := x509.MarshalPKCS8PrivateKey(k)
	if err != nil {
		t.Fatal(err)
	}
	return pem.EncodeToMemory(&pem.Block{Type: "PRIVATE KEY", Bytes: der})
}

// TestPrivateKeyJWTClient: with private_key_jwt (RFC 7523 §2.2) the provider issues a token for
// the upstream to the client registered with the matching public key, for both grants; each
// request signs a fresh assertion (the provider refuses a replayed jti), so a second request
// after Invalidate succeeds too; the key of another client is refused.
func TestPrivateKeyJWTClient(t *testing.T) {
	key, _ := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	other, _ := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	p := idp.Start(t, idp.Options{Clients: []idp.Client{{ID: "gate", PublicKey: &key.PublicKey, Audience: []string{resource}}}})
	kf := write(t, "key.pem", pemKey(t, key))
	s := newSource(t, upstreamauth.Config{Grant: upstreamauth.GrantClientCredentials, TokenURL: p.TokenURL(), ClientID: "gate",
		PrivateKeyFile: kf, Resource: resource, HTTPClient: p.HTTPClient()})
	tok, err := s.Token(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	verify(t, p, tok)
	s.Invalidate(tok)
	if tok2, err := s.Token(context.Background()); err != nil || tok2 == tok {
		t.Fatalf("second assertion: %v", err)
	}
	bad := newSource(t, upstreamauth.Config{Grant: upstreamauth.GrantClientCredentials, TokenURL: p.TokenURL(), ClientID: "gate",
		PrivateKeyFile: write(t, "other.pem", pemKey(t, other)), Resource: resource, HTTPClient: p.HTTPClient()})
	if _, err := bad.Token(context.Background()); err == nil {
		t.Fatal("another key got a token")
	}
}

// TestTokenExchangeSource: the workload's identity token (a file, as the kubelet projects a
// service-account token) is exchanged (RFC 8693) for a token whose sub is the workload and aud
// the upstream; a rotated identity file is read for the next exchange; an identity token the
// provider does not trust gets none.
func TestTokenExchangeSource(t *testing.T) {
	wk, _ := rsa.GenerateKey(rand.Reader, 2048)
	const iss, aud = "https://kubernetes.default.svc", "https://idp.example"
	sign := func(sub string) []byte {
		sg, _ := jose.NewSigner(jose.SigningKey{Algorithm: jose.RS256, Key: wk}, (&jose.SignerOptions{}).WithType("JWT").WithHeader("kid", "sa"))
		s, err := jwt.Signed(sg).Claims(jwt.Claims{Issuer: iss, Subject: sub, Audience: jwt.Audience{aud}, Expiry: jwt.NewNumericDate(time.Now().Add(time.Hour))}).Serialize()
		if err != nil {
			t.Fatal(err)
		}
		return []byte(s)
	}
	p := idp.Start(t, idp.Options{
		Clients: []idp.Client{{ID: "gate", Secret: "gs", Audience: []string{resource}, TokenExchange: true}},
		SubjectIssuers: []idp.SubjectIssuer{{Issuer: iss, Audience: aud,
			Keys: jose.JSONWebKeySet{Keys: []jose.JSONWebKey{{Key: &wk.PublicKey, KeyID: "sa", Algorithm: "RS256", Use: "sig"}}}}},
	})
	subject := write(t, "token", sign("system:serviceaccount:shop:agent"))
	s := newSource(t, upstreamauth.Config{Grant: upstreamauth.GrantTokenExchange, TokenURL: p.TokenURL(), ClientID: "gate",
		ClientSecretFile: write(t, "secret", []byte("gs")), SubjectTokenFile: subject, Resource: resource, HTTPClient: p.HTTPClient()})
	tok, err := s.Token(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	if idt := verify(t, p, tok); idt.Subject != "system:serviceaccount:shop:agent" {
		t.Fatalf("sub %q", idt.Subject)
	}
	if err := os.WriteFile(subject, sign("system:serviceaccount:shop:other"), 0o600); err != nil {
		t.Fatal(err)
	}
	s.Invalidate(tok)
	tok2, err := s.Token(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	if idt := verify(t, p, tok2); idt.Subject != "system:serviceaccount:shop:other" {
		t.Fatalf("after rotation: sub %q", idt.Subject)
	}
	if err := os.WriteFile(subject, []byte("eyJhbGciOiJub25lIn0.eyJzdWIiOiJ4In0."), 0o600); err != nil {
		t.Fatal(err)
	}
	s.Invalidate(tok2)
	if _, err := s.Token(context.Background()); err == nil {
		t.Fatal("an untrusted identity token was exchanged")
	}
}

// TestRefreshAhead: a token of a 4s lifetime is presented from the cache; before it expires
// a call starts a refresh in the background and no call waits for it (each answered within
// 100ms from the cache), the new token arriving before the first one expired, with one request
// to the provider per token. With the provider down, a token past its use is never presented.
func TestRefreshAhead(t *testing.T) {
	p := idp.Start(t, idp.Options{Clients: []idp.Client{{ID: "gate", Secret: "s", Audience: []string{resource}, AccessTokenLifetime: 4 * time.Second}}})
	s := newSource(t, upstreamauth.Config{Grant: upstreamauth.GrantClientCredentials, TokenURL: p.TokenURL(), ClientID: "gate",
		ClientSecretFile: write(t, "secret", []byte("s")), Resource: resource, HTTPClient: p.HTTPClient()})
	start := time.Now()
	tok1, err := s.Token(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	before := p.TokenRequests()
	var tok2 string
	for tok2 == "" {
		if time.Since(start) > 4*time.Second {
			t.Fatalf("no new token before the first expired (%d fetches)", s.Fetches())
		}
		time.Sleep(50 * time.Millisecond)
		t0 := time.Now()
		tk, err := s.Token(context.Background())
		if d := time.Since(t0); err != nil || d > 100*time.Millisecond {
			t.Fatalf("a call waited %v for the refresh: %v", d, err)
		}
		if tk != tok1 {
			tok2 = tk
		}
	}
	if n := p.TokenRequests() - before; n != 1 || s.Fetches() != 2 {
		t.Fatalf("%d token requests for the refresh, %d fetches", n, s.Fetches())
	}
	verify(t, p, tok2)
	p.Stop()
	time.Sleep(time.Until(start.Add(9 * time.Second)))
	if _, err := s.Token(context.Background()); err == nil {
		t.Fatal("an expired token was presented while the provider is down")
	}
}

// TestProviderDown: with the provider down, Token fails with *Error at once, and calls within
// RetryAfter get the same error without another request; a caller's cancelled context does
// not wait.
func TestProviderDown(t *testing.T) {
	p := idp.Start(t, idp.Options{Clients: []idp.Client{{ID: "gate", Secret: "s", Audience: []string{resource}}}})
	s := newSource(t, upstreamauth.Config{Grant: upstreamauth.GrantClientCredentials, TokenURL: p.TokenURL(), ClientID: "gate",
		ClientSecretFile: write(t, "secret", []byte("s")), Resource: resource, HTTPClient: p.HTTPClient()})
	p.Stop()
	var ue *upstreamauth.Error
	if _, err := s.Token(context.Background()); !errors.As(err, &ue) {
		t.Fatalf("provider down: %v", err)
	}
	if _, err := s.Token(context.Background()); !errors.As(err, &ue) || s.Fetches() != 1 {
		t.Fatalf("within RetryAfter: %v, %d fetches", err, s.Fetches())
	}
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	time.Sleep(upstreamauth.RetryAfter)
	if _, err := s.Token(ctx); err == nil {
		t.Fatal("a token with a cancelled context and the provider down")
	}
}

// TestConfigRefused: configurations that cannot work are refused at New, before any request.
func TestConfigRefused(t *testing.T) {
	secret := write(t, "secret", []byte("s"))
	empty := write(t, "empty", nil)
	key, _ := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	kf := write(t, "key.pem", pemKey(t, key))
	base := upstreamauth.Config{Grant: upstreamauth.GrantClientCredentials, TokenURL: "https://idp.example/token", ClientID: "gate", ClientSecretFile: secret, Resource: resource}
	for name, edit := range map[string]func(*upstreamauth.Config){
		"unknown grant":          func(c *upstreamauth.Config) { c.Grant = "password" },
		"http token URL":         func(c *upstreamauth.Config) { c.TokenURL = "http://idp.example/token" },
		"token URL with user":    func(c *upstreamauth.Config) { c.TokenURL = "https://u:p@idp.example/token" },
		"no client id":           func(c *upstreamauth.Config) { c.ClientID = "" },
		"no client auth":         func(c *upstreamauth.Config) { c.ClientSecretFile = "" },
		"secret and key":         func(c *upstreamauth.Config) { c.PrivateKeyFile = kf },
		"empty secret file":      func(c *upstreamauth.Config) { c.ClientSecretFile = empty },
		"missing secret file":    func(c *upstreamauth.Config) { c.ClientSecretFile = filepath.Join(t.TempDir(), "nope") },
		"key file not a key":     func(c *upstreamauth.Config) { c.ClientSecretFile, c.PrivateKeyFile = "", secret },
		"no resource":            func(c *upstreamauth.Config) { c.Resource = "" },
		"relative resource":      func(c *upstreamauth.Config) { c.Resource = "/mcp" },
		"resource with fragment": func(c *upstreamauth.Config) { c.Resource = resource + "#x" },
		"subject file for cc":    func(c *upstreamauth.Config) { c.SubjectTokenFile = secret },
		"exchange without subject": func(c *upstreamauth.Config) {
			c.Grant = upstreamauth.GrantTokenExchange
		},
		"exchange with empty subject": func(c *upstreamauth.Config) {
			c.Grant, c.SubjectTokenFile = upstreamauth.GrantTokenExchange, empty
		},
		"exchange with unknown subject type": func(c *upstreamauth.Config) {
			c.Grant, c.SubjectTokenFile, c.SubjectTokenType = upstreamauth.GrantTokenExchange, secret, "urn:x"
		},
		"exchange auth without client id": func(c *upstreamauth.Config) {
			c.Grant, c.SubjectTokenFile, c.ClientID = upstreamauth.GrantTokenExchange, secret, ""
		},
	} {
		c := base
		edit(&c)
		if _, err := upstreamauth.New(c); err == nil {
			t.Errorf("%s: accepted", name)
		}
	}
	if _, err := upstreamauth.New(base); err != nil {
		t.Fatalf("the base configuration: %v", err)
	}
	ex := upstreamauth.Config{Grant: upstreamauth.GrantTokenExchange, TokenURL: base.TokenURL, SubjectTokenFile: secret, Resource: resource}
	if _, err := upstreamauth.New(ex); err != nil {
		t.Fatalf("token exchange without client authentication: %v", err)
	}
}

// TestParsePrivateKey: keys of the supported kinds parse with their algorithm; anything else is
// a clear error.
func TestParsePrivateKey(t *testing.T) {
	ec, _ := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	ec384, _ := ecdsa.GenerateKey(elliptic.P384(), rand.Reader)
	ec521, _ := ecdsa.GenerateKey(elliptic.P521(), rand.Reader)
	r, _ := rsa.GenerateKey(rand.Reader, 2048)
	small, _ := rsa.GenerateKey(rand.Reader, 1024)
	pkcs1 := pem.EncodeToMemory(&pem.Block{Type: "RSA PRIVATE KEY", Bytes: x509.MarshalPKCS1PrivateKey(r)})
	for name, tc := range map[string]struct {
		in  []byte
		alg jose.SignatureAlgorithm
	}{
		"P-256 PKCS #8": {pemKey(t, ec), jose.ES256},
		"P-384 PKCS #8": {pemKey(t, ec384), jose.ES384},
		"RSA PKCS #8":   {pemKey(t, r), jose.RS256},
		"RSA PKCS #1":   {pkcs1, jose.RS256},
		"P-521":         {pemKey(t, ec521), ""},
		"RSA 1024":      {pemKey(t, small), ""},
		"empty":         {nil, ""},
		"not PEM":       {[]byte("hello"), ""},
		"a certificate": {pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: []byte{1, 2}}), ""},
		"bad DER":       {pem.EncodeToMemory(&pem.Block{Type: "PRIVATE KEY", Bytes: []byte{1, 2}}), ""},
		"huge":          {make([]byte, 1<<20), ""},
	} {
		_, alg, err := upstreamauth.ParsePrivateKey(tc.in)
		if tc.alg == "" && err == nil || tc.alg != "" && (err != nil || alg != tc.alg) {
			t.Errorf("%s: %v %v", name, alg, err)
		}
	}
}

func FuzzParsePrivateKey(f *testing.F) {
	f.Add([]byte("-----BEGIN PRIVATE KEY-----\nMIGHAgEAMBMGByqGSM49AgEGCCqGSM49AwEHBG0wawIBAQQg\n-----END PRIVATE KEY-----\n"))
	f.Add([]byte("-----BEGIN EC PRIVATE KEY-----\nAAAA\n-----END EC PRIVATE KEY-----\n"))
	f.Fuzz(func(t *testing.T, b []byte) {
		k, alg, err := upstreamauth.ParsePrivateKey(b)
		if err == nil && (k == nil || alg == "") {
			t.Fatal("a key without an algorithm")
		}
	})
}
