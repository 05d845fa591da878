package mcpproxy

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"regexp"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/jsonrpc"
	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/actgate/actgate/internal/mcpproxy/mcptest"
	"github.com/actgate/actgate/internal/mcpproxy/wire"
)

// modes are the two ways a tools/call crosses the proxy: the direct paths (agent2025's agentcall.go,
// upstreamcall.go, the default) and the SDK's sessions on both hops (Config.sdkOnly). Tests of
// behaviour the two must share run in both.
var modes = []struct {
	name    string
	sdkOnly bool
}{{"direct", false}, {"sdk", true}}

func sdkOnly(on bool) func(*Config) { return func(c *Config) { c.sdkOnly = on } }

// TestDirectPathsCarryToolsCalls: a plain tools/call from the SDK's own client takes both
// direct paths, and the SDK-only proxy takes neither; the call runs once either way.
func TestDirectPathsCarryToolsCalls(t *testing.T) {
	for _, m := range modes {
		t.Run(m.name, func(t *testing.T) {
			f := newFixture(t, fixtureOpts{configure: sdkOnly(m.sdkOnly)})
			cs := f.agent()
			res := call(t, cs, "ticket_create", `{"title":"direct"}`, nil)
			if res.IsError || text(res) != `ticket created: {"title":"direct"}` {
				t.Fatalf("result: %s", text(res))
			}
			if n := f.up.Count("ticket_create"); n != 1 {
				t.Fatalf("upstream ran ticket_create %d times, want 1", n)
			}
			want := int64(1)
			if m.sdkOnly {
				want = 0
			}
			if a, u := f.proxy.directAgent(), f.proxy.directUpstream(); a != want || u != want {
				t.Fatalf("direct paths carried agent=%d upstream=%d calls, want %d each", a, u, want)
			}
		})
	}
}

// TestUpstreamAnswerForms: an upstream that answers a call as an event stream (the SDK's
// default), as one JSON body, or without sessions at all. The direct upstream path carries
// each (the sessionless one without Mcp-Session-Id); the call runs once and its result reaches
// the agent every way.
func TestUpstreamAnswerForms(t *testing.T) {
	for _, form := range []struct {
		name   string
		opts   mcptest.Options
		direct bool
	}{
		{"event stream", mcptest.Options{}, true},
		{"JSON", mcptest.Options{JSONResponse: true}, true},
		{"stateless", mcptest.Options{Stateless: true}, true},
	} {
		for _, m := range modes {
			t.Run(form.name+"/"+m.name, func(t *testing.T) {
				f := newFixture(t, fixtureOpts{upstream: form.opts, configure: sdkOnly(m.sdkOnly)})
				res := call(t, f.agent(), "ticket_create", `{"title":"form"}`, nil)
				if res.IsError || text(res) != `ticket created: {"title":"form"}` {
					t.Fatalf("result isError=%v %q", res.IsError, text(res))
				}
				if n := f.up.Count("ticket_create"); n != 1 {
					t.Fatalf("upstream ran ticket_create %d times, want 1", n)
				}
				want := int64(0)
				if form.direct && !m.sdkOnly {
					want = 1
				}
				if got := f.proxy.directUpstream(); got != want {
					t.Fatalf("the direct upstream path carried %d calls, want %d", got, want)
				}
			})
		}
	}
}

