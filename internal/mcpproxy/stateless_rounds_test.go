package mcpproxy

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/actgate/actgate/internal/authority/boltstore"
	"github.com/actgate/actgate/internal/journal"
	"github.com/actgate/actgate/internal/mcpproxy/agent2026"
)

// roundsUpstream is a stateful 2025 upstream (the Go SDK's server with sessions) whose tool
// ticket_ask asks its client for a name (elicitation/create), a greeting (sampling) and its
// roots (roots/list) during the call, and whose prompt ask_prompt asks for a context.
type roundsUpstream struct {
	srv      *httptest.Server
	ran      atomic.Int32 // ticket_ask handler entries
	regions  atomic.Int32 // ticket_region calls
	finished atomic.Int32 // ticket_ask handlers that got every answer
	mu       sync.Mutex
	caps     []*mcp.ClientCapabilities // each session's declared capabilities
}

func newRoundsUpstream(t *testing.T) *roundsUpstream {
	u := &roundsUpstream{}
	srv := mcp.NewServer(&mcp.Implementation{Name: "legacy", Version: "v1"}, &mcp.ServerOptions{
		InitializedHandler: func(_ context.Context, req *mcp.InitializedRequest) {
			u.mu.Lock()
			u.caps = append(u.caps, req.Session.InitializeParams().Capabilities)
			u.mu.Unlock()
		},
	})
	srv.AddTool(&mcp.Tool{Name: "ticket_ask", InputSchema: map[string]any{"type": "object"}},
		func(ctx context.Context, req *mcp.CallToolRequest) (*mcp.CallToolResult, error) {
			u.ran.Add(1)
			el, err := req.Session.Elicit(ctx, &mcp.ElicitParams{Message: "Your name?", RequestedSchema: map[string]any{"type": "object", "properties": map[string]any{"name": map[string]any{"type": "string"}}}})
			if err != nil {
				return nil, err
			}
			sm, err := req.Session.CreateMessage(ctx, &mcp.CreateMessageParams{MaxTokens: 10, Messages: []*mcp.SamplingMessage{{Role: "user", Content: &mcp.TextContent{Text: "greet"}}}})
			if err != nil {
				return nil, err
			}
			roots, err := req.Session.ListRoots(ctx, nil)
			if err != nil {
				return nil, err
			}
			u.finished.Add(1)
			greeting := ""
			if tc, ok := sm.Content.(*mcp.TextContent); ok {
				greeting = tc.Text
			}
			return &mcp.CallToolResult{Content: []mcp.Content{&mcp.TextContent{Text: fmt.Sprintf("%s %v (%d roots)", greeting, el.Content["name"], len(roots.Roots))}}}, nil
		})
	srv.AddTool(&mcp.Tool{Name: "ticket_region", InputSchema: map[string]any{"type": "object", "properties": map[string]any{
		"region": map[string]any{"type": "string", "x-mcp-header": "Region"}, "note": map[string]any{"type": "string"}}}},
		func(context.Context, *mcp.CallToolRequest) (*mcp.CallToolResult, error) {
			u.regions.Add(1)
			return &mcp.CallToolResult{Content: []mcp.Content{&mcp.TextContent{Text: "ok"}}}, nil
		})
	srv.AddPrompt(&mcp.Prompt{Name: "ask_prompt"}, func(ctx context.Context, req *mcp.GetPromptRequest) (*mcp.GetPromptResult, error) {
		el, err := req.Session.Elicit(ctx, &mcp.ElicitParams{Message: "Context?", RequestedSchema: map[string]any{"type": "object"}})
		if err != nil {
			return nil, err
		}
		return &mcp.GetPromptResult{Messages: []*mcp.PromptMessage{{Role: "user", Content: &mcp.TextContent{Text: fmt.Sprintf("context: %v", el.Content["context"])}}}}, nil
	})
	u.srv = httptest.NewServer(mcp.NewStreamableHTTPHandler(func(*http.Request) *mcp.Server { return srv }, nil))
	t.Cleanup(u.srv.Close)
	return u
}

// newRoundsGate puts the gate in front of u.
func newRoundsGate(t *testing.T, u *roundsUpstream, callTimeout time.Duration) (string, *boltstore.Store) {
	st, gate := newGate(t, u.srv.URL)
	_, _, endpoint := serveProxy(t, Config{Server: "bank", URL: u.srv.URL, Gate: gate, Agent: agentName, CallTimeout: callTimeout})
	return endpoint, st
}

