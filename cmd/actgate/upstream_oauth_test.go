package main

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/coreos/go-oidc/v3/oidc"
	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/actgate/actgate/internal/ef"
	"github.com/actgate/actgate/internal/gateconfig"
	"github.com/actgate/actgate/internal/mcpproxy"
	"github.com/actgate/actgate/internal/mcpproxy/mcptest"
	"github.com/actgate/actgate/internal/receipt"
	"github.com/actgate/actgate/test/testutil"
	"github.com/actgate/actgate/test/testutil/idp"
)

// upOAuth is a gate that obtains the upstream's token from a real OpenID provider
// (upstreams[].oauth), in front of an MCP server (the go-sdk) that admits only the provider's
// JWTs for its own URL: signature against the provider's key set, issuer, audience = its
// resource, expiry. Otherwise it answers 401 with a WWW-Authenticate challenge (RFC 6750 §3).
type upOAuth struct {
	*testGate
	idp      *idp.Provider
	refused  atomic.Int64 // requests the upstream refused with 401
	refuse   atomic.Bool  // the upstream refuses every request (a revoked grant)
	verified atomic.Int64 // requests with a verified token
	agentTok string       // the agent's own bearer token at the gate
}

const upOAuthSecret = "gate-client-secret"

// startUpOAuth starts the provider, the upstream and the gate. The provider registers "gate"
// (aud = the upstream's URL) and "gate-elsewhere" (aud = another resource), each with tokens
// of lifetime; client is the one the gate uses.
func startUpOAuth(t *testing.T, client string, lifetime time.Duration) *upOAuth {
	t.Helper()
	g := &upOAuth{}
	var verifier atomic.Pointer[oidc.IDTokenVerifier]
	up, err := mcptest.Start([]mcptest.Tool{{Name: "get_balance"}, {Name: "send_payment"}, {Name: "email_send"}}, mcptest.Options{
		Intercept: func(w http.ResponseWriter, r *http.Request) bool {
			if tok, ok := strings.CutPrefix(r.Header.Get("Authorization"), "Bearer "); ok && !g.refuse.Load() {
				if _, err := verifier.Load().Verify(r.Context(), tok); err == nil {
					g.verified.Add(1)
					return false
				}
			}
			g.refused.Add(1)
			w.Header().Set("WWW-Authenticate", `Bearer error="invalid_token", error_description="the token is not valid for this server"`)
			http.Error(w, "unauthorized", http.StatusUnauthorized)
			return true
		},
	})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = up.Close() })
	g.idp = idp.Start(t, idp.Options{Clients: []idp.Client{
		{ID: "gate", Secret: upOAuthSecret, Audience: []string{up.URL}, AccessTokenLifetime: lifetime},
		{ID: "gate-elsewhere", Secret: upOAuthSecret, Audience: []string{"https://elsewhere.example/mcp"}, AccessTokenLifetime: lifetime},
	}})
	kctx := oidc.ClientContext(context.Background(), g.idp.HTTPClient())
	verifier.Store(oidc.NewVerifier(g.idp.Issuer(), oidc.NewRemoteKeySet(kctx, g.idp.Issuer()+"/keys"), &oidc.Config{ClientID: up.URL}))

	dir := t.TempDir()
	secret := testutil.WriteFile(t, dir, "client-secret", []byte(upOAuthSecret+"\n"))
	static := filepath.Join(dir, "finance.token")
	doc := string(demoConfig(up.URL, filepath.Join(dir, "data"), static))
	doc = strings.Replace(doc, fmt.Sprintf("  bearerTokenFile: %q\n", static), fmt.Sprintf(`  oauth:
    grant: client_credentials
    tokenURL: %s
    clientID: %s
    clientSecretFile: %s
    caFile: %s
`, g.idp.TokenURL(), client, secret, g.idp.CAFile()), 1)
	if !strings.Contains(doc, "oauth:") {
		t.Fatal("the configuration has no upstreams[].oauth")
	}
	cfgFile := filepath.Join(dir, "actgate.yaml")
	if err := os.WriteFile(cfgFile, []byte(doc), 0o600); err != nil {
		t.Fatal(err)
	}
	g.testGate = &testGate{t: t, dir: dir, cfgFile: cfgFile, up: up}
	g.start()
	b, err := os.ReadFile(g.cfg.AgentTokenPath(g.cfg.Agent.Name))
	if err != nil {
		t.Fatal(err)
	}
	g.agentTok = strings.TrimSpace(string(b))
	return g
}