// TestUpstreamMessagesDuringCall: while it runs a tools/call, the upstream sends progress and
// a log message and asks the client to ping, sample, elicit and list roots, on the call's own
// event stream. The agent receives the notifications and answers the requests, and the
// upstream's result carries the agent's answers, through either path (docs/architecture.md
// "What passes through"; agent2025's upstreamcall.go).
func TestUpstreamMessagesDuringCall(t *testing.T) {
	for _, m := range modes {
		t.Run(m.name, func(t *testing.T) {
			f := newFixture(t, fixtureOpts{tools: []mcptest.Tool{}, configure: sdkOnly(m.sdkOnly)})
			var ran atomic.Int64
			f.up.MCP().AddTool(&mcp.Tool{Name: "get_balance", InputSchema: json.RawMessage(`{"type":"object"}`)},
				func(ctx context.Context, req *mcp.CallToolRequest) (*mcp.CallToolResult, error) {
					ran.Add(1)
					ss := req.Session
					if err := ss.NotifyProgress(ctx, &mcp.ProgressNotificationParams{ProgressToken: req.Params.GetProgressToken(), Progress: 1, Total: 2, Message: "half way"}); err != nil {
						return nil, err
					}
					if err := ss.Log(ctx, &mcp.LoggingMessageParams{Level: "info", Logger: "upstream", Data: "reading the balance"}); err != nil {
						return nil, err
					}
					if err := ss.Ping(ctx, nil); err != nil {
						return nil, fmt.Errorf("ping: %w", err)
					}
					cm, err := ss.CreateMessage(ctx, &mcp.CreateMessageParams{MaxTokens: 5,
						Messages: []*mcp.SamplingMessage{{Role: "user", Content: &mcp.TextContent{Text: "say hi"}}}})
					if err != nil {
						return nil, fmt.Errorf("sampling: %w", err)
					}
					el, err := ss.Elicit(ctx, &mcp.ElicitParams{Message: "Which account?", RequestedSchema: json.RawMessage(
						`{"type":"object","properties":{"account":{"type":"string"}},"required":["account"]}`)})
					if err != nil {
						return nil, fmt.Errorf("elicitation: %w", err)
					}
					roots, err := ss.ListRoots(ctx, nil)
					if err != nil {
						return nil, fmt.Errorf("roots: %w", err)
					}
					sampled := ""
					if tc, ok := cm.Content.(*mcp.TextContent); ok {
						sampled = tc.Text
					}
					return mcptest.Text(fmt.Sprintf("sampled=%s elicited=%s/%v roots=%s", sampled, el.Action, el.Content["account"], roots.Roots[0].URI)), nil
				})

			var mu sync.Mutex
			var progress, logs []string
			c := mcp.NewClient(&mcp.Implementation{Name: "test-agent", Version: "v1"}, &mcp.ClientOptions{
				CreateMessageHandler: func(context.Context, *mcp.CreateMessageRequest) (*mcp.CreateMessageResult, error) {
					return &mcp.CreateMessageResult{Role: "assistant", Model: "agent-model", Content: &mcp.TextContent{Text: "hi-from-agent"}}, nil
				},
				ElicitationHandler: func(context.Context, *mcp.ElicitRequest) (*mcp.ElicitResult, error) {
					return &mcp.ElicitResult{Action: "accept", Content: map[string]any{"account": "acct-7"}}, nil
				},
				ProgressNotificationHandler: func(_ context.Context, r *mcp.ProgressNotificationClientRequest) {
					mu.Lock()
					progress = append(progress, r.Params.Message)
					mu.Unlock()
				},
				LoggingMessageHandler: func(_ context.Context, r *mcp.LoggingMessageRequest) {
					mu.Lock()
					logs = append(logs, fmt.Sprint(r.Params.Data))
					mu.Unlock()
				},
			})
			c.AddRoots(&mcp.Root{URI: "file:///agent-root", Name: "agent"})
			ctx := context.Background()
			cs, err := c.Connect(ctx, &mcp.StreamableClientTransport{Endpoint: f.endpoint()}, sessionOpts)
			if err != nil {
				t.Fatal(err)
			}
			t.Cleanup(func() { _ = cs.Close() })
			if err := cs.SetLoggingLevel(ctx, &mcp.SetLoggingLevelParams{Level: "debug"}); err != nil {
				t.Fatal(err)
			}
			res := call(t, cs, "get_balance", `{}`, mcp.Meta{"progressToken": "p-1"})
			if want := "sampled=hi-from-agent elicited=accept/acct-7 roots=file:///agent-root"; res.IsError || text(res) != want {
				t.Fatalf("result isError=%v %q, want %q", res.IsError, text(res), want)
			}
			if n := ran.Load(); n != 1 {
				t.Fatalf("upstream ran the tool %d times, want 1", n)
			}
			// The notifications reach the agent on its standalone stream, asynchronously.
			deadline := time.Now().Add(5 * time.Second)
			for {
				mu.Lock()
				p, l := append([]string(nil), progress...), append([]string(nil), logs...)
				mu.Unlock()
				if len(p) == 1 && len(l) == 1 {
					if p[0] != "half way" || l[0] != "reading the balance" {
						t.Fatalf("agent got progress %q, logs %q", p, l)
					}
					break
				}
				if time.Now().After(deadline) {
					t.Fatalf("agent got progress %q, logs %q; want one of each", p, l)
				}
				time.Sleep(10 * time.Millisecond)
			}
			if !m.sdkOnly && f.proxy.directUpstream() != 1 {
				t.Fatalf("the direct upstream path carried %d calls, want 1", f.proxy.directUpstream())
			}
		})
	}
}