func journalStates(t *testing.T, st *boltstore.Store) map[journal.State]int {
	t.Helper()
	out := map[journal.State]int{}
	for _, s := range []journal.State{journal.StateConsumed, journal.StateDispatchPending, journal.StateInvoked,
		journal.StateExecuted, journal.StateFailed, journal.StateIndeterminate} {
		recs, err := st.InState(context.Background(), s)
		if err != nil {
			t.Fatal(err)
		}
		if len(recs) > 0 {
			out[s] = len(recs)
		}
	}
	return out
}

// TestRoundsStatefulUpstream: the SDK's 2026-07-28 client through the gate in front of a 2025
// upstream that asks for input during a tools/call and a prompts/get. The upstream session
// declares the client's capabilities; each upstream request becomes an input_required round;
// the tool ran once, its act is EXECUTED once, and the answers reached the upstream as given.
func TestRoundsStatefulUpstream(t *testing.T) {
	u := newRoundsUpstream(t)
	endpoint, st := newRoundsGate(t, u, 10*time.Second)
	var elicited, sampled atomic.Int32
	c := mcp.NewClient(&mcp.Implementation{Name: "agent", Version: "v1"}, &mcp.ClientOptions{
		ElicitationHandler: func(_ context.Context, req *mcp.ElicitRequest) (*mcp.ElicitResult, error) {
			elicited.Add(1)
			if strings.HasPrefix(req.Params.Message, "Context") {
				return &mcp.ElicitResult{Action: "accept", Content: map[string]any{"context": "ctx-1"}}, nil
			}
			return &mcp.ElicitResult{Action: "accept", Content: map[string]any{"name": "Ada"}}, nil
		},
		CreateMessageHandler: func(context.Context, *mcp.CreateMessageRequest) (*mcp.CreateMessageResult, error) {
			sampled.Add(1)
			return &mcp.CreateMessageResult{Role: "assistant", Model: "m", Content: &mcp.TextContent{Text: "Hello"}}, nil
		},
	})
	c.AddRoots(&mcp.Root{URI: "file:///a"}, &mcp.Root{URI: "file:///b"})
	cs, err := c.Connect(context.Background(), &mcp.StreamableClientTransport{Endpoint: endpoint}, &mcp.ClientSessionOptions{ProtocolVersion: "2026-07-28"})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = cs.Close() })
	res, err := cs.CallTool(context.Background(), &mcp.CallToolParams{Name: "ticket_ask", Arguments: map[string]any{"id": 1}})
	if err != nil {
		t.Fatal(err)
	}
	if res.IsError || text(res) != "Hello Ada (2 roots)" {
		t.Fatalf("result %q (isError %v)", text(res), res.IsError)
	}
	if u.ran.Load() != 1 || u.finished.Load() != 1 || elicited.Load() != 1 || sampled.Load() != 1 {
		t.Fatalf("upstream ran %d, finished %d; agent elicited %d, sampled %d; want 1 each", u.ran.Load(), u.finished.Load(), elicited.Load(), sampled.Load())
	}
	if got := journalStates(t, st); got[journal.StateExecuted] != 1 || len(got) != 1 {
		t.Fatalf("journal states %v, want one EXECUTED act", got)
	}
	u.mu.Lock()
	caps := u.caps
	u.mu.Unlock()
	if len(caps) == 0 {
		t.Fatal("no upstream session")
	}
	if raw, _ := json.Marshal(caps[len(caps)-1]); !strings.Contains(string(raw), `"elicitation"`) || !strings.Contains(string(raw), `"sampling"`) || !strings.Contains(string(raw), `"roots"`) {
		t.Fatalf("upstream session capabilities %s: the agent's were not declared", raw)
	}
	pr, err := cs.GetPrompt(context.Background(), &mcp.GetPromptParams{Name: "ask_prompt"})
	if err != nil {
		t.Fatal(err)
	}
	if len(pr.Messages) != 1 || pr.Messages[0].Content.(*mcp.TextContent).Text != "context: ctx-1" {
		t.Fatalf("prompt %+v", pr.Messages)
	}
}

