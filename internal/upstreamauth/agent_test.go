package upstreamauth_test

import (
	"context"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"errors"
	"net/url"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	jose "github.com/go-jose/go-jose/v4"
	"github.com/go-jose/go-jose/v4/jwt"
	"golang.org/x/oauth2"
	"golang.org/x/oauth2/clientcredentials"

	"github.com/actgate/actgate/internal/upstreamauth"
	"github.com/actgate/actgate/test/testutil/idp"
)

// agentTok is an access token of the provider's client id (client credentials), as an agent
// signs in to the gate with, and its expiry.
func agentTok(t *testing.T, p *idp.Provider, id string) upstreamauth.AgentToken {
	t.Helper()
	cc := &clientcredentials.Config{ClientID: id, ClientSecret: "as", TokenURL: p.TokenURL(), AuthStyle: oauth2.AuthStyleInHeader}
	tok, err := cc.Token(context.WithValue(context.Background(), oauth2.HTTPClient, p.HTTPClient()))
	if err != nil {
		t.Fatal(err)
	}
	at, err := upstreamauth.ParseAgentToken(tok.AccessToken)
	if err != nil {
		t.Fatal(err)
	}
	if at.Token != tok.AccessToken || at.Expiry.Before(time.Now()) {
		t.Fatalf("ParseAgentToken: %+v", at)
	}
	return at
}

func oboProvider(t *testing.T) *idp.Provider {
	t.Helper()
	return idp.Start(t, idp.Options{Clients: []idp.Client{
		{ID: "gate", Secret: "gs", Audience: []string{resource}, TokenExchange: true, AccessTokenLifetime: time.Minute},
		{ID: "agent-1", Secret: "as", Audience: []string{"api://gate"}, AccessTokenLifetime: time.Minute},
		{ID: "agent-2", Secret: "as", Audience: []string{"api://gate"}, AccessTokenLifetime: time.Minute},
		{ID: "agent-3", Secret: "as", Audience: []string{"api://gate"}, AccessTokenLifetime: time.Minute},
	}})
}

func oboConfig(t *testing.T, p *idp.Provider) upstreamauth.Config {
	return upstreamauth.Config{Grant: upstreamauth.GrantTokenExchange, SubjectAgent: true, TokenURL: p.TokenURL(), ClientID: "gate",
		ClientSecretFile: write(t, "secret", []byte("gs")), Resource: resource, HTTPClient: p.HTTPClient()}
}

// TestAgentSourceExchange: each agent token of a call is exchanged for a token of the upstream
// whose sub is that agent (aud the upstream); a second call with the same agent token is
// answered from the cache (no request); another agent token gets its own exchange; a call
// without an agent token, or with one past its expiry, gets an *Error without a request to the
// provider; Invalidate makes the next call exchange again.
func TestAgentSourceExchange(t *testing.T) {
	p := oboProvider(t)
	s, err := upstreamauth.NewAgentSource(oboConfig(t, p), 0)
	if err != nil {
		t.Fatal(err)
	}
	a1, a2 := agentTok(t, p, "agent-1"), agentTok(t, p, "agent-2")
	ctx1 := upstreamauth.WithAgentToken(context.Background(), a1)
	tok1, err := s.Token(ctx1)
	if err != nil {
		t.Fatal(err)
	}
	if idt := verify(t, p, tok1); idt.Subject != "agent-1" {
		t.Fatalf("sub %q", idt.Subject)
	}
	if again, err := s.Token(ctx1); err != nil || again != tok1 || s.Fetches() != 1 {
		t.Fatalf("cached: %v, same %v, %d fetches", err, again == tok1, s.Fetches())
	}
	tok2, err := s.Token(upstreamauth.WithAgentToken(context.Background(), a2))
	if err != nil {
		t.Fatal(err)
	}
	if idt := verify(t, p, tok2); idt.Subject != "agent-2" || s.Fetches() != 2 || s.Len() != 2 {
		t.Fatalf("second agent: sub %q, %d fetches, %d entries", idt.Subject, s.Fetches(), s.Len())
	}
	var ue *upstreamauth.Error
	if _, err := s.Token(context.Background()); !errors.As(err, &ue) || !errors.Is(err, upstreamauth.ErrNoAgentToken) {
		t.Fatalf("no agent token: %v", err)
	}
	expired := upstreamauth.AgentToken{Token: a1.Token, Expiry: time.Now().Add(-time.Second)}
	if _, err := s.Token(upstreamauth.WithAgentToken(context.Background(), expired)); !errors.Is(err, upstreamauth.ErrAgentTokenExpired) {
		t.Fatalf("expired agent token: %v", err)
	}
	if s.Fetches() != 2 {
		t.Fatalf("%d fetches: a refused call asked the provider", s.Fetches())
	}
	s.Invalidate(tok1)
	if tok, err := s.Token(ctx1); err != nil || tok == tok1 || s.Fetches() != 3 {
		t.Fatalf("after Invalidate: %v, same %v, %d fetches", err, tok == tok1, s.Fetches())
	}
}

