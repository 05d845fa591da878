package conformance

import (
	"context"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/go-logr/logr"
	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/actgate/actgate/internal/act"
	"github.com/actgate/actgate/internal/authority"
	"github.com/actgate/actgate/internal/authority/boltstore"
	"github.com/actgate/actgate/internal/envelope"
	"github.com/actgate/actgate/internal/gateconfig"
	"github.com/actgate/actgate/internal/mcpproxy"
	"github.com/actgate/actgate/internal/mcpproxy/mcptest"
	"github.com/actgate/actgate/internal/sink"
	"github.com/actgate/actgate/test/testutil"
)

const payToken = "pay-upstream-token"

// upstreams are the three MCP servers of the conformance policy.
type upstreams struct {
	tools, pay, browser *mcptest.Server
}

func startUpstreams(t testing.TB) *upstreams {
	t.Helper()
	u := &upstreams{
		tools:   startUpstream(t, "tools", "search", "ticket_create", "email_send"),
		pay:     startUpstream(t, "pay", "payout_create"),
		browser: startUpstream(t, "browser", "computer_submit"),
	}
	return u
}

// startUpstream runs a counting MCP server with the named tools; each answers with its own
// name and arguments.
func startUpstream(t testing.TB, name string, tools ...string) *mcptest.Server {
	t.Helper()
	var ts []mcptest.Tool
	for _, tl := range tools {
		ts = append(ts, mcptest.Tool{Name: tl, Handler: func(_ context.Context, args json.RawMessage) (*mcp.CallToolResult, error) {
			return mcptest.Text(tl + " " + string(args)), nil
		}})
	}
	s, err := mcptest.Start(ts, mcptest.Options{Name: name, Samples: true})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = s.Close() })
	return s
}

// config renders testdata/actgate.yaml for these upstreams and data dir.
func config(t testing.TB, u *upstreams, dataDir string) []byte {
	t.Helper()
	raw, err := os.ReadFile("testdata/actgate.yaml")
	if err != nil {
		t.Fatal(err)
	}
	tok := filepath.Join(filepath.Dir(dataDir), "pay.token")
	if err := os.WriteFile(tok, []byte(payToken+"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	return []byte(strings.NewReplacer("{{DATA}}", dataDir, "{{PAYTOKEN}}", tok, "{{TOOLS}}", u.tools.URL,
		"{{PAY}}", u.pay.URL, "{{BROWSER}}", u.browser.URL).Replace(string(raw)))
}

// gate is the conformance policy's gate, in-process: the same parts `actgate serve` wires
// (gateconfig, bbolt store, sink, one MCP proxy per server), served over loopback HTTP.
type gate struct {
	t     testing.TB
	cfg   *gateconfig.Config
	store *boltstore.Store
	sink  *sink.Gate
	up    *upstreams
	srv   *httptest.Server
	// swaps are proxies whose URL is not the policy's: a swapped server (T-D) or a changed
	// origin (T-E), served by extra httptest servers.
	swaps []*httptest.Server
}

func newGate(t testing.TB) *gate {
	t.Helper()
	u := startUpstreams(t)
	dir := filepath.Join(t.TempDir(), "data")
	cfg, err := gateconfig.Parse(config(t, u, dir), "")
	if err != nil {
		t.Fatal(err)
	}
	if err := os.MkdirAll(dir, 0o700); err != nil {
		t.Fatal(err)
	}
	signer, err := authority.LoadOrCreateKey(cfg.Path(gateconfig.AuthorityKeyFile))
	if err != nil {
		t.Fatal(err)
	}
	st, err := boltstore.Open(cfg.Path(gateconfig.StoreFile), boltstore.Options{Verifier: signer.Verifier()})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = st.Close() })
	ids, err := act.NewIDIssuer([]byte("conformance-act-id-key-0123456789"), nil)
	if err != nil {
		t.Fatal(err)
	}
	compiled, err := cfg.Compile()
	if err != nil {
		t.Fatal(err)
	}
	sg, err := sink.New(sink.Options{SinkID: cfg.SinkID, Policy: sink.CompiledPolicy(compiled), Store: st, Journal: st,
		Signer: signer, IDs: ids, Log: logr.Discard()})
	if err != nil {
		t.Fatal(err)
	}
	g := &gate{t: t, cfg: cfg, store: st, sink: sg, up: u}
	mux := http.NewServeMux()
	for _, s := range cfg.Policy.Servers {
		mux.Handle(mcpproxy.Path(s.Name), g.proxy(s.Name, s.URL))
	}
	g.srv = httptest.NewServer(mux)
	t.Cleanup(g.srv.Close)
	return g
}