// roundPost POSTs a 2026-07-28 tools/call of ticket_ask with params (name added) and returns
// the HTTP status and the response's result or error.
func roundPost(t *testing.T, endpoint string, id int, params map[string]any) (int, map[string]any) {
	t.Helper()
	params["name"] = "ticket_ask"
	params["_meta"] = map[string]any{
		"io.modelcontextprotocol/protocolVersion":    "2026-07-28",
		"io.modelcontextprotocol/clientCapabilities": map[string]any{"elicitation": map[string]any{}, "sampling": map[string]any{}, "roots": map[string]any{}},
	}
	body, _ := json.Marshal(map[string]any{"jsonrpc": "2.0", "id": id, "method": "tools/call", "params": params})
	return post2026(t, endpoint, string(body), map[string]string{"Mcp-Protocol-Version": "2026-07-28", "Mcp-Method": "tools/call", "Mcp-Name": "ticket_ask"})
}

// firstRound starts ticket_ask and returns its input_required result.
func firstRound(t *testing.T, endpoint string, args map[string]any) (state string, requests map[string]any) {
	t.Helper()
	status, m := roundPost(t, endpoint, 1, map[string]any{"arguments": args})
	res, _ := m["result"].(map[string]any)
	if status != http.StatusOK || res["resultType"] != "input_required" {
		t.Fatalf("first round: HTTP %d %v", status, m)
	}
	state, _ = res["requestState"].(string)
	requests, _ = res["inputRequests"].(map[string]any)
	if state == "" || len(requests) != 1 {
		t.Fatalf("first round: %v", res)
	}
	return state, requests
}

func efOf(m map[string]any) string {
	e, _ := m["error"].(map[string]any)
	d, _ := e["data"].(map[string]any)
	s, _ := d[MetaEFCode].(string)
	return s
}

// TestRoundsContinuationRefused: a continuation with a tampered requestState, with other
// arguments, or of a round already answered is refused (EF_CONTINUATION_INVALID), nothing
// reaches the upstream, and no second act is decided; the genuine continuation completes the
// call the first round dispatched, once.
func TestRoundsContinuationRefused(t *testing.T) {
	u := newRoundsUpstream(t)
	endpoint, st := newRoundsGate(t, u, 10*time.Second)
	args := map[string]any{"id": 7}
	state, reqs := firstRound(t, endpoint, args)
	var key string
	for k, v := range reqs {
		key = k
		if v.(map[string]any)["method"] != "elicitation/create" {
			t.Fatalf("first input request %v, want elicitation/create", v)
		}
	}
	name := map[string]any{key: map[string]any{"action": "accept", "content": map[string]any{"name": "Ada"}}}
	for _, tc := range []struct {
		what   string
		params map[string]any
	}{
		{"tampered state", map[string]any{"arguments": args, "requestState": state + "-TAMPERED", "inputResponses": name}},
		{"forged state", map[string]any{"arguments": args, "requestState": "ag1.e30.AAAA", "inputResponses": name}},
		{"other arguments", map[string]any{"arguments": map[string]any{"id": 8}, "requestState": state, "inputResponses": name}},
		{"state not a string", map[string]any{"arguments": args, "requestState": 5, "inputResponses": name}},
		{"responses not objects", map[string]any{"arguments": args, "requestState": state, "inputResponses": map[string]any{key: "yes"}}},
	} {
		status, m := roundPost(t, endpoint, 2, tc.params)
		if status != http.StatusBadRequest || efOf(m) != "EF_CONTINUATION_INVALID" {
			t.Errorf("%s: HTTP %d %v, want 400 EF_CONTINUATION_INVALID", tc.what, status, m)
		}
	}
	if u.finished.Load() != 0 {
		t.Fatal("a refused continuation reached the upstream")
	}
	// The genuine continuation answers the elicitation; the next rounds ask for a sample and
	// the roots, each with its own state.
	status, m := roundPost(t, endpoint, 3, map[string]any{"arguments": args, "requestState": state, "inputResponses": name})
	res, _ := m["result"].(map[string]any)
	if status != http.StatusOK || res["resultType"] != "input_required" {
		t.Fatalf("second round: HTTP %d %v", status, m)
	}
	// The first round's state is spent.
	if status, m := roundPost(t, endpoint, 4, map[string]any{"arguments": args, "requestState": state, "inputResponses": name}); status != http.StatusBadRequest || efOf(m) != "EF_CONTINUATION_INVALID" {
		t.Fatalf("replayed first-round state: HTTP %d %v", status, m)
	}
	for round := 0; res["resultType"] == "input_required"; round++ {
		if round > 3 {
			t.Fatalf("too many rounds: %v", res)
		}
		answers := map[string]any{}
		for k, v := range res["inputRequests"].(map[string]any) {
			switch v.(map[string]any)["method"] {
			case "sampling/createMessage":
				answers[k] = map[string]any{"role": "assistant", "model": "m", "content": map[string]any{"type": "text", "text": "Hi"}}
			case "roots/list":
				answers[k] = map[string]any{"roots": []any{map[string]any{"uri": "file:///r"}}}
			default:
				t.Fatalf("unexpected input request %v", v)
			}
		}
		status, m = roundPost(t, endpoint, 5+round, map[string]any{"arguments": args, "requestState": res["requestState"], "inputResponses": answers})
		res, _ = m["result"].(map[string]any)
		if status != http.StatusOK || res == nil {
			t.Fatalf("round %d: HTTP %d %v", round+2, status, m)
		}
	}
	content, _ := res["content"].([]any)
	if res["resultType"] != "complete" || len(content) != 1 || content[0].(map[string]any)["text"] != "Hi Ada (1 roots)" {
		t.Fatalf("final result %v", res)
	}
	if u.ran.Load() != 1 || u.finished.Load() != 1 {
		t.Fatalf("upstream ran %d, finished %d; want 1 and 1", u.ran.Load(), u.finished.Load())
	}
	if got := journalStates(t, st); got[journal.StateExecuted] != 1 || len(got) != 1 {
		t.Fatalf("journal states %v, want one EXECUTED act", got)
	}
}

