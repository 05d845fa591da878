package mcpproxy

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"strings"
	"sync"
	"testing"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/actgate/actgate/internal/journal"
	"github.com/actgate/actgate/internal/mcpproxy/mcptest"
	"github.com/actgate/actgate/internal/mcpproxy/stateless"
	"github.com/actgate/actgate/internal/mcpproxy/wire"
)

// connect2026 connects the SDK's client pinned to MCP 2026-07-28, with the agent's bearer
// token when tok is set, and checks that it did not fall back to a session.
func connect2026(t *testing.T, endpoint, tok string) *mcp.ClientSession {
	t.Helper()
	var hc *http.Client
	if tok != "" {
		hc = &http.Client{Transport: bearerRT{tok}}
	}
	c := mcp.NewClient(&mcp.Implementation{Name: "test-agent-2026", Version: "v1"}, nil)
	cs, err := c.Connect(context.Background(), &mcp.StreamableClientTransport{Endpoint: endpoint, HTTPClient: hc}, &mcp.ClientSessionOptions{ProtocolVersion: "2026-07-28"})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = cs.Close() })
	if v := cs.InitializeResult().ProtocolVersion; v != "2026-07-28" || cs.ID() != "" {
		t.Fatalf("client fell back: version %q, session %q", v, cs.ID())
	}
	return cs
}

type bearerRT struct{ tok string }

func (b bearerRT) RoundTrip(r *http.Request) (*http.Response, error) {
	r = r.Clone(r.Context())
	r.Header.Set("Authorization", "Bearer "+b.tok)
	return http.DefaultTransport.RoundTrip(r)
}

// TestStateless2026 runs a 2026-07-28 client directly against each kind of upstream and
// through the gate: no fallback either way; the gate's tools/list additions; a permitted call
// runs once and its retry is the recorded result; a human-gated call never reaches the
// upstream.
func TestStateless2026(t *testing.T) {
	for _, tc := range []struct {
		name     string
		upstream mcptest.Options
	}{
		{"stateless upstream", mcptest.Options{Stateless: true, JSONResponse: true}},
		{"stateless upstream streaming", mcptest.Options{Stateless: true}},
		{"stateful upstream", mcptest.Options{}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			f := newFixture(t, fixtureOpts{upstream: tc.upstream})
			ctx := context.Background()
			if tc.upstream.Stateless {
				direct := connect2026(t, f.up.URL, "")
				if _, err := direct.CallTool(ctx, &mcp.CallToolParams{Name: "get_balance", Arguments: map[string]any{}}); err != nil {
					t.Fatalf("direct: %v", err)
				}
			}
			cs := connect2026(t, f.endpoint(), "")
			tools, err := cs.ListTools(ctx, nil)
			if err != nil {
				t.Fatal(err)
			}
			var names []string
			escalates := false
			for _, tool := range tools.Tools {
				names = append(names, tool.Name)
				if tool.Name == "send_payment" && tool.Meta[AnnotationEmitsBindingMoment] == true {
					escalates = true
				}
			}
			if !strings.Contains(strings.Join(names, ","), "request_binding_moment") || !escalates {
				t.Fatalf("tools/list lacks the gate's additions: %v (send_payment annotated: %v)", names, escalates)
			}
			before := f.up.Count("ticket_create")
			args := map[string]any{"title": "disk full " + tc.name}
			r1, err := cs.CallTool(ctx, &mcp.CallToolParams{Name: "ticket_create", Arguments: args})
			if err != nil {
				t.Fatal(err)
			}
			if r1.IsError || !strings.Contains(text(r1), "ticket created") {
				t.Fatalf("permitted call: %+v", r1)
			}
			r2, err := cs.CallTool(ctx, &mcp.CallToolParams{Name: "ticket_create", Arguments: args})
			if err != nil {
				t.Fatal(err)
			}
			if got := f.up.Count("ticket_create") - before; got != 1 {
				t.Fatalf("upstream ran ticket_create %d times for a call and its retry, want 1", got)
			}
			// The recorded result as first given (the replay is marked in an HTTP header the
			// SDK's client does not show: TestReplayKeepsContent).
			if j1, j2 := marshalled(t, r1), marshalled(t, r2); r2.IsError || j1 != j2 {
				t.Fatalf("retry is not the recorded result:\n first %s\n retry %s", j1, j2)
			}
			calls := f.up.Calls()
			if op, _ := calls[len(calls)-1].Meta[MetaOperationID].(string); op == "" {
				t.Fatal("the upstream did not receive the operation id")
			}
			pay, err := cs.CallTool(ctx, &mcp.CallToolParams{Name: "send_payment", Arguments: map[string]any{"amount": 5}})
			if err != nil {
				t.Fatal(err)
			}
			if !pay.IsError || efCode(pay) != "EF_ESCALATION_REQUIRED" || f.up.Count("send_payment") != 0 {
				t.Fatalf("human-gated call: code %q, upstream ran it %d times", efCode(pay), f.up.Count("send_payment"))
			}
			if pay.StructuredContent != nil {
				t.Fatalf("a 2026-07-28 refusal carries structuredContent: %v", pay.StructuredContent)
			}
		})
	}
}

