package main

import (
	"bytes"
	"context"
	"crypto/hmac"
	"crypto/sha256"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/go-logr/logr"
	"github.com/modelcontextprotocol/go-sdk/mcp"
	"golang.org/x/oauth2"
	"golang.org/x/oauth2/clientcredentials"

	"github.com/actgate/actgate/internal/agentoauth"
	"github.com/actgate/actgate/internal/diag"
	"github.com/actgate/actgate/internal/gateconfig"
	"github.com/actgate/actgate/internal/mcpproxy"
	"github.com/actgate/actgate/internal/mcpproxy/mcptest"
	"github.com/actgate/actgate/internal/standalone"
	"github.com/actgate/actgate/test/testutil/idp"
)

// oauthGate is a gate served in-process as `actgate serve` serves it, authenticating agents by
// the access tokens of a real OpenID provider (test/testutil/idp), in front of a counting
// upstream.
type oauthGate struct {
	t    *testing.T
	idp  *idp.Provider
	up   *mcptest.Server
	base string
	cfg  *gateconfig.Config
	file string // the configuration file
}

// The machine clients registered at the provider.
const (
	oauthAgentClient = "billing-agent" // aud: the gate; scope mcp.call
	oauthOtherClient = "other-service" // aud: another resource
	oauthShortClient = "short-agent"   // aud: the gate; tokens live 2s
	oauthOpaque      = "opaque-agent"  // aud: the gate; opaque tokens (introspection)
	oauthGateClient  = "actgate-gate"  // the gate's own client, for introspection
	oauthSecret      = "client-secret-of-the-test"
)

func startOAuthGate(t *testing.T, extra string) *oauthGate {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	base := "http://" + ln.Addr().String()
	p := idp.Start(t, idp.Options{Clients: []idp.Client{
		{ID: oauthAgentClient, Secret: oauthSecret, Audience: []string{base}, Scopes: []string{"mcp.call"}},
		{ID: oauthOtherClient, Secret: oauthSecret, Audience: []string{"https://elsewhere.example"}, Scopes: []string{"mcp.call"}},
		{ID: oauthShortClient, Secret: oauthSecret, Audience: []string{base}, Scopes: []string{"mcp.call"}, AccessTokenLifetime: 2 * time.Second},
		{ID: oauthOpaque, Secret: oauthSecret, Audience: []string{base}, Scopes: []string{"mcp.call"}, OpaqueAccessTokens: true},
		{ID: oauthGateClient, Secret: oauthSecret, Audience: []string{"https://gate-introspection.example"}},
	}})
	up, dir, tok := countingDemoUpstream(t)
	doc := strings.Replace(string(demoConfig(up.URL, filepath.Join(dir, "data"), tok)), "listen: 127.0.0.1:0", "listen: "+ln.Addr().String(), 1)
	doc = strings.Replace(doc, "  trustDeclaredProvenance: true\n", fmt.Sprintf(`  trustDeclaredProvenance: true
  authentication: oauth
  oauth:
    issuer: %s
    caFile: %s
    agentClaim: client_id
    agentPrefix: "idp:"
    clockSkew: 0s
    jwksRefresh: 1s
%s`, p.Issuer(), p.CAFile(), strings.ReplaceAll(extra, "$ISSUER", p.Issuer())), 1)
	cfgFile := filepath.Join(dir, "actgate.yaml")
	if err := os.WriteFile(cfgFile, []byte(doc), 0o600); err != nil {
		t.Fatal(err)
	}
	cfg, err := gateconfig.Load(cfgFile)
	if err != nil {
		t.Fatal(err)
	}
	rt, err := standalone.Open(context.Background(), cfg, logr.Discard(), standalone.Hooks{})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	var out bytes.Buffer
	go func() { done <- rt.Serve(ctx, ln, &out) }()
	t.Cleanup(func() {
		cancel()
		if err := <-done; err != nil {
			t.Errorf("serve: %v", err)
		}
	})
	return &oauthGate{t: t, idp: p, up: up, base: base, cfg: cfg, file: cfgFile}
}

