package attacks

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
	"github.com/actgate/actgate/internal/journal"
	"github.com/actgate/actgate/internal/mcpproxy"
	"github.com/actgate/actgate/internal/mcpproxy/mcptest"
	"github.com/actgate/actgate/internal/sink"
	"github.com/actgate/actgate/test/testutil"
)

// The standalone rows mount their attack on the parts `actgate serve` wires — gateconfig, the
// bbolt store, the sink, one MCP proxy per server — with the official Go SDK's client as the
// agent and SDK servers (mcptest) as the upstreams, all over loopback HTTP. The pattern is
// test/conformance's, copied rather than imported (test packages do not import each other).

const (
	payToken  = "pay-upstream-token"
	agentName = "attack-agent" // testdata/actgate.yaml agent.name
	principal = "alice"        // the principal the policy names for payouts and checkout
)

type upstreams struct {
	tools, pay, browser *mcptest.Server
}

// startUpstream runs a counting MCP server with the named tools; each answers with its own name
// and arguments.
func startUpstream(t testing.TB, name string, tools ...string) *mcptest.Server {
	t.Helper()
	var ts []mcptest.Tool
	for _, tl := range tools {
		ts = append(ts, mcptest.Tool{Name: tl, Handler: func(_ context.Context, args json.RawMessage) (*mcp.CallToolResult, error) {
			return mcptest.Text(tl + " " + string(args)), nil
		}})
	}
	s, err := mcptest.Start(ts, mcptest.Options{Name: name})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = s.Close() })
	return s
}

// gate is testdata/actgate.yaml's gate, in-process.
type gate struct {
	t     testing.TB
	cfg   *gateconfig.Config
	store *boltstore.Store
	sink  *sink.Gate
	up    *upstreams
	srv   *httptest.Server
}

func newGate(t testing.TB) *gate {
	t.Helper()
	u := &upstreams{
		tools:   startUpstream(t, "tools", "search", "ticket_create", "email_send"),
		pay:     startUpstream(t, "pay", "payout_create"),
		browser: startUpstream(t, "browser", "computer_submit"),
	}
	dir := filepath.Join(t.TempDir(), "data")
	raw, err := os.ReadFile("testdata/actgate.yaml")
	if err != nil {
		t.Fatal(err)
	}
	tok := filepath.Join(filepath.Dir(dir), "pay.token")
	if err := os.WriteFile(tok, []byte(payToken+"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	conf := strings.NewReplacer("{{DATA}}", dir, "{{PAYTOKEN}}", tok, "{{TOOLS}}", u.tools.URL,
		"{{PAY}}", u.pay.URL, "{{BROWSER}}", u.browser.URL).Replace(string(raw))
	cfg, err := gateconfig.Parse([]byte(conf), "")
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
	ids, err := act.NewIDIssuer([]byte("attacks-act-id-key-0123456789abcd"), nil)
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

// proxy is the gate's MCP proxy for server, contacting url (the policy's, or a swapped one).
func (g *gate) proxy(server, url string) *mcpproxy.Proxy {
	g.t.Helper()
	cred, err := g.cfg.Upstream(server).Credential()
	if err != nil {
		g.t.Fatal(err)
	}
	var credOrigin string
	for _, s := range g.cfg.Policy.Servers {
		if s.Name == server {
			credOrigin = s.URL
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
	return s.URL + mcpproxy.Path(server)
}

func (g *gate) endpoint(server string) string { return g.srv.URL + mcpproxy.Path(server) }

// journaled counts the journal's records in every state: an attack refused before consume
// leaves no record.
func (g *gate) journaled() int {
	g.t.Helper()
	n := 0
	for _, s := range []journal.State{journal.StateConsumed, journal.StateDispatchPending, journal.StateInvoked,
		journal.StateExecuted, journal.StateFailed, journal.StateIndeterminate} {
		recs, err := g.store.InState(context.Background(), s)
		if err != nil {
			g.t.Fatal(err)
		}
		n += len(recs)
	}
	return n
}

// authorityState reads an issued authority's state from the store.
func (g *gate) authorityState(id string) authority.State {
	g.t.Helper()
	rec, err := g.store.Get(context.Background(), "", id)
	if err != nil {
		g.t.Fatalf("authority %s: %v", id, err)
	}
	return rec.State
}

// moment returns the registered moment id.
func (g *gate) moment(id string) sink.Moment {
	g.t.Helper()
	ms, err := g.sink.Moments(context.Background(), sink.MomentFilter{})
	if err != nil {
		g.t.Fatal(err)
	}
	for _, m := range ms {
		if m.ID == id {
			return m
		}
	}
	g.t.Fatalf("no moment %s", id)
	return sink.Moment{}
}

// momentCount is how many binding moments the gate holds.
func (g *gate) momentCount() int {
	g.t.Helper()
	ms, err := g.sink.Moments(context.Background(), sink.MomentFilter{})
	if err != nil {
		g.t.Fatal(err)
	}
	return len(ms)
}

// agent is an MCP client session (the SDK's) to endpoint.
func agent(t testing.TB, endpoint string) *mcp.ClientSession {
	t.Helper()
	c := mcp.NewClient(&mcp.Implementation{Name: "attacker", Version: "v1"}, nil)
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

// text joins a result's text blocks.
func text(r *mcp.CallToolResult) string { return testutil.Text(r) }

// refused checks that r is a refusal with code whose §17 error object says invoked=false.
func refused(t testing.TB, r *mcp.CallToolResult, want string) {
	t.Helper()
	if code(r) != want {
		t.Fatalf("code %q, want %s (meta %v) %s", code(r), want, r.Meta, text(r))
	}
	b, _ := json.Marshal(r.StructuredContent)
	var sc struct {
		Error struct {
			Invoked *bool `json:"invoked"`
		} `json:"error"`
	}
	if err := json.Unmarshal(b, &sc); err != nil || sc.Error.Invoked == nil || *sc.Error.Invoked || !r.IsError {
		t.Fatalf("refusal is not an isError result with invoked=false: %s", b)
	}
}

// escalation returns the moment id and envelope digest an escalation or a registered proposal
// carries.
func escalation(t testing.TB, r *mcp.CallToolResult) (string, string) {
	t.Helper()
	id, _ := r.Meta[mcpproxy.MetaMomentID].(string)
	digest, _ := r.Meta[mcpproxy.MetaEnvelopeDigest].(string)
	if id == "" || !strings.HasPrefix(digest, "sha256:") {
		t.Fatalf("not a binding moment: %+v %s", r.Meta, text(r))
	}
	return id, digest
}

// resolution is the §7.3 resolution object of an option choice, wrapped as envelope-04 §8.3
// delivers it.
func resolution(digest string, option int) []byte {
	b, _ := json.Marshal(map[string]any{envelope.MemberResolution: map[string]any{
		"envelope_digest": digest, "resolution": "option", "option_idx": option}})
	return b
}

// resolve has who choose option of a moment.
func (g *gate) resolve(momentID, who string, raw []byte) (sink.ResolveResult, error) {
	return g.sink.Resolve(context.Background(), momentID, who, raw)
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