func (g *upOAuth) call(cs *mcp.ClientSession, tool, args string) *mcp.CallToolResult {
	g.t.Helper()
	// The agent declares the instruction the user's (the email rule refuses others), so that
	// email_send is allowed and its dispatch journaled.
	res, err := cs.CallTool(context.Background(), &mcp.CallToolParams{Name: tool, Arguments: json.RawMessage(args), Meta: mcp.Meta{mcpproxy.MetaProvenance: "user"}})
	if err != nil {
		g.t.Fatalf("%s: %v", tool, err)
	}
	return res
}

// outcomes stops the gate and returns the states of its verified outcome receipts.
func (g *upOAuth) outcomes() []string {
	g.t.Helper()
	g.stop()
	pub, err := os.ReadFile(g.cfg.Path(gateconfig.ReceiptPubFile))
	if err != nil {
		g.t.Fatal(err)
	}
	v, err := receipt.NewVerifierPEM(pub)
	if err != nil {
		g.t.Fatal(err)
	}
	var out []string
	for _, r := range testutil.VerifiedReceipts(g.t, g.cfg.Path(gateconfig.ReceiptsFile), v) {
		if r.Decision == receipt.DecisionOutcome {
			out = append(out, r.State)
		}
	}
	return out
}

// checkNoLeak: every request the upstream saw carried a bearer token, none of them the agent's
// own token, and no answer the agent got quotes one.
func (g *upOAuth) checkNoLeak(results ...*mcp.CallToolResult) {
	g.t.Helper()
	for _, a := range g.up.Authorizations() {
		tok, ok := strings.CutPrefix(a, "Bearer ")
		if !ok || tok == "" || tok == g.agentTok {
			g.t.Fatalf("the upstream saw Authorization %q (the agent's token is %q)", a, g.agentTok)
		}
		for _, r := range results {
			if b, _ := json.Marshal(r); strings.Contains(string(b), tok) {
				g.t.Fatal("an answer to the agent quotes the upstream's token")
			}
		}
	}
}

// TestUpstreamOAuthClientCredentials: through the gate, calls reach an upstream that admits
// only the provider's tokens for its own URL; the token is obtained once and cached (one request
// to the provider's token endpoint for the session and three calls), never the agent's token and
// never shown to the agent; once it expired, the next call gets a fresh one (a second request)
// and runs.
func TestUpstreamOAuthClientCredentials(t *testing.T) {
	g := startUpOAuth(t, "gate", 6*time.Second)
	start := time.Now()
	before := g.idp.TokenRequests()
	cs := g.agent()
	var results []*mcp.CallToolResult
	for range 3 {
		res := g.call(cs, "get_balance", `{"account":"main"}`)
		if res.IsError {
			t.Fatalf("call through the gate: %s", resultText(res))
		}
		results = append(results, res)
	}
	if n := g.up.Count("get_balance"); n != 3 {
		t.Fatalf("the upstream ran %d calls, want 3", n)
	}
	if n := g.idp.TokenRequests() - before; n != 1 {
		t.Fatalf("%d token requests for a session and three calls, want 1 (cached)", n)
	}
	if g.refused.Load() != 0 || g.verified.Load() == 0 {
		t.Fatalf("the upstream refused %d requests, verified %d", g.refused.Load(), g.verified.Load())
	}
	g.checkNoLeak(results...)
	// Past the token's expiry: the next call presents a fresh token.
	time.Sleep(time.Until(start.Add(7 * time.Second)))
	res := g.call(cs, "get_balance", `{"account":"main"}`)
	if res.IsError || g.up.Count("get_balance") != 4 || g.refused.Load() != 0 {
		t.Fatalf("after expiry: %s; upstream ran %d, refused %d", resultText(res), g.up.Count("get_balance"), g.refused.Load())
	}
	if n := g.idp.TokenRequests() - before; n != 2 {
		t.Fatalf("%d token requests after the expiry, want 2", n)
	}
	email := g.call(cs, "email_send", `{"to":"carol@example.com"}`)
	if email.IsError || g.up.Count("email_send") != 1 {
		t.Fatalf("journaled call: %s", resultText(email))
	}
	g.checkNoLeak(res, email)
	if out := g.outcomes(); strings.Join(out, ",") != "EXECUTED" {
		t.Fatalf("outcomes %v, want the email's EXECUTED", out)
	}
}

