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

// TestUpstreamOAuthSubjectAgent: subject: agent is a token exchange of the agent's token; it
// is accepted with agent.authentication: oauth (its credential refuses a request that carries
// no agent token, without asking the provider), and refused, naming the field, with static
// agent tokens, with a subject token file too, with another grant or subject, a negative
// bound, and in the sidecar's settings.
func TestUpstreamOAuthSubjectAgent(t *testing.T) {
	dir := t.TempDir()
	if err := os.WriteFile(filepath.Join(dir, "secret"), []byte("s\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	block := "upstreams:\n- server: bank\n  oauth:\n    grant: token_exchange\n    subject: agent\n    tokenURL: https://127.0.0.1:1/token\n    clientID: gate\n    clientSecretFile: secret\n"
	oauthAgents := "externalURL: https://gate.example\n" + strings.Replace(minimal, "agent:\n", "agent:\n  authentication: oauth\n  oauth:\n    issuer: https://idp.example\n", 1)
	if !strings.Contains(oauthAgents, "authentication: oauth") {
		t.Fatal("the minimal configuration has no agent section")
	}
	c, err := Parse([]byte(oauthAgents+block), dir)
	if err != nil {
		t.Fatal(err)
	}
	cred, err := c.Upstream("bank").UpstreamCredential(c.Policy.Servers[0].URL)
	if err != nil || cred.Token == nil || cred.Rejected == nil {
		t.Fatalf("credential %+v %v", cred, err)
	}
	if tok, err := cred.Token(context.Background()); err == nil || tok != "" || !strings.Contains(err.Error(), "no agent OAuth token") {
		t.Fatalf("a request without an agent token: %q %v", tok, err)
	}
	for _, tc := range []struct{ name, doc, field string }{
		{"static agent tokens", minimal + block, "agent.authentication: oauth"},
		{"and a subject file", oauthAgents + block + "    subjectTokenFile: secret\n", "upstreams[0].oauth"},
		{"client credentials", oauthAgents + strings.Replace(block, "token_exchange", "client_credentials", 1), "upstreams[0].oauth.subject"},
		{"unknown subject", oauthAgents + strings.Replace(block, "subject: agent", "subject: user", 1), "upstreams[0].oauth.subject"},
		{"negative bound", oauthAgents + block + "    maxAgentTokens: -1\n", "upstreams[0].oauth.maxAgentTokens"},
		{"missing actor file", oauthAgents + block + "    actorTokenFile: nope\n", "upstreams[0].oauth"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := Parse([]byte(tc.doc), dir)
			if err == nil || !strings.Contains(err.Error(), tc.field) {
				t.Fatalf("accepted or wrong error: %v", err)
			}
		})
	}
	agentDoc := []byte("grant: token_exchange\nsubject: agent\ntokenURL: https://127.0.0.1:1/token\n")
	if _, err := ParseUpstreamOAuth(agentDoc, dir, "https://up.example/mcp", false); err == nil ||
		!strings.Contains(err.Error(), "sidecar") {
		t.Fatalf("the settings of a sidecar without agent OAuth, with subject: agent: %v", err)
	}
	o, err := ParseUpstreamOAuth(agentDoc, dir, "https://up.example/mcp", true)
	if err != nil {
		t.Fatalf("the settings of a sidecar with agent OAuth, with subject: agent: %v", err)
	}
	if sc, err := o.SourceConfig("https://up.example/mcp"); err != nil || !sc.SubjectAgent {
		t.Fatalf("subject: agent read as %+v, %v", sc, err)
	}
	if _, err := ParseUpstreamOAuth([]byte("grant: client_credentials\nsubject: agent\ntokenURL: https://127.0.0.1:1/token\nclientID: c\n"), dir,
		"https://up.example/mcp", true); err == nil || !strings.Contains(err.Error(), "subject") {
		t.Fatalf("subject: agent with client credentials: %v", err)
	}
}
