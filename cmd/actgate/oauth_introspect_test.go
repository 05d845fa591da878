package main

import (
	"context"
	"encoding/json"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// TestOAuthAgentsIntrospection: with agent.oauth.introspection, the official MCP Go SDK client
// of a machine client whose provider issues opaque access tokens calls through the gate: the
// gate introspects the token at the provider (RFC 7662, as its own client, secret from a file)
// and the call runs once upstream, which never sees the agent's token. An opaque token the
// provider does not know, and one without the required scope, are refused; with a wrong
// introspection secret (the file rotated in place) or the provider down, a new token is 503
// EF_AGENT_IDP_UNAVAILABLE and nothing more reaches the upstream — never an admission.
func TestOAuthAgentsIntrospection(t *testing.T) {
	secretFile := filepath.Join(t.TempDir(), "introspection-secret")
	if err := os.WriteFile(secretFile, []byte(oauthSecret+"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	g := startOAuthGate(t, "    scopes: [mcp.call]\n    introspection:\n      url: $ISSUER/oauth/introspect\n      clientID: "+oauthGateClient+
		"\n      clientSecretFile: "+secretFile+"\n")
	tok := g.token(oauthOpaque, "mcp.call")
	if strings.Count(tok, ".") == 2 {
		t.Fatal("the provider issued a JWT, want an opaque token")
	}
	cs, err := g.sessionWith(&http.Client{Transport: bearerTransport{token: tok, base: http.DefaultTransport}})
	if err != nil {
		t.Fatal(err)
	}
	res, err := cs.CallTool(context.Background(), &mcp.CallToolParams{Name: "get_balance", Arguments: json.RawMessage(`{}`)})
	if err != nil || res.IsError || g.up.Count("get_balance") != 1 {
		t.Fatalf("get_balance with an opaque token: %v %+v (upstream ran %d)", err, res, g.up.Count("get_balance"))
	}
	for _, a := range g.up.Authorizations() {
		if strings.Contains(a, tok) {
			t.Fatal("the agent's token reached the upstream")
		}
	}
	for name, bad := range map[string]string{
		"unknown opaque token": "bm90LWEtdG9rZW4",
		"no scope":             g.token(oauthOpaque),
	} {
		if code, challenge, _ := g.initialize("Bearer " + bad); code != http.StatusUnauthorized && code != http.StatusForbidden || !strings.Contains(challenge, "error=") {
			t.Errorf("%s: %d %q", name, code, challenge)
		}
	}
	if err := os.WriteFile(secretFile, []byte("rotated-to-a-wrong-secret\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	fresh := g.token(oauthOpaque, "mcp.call")
	if code, _, body := g.initialize("Bearer " + fresh); code != http.StatusServiceUnavailable || !strings.Contains(body, "EF_AGENT_IDP_UNAVAILABLE") {
		t.Fatalf("a wrong introspection secret: %d %s", code, body)
	}
	if err := os.WriteFile(secretFile, []byte(oauthSecret+"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	g.idp.Stop()
	if code, _, body := g.initialize("Bearer " + fresh); code != http.StatusServiceUnavailable || !strings.Contains(body, "EF_AGENT_IDP_UNAVAILABLE") {
		t.Fatalf("provider down: %d %s", code, body)
	}
	if n := g.up.Count("get_balance"); n != 1 {
		t.Fatalf("upstream ran get_balance %d times, want 1", n)
	}
}