// TestRoundsMissingResponse: a continuation that lacks a response is asked again in a new
// round (not an error); wrong keys are ignored.
func TestRoundsMissingResponse(t *testing.T) {
	u := newRoundsUpstream(t)
	endpoint, _ := newRoundsGate(t, u, 10*time.Second)
	args := map[string]any{}
	state, reqs := firstRound(t, endpoint, args)
	status, m := roundPost(t, endpoint, 2, map[string]any{"arguments": args, "requestState": state, "inputResponses": map[string]any{"wrong_key": map[string]any{}}})
	res, _ := m["result"].(map[string]any)
	if status != http.StatusOK || res["resultType"] != "input_required" || res["requestState"] == state {
		t.Fatalf("missing response: HTTP %d %v", status, m)
	}
	again, _ := res["inputRequests"].(map[string]any)
	for k := range reqs {
		if again[k] == nil {
			t.Fatalf("re-requested %v, want %v", again, reqs)
		}
	}
}

// TestRoundsExpire: an agent that never continues leaves the dispatched act INDETERMINATE once
// the call's bound passes; the upstream's waiting request is answered with an error (a 2025
// server waits for it), and the state then names no round.
func TestRoundsExpire(t *testing.T) {
	u := newRoundsUpstream(t)
	endpoint, st := newRoundsGate(t, u, 400*time.Millisecond)
	state, reqs := firstRound(t, endpoint, map[string]any{"id": 1})
	deadline := time.Now().Add(5 * time.Second)
	for journalStates(t, st)[journal.StateIndeterminate] != 1 {
		if time.Now().After(deadline) {
			t.Fatalf("journal states %v, want one INDETERMINATE act", journalStates(t, st))
		}
		time.Sleep(50 * time.Millisecond)
	}
	answers := map[string]any{}
	for k := range reqs {
		answers[k] = map[string]any{"action": "accept", "content": map[string]any{"name": "x"}}
	}
	status, m := roundPost(t, endpoint, 2, map[string]any{"arguments": map[string]any{"id": 1}, "requestState": state, "inputResponses": answers})
	if status != http.StatusBadRequest || efOf(m) != "EF_CONTINUATION_INVALID" {
		t.Fatalf("expired continuation: HTTP %d %v", status, m)
	}
	if u.finished.Load() != 0 {
		t.Fatal("the upstream completed a call whose agent never answered")
	}
	if got := journalStates(t, st); got[journal.StateIndeterminate] != 1 || len(got) != 1 {
		t.Fatalf("journal states %v, want one INDETERMINATE act", got)
	}
}