// token gets an access token of client by the client credentials grant.
func (g *oauthGate) token(client string, scopes ...string) string {
	g.t.Helper()
	ctx := context.WithValue(context.Background(), oauth2.HTTPClient, g.idp.HTTPClient())
	tok, err := g.credentials(client, scopes).Token(ctx)
	if err != nil {
		g.t.Fatalf("client credentials of %s: %v", client, err)
	}
	return tok.AccessToken
}

func (g *oauthGate) credentials(client string, scopes []string) *clientcredentials.Config {
	return &clientcredentials.Config{ClientID: client, ClientSecret: oauthSecret, TokenURL: g.idp.Issuer() + "/oauth/token",
		Scopes: scopes, AuthStyle: oauth2.AuthStyleInHeader}
}

// session connects the official MCP Go SDK client to the finance server through an HTTP
// client whose transport is the oauth2 client credentials token source.
func (g *oauthGate) session(client string, scopes ...string) (*mcp.ClientSession, error) {
	ctx := context.WithValue(context.Background(), oauth2.HTTPClient, g.idp.HTTPClient())
	hc := oauth2.NewClient(ctx, g.credentials(client, scopes).TokenSource(ctx))
	return g.sessionWith(hc)
}

func (g *oauthGate) sessionWith(hc *http.Client) (*mcp.ClientSession, error) {
	c := mcp.NewClient(&mcp.Implementation{Name: "oauth-agent", Version: "v1"}, nil)
	cs, err := c.Connect(context.Background(), &mcp.StreamableClientTransport{Endpoint: g.base + mcpproxy.Path("finance"), HTTPClient: hc},
		&mcp.ClientSessionOptions{ProtocolVersion: "2025-11-25"})
	if err == nil {
		g.t.Cleanup(func() { _ = cs.Close() })
	}
	return cs, err
}