// TestAgentSourceBounded: with a bound of two agent tokens, a third evicts one (the cache never
// holds more than two) and every call still gets its own subject's token; with the provider down
// an exchange fails with *Error (no token), and within RetryAfter the same agent token gets the
// error without another request.
func TestAgentSourceBounded(t *testing.T) {
	p := oboProvider(t)
	s, err := upstreamauth.NewAgentSource(oboConfig(t, p), 2)
	if err != nil {
		t.Fatal(err)
	}
	for _, id := range []string{"agent-1", "agent-2", "agent-3"} {
		tok, err := s.Token(upstreamauth.WithAgentToken(context.Background(), agentTok(t, p, id)))
		if err != nil {
			t.Fatal(err)
		}
		if idt := verify(t, p, tok); idt.Subject != id {
			t.Fatalf("sub %q, want %s", idt.Subject, id)
		}
		if s.Len() > 2 {
			t.Fatalf("%d entries above the bound", s.Len())
		}
	}
	a := agentTok(t, p, "agent-1")
	p.Stop()
	n := s.Fetches()
	ctx := upstreamauth.WithAgentToken(context.Background(), a)
	var ue *upstreamauth.Error
	if tok, err := s.Token(ctx); !errors.As(err, &ue) || tok != "" {
		t.Fatalf("provider down: %q %v", tok, err)
	}
	if _, err := s.Token(ctx); err == nil || s.Fetches() != n+1 {
		t.Fatalf("within RetryAfter: %v, %d fetches", err, s.Fetches()-n)
	}
}

// TestAgentSourceNeverOutlivesAgentToken: an upstream token of a one-minute lifetime exchanged
// for an agent token that expires sooner is presented only until the agent token's expiry (a
// clock moved past it refuses the call rather than presenting the cached token).
func TestAgentSourceNeverOutlivesAgentToken(t *testing.T) {
	p := oboProvider(t)
	var skew atomic.Int64
	cfg := oboConfig(t, p)
	cfg.Now = func() time.Time { return time.Now().Add(time.Duration(skew.Load())) }
	s, err := upstreamauth.NewAgentSource(cfg, 0)
	if err != nil {
		t.Fatal(err)
	}
	a := agentTok(t, p, "agent-1")
	short := upstreamauth.AgentToken{Token: a.Token, Expiry: time.Now().Add(5 * time.Second)}
	ctx := upstreamauth.WithAgentToken(context.Background(), short)
	if _, err := s.Token(ctx); err != nil {
		t.Fatal(err)
	}
	skew.Store(int64(6 * time.Second))
	if tok, err := s.Token(ctx); !errors.Is(err, upstreamauth.ErrAgentTokenExpired) || tok != "" {
		t.Fatalf("past the agent token's expiry: %q %v", tok, err)
	}
}

