package gateconfig

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// TestUpstreamOAuthConfig: upstreams[].oauth resolves its files relative to the configuration,
// defaults the resource to the server's URL, and yields a credential that asks the provider (a
// token endpoint that is not there: the error is upstreamauth's, no token); a configuration that
// cannot work is refused at load with the field named.
func TestUpstreamOAuthConfig(t *testing.T) {
	dir := t.TempDir()
	if err := os.WriteFile(filepath.Join(dir, "secret"), []byte("s\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	block := "upstreams:\n- server: bank\n  oauth:\n    grant: client_credentials\n    tokenURL: https://127.0.0.1:1/token\n    clientID: gate\n    clientSecretFile: secret\n"
	c, err := Parse([]byte(minimal+block), dir)
	if err != nil {
		t.Fatal(err)
	}
	o := c.Upstream("bank").OAuth
	if o == nil || o.ClientSecretFile != filepath.Join(dir, "secret") {
		t.Fatalf("oauth %+v", o)
	}
	cred, err := c.Upstream("bank").UpstreamCredential(c.Policy.Servers[0].URL)
	if err != nil || cred.Token == nil || cred.Rejected == nil {
		t.Fatalf("credential %+v %v", cred, err)
	}
	if tok, err := cred.Token(context.Background()); err == nil || tok != "" {
		t.Fatalf("a token from a provider that is not there: %q %v", tok, err)
	}
	for _, tc := range []struct{ name, doc, field string }{
		{"with a static token too", strings.Replace(block, "  oauth:\n", "  bearerTokenFile: secret\n  oauth:\n", 1), "upstreams[0].oauth"},
		{"unknown grant", strings.Replace(block, "client_credentials", "password", 1), "upstreams[0].oauth"},
		{"http token URL", strings.Replace(block, "https://127.0.0.1:1/token", "http://127.0.0.1:1/token", 1), "upstreams[0].oauth"},
		{"missing secret file", strings.Replace(block, "clientSecretFile: secret", "clientSecretFile: nope", 1), "upstreams[0].oauth"},
		{"no client auth", strings.Replace(block, "    clientSecretFile: secret\n", "", 1), "upstreams[0].oauth"},
		{"exchange without subject", strings.Replace(block, "client_credentials", "token_exchange", 1), "upstreams[0].oauth"},
		{"unknown field", block + "    secret: x\n", "secret"},
		{"CA file not PEM", block + "    caFile: secret\n", "upstreams[0].oauth.caFile"},
		{"the ToolPolicy's auth in embedded mode", "", "policy.servers[0].auth"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			doc := minimal + tc.doc
			if tc.doc == "" {
				doc = strings.Replace(minimal, "    url: http://127.0.0.1:9000/mcp", "    url: http://127.0.0.1:9000/mcp\n    auth: {grant: ClientCredentials, tokenURL: 'https://idp/t'}", 1)
			}
			_, err := Parse([]byte(doc), dir)
			if err == nil || !errors.Is(err, ErrConfig) && !strings.Contains(err.Error(), tc.field) {
				t.Fatalf("accepted or wrong error: %v", err)
			}
			if !strings.Contains(err.Error(), tc.field) {
				t.Fatalf("error %v does not name %s", err, tc.field)
			}
		})
	}
}