// initialize posts an MCP initialize to the finance server with the Authorization header auth
// ("" for none) and returns the answer's status, WWW-Authenticate and body.
func (g *oauthGate) initialize(auth string) (int, string, string) {
	g.t.Helper()
	body := `{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"2025-11-25","capabilities":{},"clientInfo":{"name":"raw","version":"1"}}}`
	req, _ := http.NewRequest(http.MethodPost, g.base+mcpproxy.Path("finance"), strings.NewReader(body))
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Accept", "application/json, text/event-stream")
	if auth != "" {
		req.Header.Set("Authorization", auth)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		g.t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, resp.Header.Get("WWW-Authenticate"), string(b)
}

func b64(b []byte) string { return base64.RawURLEncoding.EncodeToString(b) }

// craft is a compact JWS of header and claims "signed" by sign over the signing input.
func craft(header, claims map[string]any, sign func(input string) []byte) string {
	h, _ := json.Marshal(header)
	c, _ := json.Marshal(claims)
	input := b64(h) + "." + b64(c)
	return input + "." + b64(sign(input))
}

// TestOAuthAgents: with agent.authentication oauth, a real `actgate serve` admits the official
// MCP Go SDK client whose HTTP client carries client-credentials access tokens of a real
// OpenID provider: the call runs once upstream, the binding moment of an escalated call names
// the agent the configured claim maps (idp:billing-agent), and the upstream never sees the
// agent's token. Every bad token — expired, another audience, another issuer, alg none, HS256
// keyed with the public key, a bad signature, a token of a key the provider removed, a token
// without the required scope — is answered 401 (403 for the scope) with the WWW-Authenticate
// challenge naming the resource metadata, and the upstream count stays where it was.
func TestOAuthAgents(t *testing.T) {
	g := startOAuthGate(t, "    scopes: [mcp.call]\n")

	// RFC 9728 metadata of the gate and of the server's path.
	for path, resource := range map[string]string{
		agentoauth.MetadataPath:                  g.base,
		agentoauth.MetadataPath + "/mcp/finance": g.base + "/mcp/finance",
	} {
		resp, err := http.Get(g.base + path)
		if err != nil {
			t.Fatal(err)
		}
		var m agentoauth.Metadata
		err = json.NewDecoder(resp.Body).Decode(&m)
		_ = resp.Body.Close()
		if err != nil || resp.StatusCode != http.StatusOK || m.Resource != resource || len(m.AuthorizationServers) != 1 ||
			m.AuthorizationServers[0] != g.idp.Issuer() || strings.Join(m.BearerMethodsSupported, ",") != "header" || strings.Join(m.ScopesSupported, ",") != "mcp.call" {
			t.Fatalf("metadata at %s: %d %+v %v", path, resp.StatusCode, m, err)
		}
	}
	if resp, err := http.Get(g.base + agentoauth.MetadataPath + "/mcp/nothing"); err != nil || resp.StatusCode != http.StatusNotFound {
		t.Fatalf("metadata of an unknown server: %v %v", resp, err)
	}

	// No token: 401 with resource_metadata and no error (RFC 6750 §3.1).
	code, challenge, body := g.initialize("")
	wantMeta := `resource_metadata="` + g.base + agentoauth.MetadataPath + `/mcp/finance"`
	if code != http.StatusUnauthorized || !strings.HasPrefix(challenge, "Bearer "+wantMeta) || strings.Contains(challenge, "error=") ||
		!strings.Contains(body, "EF_AGENT_UNAUTHENTICATED") {
		t.Fatalf("no token: %d %q %s", code, challenge, body)
	}

	// A valid token: the call runs once, upstream, which never sees the agent's token.
	good := g.token(oauthAgentClient, "mcp.call")
	cs, err := g.session(oauthAgentClient, "mcp.call")
	if err != nil {
		t.Fatal(err)
	}
	res, err := cs.CallTool(context.Background(), &mcp.CallToolParams{Name: "get_balance", Arguments: json.RawMessage(`{}`)})
	if err != nil || res.IsError {
		t.Fatalf("get_balance: %v %+v", err, res)
	}
	if n := g.up.Count("get_balance"); n != 1 {
		t.Fatalf("upstream ran get_balance %d times, want 1", n)
	}
	id := escalate(t, cs, `{"to":"bob","amount":5}`)
	alice, err := os.ReadFile(g.cfg.PrincipalTokenPath("alice"))
	if err != nil {
		t.Fatal(err)
	}
	req, _ := http.NewRequest(http.MethodGet, g.base+"/v1/moments/"+id, nil)
	req.Header.Set("Authorization", "Bearer "+strings.TrimSpace(string(alice)))
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	var m standalone.MomentJSON
	err = json.NewDecoder(resp.Body).Decode(&m)
	_ = resp.Body.Close()
	if err != nil || m.Agent != "idp:"+oauthAgentClient {
		t.Fatalf("the moment names agent %q (%v), want idp:%s", m.Agent, err, oauthAgentClient)
	}

	// Another agent's valid token on this agent's session is refused: the session is bound to
	// the agent that opened it.
	hijack, _ := http.NewRequest(http.MethodPost, g.base+mcpproxy.Path("finance"),
		strings.NewReader(`{"jsonrpc":"2.0","id":9,"method":"tools/call","params":{"name":"get_balance","arguments":{}}}`))
	hijack.Header.Set("Content-Type", "application/json")
	hijack.Header.Set("Accept", "application/json, text/event-stream")
	hijack.Header.Set("Mcp-Session-Id", cs.ID())
	hijack.Header.Set("Mcp-Protocol-Version", "2025-11-25")
	hijack.Header.Set("Authorization", "Bearer "+g.token(oauthShortClient, "mcp.call"))
	if resp, err := http.DefaultClient.Do(hijack); err != nil || resp.StatusCode != http.StatusForbidden {
		t.Fatalf("another agent on the session: %v %v", resp, err)
	} else {
		_ = resp.Body.Close()
	}
	if n := g.up.Count("get_balance"); n != 1 {
		t.Fatalf("upstream ran get_balance %d times after the hijack, want 1", n)
	}

	// Host loops take the same tokens (the gate as a whole is their resource).
	enforce := func(auth string) int {
		req, _ := http.NewRequest(http.MethodPost, g.base+"/v1/enforce", strings.NewReader(`{}`))
		req.Header.Set("Content-Type", "application/json")
		if auth != "" {
			req.Header.Set("Authorization", auth)
		}
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		_ = resp.Body.Close()
		return resp.StatusCode
	}
	if code := enforce(""); code != http.StatusUnauthorized {
		t.Fatalf("/v1/enforce without a token: %d", code)
	}
	if code := enforce("Bearer " + good); code == http.StatusUnauthorized || code == http.StatusForbidden || code >= 500 {
		t.Fatalf("/v1/enforce with a valid token: %d", code)
	}

	now := time.Now()
	claims := func(mod func(map[string]any)) map[string]any {
		c := map[string]any{"iss": g.idp.Issuer(), "sub": oauthAgentClient, "client_id": oauthAgentClient, "aud": []string{g.base},
			"exp": now.Add(time.Minute).Unix(), "iat": now.Unix(), "nbf": now.Unix(), "scope": "mcp.call", "jti": "t"}
		if mod != nil {
			mod(c)
		}
		return c
	}
	pub := g.idp.PublicKeyPEM(t)
	forged := good[:strings.LastIndex(good, ".")+1] + b64(bytes.Repeat([]byte{7}, 256))
	for _, tc := range []struct {
		name, token, oauthErr string
		status                int
	}{
		{"signed by the provider, as issued", g.idp.Sign(t, claims(nil)), "", http.StatusOK},
		{"expired", g.idp.Sign(t, claims(func(c map[string]any) { c["exp"] = now.Add(-time.Minute).Unix() })), "invalid_token", 401},
		{"no expiry", g.idp.Sign(t, claims(func(c map[string]any) { delete(c, "exp") })), "invalid_token", 401},
		{"not valid yet", g.idp.Sign(t, claims(func(c map[string]any) { c["nbf"] = now.Add(time.Hour).Unix() })), "invalid_token", 401},
		{"wrong audience (issued to another resource)", g.token(oauthOtherClient, "mcp.call"), "invalid_token", 401},
		{"wrong issuer", g.idp.Sign(t, claims(func(c map[string]any) { c["iss"] = "https://evil.example" })), "invalid_token", 401},
		{"alg none", craft(map[string]any{"alg": "none", "typ": "JWT"}, claims(nil), func(string) []byte { return nil }), "invalid_token", 401},
		{"HS256 keyed with the public key", craft(map[string]any{"alg": "HS256", "kid": g.idp.KeyID()}, claims(nil), func(in string) []byte {
			m := hmac.New(sha256.New, pub)
			m.Write([]byte(in))
			return m.Sum(nil)
		}), "invalid_token", 401},
		{"bad signature", forged, "invalid_token", 401},
		{"agent claim not a string", g.idp.Sign(t, claims(func(c map[string]any) { c["client_id"] = 5 })), "invalid_token", 401},
		{"without the required scope", g.token(oauthAgentClient), "insufficient_scope", 403},
		{"not a JWT", "opaque-token-1234567890", "invalid_token", 401},
	} {
		t.Run(tc.name, func(t *testing.T) {
			before := g.up.Count("get_balance")
			code, challenge, body := g.initialize("Bearer " + tc.token)
			if code != tc.status {
				t.Fatalf("status %d, want %d: %q %s", code, tc.status, challenge, body)
			}
			if tc.status == http.StatusOK {
				return
			}
			if !strings.Contains(challenge, wantMeta) || !strings.Contains(challenge, `error="`+tc.oauthErr+`"`) || !strings.Contains(body, "EF_AGENT_UNAUTHENTICATED") {
				t.Fatalf("challenge %q body %s", challenge, body)
			}
			if tc.status == http.StatusForbidden && !strings.Contains(challenge, `scope="mcp.call"`) {
				t.Fatalf("insufficient_scope without the scope: %q", challenge)
			}
			if strings.Contains(challenge+body, tc.token) {
				t.Fatal("the refusal repeats the token")
			}
			if n := g.up.Count("get_balance"); n != before {
				t.Fatalf("upstream count %d → %d", before, n)
			}
		})
	}

	// Rotation: a token of the new key verifies once the gate fetched the key set again (one
	// bounded refresh for the unknown key id); a token of the removed key is refused.
	g.idp.RotateKey(false)
	time.Sleep(1100 * time.Millisecond) // agent.oauth.jwksRefresh: 1s
	if code, ch, body := g.initialize("Bearer " + g.token(oauthAgentClient, "mcp.call")); code != http.StatusOK {
		t.Fatalf("a token of the new key: %d %q %s", code, ch, body)
	}
	if code, ch, _ := g.initialize("Bearer " + good); code != http.StatusUnauthorized || !strings.Contains(ch, "invalid_token") {
		t.Fatalf("a token of the removed key: %d %q", code, ch)
	}

	for _, a := range g.up.Authorizations() {
		if a != "Bearer tok" {
			t.Fatalf("the upstream saw Authorization %q: only the gate's own upstream credential may reach it", a)
		}
	}
}

// TestOAuthAgentTokenExpiresInSession: a token that expires between two calls of one session
// refuses the second call (every request is authenticated again), and the upstream ran only
// the first; a client that renews its token keeps its session.
func TestOAuthAgentTokenExpiresInSession(t *testing.T) {
	g := startOAuthGate(t, "")
	tok := g.token(oauthShortClient, "mcp.call")
	cs, err := g.sessionWith(&http.Client{Transport: bearerTransport{token: tok, base: http.DefaultTransport}})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := cs.CallTool(context.Background(), &mcp.CallToolParams{Name: "get_balance", Arguments: json.RawMessage(`{}`)}); err != nil {
		t.Fatal(err)
	}
	time.Sleep(3 * time.Second) // the token lives 2s; clockSkew 0s
	if _, err := cs.CallTool(context.Background(), &mcp.CallToolParams{Name: "get_balance", Arguments: json.RawMessage(`{}`)}); err == nil {
		t.Fatal("a call with the expired token was admitted")
	}
	if n := g.up.Count("get_balance"); n != 1 {
		t.Fatalf("upstream ran get_balance %d times, want 1", n)
	}

	// A client whose token source renews the token keeps its session: the session is bound to
	// the agent the tokens name, not to one token.
	renewing, err := g.session(oauthShortClient, "mcp.call")
	if err != nil {
		t.Fatal(err)
	}
	for i := range 2 {
		if i == 1 {
			time.Sleep(3 * time.Second)
		}
		if res, err := renewing.CallTool(context.Background(), &mcp.CallToolParams{Name: "get_balance", Arguments: json.RawMessage(`{}`)}); err != nil || res.IsError {
			t.Fatalf("call %d with a renewed token: %v %+v", i+1, err, res)
		}
	}
	if n := g.up.Count("get_balance"); n != 3 {
		t.Fatalf("upstream ran get_balance %d times, want 3", n)
	}
}

// TestOAuthAgentsIdPDown: while the provider is down and the gate holds none of its keys,
// agents are refused with 503 EF_AGENT_IDP_UNAVAILABLE — never admitted — and nothing reaches
// the upstream.
func TestOAuthAgentsIdPDown(t *testing.T) {
	g := startOAuthGate(t, "")
	tok := g.token(oauthAgentClient, "mcp.call")
	g.idp.Stop()
	for range 3 {
		code, challenge, body := g.initialize("Bearer " + tok)
		if code != http.StatusServiceUnavailable || !strings.Contains(body, "EF_AGENT_IDP_UNAVAILABLE") || !strings.Contains(challenge, "resource_metadata=") {
			t.Fatalf("provider down: %d %q %s", code, challenge, body)
		}
	}
	if _, err := g.sessionWith(&http.Client{Transport: bearerTransport{token: tok, base: http.DefaultTransport}}); err == nil {
		t.Fatal("the SDK client connected while the provider is down")
	}
	if calls := g.up.Calls(); len(calls) != 0 {
		t.Fatalf("the upstream ran %d calls", len(calls))
	}
}

// TestOAuthDoctor: `actgate doctor` checks the identity provider of agent.authentication oauth:
// OK with the number of signing keys while it serves, FAIL naming EF_AGENT_IDP_UNAVAILABLE when
// it is down.
func TestOAuthDoctor(t *testing.T) {
	g := startOAuthGate(t, "")
	find := func() diag.Check {
		for _, c := range doctorStandalone(context.Background(), g.file, http.DefaultTransport.(*http.Transport).Clone()) {
			if c.Name == "identity provider" {
				return c
			}
		}
		t.Fatal("no identity provider check")
		return diag.Check{}
	}
	if c := find(); c.Status != diag.StatusOK || !strings.Contains(c.Detail, "publishes 1 signing keys") {
		t.Fatalf("provider up: %+v", c)
	}
	g.idp.Stop()
	if c := find(); c.Status != diag.StatusFail || !strings.Contains(c.Fix, "EF_AGENT_IDP_UNAVAILABLE") {
		t.Fatalf("provider down: %+v", c)
	}
}