// TestSessionlessUpstreamProgress: an upstream serving a 2025 revision without sessions sends
// progress on a tools/call's answer stream. The call goes the direct path (no Mcp-Session-Id
// upstream), and the progress reaches an agent that opened no GET stream on its POST's answer,
// before the response.
func TestSessionlessUpstreamProgress(t *testing.T) {
	var sessionHeaders []string
	var mu sync.Mutex
	record := func(_ http.ResponseWriter, r *http.Request) bool {
		if isToolsCall(r) {
			mu.Lock()
			sessionHeaders = append(sessionHeaders, r.Header.Get("Mcp-Session-Id"))
			mu.Unlock()
		}
		return false
	}
	f := newFixture(t, fixtureOpts{tools: []mcptest.Tool{}, upstream: mcptest.Options{Stateless: true, Intercept: record}})
	var ran atomic.Int64
	f.up.MCP().AddTool(&mcp.Tool{Name: "get_balance", InputSchema: json.RawMessage(`{"type":"object"}`)},
		func(ctx context.Context, req *mcp.CallToolRequest) (*mcp.CallToolResult, error) {
			ran.Add(1)
			for i := 1; i <= 2; i++ {
				if err := req.Session.NotifyProgress(ctx, &mcp.ProgressNotificationParams{ProgressToken: req.Params.GetProgressToken(), Progress: float64(i), Total: 2}); err != nil {
					return nil, err
				}
			}
			return mcptest.Text("balance: 7"), nil
		})
	s := newRawSession(t, f.endpoint())
	_, ct, body := agentExchange(t, s, http.MethodPost, `{"jsonrpc":"2.0","id":9,"method":"tools/call","params":{"name":"get_balance","arguments":{},"_meta":{"progressToken":"tok-9"}}}`, nil)
	want := regexp.MustCompile(`^event: message\ndata: \{"jsonrpc":"2.0","method":"notifications/progress","params":\{"progressToken":"tok-9","progress":1,"total":2\}\}\n\n` +
		`event: message\ndata: \{"jsonrpc":"2.0","method":"notifications/progress","params":\{"progressToken":"tok-9","progress":2,"total":2\}\}\n\n` +
		`event: message\ndata: \{"jsonrpc":"2.0","id":9,"result":\{"content":\[\{"type":"text","text":"balance: 7"\}\]\}\}\n\n$`)
	if ct != "text/event-stream" || !want.MatchString(body) {
		t.Fatalf("the POST's answer: %s\n%s\nwant both progress notifications, then the response", ct, body)
	}
	mu.Lock()
	defer mu.Unlock()
	if n := ran.Load(); n != 1 || len(sessionHeaders) != 1 || sessionHeaders[0] != "" {
		t.Fatalf("upstream ran the tool %d times, tools/call POSTs with Mcp-Session-Id %q; want 1 without", n, sessionHeaders)
	}
	if got := f.proxy.directUpstream(); got != 1 {
		t.Fatalf("the direct upstream path carried %d calls, want 1", got)
	}
}

// TestUpstreamRequestWithoutAgentCapability: an upstream asking for sampling or elicitation of
// an agent that declared neither gets the SDK client's refusals, through either path, and its
// tool sees them as errors.
func TestUpstreamRequestWithoutAgentCapability(t *testing.T) {
	for _, m := range modes {
		t.Run(m.name, func(t *testing.T) {
			f := newFixture(t, fixtureOpts{tools: []mcptest.Tool{}, configure: sdkOnly(m.sdkOnly)})
			f.up.MCP().AddTool(&mcp.Tool{Name: "get_balance", InputSchema: json.RawMessage(`{"type":"object"}`)},
				func(ctx context.Context, req *mcp.CallToolRequest) (*mcp.CallToolResult, error) {
					_, serr := req.Session.CreateMessage(ctx, &mcp.CreateMessageParams{MaxTokens: 5,
						Messages: []*mcp.SamplingMessage{{Role: "user", Content: &mcp.TextContent{Text: "x"}}}})
					_, eerr := req.Session.Elicit(ctx, &mcp.ElicitParams{Message: "?", RequestedSchema: json.RawMessage(`{"type":"object"}`)})
					return mcptest.Text(fmt.Sprintf("sampling refused=%v elicitation refused=%v", serr != nil, eerr != nil)), nil
				})
			res := call(t, f.agent(), "get_balance", `{}`, nil)
			if want := "sampling refused=true elicitation refused=true"; text(res) != want {
				t.Fatalf("result %q, want %q", text(res), want)
			}
		})
	}
}