// TestUpstreamOAuthIdPDown: with the provider down, an agent's session cannot be opened (the
// initialize answers EF_UPSTREAM_IDP_UNAVAILABLE, the upstream sees no request); and once the
// token of an open session has expired, a call is not sent (the upstream sees no further
// request), the agent gets an isError result with EF_UPSTREAM_IDP_UNAVAILABLE, and the act's
// outcome is FAILED, never INDETERMINATE.
func TestUpstreamOAuthIdPDown(t *testing.T) {
	t.Run("initialize", func(t *testing.T) {
		g := startUpOAuth(t, "gate", time.Minute)
		g.idp.Stop()
		hc, err := agentClient(g.cfg, g.cfg.Agent.Name)
		if err != nil {
			t.Fatal(err)
		}
		c := mcp.NewClient(&mcp.Implementation{Name: "agent", Version: "v1"}, nil)
		_, err = c.Connect(context.Background(), &mcp.StreamableClientTransport{Endpoint: g.base + "/mcp/finance", HTTPClient: hc}, &mcp.ClientSessionOptions{ProtocolVersion: "2025-11-25"})
		if err == nil || !strings.Contains(err.Error(), string(ef.EFUpstreamIDPUnavailable)) {
			t.Fatalf("initialize with the provider down: %v", err)
		}
		if n := len(g.up.Authorizations()); n != 0 {
			t.Fatalf("the upstream saw %d requests", n)
		}
	})
	t.Run("call", func(t *testing.T) {
		g := startUpOAuth(t, "gate", 3*time.Second)
		start := time.Now()
		cs := g.agent()
		if res := g.call(cs, "get_balance", `{"account":"main"}`); res.IsError {
			t.Fatal(resultText(res))
		}
		g.idp.Stop()
		seen := len(g.up.Authorizations())
		time.Sleep(time.Until(start.Add(4 * time.Second)))
		for _, tool := range []string{"get_balance", "email_send"} {
			res := g.call(cs, tool, `{"to":"carol@example.com"}`)
			if !res.IsError || efCodeOf(res) != string(ef.EFUpstreamIDPUnavailable) {
				t.Fatalf("%s with the provider down: isError %v code %q: %s", tool, res.IsError, efCodeOf(res), resultText(res))
			}
		}
		if n := len(g.up.Authorizations()); n != seen || g.up.Count("get_balance") != 1 || g.up.Count("email_send") != 0 {
			t.Fatalf("the upstream saw %d more requests, ran %d calls", n-seen, len(g.up.Calls()))
		}
		if out := g.outcomes(); strings.Join(out, ",") != "FAILED" {
			t.Fatalf("outcomes %v, want the email's FAILED", out)
		}
	})
}

