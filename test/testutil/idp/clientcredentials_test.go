package idp_test

import (
	"context"
	"slices"
	"testing"
	"time"

	"github.com/coreos/go-oidc/v3/oidc"
	"golang.org/x/oauth2"
	"golang.org/x/oauth2/clientcredentials"

	"github.com/actgate/actgate/test/testutil/idp"
)

// TestClientCredentials: a machine client gets, by the client credentials grant, a JWT access
// token signed by the provider's published key with iss, aud = its Audience, sub and client_id
// = its id, scope and a short exp; a wrong secret, a scope it may not have and a client without
// an audience get none; after a rotation without the old key, tokens carry the new key id.
func TestClientCredentials(t *testing.T) {
	p := idp.Start(t, idp.Options{Clients: []idp.Client{
		{ID: "svc", Secret: "svc-secret", Audience: []string{"https://gate.example"}, Scopes: []string{"mcp.call"}, AccessTokenLifetime: time.Minute},
		{ID: "web", Secret: "web-secret", RedirectURIs: []string{"http://127.0.0.1/cb"}},
	}})
	ctx := context.WithValue(context.Background(), oauth2.HTTPClient, p.HTTPClient())
	conf := func(id, secret string, scopes ...string) *clientcredentials.Config {
		return &clientcredentials.Config{ClientID: id, ClientSecret: secret, TokenURL: p.Issuer() + "/oauth/token", Scopes: scopes, AuthStyle: oauth2.AuthStyleInHeader}
	}
	tok, err := conf("svc", "svc-secret", "mcp.call").Token(ctx)
	if err != nil {
		t.Fatal(err)
	}
	keys := oidc.NewRemoteKeySet(ctx, p.Issuer()+"/keys")
	v := oidc.NewVerifier(p.Issuer(), keys, &oidc.Config{ClientID: "https://gate.example"})
	idt, err := v.Verify(ctx, tok.AccessToken)
	if err != nil {
		t.Fatalf("the access token does not verify as the provider's JWT for the gate: %v", err)
	}
	var c struct {
		Sub      string `json:"sub"`
		ClientID string `json:"client_id"`
		Scope    string `json:"scope"`
	}
	if err := idt.Claims(&c); err != nil || c.Sub != "svc" || c.ClientID != "svc" || c.Scope != "mcp.call" ||
		time.Until(idt.Expiry) > time.Minute+5*time.Second || !slices.Equal(idt.Audience, []string{"https://gate.example"}) {
		t.Fatalf("claims %+v aud %v exp %v: %v", c, idt.Audience, idt.Expiry, err)
	}
	for name, cc := range map[string]*clientcredentials.Config{
		"wrong secret":         conf("svc", "nope", "mcp.call"),
		"scope not allowed":    conf("svc", "svc-secret", "admin"),
		"not a machine client": conf("web", "web-secret"),
	} {
		if _, err := cc.Token(ctx); err == nil {
			t.Errorf("%s: a token was issued", name)
		}
	}
	old := p.KeyID()
	p.RotateKey(false)
	tok2, err := conf("svc", "svc-secret").Token(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if p.KeyID() == old {
		t.Fatal("the key id did not change")
	}
	if _, err := oidc.NewVerifier(p.Issuer(), oidc.NewRemoteKeySet(ctx, p.Issuer()+"/keys"), &oidc.Config{ClientID: "https://gate.example"}).Verify(ctx, tok2.AccessToken); err != nil {
		t.Fatalf("a token of the new key: %v", err)
	}
}