// TestSessionIdleTimeout: Config.SessionTimeout closes an agent session only after that long
// without a request, and tools/calls carried by the direct path count as requests (the proxy
// keeps the timer, not the SDK's handler, which the direct path does not pass through).
func TestSessionIdleTimeout(t *testing.T) {
	for _, m := range modes {
		t.Run(m.name, func(t *testing.T) {
			const timeout = 400 * time.Millisecond
			f := newFixture(t, fixtureOpts{configure: func(c *Config) {
				c.sdkOnly = m.sdkOnly
				c.SessionTimeout = timeout
			}})
			cs := f.agent()
			start := time.Now()
			for time.Since(start) < 3*timeout {
				if res := call(t, cs, "get_balance", `{}`, nil); res.IsError {
					t.Fatalf("call on a busy session: %s", text(res))
				}
				time.Sleep(timeout / 4)
			}
			time.Sleep(3 * timeout)
			_, err := cs.CallTool(context.Background(), &mcp.CallToolParams{Name: "get_balance", Arguments: json.RawMessage(`{}`)})
			if err == nil {
				t.Fatal("a call on a session idle for 3× the timeout succeeded")
			}
		})
	}
}

// TestDirectAgentPathMatchesSDK sends the same raw HTTP requests to a proxy with the direct
// paths and to one without, and requires the same HTTP status, content type and JSON-RPC
// answer (id, error code, isError) from both: the direct agent path either answers as the
// SDK's handler would or leaves the request to it. The one difference allowed is the framing
// of a call the upstream answered on an event stream: the direct path answers on one too
// (agentstream.go), and its last message is compared.
func TestDirectAgentPathMatchesSDK(t *testing.T) {
	type answer struct {
		Status      int
		ContentType string
		ID          string
		ErrorCode   int64
		IsError     bool
		EFCode      string
		Text        string
	}
	run := func(sdk bool) (map[string]answer, int64) {
		f := newFixture(t, fixtureOpts{configure: sdkOnly(sdk)})
		rs := newRawSession(t, f.endpoint())
		good := map[string]string{
			"Content-Type":         "application/json",
			"Accept":               "application/json, text/event-stream",
			"Mcp-Session-Id":       rs.session,
			"Mcp-Protocol-Version": rs.version,
		}
		with := func(k, v string) map[string]string {
			h := map[string]string{}
			for k0, v0 := range good {
				h[k0] = v0
			}
			if v == "" {
				delete(h, k)
			} else {
				h[k] = v
			}
			return h
		}
		call := `{"jsonrpc":"2.0","id":%s,"method":"tools/call","params":%s}`
		cases := []struct {
			name, host, body string
			header           map[string]string
		}{
			{"hot call", "", fmt.Sprintf(call, "7", `{"name":"get_balance","arguments":{"account":"a"}}`), good},
			{"string id", "", fmt.Sprintf(call, `"x-1"`, `{"name":"get_balance","arguments":{}}`), good},
			{"refused call", "", fmt.Sprintf(call, "8", `{"name":"email_send","arguments":{"to":"x"},"_meta":{"actgate.io/instruction-provenance":"retrieval"}}`), good},
			{"unknown tool", "", fmt.Sprintf(call, "9", `{"name":"nope","arguments":{}}`), good},
			{"no name", "", fmt.Sprintf(call, "10", `{"arguments":{}}`), good},
			{"capitalised member", "", fmt.Sprintf(call, "11", `{"Name":"get_balance","arguments":{}}`), good},
			{"no params", "", `{"jsonrpc":"2.0","id":12,"method":"tools/call"}`, good},
			{"null params", "", fmt.Sprintf(call, "13", `null`), good},
			{"arguments not an object", "", fmt.Sprintf(call, "14", `{"name":"get_balance","arguments":[1]}`), good},
			{"as a notification", "", `{"jsonrpc":"2.0","method":"tools/call","params":{"name":"get_balance"}}`, good},
			{"batch", "", "[" + fmt.Sprintf(call, "15", `{"name":"get_balance"}`) + "]", good},
			{"not JSON", "", `{"jsonrpc":`, good},
			{"trailing bytes", "", fmt.Sprintf(call, "29", `{"name":"get_balance"}`) + "0", good},
			{"trailing object", "", fmt.Sprintf(call, "30", `{"name":"get_balance"}`) + `{"x":1}`, good},
			{"trailing space", "", fmt.Sprintf(call, "31", `{"name":"get_balance"}`) + " \n", good},
			{"wrong jsonrpc version", "", `{"jsonrpc":"1.0","id":16,"method":"tools/call","params":{"name":"get_balance"}}`, good},
			{"protocolVersion in _meta", "", fmt.Sprintf(call, "17", `{"name":"get_balance","_meta":{"protocolVersion":"2025-06-18"}}`), good},
			{"rebinding Host", "evil.example:80", fmt.Sprintf(call, "18", `{"name":"get_balance"}`), good},
			{"unknown session", "", fmt.Sprintf(call, "19", `{"name":"get_balance"}`), with("Mcp-Session-Id", "no-such-session")},
			{"unsupported version header", "", fmt.Sprintf(call, "20", `{"name":"get_balance"}`), with("Mcp-Protocol-Version", "1999-01-01")},
			{"other supported version header", "", fmt.Sprintf(call, "21", `{"name":"get_balance"}`), with("Mcp-Protocol-Version", "2025-03-26")},
			{"no version header", "", fmt.Sprintf(call, "22", `{"name":"get_balance"}`), with("Mcp-Protocol-Version", "")},
			{"JSON-only Accept", "", fmt.Sprintf(call, "23", `{"name":"get_balance"}`), with("Accept", "application/json")},
			{"wildcard Accept", "", fmt.Sprintf(call, "24", `{"name":"get_balance"}`), with("Accept", "*/*")},
			{"text Content-Type", "", fmt.Sprintf(call, "25", `{"name":"get_balance"}`), with("Content-Type", "text/plain")},
			{"charset Content-Type", "", fmt.Sprintf(call, "26", `{"name":"get_balance"}`), with("Content-Type", "application/json; charset=utf-8")},
			{"Last-Event-ID", "", fmt.Sprintf(call, "27", `{"name":"get_balance"}`), with("Last-Event-ID", "s_1")},
			{"large body", "", fmt.Sprintf(call, "28", `{"name":"get_balance","arguments":{"pad":"`+strings.Repeat("x", mcp.DefaultMaxRequestBodyBytes)+`"}}`), good},
		}
		out := map[string]answer{}
		for _, tc := range cases {
			req, err := http.NewRequest(http.MethodPost, f.endpoint(), strings.NewReader(tc.body))
			if err != nil {
				t.Fatal(err)
			}
			for k, v := range tc.header {
				req.Header.Set(k, v)
			}
			if tc.host != "" {
				req.Host = tc.host
			}
			resp, err := http.DefaultClient.Do(req)
			if err != nil {
				t.Fatalf("%s: %v", tc.name, err)
			}
			body, _ := io.ReadAll(resp.Body)
			_ = resp.Body.Close()
			a := answer{Status: resp.StatusCode, ContentType: resp.Header.Get("Content-Type")}
			if strings.HasPrefix(a.ContentType, "text/event-stream") && !sdk && a.Status == http.StatusOK {
				// The direct path follows the upstream's framing (agentstream.go), the SDK's
				// handler answers JSON: the answer compared is the stream's last message.
				var last string
				for _, line := range strings.Split(string(body), "\n") {
					if d, ok := strings.CutPrefix(line, "data: "); ok {
						last = d
					}
				}
				body, a.ContentType = []byte(last), "application/json"
			}
			var msg struct {
				ID     json.RawMessage       `json:"id"`
				Error  *struct{ Code int64 } `json:"error"`
				Result *struct {
					IsError bool           `json:"isError"`
					Meta    map[string]any `json:"_meta"`
					Content []struct {
						Text string `json:"text"`
					} `json:"content"`
				} `json:"result"`
			}
			if strings.HasPrefix(a.ContentType, "application/json") && json.Unmarshal(body, &msg) == nil {
				a.ID = string(msg.ID)
				if msg.Error != nil {
					a.ErrorCode = msg.Error.Code
				}
				if r := msg.Result; r != nil {
					a.IsError = r.IsError
					a.EFCode, _ = r.Meta[MetaEFCode].(string)
					if len(r.Content) > 0 && !r.IsError {
						a.Text = r.Content[0].Text
					}
				}
			} else if a.Status >= 400 {
				a.Text = strings.TrimSpace(string(body)) // the SDK's plain-text refusals
			}
			out[tc.name] = a
		}
		return out, f.proxy.directAgent()
	}
	sdk, n := run(true)
	if n != 0 {
		t.Fatalf("the SDK-only proxy answered %d calls directly", n)
	}
	direct, n := run(false)
	if n == 0 {
		t.Fatal("the direct path answered none of the requests")
	}
	for name, want := range sdk {
		if got := direct[name]; got != want {
			t.Errorf("%s:\n direct %+v\n sdk    %+v", name, got, want)
		}
	}
	if a := direct["hot call"]; a.Status != http.StatusOK || a.ID != "7" || a.Text != `{"ok":true}` {
		t.Errorf("hot call: %+v", a)
	}
	// A body that is more than one JSON value runs on neither path (envelope-04 §12.7).
	for _, name := range []string{"trailing bytes", "trailing object", "not JSON"} {
		if a := direct[name]; a.Status != http.StatusBadRequest {
			t.Errorf("%s: %+v, want HTTP 400", name, a)
		}
	}
}