// TestAgentSourceConfigRefused: an AgentSource needs a token exchange with SubjectAgent and
// not a subject token file too; a Source refuses SubjectAgent; an actor token type needs a
// file, and an actor token file that cannot be read is refused.
func TestAgentSourceConfigRefused(t *testing.T) {
	secret := write(t, "secret", []byte("s"))
	base := upstreamauth.Config{Grant: upstreamauth.GrantTokenExchange, SubjectAgent: true, TokenURL: "https://idp.example/token", Resource: resource}
	for name, edit := range map[string]func(*upstreamauth.Config){
		"client credentials": func(c *upstreamauth.Config) {
			c.Grant, c.ClientID, c.ClientSecretFile = upstreamauth.GrantClientCredentials, "g", secret
		},
		"not SubjectAgent":    func(c *upstreamauth.Config) { c.SubjectAgent, c.SubjectTokenFile = false, secret },
		"and a subject file":  func(c *upstreamauth.Config) { c.SubjectTokenFile = secret },
		"actor type, no file": func(c *upstreamauth.Config) { c.ActorTokenType = upstreamauth.TokenTypeAccessToken },
		"unknown actor type":  func(c *upstreamauth.Config) { c.ActorTokenFile, c.ActorTokenType = secret, "urn:x" },
		"missing actor file":  func(c *upstreamauth.Config) { c.ActorTokenFile = secret + ".nope" },
	} {
		c := base
		edit(&c)
		if _, err := upstreamauth.NewAgentSource(c, 0); err == nil {
			t.Errorf("%s: accepted", name)
		}
	}
	if _, err := upstreamauth.NewAgentSource(base, 0); err != nil {
		t.Fatalf("the base configuration: %v", err)
	}
	if _, err := upstreamauth.New(base); err == nil {
		t.Fatal("a Source accepted SubjectAgent")
	}
}

// TestParseAgentToken: a JWT with exp gives its expiry; anything else is a clear error, never a
// panic: not a JWT, alg none, HS256, no exp, a payload that is not JSON.
func TestParseAgentToken(t *testing.T) {
	key, _ := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	sg, _ := jose.NewSigner(jose.SigningKey{Algorithm: jose.ES256, Key: key}, nil)
	exp := time.Now().Add(time.Hour).Truncate(time.Second)
	good, _ := jwt.Signed(sg).Claims(jwt.Claims{Subject: "a", Expiry: jwt.NewNumericDate(exp)}).Serialize()
	noExp, _ := jwt.Signed(sg).Claims(jwt.Claims{Subject: "a"}).Serialize()
	hs, _ := jose.NewSigner(jose.SigningKey{Algorithm: jose.HS256, Key: []byte("0123456789abcdef0123456789abcdef")}, nil)
	hmac, _ := jwt.Signed(hs).Claims(jwt.Claims{Subject: "a", Expiry: jwt.NewNumericDate(exp)}).Serialize()
	at, err := upstreamauth.ParseAgentToken(good)
	if err != nil || !at.Expiry.Equal(exp) || at.Token != good {
		t.Fatalf("good token: %+v %v", at, err)
	}
	parts := strings.Split(good, ".")
	for name, tok := range map[string]string{
		"empty":            "",
		"opaque":           "abc123",
		"alg none":         "eyJhbGciOiJub25lIn0.eyJzdWIiOiJ4IiwiZXhwIjo0MTAyNDQ0ODAwfQ.",
		"HS256":            hmac,
		"no exp":           noExp,
		"payload not JSON": parts[0] + "." + "bm90IGpzb24" + "." + parts[2],
		"two parts":        parts[0] + "." + parts[1],
		"escaped":          url.QueryEscape(good) + "%",
	} {
		if _, err := upstreamauth.ParseAgentToken(tok); err == nil {
			t.Errorf("%s: accepted", name)
		}
	}
}

// FuzzParseAgentToken: no input panics; what parses has an expiry.
func FuzzParseAgentToken(f *testing.F) {
	f.Add("eyJhbGciOiJFUzI1NiJ9.eyJleHAiOjQxMDI0NDQ4MDB9.AAAA")
	f.Add("eyJhbGciOiJub25lIn0.eyJzdWIiOiJ4In0.")
	f.Add("a.b.c")
	f.Fuzz(func(t *testing.T, s string) {
		at, err := upstreamauth.ParseAgentToken(s)
		if err == nil && at.Expiry.IsZero() {
			t.Fatal("parsed without an expiry")
		}
	})
}
