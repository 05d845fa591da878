package agentoauth

import (
	"context"
	"net/http"
	"strings"
	"testing"
	"time"

	"golang.org/x/oauth2"
	"golang.org/x/oauth2/clientcredentials"

	"github.com/actgate/actgate/internal/ef"
	"github.com/actgate/actgate/test/testutil/idp"
)

// TestParseIntrospection: an RFC 7662 answer is read strictly; an inactive answer needs
// nothing else, an active one needs exp; bad members are errors, never an admission.
func TestParseIntrospection(t *testing.T) {
	a, err := ParseIntrospection([]byte(`{"active":true,"iss":"https://idp","aud":"api://x","exp":2000000000,"nbf":1,"iat":1,"client_id":"c","scope":"a b"}`))
	if err != nil || !a.Active || a.Issuer != "https://idp" || len(a.Audience) != 1 || a.Audience[0] != "api://x" || a.Expiry.Unix() != 2000000000 {
		t.Fatalf("good: %+v %v", a, err)
	}
	if a, err := ParseIntrospection([]byte(`{"active":true,"aud":["a","b"],"exp":2000000000}`)); err != nil || len(a.Audience) != 2 {
		t.Fatalf("aud list: %+v %v", a, err)
	}
	if a, err := ParseIntrospection([]byte(`{"active":false}`)); err != nil || a.Active {
		t.Fatalf("inactive: %+v %v", a, err)
	}
	for name, in := range map[string]string{
		"empty":             ``,
		"not JSON":          `active=true`,
		"null":              `null`,
		"array":             `[{"active":true}]`,
		"no active":         `{"exp":2000000000}`,
		"active a string":   `{"active":"true","exp":2000000000}`,
		"active no exp":     `{"active":true}`,
		"exp a string":      `{"active":true,"exp":"2000000000"}`,
		"exp negative":      `{"active":true,"exp":-1}`,
		"exp huge":          `{"active":true,"exp":1e300}`,
		"iss a number":      `{"active":true,"exp":2000000000,"iss":1}`,
		"aud an object":     `{"active":true,"exp":2000000000,"aud":{"a":1}}`,
		"aud mixed list":    `{"active":true,"exp":2000000000,"aud":["a",1]}`,
		"nbf a string":      `{"active":true,"exp":2000000000,"nbf":"x"}`,
		"two values":        `{"active":true,"exp":2000000000}{}`,
		"trailing garbage":  `{"active":true,"exp":2000000000} x`,
		"oversized":         `{"active":true,"exp":2000000000,"x":"` + strings.Repeat("a", maxIntrospectionBytes) + `"}`,
		"duplicate members": `{"active":false,"active":1}`,
	} {
		if a, err := ParseIntrospection([]byte(in)); err == nil {
			t.Errorf("%s: accepted %+v", name, a)
		}
	}
}

// FuzzParseIntrospection: no input panics; an accepted active answer has an expiry.
func FuzzParseIntrospection(f *testing.F) {
	f.Add([]byte(`{"active":true,"iss":"https://idp","aud":"api://x","exp":2000000000,"client_id":"c"}`))
	f.Add([]byte(`{"active":false}`))
	f.Add([]byte(`{"active":true,"aud":["a"],"exp":1.5,"nbf":0}`))
	f.Fuzz(func(t *testing.T, in []byte) {
		a, err := ParseIntrospection(in)
		if err == nil && a.Active && a.Expiry.IsZero() {
			t.Fatalf("an active answer without expiry: %q", in)
		}
	})
}

