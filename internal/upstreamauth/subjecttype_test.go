package upstreamauth_test

import (
	"context"
	"errors"
	"strings"
	"testing"

	"golang.org/x/oauth2"
	"golang.org/x/oauth2/clientcredentials"

	"github.com/actgate/actgate/internal/upstreamauth"
	"github.com/actgate/actgate/test/testutil/idp"
)

// TestTokenExchangeAccessTokenSubject: token exchange (RFC 8693) of a subject token that is not
// a JWT — an opaque access token the provider itself issued to the workload, declared
// subjectTokenType access_token — yields the upstream's token (aud = its resource, sub = the
// workload); the same token declared a JWT (the default type) is refused by the provider, so
// the call would not be sent (an *Error, never a token).
func TestTokenExchangeAccessTokenSubject(t *testing.T) {
	p := idp.Start(t, idp.Options{Clients: []idp.Client{
		{ID: "workload", Secret: "ws", Audience: []string{"https://workload.example"}, OpaqueAccessTokens: true},
		{ID: "gate", Secret: "gs", Audience: []string{resource}, TokenExchange: true},
	}})
	ctx := context.WithValue(context.Background(), oauth2.HTTPClient, p.HTTPClient())
	wt, err := (&clientcredentials.Config{ClientID: "workload", ClientSecret: "ws", TokenURL: p.TokenURL(), AuthStyle: oauth2.AuthStyleInHeader}).Token(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if strings.Count(wt.AccessToken, ".") == 2 {
		t.Fatal("the workload's token is a JWT; want an opaque one")
	}
	subject := write(t, "subject", []byte(wt.AccessToken))
	secret := write(t, "secret", []byte("gs"))
	cfg := upstreamauth.Config{Grant: upstreamauth.GrantTokenExchange, TokenURL: p.TokenURL(), ClientID: "gate", ClientSecretFile: secret,
		SubjectTokenFile: subject, SubjectTokenType: upstreamauth.TokenTypeAccessToken, Resource: resource, HTTPClient: p.HTTPClient()}
	tok, err := newSource(t, cfg).Token(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	if idt := verify(t, p, tok); idt.Subject != "workload" {
		t.Fatalf("the exchanged token's subject is %q, want the workload", idt.Subject)
	}
	cfg.SubjectTokenType = ""
	tok, err = newSource(t, cfg).Token(context.Background())
	var ue *upstreamauth.Error
	if err == nil || tok != "" || !errors.As(err, &ue) {
		t.Fatalf("an opaque token declared a JWT: %q %v", tok, err)
	}
}