// TestUpstreamOAuthRefused: a token for another audience is refused by the upstream (401 with
// WWW-Authenticate) and the call is FAILED, never INDETERMINATE, the tool not run; an upstream
// that refuses the gate's token on the tools/call itself (a revoked grant) makes the call
// FAILED too, and the gate drops that token: the next call asks the provider for a new one.
func TestUpstreamOAuthRefused(t *testing.T) {
	t.Run("wrong audience", func(t *testing.T) {
		g := startUpOAuth(t, "gate-elsewhere", time.Minute)
		hc, err := agentClient(g.cfg, g.cfg.Agent.Name)
		if err != nil {
			t.Fatal(err)
		}
		c := mcp.NewClient(&mcp.Implementation{Name: "agent", Version: "v1"}, nil)
		_, err = c.Connect(context.Background(), &mcp.StreamableClientTransport{Endpoint: g.base + "/mcp/finance", HTTPClient: hc}, &mcp.ClientSessionOptions{ProtocolVersion: "2025-11-25"})
		if err == nil || g.refused.Load() == 0 || g.verified.Load() != 0 || len(g.up.Calls()) != 0 {
			t.Fatalf("wrong audience: initialize %v, upstream refused %d, verified %d", err, g.refused.Load(), g.verified.Load())
		}
	})
	t.Run("refused on the call", func(t *testing.T) {
		g := startUpOAuth(t, "gate", time.Minute)
		cs := g.agent()
		if res := g.call(cs, "get_balance", `{"account":"a"}`); res.IsError {
			t.Fatal(resultText(res))
		}
		before := g.idp.TokenRequests()
		g.refuse.Store(true)
		const args = `{"to":"carol@example.com"}`
		res := g.call(cs, "email_send", args)
		if !res.IsError || !strings.Contains(resultText(res), "HTTP 401") || g.up.Count("email_send") != 0 {
			t.Fatalf("refused call: isError %v, ran %d: %s", res.IsError, g.up.Count("email_send"), resultText(res))
		}
		g.refuse.Store(false)
		// The same call again gets the recorded FAILED answer, not EF_INDETERMINATE; another
		// call runs with a new token.
		if res := g.call(cs, "email_send", args); !res.IsError || efCodeOf(res) == string(ef.EFIndeterminate) || g.up.Count("email_send") != 0 {
			t.Fatalf("the refused call again: %s (%s)", resultText(res), efCodeOf(res))
		}
		if res := g.call(cs, "email_send", `{"to":"dave@example.com"}`); res.IsError || g.up.Count("email_send") != 1 {
			t.Fatalf("after the refusal: %s", resultText(res))
		}
		if n := g.idp.TokenRequests() - before; n != 1 {
			t.Fatalf("%d token requests after the 401, want 1 (the refused token dropped)", n)
		}
		out := g.outcomes()
		if len(out) < 2 || out[0] != "FAILED" || out[len(out)-1] != "EXECUTED" || slices.Contains(out, "INDETERMINATE") {
			t.Fatalf("outcomes %v, want FAILED first, EXECUTED last, none INDETERMINATE", out)
		}
	})
}

// TestUpstreamOAuthExpiresBeforeDispatch: the token cached when a payment was escalated has
// expired by the time the principal's resolution lets the call run: the dispatch presents a
// fresh token, and the payment runs once.
func TestUpstreamOAuthExpiresBeforeDispatch(t *testing.T) {
	g := startUpOAuth(t, "gate", 3*time.Second)
	cs := g.agent()
	start := time.Now()
	id := escalate(t, cs, `{"to":"bob","amount":250}`)
	before := g.idp.TokenRequests()
	time.Sleep(time.Until(start.Add(4 * time.Second)))
	if code, out, errOut := g.cli("resolve", id, "--as", "alice", "--option", "1"); code != exitOK {
		t.Fatalf("resolve: %d %q %q", code, out, errOut)
	}
	res := g.call(cs, "send_payment", `{"amount":250,"to":"bob"}`)
	if res.IsError || g.up.Count("send_payment") != 1 || g.refused.Load() != 0 {
		t.Fatalf("authorised call: %s; ran %d, refused %d", resultText(res), g.up.Count("send_payment"), g.refused.Load())
	}
	if n := g.idp.TokenRequests() - before; n < 1 {
		t.Fatal("the dispatch did not ask for a fresh token")
	}
	g.checkNoLeak(res)
}
