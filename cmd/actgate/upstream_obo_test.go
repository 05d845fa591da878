package main

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/coreos/go-oidc/v3/oidc"
	"github.com/modelcontextprotocol/go-sdk/mcp"
	"golang.org/x/oauth2"
	"golang.org/x/oauth2/clientcredentials"

	"github.com/actgate/actgate/internal/ef"
	"github.com/actgate/actgate/internal/gateconfig"
	"github.com/actgate/actgate/internal/mcpproxy"
	"github.com/actgate/actgate/internal/mcpproxy/mcptest"
	"github.com/actgate/actgate/test/testutil"
	"github.com/actgate/actgate/test/testutil/idp"
)

// oboGate is a gate whose agents sign in with a real OpenID provider (agent.authentication:
// oauth) and which presents the upstream, for each call, a token the provider issued in
// exchange for the agent's own token of the call (upstreams[].oauth.subject: agent). The
// upstream (the go-sdk MCP server) admits only the provider's JWTs for its own URL and records
// each admitted token's sub and act.sub.
type oboGate struct {
	*testGate
	idp     *idp.Provider
	refused atomic.Int64

	mu       sync.Mutex
	subjects []string // sub of every admitted upstream request
	actors   []string // act.sub of every admitted upstream request ("" for none)
	seen     []string // every bearer token the upstream saw
}

// The clients registered at the provider for the on-behalf-of tests.
const (
	oboAgentA   = "agent-a" // aud: the gate
	oboAgentB   = "agent-b" // aud: the gate
	oboShort    = "agent-short"
	oboGateID   = "gate" // may exchange tokens for the upstream
	oboSecret   = "obo-client-secret"
	oboAudience = "api://actgate"
)

// startOBO starts the provider, the upstream and the gate; extra is added to
// upstreams[0].oauth (indented four spaces); the exchanged tokens live for lifetime.
func startOBO(t *testing.T, extra string, lifetime time.Duration) *oboGate {
	t.Helper()
	g := &oboGate{}
	var verifier atomic.Pointer[oidc.IDTokenVerifier]
	up, err := mcptest.Start([]mcptest.Tool{{Name: "get_balance"}, {Name: "send_payment"}, {Name: "email_send"}}, mcptest.Options{
		Intercept: func(w http.ResponseWriter, r *http.Request) bool {
			tok, ok := strings.CutPrefix(r.Header.Get("Authorization"), "Bearer ")
			g.mu.Lock()
			g.seen = append(g.seen, tok)
			g.mu.Unlock()
			if ok {
				if idt, err := verifier.Load().Verify(r.Context(), tok); err == nil {
					var cl struct {
						Act struct {
							Sub string `json:"sub"`
						} `json:"act"`
					}
					_ = idt.Claims(&cl)
					g.mu.Lock()
					g.subjects = append(g.subjects, idt.Subject)
					g.actors = append(g.actors, cl.Act.Sub)
					g.mu.Unlock()
					return false
				}
			}
			g.refused.Add(1)
			w.Header().Set("WWW-Authenticate", `Bearer error="invalid_token"`)
			http.Error(w, "unauthorized", http.StatusUnauthorized)
			return true
		},
	})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = up.Close() })
	g.idp = idp.Start(t, idp.Options{Clients: []idp.Client{
		{ID: oboAgentA, Secret: oboSecret, Audience: []string{oboAudience}, AccessTokenLifetime: time.Minute},
		{ID: oboAgentB, Secret: oboSecret, Audience: []string{oboAudience}, AccessTokenLifetime: time.Minute},
		{ID: oboShort, Secret: oboSecret, Audience: []string{oboAudience}, AccessTokenLifetime: 3 * time.Second},
		{ID: oboGateID, Secret: oboSecret, Audience: []string{up.URL, oboAudience}, TokenExchange: true, AccessTokenLifetime: lifetime},
	}})
	kctx := oidc.ClientContext(context.Background(), g.idp.HTTPClient())
	verifier.Store(oidc.NewVerifier(g.idp.Issuer(), oidc.NewRemoteKeySet(kctx, g.idp.Issuer()+"/keys"), &oidc.Config{ClientID: up.URL}))

	dir := t.TempDir()
	secret := testutil.WriteFile(t, dir, "client-secret", []byte(oboSecret+"\n"))
	static := filepath.Join(dir, "finance.token")
	doc := string(demoConfig(up.URL, filepath.Join(dir, "data"), static))
	doc = strings.Replace(doc, fmt.Sprintf("  bearerTokenFile: %q\n", static), fmt.Sprintf(`  oauth:
    grant: token_exchange
    subject: agent
    tokenURL: %s
    clientID: %s
    clientSecretFile: %s
    caFile: %s
%s`, g.idp.TokenURL(), oboGateID, secret, g.idp.CAFile(), extra), 1)
	doc = strings.Replace(doc, "  trustDeclaredProvenance: true\n", fmt.Sprintf(`  trustDeclaredProvenance: true
  authentication: oauth
  oauth:
    issuer: %s
    caFile: %s
    audience: %s
    agentClaim: client_id
    agentPrefix: "idp:"
    clockSkew: 0s
`, g.idp.Issuer(), g.idp.CAFile(), oboAudience), 1)
	doc = "externalURL: https://gate.example.com\n" + doc
	if !strings.Contains(doc, "subject: agent") || !strings.Contains(doc, "authentication: oauth") {
		t.Fatal("the configuration lacks upstreams[].oauth.subject or agent.authentication")
	}
	cfgFile := filepath.Join(dir, "actgate.yaml")
	if err := os.WriteFile(cfgFile, []byte(doc), 0o600); err != nil {
		t.Fatal(err)
	}
	g.testGate = &testGate{t: t, dir: dir, cfgFile: cfgFile, up: up}
	g.start()
	return g
}