// post2026 POSTs one 2026-07-28 message with the given standard headers.
func post2026(t *testing.T, endpoint, body string, hdr map[string]string) (int, map[string]any) {
	t.Helper()
	req, err := http.NewRequest(http.MethodPost, endpoint, strings.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Accept", "application/json, text/event-stream")
	for k, v := range hdr {
		req.Header.Set(k, v)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	raw, _ := io.ReadAll(resp.Body)
	if i := strings.Index(string(raw), "data: "); i >= 0 && strings.HasPrefix(resp.Header.Get("Content-Type"), "text/event-stream") {
		raw = []byte(strings.SplitN(string(raw[i+6:]), "\n", 2)[0])
	}
	var m map[string]any
	if err := json.Unmarshal(raw, &m); err != nil {
		t.Fatalf("HTTP %d: not JSON: %s", resp.StatusCode, raw)
	}
	return resp.StatusCode, m
}

const call2026 = `{"jsonrpc":"2.0","id":7,"method":"tools/call","params":{"name":"ticket_create","arguments":{"title":"x"},"_meta":{"io.modelcontextprotocol/protocolVersion":"2026-07-28","io.modelcontextprotocol/clientCapabilities":{}}}}`

// TestStatelessHeaderMismatch: a tools/call whose Mcp-Name or Mcp-Method names something else
// than its body is refused before the gate decides anything, and the upstream never sees it.
func TestStatelessHeaderMismatch(t *testing.T) {
	for _, tc := range []struct {
		name string
		hdr  map[string]string
	}{
		{"other name", map[string]string{"Mcp-Method": "tools/call", "Mcp-Name": "get_balance"}},
		{"other method", map[string]string{"Mcp-Method": "tools/list", "Mcp-Name": "ticket_create"}},
		{"no name", map[string]string{"Mcp-Method": "tools/call"}},
		{"no method", map[string]string{"Mcp-Name": "ticket_create"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			f := newFixture(t, fixtureOpts{upstream: mcptest.Options{Stateless: true}})
			tc.hdr["Mcp-Protocol-Version"] = "2026-07-28"
			status, m := post2026(t, f.endpoint(), call2026, tc.hdr)
			e, _ := m["error"].(map[string]any)
			data, _ := e["data"].(map[string]any)
			if status != http.StatusBadRequest || e["code"] != float64(wire.CodeHeaderMismatch) || data[MetaEFCode] != "EF_MCP_HEADER_MISMATCH" {
				t.Fatalf("HTTP %d %v", status, m)
			}
			if n := f.up.Count("ticket_create"); n != 0 {
				t.Fatalf("upstream ran the mismatched call %d times", n)
			}
		})
	}
	// The same request with agreeing headers runs, once.
	f := newFixture(t, fixtureOpts{upstream: mcptest.Options{Stateless: true}})
	status, m := post2026(t, f.endpoint(), call2026, map[string]string{"Mcp-Protocol-Version": "2026-07-28", "Mcp-Method": "tools/call", "Mcp-Name": "ticket_create"})
	res, _ := m["result"].(map[string]any)
	if status != http.StatusOK || res["resultType"] != "complete" || f.up.Count("ticket_create") != 1 {
		t.Fatalf("HTTP %d %v; upstream ran it %d times", status, m, f.up.Count("ticket_create"))
	}
}

// TestStatelessReplayBoundToAgent: the recorded result of one agent's call is not another
// agent's to collect: the same call from a second authenticated agent is its own act.
func TestStatelessReplayBoundToAgent(t *testing.T) {
	agents, err := NewBearerAgents(map[string][]byte{"agent-a": []byte("token-a-0123456789"), "agent-b": []byte("token-b-0123456789")})
	if err != nil {
		t.Fatal(err)
	}
	f := newFixture(t, fixtureOpts{upstream: mcptest.Options{Stateless: true}, configure: func(c *Config) { c.Agents = agents }})
	ctx := context.Background()
	args := map[string]any{"title": "shared"}
	a := connect2026(t, f.endpoint(), "token-a-0123456789")
	if _, err := a.CallTool(ctx, &mcp.CallToolParams{Name: "ticket_create", Arguments: args}); err != nil {
		t.Fatal(err)
	}
	b := connect2026(t, f.endpoint(), "token-b-0123456789")
	rb, err := b.CallTool(ctx, &mcp.CallToolParams{Name: "ticket_create", Arguments: args})
	if err != nil {
		t.Fatal(err)
	}
	if rb.IsError {
		t.Fatalf("agent b's call: %+v", rb)
	}
	if n := f.up.Count("ticket_create"); n != 2 {
		t.Fatalf("upstream ran ticket_create %d times for two agents' calls, want 2", n)
	}
	if stateless.Scope("bank", "agent-a") == stateless.Scope("bank", "agent-b") {
		t.Fatal("two agents share a scope")
	}
}

// TestStatelessStatefulUpstreamAnswers: in front of a stateful upstream, a 2026-07-28 agent
// gets what a 2026-07-28 server answers: the removed requests (ping, logging/setLevel,
// resources/subscribe and unsubscribe, initialize) HTTP 404 with -32601 from the gate itself,
// a method the upstream does not have the upstream's -32601 with HTTP 404, cacheable results and server/discover with the caching hints the revision
// requires (the upstream's where it gives them), and a request without client capabilities
// -32602 with HTTP 400.
func TestStatelessStatefulUpstreamAnswers(t *testing.T) {
	// The upstream answers foo/bar as the TypeScript SDK's server answers a method it does not
	// have: -32601 in an HTTP 200.
	notFound := func(w http.ResponseWriter, r *http.Request) bool {
		if r.Method != http.MethodPost {
			return false
		}
		body, _ := io.ReadAll(r.Body)
		r.Body = io.NopCloser(strings.NewReader(string(body)))
		var m struct {
			ID     json.RawMessage `json:"id"`
			Method string          `json:"method"`
		}
		if json.Unmarshal(body, &m) != nil || m.Method != "foo/bar" {
			return false
		}
		w.Header().Set("Content-Type", "application/json")
		_, _ = w.Write([]byte(`{"jsonrpc":"2.0","id":` + string(m.ID) + `,"error":{"code":-32601,"message":"Method not found"}}`))
		return true
	}
	f := newFixture(t, fixtureOpts{upstream: mcptest.Options{Intercept: notFound}})
	const meta = `"_meta":{"io.modelcontextprotocol/protocolVersion":"2026-07-28","io.modelcontextprotocol/clientCapabilities":{}}`
	post := func(method, params string) (int, map[string]any) {
		body := `{"jsonrpc":"2.0","id":3,"method":"` + method + `","params":{` + params + `}}`
		return post2026(t, f.endpoint(), body, map[string]string{"Mcp-Protocol-Version": "2026-07-28", "Mcp-Method": method})
	}
	for _, method := range []string{"ping", "logging/setLevel", "resources/subscribe", "resources/unsubscribe", "initialize", "foo/bar"} {
		params := meta
		switch method {
		case "logging/setLevel":
			params = `"level":"debug",` + meta
		case "resources/subscribe", "resources/unsubscribe":
			params = `"uri":"test://x",` + meta
		}
		status, m := post(method, params)
		e, _ := m["error"].(map[string]any)
		if status != http.StatusNotFound || e["code"] != float64(wire.CodeMethodNotFound) || m["id"] != float64(3) {
			t.Errorf("%s: HTTP %d %v, want 404 and -32601", method, status, m)
		}
	}
	for _, method := range []string{"tools/list", "server/discover"} {
		status, m := post(method, meta)
		res, _ := m["result"].(map[string]any)
		if _, ok := res["ttlMs"].(float64); status != http.StatusOK || !ok || res["cacheScope"] == nil || res["resultType"] != "complete" {
			t.Errorf("%s: HTTP %d %v, want the caching hints", method, status, m)
		}
	}
	if _, m := post("server/discover", meta); m["result"].(map[string]any)["cacheScope"] != "private" {
		t.Errorf("server/discover answered by the gate: %v, want cacheScope private", m)
	}
	status, m := post("tools/list", `"_meta":{"io.modelcontextprotocol/protocolVersion":"2026-07-28"}`)
	if e, _ := m["error"].(map[string]any); status != http.StatusBadRequest || e["code"] != float64(wire.CodeInvalidParams) {
		t.Errorf("no client capabilities: HTTP %d %v, want 400 and -32602", status, m)
	}
	// ping is still a request of the stateful revisions on the session path.
	if err := f.agent().Ping(context.Background(), nil); err != nil {
		t.Errorf("ping on a session: %v", err)
	}
}

// TestStatelessParamHeaders: a tools/call's Mcp-Param-* header reaches a 2026-07-28 upstream
// when it copies the argument the tool declares it for (x-mcp-header); one that names another
// value is refused with -32020 before anything is decided, and the upstream never runs the
// call.
func TestStatelessParamHeaders(t *testing.T) {
	var seen []string
	var mu sync.Mutex
	record := func(_ http.ResponseWriter, r *http.Request) bool {
		if v := r.Header.Get("Mcp-Param-Title"); v != "" {
			mu.Lock()
			seen = append(seen, v)
			mu.Unlock()
		}
		return false
	}
	tools := []mcptest.Tool{{Name: "ticket_create", InputSchema: json.RawMessage(`{"type":"object","properties":{"title":{"type":"string","x-mcp-header":"Title"}}}`)}}
	f := newFixture(t, fixtureOpts{upstream: mcptest.Options{Stateless: true, JSONResponse: true, Intercept: record}, tools: tools})
	hdr := func(param string) map[string]string {
		return map[string]string{"Mcp-Protocol-Version": "2026-07-28", "Mcp-Method": "tools/call", "Mcp-Name": "ticket_create", "Mcp-Param-Title": param}
	}
	status, m := post2026(t, f.endpoint(), call2026, hdr("x"))
	if res, _ := m["result"].(map[string]any); status != http.StatusOK || res["isError"] == true || f.up.Count("ticket_create") != 1 {
		t.Fatalf("HTTP %d %v; upstream ran it %d times", status, m, f.up.Count("ticket_create"))
	}
	mu.Lock()
	got := strings.Join(seen, ",")
	mu.Unlock()
	if got != "x" {
		t.Fatalf("the upstream saw Mcp-Param-Title %q, want the agent's \"x\"", got)
	}
	status, m = post2026(t, f.endpoint(), strings.Replace(call2026, `"id":7`, `"id":8`, 1), hdr("other"))
	e, _ := m["error"].(map[string]any)
	if status != http.StatusBadRequest || e["code"] != float64(wire.CodeHeaderMismatch) || f.up.Count("ticket_create") != 1 {
		t.Fatalf("a header naming another value: HTTP %d %v; upstream ran it %d times", status, m, f.up.Count("ticket_create"))
	}
}

// TestStatelessMissingCapabilityRefusal: a 2026-07-28 upstream's -32021 (the call needs a client
// capability the request did not declare) is a refusal before execution: the agent gets the
// upstream's error with its HTTP 400, and the journal records the act FAILED, not
// INDETERMINATE.
func TestStatelessMissingCapabilityRefusal(t *testing.T) {
	refuse := func(w http.ResponseWriter, r *http.Request) bool {
		if !isToolsCall(r) {
			return false
		}
		body, _ := io.ReadAll(r.Body)
		var m struct {
			ID json.RawMessage `json:"id"`
		}
		_ = json.Unmarshal(body, &m)
		w.Header().Set("Content-Type", "application/json")
		w.WriteHeader(http.StatusBadRequest)
		_, _ = w.Write([]byte(`{"jsonrpc":"2.0","id":` + string(m.ID) + `,"error":{"code":-32021,"message":"Missing required client capability","data":{"requiredCapabilities":{"sampling":{}}}}}`))
		return true
	}
	f := newFixture(t, fixtureOpts{upstream: mcptest.Options{Stateless: true, JSONResponse: true, Intercept: refuse}})
	status, m := post2026(t, f.endpoint(), call2026, map[string]string{"Mcp-Protocol-Version": "2026-07-28", "Mcp-Method": "tools/call", "Mcp-Name": "ticket_create"})
	e, _ := m["error"].(map[string]any)
	data, _ := e["data"].(map[string]any)
	if status != http.StatusBadRequest || e["code"] != float64(wire.CodeMissingClientCapability) || data["requiredCapabilities"] == nil {
		t.Fatalf("HTTP %d %v, want the upstream's -32021 with HTTP 400", status, m)
	}
	if st := statesIn(t, f); st[journal.StateFailed] != 1 || st[journal.StateIndeterminate] != 0 {
		t.Fatalf("journal states %v, want one FAILED act", st)
	}
}

// TestStatelessStatefulUpstreamCall: a 2026-07-28 tools/call in front of a stateful upstream
// gets the upstream's log messages only when the request asked for a log level
// (_meta["io.modelcontextprotocol/logLevel"]), at that level or more severe; and the upstream's
// -32021 (in an HTTP 200, as 2025 answers errors) is answered with HTTP 400, the act FAILED.
func TestStatelessStatefulUpstreamCall(t *testing.T) {
	intercept := func(w http.ResponseWriter, r *http.Request) bool {
		if !isToolsCall(r) {
			return false
		}
		body, _ := io.ReadAll(r.Body)
		var m struct {
			ID     json.RawMessage `json:"id"`
			Params struct {
				Name string `json:"name"`
			} `json:"params"`
		}
		_ = json.Unmarshal(body, &m)
		if m.Params.Name == "get_balance" {
			w.Header().Set("Content-Type", "application/json")
			_, _ = w.Write([]byte(`{"jsonrpc":"2.0","id":` + string(m.ID) + `,"error":{"code":-32021,"message":"Missing required client capability","data":{"requiredCapabilities":{"sampling":{}}}}}`))
			return true
		}
		w.Header().Set("Content-Type", "text/event-stream")
		_, _ = w.Write([]byte("event: message\ndata: {\"jsonrpc\":\"2.0\",\"method\":\"notifications/message\",\"params\":{\"level\":\"info\",\"data\":\"ticket log\"}}\n\n" +
			"event: message\ndata: {\"jsonrpc\":\"2.0\",\"id\":" + string(m.ID) + ",\"result\":{\"content\":[{\"type\":\"text\",\"text\":\"ok\"}]}}\n\n"))
		return true
	}
	f := newFixture(t, fixtureOpts{upstream: mcptest.Options{Intercept: intercept}})
	post := func(id int, tool, level string) (int, string) {
		meta := `"_meta":{"io.modelcontextprotocol/protocolVersion":"2026-07-28","io.modelcontextprotocol/clientCapabilities":{}`
		if level != "" {
			meta += `,"io.modelcontextprotocol/logLevel":"` + level + `"`
		}
		body := fmt.Sprintf(`{"jsonrpc":"2.0","id":%d,"method":"tools/call","params":{"name":%q,"arguments":{"title":"t%d"},%s}}}`, id, tool, id, meta)
		req, _ := http.NewRequest(http.MethodPost, f.endpoint(), strings.NewReader(body))
		req.Header.Set("Content-Type", "application/json")
		req.Header.Set("Accept", "application/json, text/event-stream")
		req.Header.Set("Mcp-Protocol-Version", "2026-07-28")
		req.Header.Set("Mcp-Method", "tools/call")
		req.Header.Set("Mcp-Name", tool)
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		raw, _ := io.ReadAll(resp.Body)
		return resp.StatusCode, string(raw)
	}
	for i, tc := range []struct {
		level string
		logs  bool
	}{{"", false}, {"debug", true}, {"info", true}, {"error", false}} {
		status, body := post(10+i, "ticket_create", tc.level)
		if status != http.StatusOK || !strings.Contains(body, `"text":"ok"`) {
			t.Fatalf("logLevel %q: HTTP %d %s", tc.level, status, body)
		}
		if got := strings.Contains(body, "ticket log"); got != tc.logs {
			t.Errorf("logLevel %q: log message relayed %v, want %v: %s", tc.level, got, tc.logs, body)
		}
	}
	status, body := post(20, "get_balance", "")
	if status != http.StatusBadRequest || !strings.Contains(body, `"code":-32021`) {
		t.Fatalf("-32021 from a stateful upstream: HTTP %d %s, want 400", status, body)
	}
	if st := statesIn(t, f); st[journal.StateIndeterminate] != 0 {
		t.Fatalf("journal states %v: no act may be INDETERMINATE", st)
	}
}

const meta2026 = `"_meta":{"io.modelcontextprotocol/protocolVersion":"2026-07-28","io.modelcontextprotocol/clientCapabilities":{}}`
