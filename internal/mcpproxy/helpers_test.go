package mcpproxy

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/actgate/actgate/internal/act"
	"github.com/actgate/actgate/internal/authority/boltstore"
	"github.com/actgate/actgate/internal/mcpproxy/mcptest"
	"github.com/actgate/actgate/internal/policy"
	"github.com/actgate/actgate/internal/sink"
	"github.com/actgate/actgate/test/testutil"
)

const (
	agentName   = "agent-1"
	upstreamTok = "upstream-secret-token-7f3a"
)

// bankTools are the test upstream's tools; send_payment and ticket_create answer with what
// they did so tests can compare results.
func bankTools() []mcptest.Tool {
	return []mcptest.Tool{
		{Name: "get_balance", Description: "Reads a balance.", Annotations: &mcp.ToolAnnotations{ReadOnlyHint: true}},
		{Name: "ticket_create", Handler: func(_ context.Context, args json.RawMessage) (*mcp.CallToolResult, error) {
			return mcptest.Text("ticket created: " + string(args)), nil
		}},
		{Name: "email_send", Description: "Sends an email."},
		{Name: "send_payment", Description: "Sends money.", Handler: func(_ context.Context, args json.RawMessage) (*mcp.CallToolResult, error) {
			return mcptest.Text("paid: " + string(args)), nil
		}},
		{Name: "refuse", Handler: func(context.Context, json.RawMessage) (*mcp.CallToolResult, error) {
			return mcptest.ErrorText("insufficient funds"), nil
		}},
	}
}

// fixture is a real gate (compiled policy, bbolt store) behind a real proxy, in front of a real
// upstream MCP server, all over loopback HTTP.
type fixture struct {
	t      *testing.T
	up     *mcptest.Server
	store  *boltstore.Store
	gate   *sink.Gate
	proxy  *Proxy
	server *httptest.Server
}

type fixtureOpts struct {
	upstream  mcptest.Options
	tools     []mcptest.Tool
	proxyURL  string // the URL the proxy contacts, when not the policy's (a swapped server)
	configure func(*Config)
}

func newFixture(t *testing.T, o fixtureOpts) *fixture {
	t.Helper()
	if o.tools == nil {
		o.tools = bankTools()
	}
	up, err := mcptest.Start(o.tools, o.upstream)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = up.Close() })
	f := &fixture{t: t, up: up}
	f.store, f.gate = newGate(t, up.URL)
	url := up.URL
	if o.proxyURL != "" {
		url = o.proxyURL
	}
	cfg := Config{
		Server: "bank", URL: url, Gate: f.gate, Agent: agentName,
		Credential:              func(context.Context) (string, error) { return upstreamTok, nil },
		TrustDeclaredProvenance: true,
		CallTimeout:             5 * time.Second,
	}
	if o.configure != nil {
		o.configure(&cfg)
	}
	f.proxy, err = New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	mux := http.NewServeMux()
	mux.Handle(Path("bank"), f.proxy)
	f.server = httptest.NewServer(mux)
	t.Cleanup(func() {
		_ = f.proxy.Close()
		f.server.Close()
	})
	return f
}

// newGate builds the sink on a fresh bbolt store with testdata/policy.yaml, its bank server at
// bankURL.
func newGate(t *testing.T, bankURL string) (*boltstore.Store, *sink.Gate) {
	t.Helper()
	raw, err := os.ReadFile("testdata/policy.yaml")
	if err != nil {
		t.Fatal(err)
	}
	spec, err := policy.ParseSpec(bytes.ReplaceAll(raw, []byte("{{BANK}}"), []byte(bankURL)))
	if err != nil {
		t.Fatal(err)
	}
	compiled, err := policy.Compile("default/proxy-test", spec, 1)
	if err != nil {
		t.Fatal(err)
	}
	st, signer := testutil.SeededStore(t, "mcpproxy tests")
	ids, err := act.NewIDIssuer([]byte("0123456789abcdef0123456789abcdef"), nil)
	if err != nil {
		t.Fatal(err)
	}
	g, err := sink.New(sink.Options{SinkID: "proxy-test", Policy: sink.CompiledPolicy(compiled), Store: st, Journal: st, Signer: signer, IDs: ids})
	if err != nil {
		t.Fatal(err)
	}
	return st, g
}

// endpoint is the agent-facing URL of the bank proxy.
func (f *fixture) endpoint() string { return f.server.URL + Path("bank") }

// agent connects a real MCP client (the SDK's) to the proxy.
func (f *fixture) agent() *mcp.ClientSession {
	f.t.Helper()
	return connect(f.t, f.endpoint())
}

// sessionOpts pins a test client to the stateful revision: the session path is what those
// tests exercise (a client left at the SDK's latest version speaks 2026-07-28 through the gate,
// stateless_test.go).
var sessionOpts = &mcp.ClientSessionOptions{ProtocolVersion: "2025-11-25"}