// agentToken is an access token of client for the gate (client credentials).
func (g *oboGate) agentToken(client string) string {
	g.t.Helper()
	cc := &clientcredentials.Config{ClientID: client, ClientSecret: oboSecret, TokenURL: g.idp.TokenURL(), AuthStyle: oauth2.AuthStyleInHeader}
	tok, err := cc.Token(context.WithValue(context.Background(), oauth2.HTTPClient, g.idp.HTTPClient()))
	if err != nil {
		g.t.Fatalf("client credentials of %s: %v", client, err)
	}
	return tok.AccessToken
}

// swappable presents a bearer token the test replaces (an agent that signs in again).
type swappable struct{ tok atomic.Pointer[string] }

func (s *swappable) RoundTrip(r *http.Request) (*http.Response, error) {
	r = r.Clone(r.Context())
	r.Header.Set("Authorization", "Bearer "+*s.tok.Load())
	return http.DefaultTransport.RoundTrip(r)
}

// session connects the MCP Go SDK client to the finance server presenting tok.
func (g *oboGate) session(tok string) *mcp.ClientSession {
	g.t.Helper()
	cs, _ := g.sessionSwap(tok)
	return cs
}

// sessionSwap is session with the token source, so that the session's later requests can
// present another token.
func (g *oboGate) sessionSwap(tok string) (*mcp.ClientSession, *swappable) {
	g.t.Helper()
	return g.sessionAt(tok, "2025-11-25")
}

// sessionAt is sessionSwap on the MCP revision version.
func (g *oboGate) sessionAt(tok, version string) (*mcp.ClientSession, *swappable) {
	g.t.Helper()
	src := &swappable{}
	src.tok.Store(&tok)
	hc := &http.Client{Transport: src}
	c := mcp.NewClient(&mcp.Implementation{Name: "obo-agent", Version: "v1"}, nil)
	cs, err := c.Connect(context.Background(), &mcp.StreamableClientTransport{Endpoint: g.base + mcpproxy.Path("finance"), HTTPClient: hc},
		&mcp.ClientSessionOptions{ProtocolVersion: version})
	if err != nil {
		g.t.Fatal(err)
	}
	g.t.Cleanup(func() { _ = cs.Close() })
	return cs, src
}

func (g *oboGate) call(cs *mcp.ClientSession, tool, args string) *mcp.CallToolResult {
	g.t.Helper()
	res, err := cs.CallTool(context.Background(), &mcp.CallToolParams{Name: tool, Arguments: json.RawMessage(args), Meta: mcp.Meta{mcpproxy.MetaProvenance: "user"}})
	if err != nil {
		g.t.Fatalf("%s: %v", tool, err)
	}
	return res
}

// record returns what the upstream saw so far.
func (g *oboGate) record() (subjects, actors, seen []string) {
	g.mu.Lock()
	defer g.mu.Unlock()
	return slices.Clone(g.subjects), slices.Clone(g.actors), slices.Clone(g.seen)
}