// proxy is the gate's MCP proxy for server, contacting url.
func (g *gate) proxy(server, url string) *mcpproxy.Proxy {
	g.t.Helper()
	cred, err := g.cfg.Upstream(server).Credential()
	if err != nil {
		g.t.Fatal(err)
	}
	var credOrigin string
	for _, s := range g.cfg.Policy.Servers {
		if s.Name == server {
			credOrigin = s.URL // the credential belongs to the policy's server, wherever the proxy points
		}
	}
	p, err := mcpproxy.New(mcpproxy.Config{Server: server, URL: url, Gate: g.sink, Agent: g.cfg.Agent.Name,
		Credential: cred, CredentialOrigin: credOrigin, TrustDeclaredProvenance: g.cfg.Agent.TrustDeclaredProvenance,
		CallTimeout: g.cfg.Timeout()})
	if err != nil {
		g.t.Fatal(err)
	}
	g.t.Cleanup(func() { _ = p.Close() })
	return p
}

// swapped serves the proxy of server as if its upstream were url, and returns its endpoint.
func (g *gate) swapped(server, url string) string {
	g.t.Helper()
	mux := http.NewServeMux()
	mux.Handle(mcpproxy.Path(server), g.proxy(server, url))
	s := httptest.NewServer(mux)
	g.t.Cleanup(s.Close)
	g.swaps = append(g.swaps, s)
	return s.URL + mcpproxy.Path(server)
}

// endpoint is the agent-facing MCP endpoint of a server.
func (g *gate) endpoint(server string) string { return g.srv.URL + mcpproxy.Path(server) }

// agent is an MCP client session (the SDK's) to endpoint.
func agent(t testing.TB, endpoint string) *mcp.ClientSession {
	t.Helper()
	c := mcp.NewClient(&mcp.Implementation{Name: "conformance-agent", Version: "v1"}, nil)
	cs, err := c.Connect(context.Background(), &mcp.StreamableClientTransport{Endpoint: endpoint, DisableStandaloneSSE: true}, nil)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = cs.Close() })
	return cs
}

// call makes one tools/call; provenance "" declares none.
func call(t testing.TB, cs *mcp.ClientSession, tool, args, provenance string) *mcp.CallToolResult {
	t.Helper()
	p := &mcp.CallToolParams{Name: tool, Arguments: json.RawMessage(args)}
	if provenance != "" {
		p.Meta = mcp.Meta{mcpproxy.MetaProvenance: provenance}
	}
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	res, err := cs.CallTool(ctx, p)
	if err != nil {
		t.Fatalf("tools/call %s: %v", tool, err)
	}
	return res
}

func code(r *mcp.CallToolResult) string { return testutil.MetaString(r, mcpproxy.MetaEFCode) }

// invokedFalse checks the refusal's §17 error object says invoked=false.
func invokedFalse(t testing.TB, r *mcp.CallToolResult) {
	t.Helper()
	b, _ := json.Marshal(r.StructuredContent)
	var sc struct {
		Error struct {
			Invoked *bool `json:"invoked"`
		} `json:"error"`
	}
	if err := json.Unmarshal(b, &sc); err != nil || sc.Error.Invoked == nil || *sc.Error.Invoked || !r.IsError {
		t.Errorf("refusal is not an isError result with invoked=false: %s", b)
	}
}

// resolveOption has alice choose an option of the moment an escalation returned.
func (g *gate) resolveOption(r *mcp.CallToolResult, option int) {
	g.t.Helper()
	id, _ := r.Meta[mcpproxy.MetaMomentID].(string)
	digest, _ := r.Meta[mcpproxy.MetaEnvelopeDigest].(string)
	if id == "" || !strings.HasPrefix(digest, "sha256:") {
		g.t.Fatalf("not an escalation: %+v", r.Meta)
	}
	b, _ := json.Marshal(map[string]any{envelope.MemberResolution: map[string]any{
		"envelope_digest": digest, "resolution": "option", "option_idx": option}})
	rr, err := g.sink.Resolve(context.Background(), id, "alice", b)
	if err != nil || rr.AuthorityID == "" {
		g.t.Fatalf("resolve %s: %+v %v", id, rr, err)
	}
}

// parallel runs fns at once and waits for all.
func parallel(fns ...func()) {
	var wg sync.WaitGroup
	for _, f := range fns {
		wg.Add(1)
		go func() { defer wg.Done(); f() }()
	}
	wg.Wait()
}