func connect(t *testing.T, endpoint string) *mcp.ClientSession {
	t.Helper()
	c := mcp.NewClient(&mcp.Implementation{Name: "test-agent", Version: "v1"}, nil)
	cs, err := c.Connect(context.Background(), &mcp.StreamableClientTransport{Endpoint: endpoint}, sessionOpts)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = cs.Close() })
	return cs
}

// call makes one tools/call as the agent.
func call(t *testing.T, cs *mcp.ClientSession, tool, args string, meta mcp.Meta) *mcp.CallToolResult {
	t.Helper()
	res, err := cs.CallTool(context.Background(), &mcp.CallToolParams{Name: tool, Arguments: json.RawMessage(args), Meta: meta})
	if err != nil {
		t.Fatalf("tools/call %s: %v", tool, err)
	}
	return res
}

// text joins a result's text blocks.
func text(r *mcp.CallToolResult) string { return testutil.Text(r) }

// efCode is the EF code a refusal carries in _meta.
func efCode(r *mcp.CallToolResult) string { return testutil.MetaString(r, MetaEFCode) }

// rawSession is an MCP client written by hand over net/http, to see the JSON-RPC responses
// exactly as they are on the wire.
type rawSession struct {
	t        *testing.T
	endpoint string
	session  string
	version  string
	next     int
}

func newRawSession(t *testing.T, endpoint string) *rawSession {
	t.Helper()
	r := &rawSession{t: t, endpoint: endpoint, next: 1}
	resp, hdr := r.post(`{"jsonrpc":"2.0","id":0,"method":"initialize","params":{"protocolVersion":"2025-06-18","capabilities":{},"clientInfo":{"name":"raw","version":"1"}}}`)
	r.session = hdr.Get("Mcp-Session-Id")
	if r.session == "" {
		t.Fatalf("initialize: no session id: %s", resp)
	}
	var init struct {
		Result struct {
			ProtocolVersion string `json:"protocolVersion"`
		} `json:"result"`
	}
	if err := json.Unmarshal(resp, &init); err != nil {
		t.Fatalf("initialize: %v: %s", err, resp)
	}
	r.version = init.Result.ProtocolVersion
	r.post(`{"jsonrpc":"2.0","method":"notifications/initialized"}`)
	return r
}

// request sends one request with the given id text and returns the response message.
func (r *rawSession) request(id, method, params string) json.RawMessage {
	r.t.Helper()
	body := fmt.Sprintf(`{"jsonrpc":"2.0","id":%s,"method":%q,"params":%s}`, id, method, params)
	resp, _ := r.post(body)
	return resp
}

// post sends one message and returns the (single) JSON-RPC message of the response, from a
// JSON body or the first SSE data event.
func (r *rawSession) post(body string) (json.RawMessage, http.Header) {
	r.t.Helper()
	req, err := http.NewRequest(http.MethodPost, r.endpoint, strings.NewReader(body))
	if err != nil {
		r.t.Fatal(err)
	}
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Accept", "application/json, text/event-stream")
	req.Header.Set("Authorization", "Bearer agent-credential-must-not-travel")
	if r.session != "" {
		req.Header.Set("Mcp-Session-Id", r.session)
	}
	if r.version != "" {
		req.Header.Set("Mcp-Protocol-Version", r.version)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		r.t.Fatal(err)
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		r.t.Fatal(err)
	}
	if resp.StatusCode >= 300 {
		r.t.Fatalf("POST %s: HTTP %d: %s", body, resp.StatusCode, b)
	}
	if strings.HasPrefix(resp.Header.Get("Content-Type"), "text/event-stream") {
		for _, line := range strings.Split(string(b), "\n") {
			if d, ok := strings.CutPrefix(line, "data: "); ok && d != "" { // not a priming event
				return json.RawMessage(d), resp.Header
			}
		}
		return nil, resp.Header
	}
	return json.RawMessage(b), resp.Header
}

// serveProxy starts the proxy cfg configures behind a test HTTP server, at Path(cfg.Server);
// the proxy and the server are closed when tb's test ends. It returns the proxy, the server and
// the proxy's endpoint.
func serveProxy(tb testing.TB, cfg Config) (*Proxy, *httptest.Server, string) {
	tb.Helper()
	p, err := New(cfg)
	if err != nil {
		tb.Fatal(err)
	}
	mux := http.NewServeMux()
	mux.Handle(Path(cfg.Server), p)
	srv := httptest.NewServer(mux)
	tb.Cleanup(func() {
		_ = p.Close()
		srv.Close()
	})
	return p, srv, srv.URL + Path(cfg.Server)
}

// marshalled is v as JSON, for comparing results the SDK's client decoded.
func marshalled(t testing.TB, v any) string {
	t.Helper()
	b, err := json.Marshal(v)
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

// directAgent and directUpstream are how many tools/calls the session side's direct paths
// carried toward the agent and toward the upstream (agent2025.Handler.DirectCalls).
func (p *Proxy) directAgent() int64 {
	a, _ := p.v2025.DirectCalls()
	return a
}

func (p *Proxy) directUpstream() int64 {
	_, u := p.v2025.DirectCalls()
	return u
}