// checkNoPassthrough: no request the upstream saw carried one of the agents' own tokens, and
// no answer quotes a token the upstream saw.
func (g *oboGate) checkNoPassthrough(agentToks []string, results ...*mcp.CallToolResult) {
	g.t.Helper()
	_, _, seen := g.record()
	for _, tok := range seen {
		if tok == "" || slices.Contains(agentToks, tok) {
			g.t.Fatal("the upstream saw no token, or an agent's own token (token passthrough)")
		}
		for _, r := range results {
			if b, _ := json.Marshal(r); strings.Contains(string(b), tok) {
				g.t.Fatal("an answer to the agent quotes the upstream's token")
			}
		}
	}
}

// TestUpstreamOBOTwoAgents: two agents signed in with two tokens of the provider call the same
// upstream through the gate; the upstream, which admits only the provider's tokens for its own
// URL, sees each call under the subject of the agent it is for (sub = the agent's client), never
// an agent's own token; a second call of the same agent token is served from the cache (no
// further request to the provider), and the answers quote no upstream token.
func TestUpstreamOBOTwoAgents(t *testing.T) {
	g := startOBO(t, "", time.Minute)
	ta, tb := g.agentToken(oboAgentA), g.agentToken(oboAgentB)
	csA, csB := g.session(ta), g.session(tb)
	r1 := g.call(csA, "get_balance", `{"account":"main"}`)
	r2 := g.call(csB, "get_balance", `{"account":"main"}`)
	before := g.idp.TokenRequests()
	r3 := g.call(csA, "get_balance", `{"account":"savings"}`)
	for _, r := range []*mcp.CallToolResult{r1, r2, r3} {
		if r.IsError {
			t.Fatalf("call refused: %s", resultText(r))
		}
	}
	if g.up.Count("get_balance") != 3 || g.refused.Load() != 0 {
		t.Fatalf("upstream ran %d, refused %d", g.up.Count("get_balance"), g.refused.Load())
	}
	if n := g.idp.TokenRequests() - before; n != 0 {
		t.Fatalf("%d requests to the provider for a cached agent token", n)
	}
	subjects, _, _ := g.record()
	if !slices.Contains(subjects, oboAgentA) || !slices.Contains(subjects, oboAgentB) {
		t.Fatalf("the upstream saw subjects %v, want both %s and %s", subjects, oboAgentA, oboAgentB)
	}
	for _, s := range subjects {
		if s != oboAgentA && s != oboAgentB {
			t.Fatalf("the upstream saw subject %q", s)
		}
	}
	g.checkNoPassthrough([]string{ta, tb}, r1, r2, r3)
}

// TestUpstreamOBO2026: on the 2026-07-28 revision (no session: each request carries its own
// token, and the call may run on a held exchange), each agent's call reaches the upstream under
// that agent's subject, and the agent's token is never sent upstream.
func TestUpstreamOBO2026(t *testing.T) {
	g := startOBO(t, "", time.Minute)
	ta, tb := g.agentToken(oboAgentA), g.agentToken(oboAgentB)
	csA, _ := g.sessionAt(ta, "2026-07-28")
	csB, _ := g.sessionAt(tb, "2026-07-28")
	if v := csA.InitializeResult().ProtocolVersion; v != "2026-07-28" {
		t.Fatalf("the session runs %s, want 2026-07-28", v)
	}
	r1 := g.call(csA, "get_balance", `{"account":"main"}`)
	r2 := g.call(csB, "get_balance", `{"account":"main"}`)
	for _, r := range []*mcp.CallToolResult{r1, r2} {
		if r.IsError {
			t.Fatalf("call refused: %s", resultText(r))
		}
	}
	if g.up.Count("get_balance") != 2 || g.refused.Load() != 0 {
		t.Fatalf("upstream ran %d, refused %d", g.up.Count("get_balance"), g.refused.Load())
	}
	subjects, _, _ := g.record()
	if !slices.Contains(subjects, oboAgentA) || !slices.Contains(subjects, oboAgentB) {
		t.Fatalf("the upstream saw subjects %v, want both %s and %s", subjects, oboAgentA, oboAgentB)
	}
	for _, s := range subjects {
		if s != oboAgentA && s != oboAgentB {
			t.Fatalf("the upstream saw subject %q", s)
		}
	}
	g.checkNoPassthrough([]string{ta, tb}, r1, r2)
}