// TestIntrospectionOpaqueTokens: with introspection configured, the opaque access token of a
// machine client (the zitadel-based provider, Client.OpaqueAccessTokens) names its agent by
// the provider's introspection answer, authenticated as a registered client; a token for
// another audience and a token the provider does not know are refused invalid_token; a wrong
// introspection secret, or the provider down, refuses with EF_AGENT_IDP_UNAVAILABLE (503),
// except for a token whose active answer is remembered, until the earlier of its exp and the
// cache TTL — an expired token is refused once its exp passed. The cache never holds more
// than MaxCached answers. Without introspection an opaque token is refused.
func TestIntrospectionOpaqueTokens(t *testing.T) {
	const aud = "api://agents"
	p := idp.Start(t, idp.Options{Clients: []idp.Client{
		{ID: "agent-a", Secret: "a", Audience: []string{aud}, OpaqueAccessTokens: true, Scopes: []string{"mcp.call"}},
		{ID: "agent-short", Secret: "s", Audience: []string{aud}, OpaqueAccessTokens: true, AccessTokenLifetime: 2 * time.Second},
		{ID: "elsewhere", Secret: "e", Audience: []string{"api://other"}, OpaqueAccessTokens: true},
		{ID: "gate", Secret: "gate-secret", Audience: []string{"api://gate-itself"}},
	}})
	token := func(id, secret string, scopes ...string) string {
		t.Helper()
		ctx := context.WithValue(context.Background(), oauth2.HTTPClient, p.HTTPClient())
		tok, err := (&clientcredentials.Config{ClientID: id, ClientSecret: secret, TokenURL: p.TokenURL(), Scopes: scopes,
			AuthStyle: oauth2.AuthStyleInHeader}).Token(ctx)
		if err != nil {
			t.Fatal(err)
		}
		if strings.Count(tok.AccessToken, ".") == 2 {
			t.Fatalf("client %s got a JWT, want an opaque token", id)
		}
		return tok.AccessToken
	}
	secret := "gate-secret"
	newVerifier := func(intro *Introspection) *Verifier {
		v, err := New(Options{Issuer: p.Issuer(), ExternalURL: "http://127.0.0.1:1", Audience: aud, AudienceOnly: true,
			Algorithms: []string{"RS256"}, AgentClaim: "client_id", AgentPrefix: "idp:", Scopes: []string{"mcp.call"}, CAPEM: p.CAPEM(),
			Introspection: intro, JWKSRefresh: time.Second, JWKSMaxAge: time.Hour})
		if err != nil {
			t.Fatal(err)
		}
		return v
	}
	v := newVerifier(&Introspection{URL: p.IntrospectionURL(), ClientID: "gate", ClientSecret: func() (string, error) { return secret, nil }, MaxCached: 2})
	ctx := context.Background()
	good := token("agent-a", "a", "mcp.call")
	if agent, rf := v.Verify(ctx, good, "payments"); rf != nil || agent != "idp:agent-a" {
		t.Fatalf("an active opaque token: %q %v", agent, rf)
	}
	if _, rf := newVerifier(nil).Verify(ctx, good, "payments"); rf == nil || rf.Status != http.StatusUnauthorized {
		t.Fatalf("an opaque token without introspection: %v", rf)
	}
	for name, tok := range map[string]string{
		"other audience": token("elsewhere", "e"),
		"unknown token":  "bm90LWEtdG9rZW4tdGhlLXByb3ZpZGVyLWtub3dz",
		"no scope":       token("agent-a", "a"),
	} {
		if agent, rf := v.Verify(ctx, tok, "payments"); rf == nil || rf.Status == http.StatusServiceUnavailable || agent != "" {
			t.Errorf("%s: %q %v", name, agent, rf)
		}
	}
	short := token("agent-short", "s")
	v2 := newVerifier(&Introspection{URL: p.IntrospectionURL(), ClientID: "gate", ClientSecret: func() (string, error) { return secret, nil }})
	v2.o.Scopes = nil
	if agent, rf := v2.Verify(ctx, short, ""); rf != nil || agent != "idp:agent-short" {
		t.Fatalf("a short-lived token: %q %v", agent, rf)
	}
	time.Sleep(2500 * time.Millisecond)
	if _, rf := v2.Verify(ctx, short, ""); rf == nil || rf.Code != ef.EFAgentUnauthenticated {
		t.Fatalf("the short-lived token after its exp: %v", rf)
	}

	for i := range 3 {
		if _, rf := v.Verify(ctx, token("agent-a", "a", "mcp.call"), ""); rf != nil {
			t.Fatalf("token %d: %v", i, rf)
		}
	}
	v.intro.mu.Lock()
	n := len(v.intro.cache)
	v.intro.mu.Unlock()
	if n != 2 {
		t.Fatalf("%d answers cached after four tokens, bound 2", n)
	}
	if agent, rf := v.Verify(ctx, good, "payments"); rf != nil || agent != "idp:agent-a" { // introspected again if dropped
		t.Fatalf("the first token again: %q %v", agent, rf)
	}

	secret = "wrong"
	fresh := token("agent-a", "a", "mcp.call")
	if _, rf := v.Verify(ctx, fresh, ""); rf == nil || rf.Status != http.StatusServiceUnavailable || rf.Code != ef.EFAgentIDPUnavailable {
		t.Fatalf("a wrong introspection secret: %v", rf)
	}
	secret = "gate-secret"
	p.Stop()
	if agent, rf := v.Verify(ctx, good, "payments"); rf != nil || agent != "idp:agent-a" {
		t.Fatalf("a remembered token with the provider down: %q %v", agent, rf)
	}
	if _, rf := v.Verify(ctx, fresh, "payments"); rf == nil || rf.Code != ef.EFAgentIDPUnavailable {
		t.Fatalf("a new token with the provider down: %v", rf)
	}
}