// TestCancelledOnlyWhenAbandoned: the upstream gets notifications/cancelled for a call the proxy
// abandoned at its deadline, and for no other: a call the upstream answered with a JSON-RPC
// error was not abandoned (the call's context is judged before it is cancelled, not after).
func TestCancelledOnlyWhenAbandoned(t *testing.T) {
	for _, m := range modes {
		t.Run(m.name, func(t *testing.T) {
			release := make(chan struct{})
			t.Cleanup(func() { close(release) })
			var mu sync.Mutex
			callIDs := map[string]string{} // tool → JSON-RPC id of its tools/call
			var cancelled []string         // requestIds of notifications/cancelled
			intercept := func(_ http.ResponseWriter, r *http.Request) bool {
				if r.Method != http.MethodPost {
					return false
				}
				b, _ := io.ReadAll(r.Body)
				r.Body = io.NopCloser(bytes.NewReader(b))
				var msg struct {
					ID     json.RawMessage `json:"id"`
					Method string          `json:"method"`
					Params struct {
						Name      string          `json:"name"`
						RequestID json.RawMessage `json:"requestId"`
					} `json:"params"`
				}
				if json.Unmarshal(b, &msg) == nil {
					mu.Lock()
					switch msg.Method {
					case wire.MethodCallTool:
						callIDs[msg.Params.Name] = string(msg.ID)
					case "notifications/cancelled":
						cancelled = append(cancelled, string(msg.Params.RequestID))
					}
					mu.Unlock()
				}
				return false
			}
			tools := []mcptest.Tool{
				{Name: "ticket_crash", Handler: func(context.Context, json.RawMessage) (*mcp.CallToolResult, error) {
					return nil, &jsonrpc.Error{Code: -32000, Message: "handler crashed half way"}
				}},
				{Name: "ticket_slow", Handler: func(ctx context.Context, _ json.RawMessage) (*mcp.CallToolResult, error) {
					select {
					case <-release:
					case <-ctx.Done():
					}
					return mcptest.Text("late"), nil
				}},
			}
			// A JSON upstream: its error answer is read whole before the call returns. The deadline
			// leaves ticket_crash's answer time to arrive on a loaded machine, so only ticket_slow
			// is abandoned.
			f := newFixture(t, fixtureOpts{tools: tools, upstream: mcptest.Options{Intercept: intercept, JSONResponse: true},
				configure: func(c *Config) { c.CallTimeout = 2 * time.Second; c.sdkOnly = m.sdkOnly }})
			cs := f.agent()
			if res := call(t, cs, "ticket_crash", `{}`, nil); efCode(res) != "EF_INDETERMINATE" {
				t.Fatalf("ticket_crash: %s", text(res))
			}
			if res := call(t, cs, "ticket_slow", `{}`, nil); efCode(res) != "EF_INDETERMINATE" {
				t.Fatalf("ticket_slow: %s", text(res))
			}
			deadline := time.Now().Add(5 * time.Second)
			for {
				mu.Lock()
				got, slow := append([]string(nil), cancelled...), callIDs["ticket_slow"]
				mu.Unlock()
				if len(got) > 0 {
					if len(got) != 1 || got[0] != slow {
						t.Fatalf("notifications/cancelled for %q; want only the abandoned call %s (ticket_crash was %s)", got, slow, callIDs["ticket_crash"])
					}
					break
				}
				if time.Now().After(deadline) {
					t.Fatal("the abandoned call was never cancelled upstream")
				}
				time.Sleep(10 * time.Millisecond)
			}
		})
	}
}