// TestUpstreamOBOActor: with actorTokenFile (the gate's own token of the provider,
// actorTokenType access_token), the upstream's token names the agent as sub and the gate as
// act.sub (RFC 8693 §4.1 delegation).
func TestUpstreamOBOActor(t *testing.T) {
	// The actor token is a token of the gate's client; the provider is started by startOBO, so
	// the file is written after it, before the first call reads it.
	actor := filepath.Join(t.TempDir(), "actor.token")
	if err := os.WriteFile(actor, []byte("placeholder\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	g := startOBO(t, fmt.Sprintf("    actorTokenFile: %s\n    actorTokenType: urn:ietf:params:oauth:token-type:access_token\n", actor), time.Minute)
	if err := os.WriteFile(actor, []byte(g.agentToken(oboGateID)+"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	ta := g.agentToken(oboAgentA)
	r := g.call(g.session(ta), "get_balance", `{"account":"main"}`)
	if r.IsError {
		t.Fatalf("call refused: %s", resultText(r))
	}
	subjects, actors, _ := g.record()
	i := slices.Index(subjects, oboAgentA)
	if i < 0 || actors[i] != oboGateID {
		t.Fatalf("the upstream saw subjects %v, actors %v; want sub %s act.sub %s", subjects, actors, oboAgentA, oboGateID)
	}
	g.checkNoPassthrough([]string{ta}, r)
}

// TestUpstreamOBOIdPDown: the provider goes down while an agent's exchanged token is cached;
// once that token nears its expiry, the agent's next call cannot be exchanged: it is not sent
// (the upstream's count stays), the agent gets EF_UPSTREAM_IDP_UNAVAILABLE, and the act is
// FAILED, never INDETERMINATE. A second agent, whose token the gate verifies with the keys it
// holds, is refused at initialize with the same code (its upstream session needs an exchange).
func TestUpstreamOBOIdPDown(t *testing.T) {
	g := startOBO(t, "", 3*time.Second)
	start := time.Now()
	ta, tb := g.agentToken(oboAgentA), g.agentToken(oboAgentB)
	cs := g.session(ta)
	if r := g.call(cs, "get_balance", `{"account":"main"}`); r.IsError {
		t.Fatalf("call refused: %s", resultText(r))
	}
	g.idp.Stop()
	hc := oauth2.NewClient(context.Background(), oauth2.StaticTokenSource(&oauth2.Token{AccessToken: tb, TokenType: "Bearer"}))
	_, err := mcp.NewClient(&mcp.Implementation{Name: "obo-agent", Version: "v1"}, nil).Connect(context.Background(),
		&mcp.StreamableClientTransport{Endpoint: g.base + mcpproxy.Path("finance"), HTTPClient: hc}, &mcp.ClientSessionOptions{ProtocolVersion: "2025-11-25"})
	if err == nil || !strings.Contains(err.Error(), string(ef.EFUpstreamIDPUnavailable)) {
		t.Fatalf("initialize of a second agent with the provider down: %v", err)
	}
	_, _, seen := g.record()
	time.Sleep(time.Until(start.Add(4 * time.Second)))
	res := g.call(cs, "email_send", `{"to":"carol@example.com"}`)
	if !res.IsError || efCodeOf(res) != string(ef.EFUpstreamIDPUnavailable) {
		t.Fatalf("want EF_UPSTREAM_IDP_UNAVAILABLE, got isError %v code %q: %s", res.IsError, efCodeOf(res), resultText(res))
	}
	if _, _, now := g.record(); len(now) != len(seen) || g.up.Count("email_send") != 0 {
		t.Fatalf("the upstream saw %d more requests, ran email_send %d times", len(now)-len(seen), g.up.Count("email_send"))
	}
	if out := outcomeStates(g.testGate); strings.Join(out, ",") != "FAILED" {
		t.Fatalf("outcomes %v, want the email's FAILED", out)
	}
}

// TestUpstreamOBOExpiredAgentToken: a payment escalated to a binding moment under an agent
// token that expires before the principal resolves it: the agent's call with the expired token
// is refused at the gate (401) and nothing runs; the same agent session with a fresh token gets
// the resolved call run once, under its subject (the exchange uses the token of the call that
// runs, not the one the call was escalated under).
func TestUpstreamOBOExpiredAgentToken(t *testing.T) {
	g := startOBO(t, "", time.Minute)
	short := g.agentToken(oboShort)
	exp := time.Now().Add(3 * time.Second)
	cs, src := g.sessionSwap(short)
	id := escalate(t, cs, `{"to":"bob","amount":250}`)
	if code, out, errOut := g.cli("resolve", id, "--as", "alice", "--option", "1"); code != exitOK {
		t.Fatalf("resolve: %d %q %q", code, out, errOut)
	}
	time.Sleep(time.Until(exp.Add(500 * time.Millisecond)))
	// The session's call under the expired token (a raw POST: the SDK client ends its session on
	// a 401).
	req, err := http.NewRequest(http.MethodPost, g.base+mcpproxy.Path("finance"), strings.NewReader(
		`{"jsonrpc":"2.0","id":77,"method":"tools/call","params":{"name":"send_payment","arguments":{"amount":250,"to":"bob"}}}`))
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Accept", "application/json, text/event-stream")
	req.Header.Set("Mcp-Session-Id", cs.ID())
	req.Header.Set("Mcp-Protocol-Version", "2025-11-25")
	req.Header.Set("Authorization", "Bearer "+short)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	_ = resp.Body.Close()
	if resp.StatusCode != http.StatusUnauthorized {
		t.Fatalf("a call with an expired agent token: HTTP %d, want 401", resp.StatusCode)
	}
	if g.up.Count("send_payment") != 0 {
		t.Fatal("the payment ran on an expired agent token")
	}
	fresh := g.agentToken(oboShort)
	src.tok.Store(&fresh)
	res := g.call(cs, "send_payment", `{"amount":250,"to":"bob"}`)
	if res.IsError || g.up.Count("send_payment") != 1 {
		t.Fatalf("resolved call with a fresh token: %s; ran %d", resultText(res), g.up.Count("send_payment"))
	}
	// The same session's call without Mcp-Protocol-Version goes through the SDK's handler, whose
	// handlers get the session's context (of the initialize, under the expired token): the
	// exchange still uses this request's fresh token, and the call runs.
	post := func(body string) (int, string) {
		req, err := http.NewRequest(http.MethodPost, g.base+mcpproxy.Path("finance"), strings.NewReader(body))
		if err != nil {
			t.Fatal(err)
		}
		req.Header.Set("Content-Type", "application/json")
		req.Header.Set("Accept", "application/json, text/event-stream")
		req.Header.Set("Mcp-Session-Id", cs.ID())
		req.Header.Set("Authorization", "Bearer "+fresh)
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		b, _ := io.ReadAll(io.LimitReader(resp.Body, 1<<20))
		return resp.StatusCode, string(b)
	}
	code, body := post(`{"jsonrpc":"2.0","id":78,"method":"tools/call","params":{"name":"get_balance","arguments":{"account":"main"}}}`)
	if code != http.StatusOK || strings.Contains(body, `"isError":true`) || g.up.Count("get_balance") != 1 {
		t.Fatalf("SDK-path call with a fresh token: HTTP %d %s; ran %d", code, body, g.up.Count("get_balance"))
	}
	subjects, _, _ := g.record()
	if !slices.Contains(subjects, oboShort) {
		t.Fatalf("the upstream saw subjects %v", subjects)
	}
	g.checkNoPassthrough([]string{short, fresh}, res)
}

// TestUpstreamOBOConfigNeedsAgentOAuth: subject: agent with static agent tokens is refused at
// load, naming the field, so no call is ever sent with another identity.
func TestUpstreamOBOConfigNeedsAgentOAuth(t *testing.T) {
	dir := t.TempDir()
	static := filepath.Join(dir, "finance.token")
	doc := strings.Replace(string(demoConfig("https://upstream.example/mcp", filepath.Join(dir, "data"), static)),
		fmt.Sprintf("  bearerTokenFile: %q\n", static), `  oauth:
    grant: token_exchange
    subject: agent
    tokenURL: https://idp.example/oauth/token
`, 1)
	f := filepath.Join(dir, "actgate.yaml")
	if err := os.WriteFile(f, []byte(doc), 0o600); err != nil {
		t.Fatal(err)
	}
	_, err := gateconfig.Load(f)
	if err == nil || !strings.Contains(err.Error(), "upstreams[0].oauth.subject") || !strings.Contains(err.Error(), "agent.authentication: oauth") {
		t.Fatalf("load: %v", err)
	}
}

// outcomeStates stops the gate and returns the states of its verified outcome receipts.
func outcomeStates(g *testGate) []string {
	g.t.Helper()
	return (&upOAuth{testGate: g}).outcomes()
}