// TestRoundsBound: an agent with agent2026.MaxHeldPerAgent requests awaiting its input gets
// EF_INPUT_LIMIT for its next tools/call, which is not decided or sent; a tools/list, which
// dispatches nothing, is still answered.
func TestRoundsBound(t *testing.T) {
	u := newRoundsUpstream(t)
	endpoint, st := newRoundsGate(t, u, 10*time.Second)
	for i := range agent2026.MaxHeldPerAgent {
		firstRound(t, endpoint, map[string]any{"id": i})
	}
	status, m := roundPost(t, endpoint, 99, map[string]any{"arguments": map[string]any{"id": 99}})
	if status != http.StatusBadRequest || efOf(m) != "EF_INPUT_LIMIT" {
		t.Fatalf("beyond the bound: HTTP %d %v", status, m)
	}
	if u.ran.Load() != agent2026.MaxHeldPerAgent {
		t.Fatalf("upstream ran %d calls, want %d", u.ran.Load(), agent2026.MaxHeldPerAgent)
	}
	if got := journalStates(t, st); got[journal.StateInvoked]+got[journal.StateDispatchPending] != agent2026.MaxHeldPerAgent {
		t.Fatalf("journal states %v, want %d dispatched acts", got, agent2026.MaxHeldPerAgent)
	}
	meta := `"_meta":{"io.modelcontextprotocol/protocolVersion":"2026-07-28","io.modelcontextprotocol/clientCapabilities":{}}`
	status, m = post2026(t, endpoint, `{"jsonrpc":"2.0","id":100,"method":"tools/list","params":{`+meta+`}}`,
		map[string]string{"Mcp-Protocol-Version": "2026-07-28", "Mcp-Method": "tools/list"})
	if res, _ := m["result"].(map[string]any); status != http.StatusOK || res["tools"] == nil {
		t.Fatalf("tools/list at the bound: HTTP %d %v", status, m)
	}
}

// TestDeclaredParamHeaders: in front of a 2025 upstream, the gate learns from tools/list which
// argument a tool's Mcp-Param-Region header copies (x-mcp-header) and refuses a call whose
// header is missing, copies another argument or has no argument to copy (-32020,
// EF_MCP_HEADER_MISMATCH); none of them reaches the upstream.
func TestDeclaredParamHeaders(t *testing.T) {
	u := newRoundsUpstream(t)
	endpoint, _ := newRoundsGate(t, u, 10*time.Second)
	meta := `"_meta":{"io.modelcontextprotocol/protocolVersion":"2026-07-28","io.modelcontextprotocol/clientCapabilities":{}}`
	if status, m := post2026(t, endpoint, `{"jsonrpc":"2.0","id":1,"method":"tools/list","params":{`+meta+`}}`,
		map[string]string{"Mcp-Protocol-Version": "2026-07-28", "Mcp-Method": "tools/list"}); status != http.StatusOK || m["result"] == nil {
		t.Fatalf("tools/list: HTTP %d %v", status, m)
	}
	callRegion := func(args string, region string) (int, map[string]any) {
		hdr := map[string]string{"Mcp-Protocol-Version": "2026-07-28", "Mcp-Method": "tools/call", "Mcp-Name": "ticket_region"}
		if region != "" {
			hdr["Mcp-Param-Region"] = region
		}
		return post2026(t, endpoint, `{"jsonrpc":"2.0","id":2,"method":"tools/call","params":{"name":"ticket_region","arguments":`+args+`,`+meta+`}}`, hdr)
	}
	for _, tc := range []struct{ what, args, region string }{
		{"missing header", `{"region":"eu"}`, ""},
		{"header copying another argument", `{"region":"eu","note":"us"}`, "us"},
		{"header without its argument", `{"note":"eu"}`, "eu"},
	} {
		status, m := callRegion(tc.args, tc.region)
		e, _ := m["error"].(map[string]any)
		if status != http.StatusBadRequest || e["code"] != float64(-32020) || efOf(m) != "EF_MCP_HEADER_MISMATCH" {
			t.Errorf("%s: HTTP %d %v, want 400 -32020", tc.what, status, m)
		}
	}
	if u.regions.Load() != 0 {
		t.Fatalf("a refused call reached the upstream %d times", u.regions.Load())
	}
	for i, region := range []string{"eu", "=?base64?ZXU=?="} {
		if status, m := callRegion(fmt.Sprintf(`{"region":"eu","note":"n%d"}`, i), region); status != http.StatusOK || m["result"] == nil {
			t.Fatalf("header %q: HTTP %d %v", region, status, m)
		}
	}
	if status, m := callRegion(`{"note":"x"}`, ""); status != http.StatusOK || m["result"] == nil {
		t.Fatalf("no region, no header: HTTP %d %v", status, m)
	}
	if u.regions.Load() != 3 {
		t.Fatalf("upstream ran %d calls, want 3", u.regions.Load())
	}
}
