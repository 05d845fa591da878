package mcpproxy

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/jsonrpc"
	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/actgate/actgate/internal/ef"
	"github.com/actgate/actgate/internal/journal"
	"github.com/actgate/actgate/internal/mcpproxy/mcptest"
	"github.com/actgate/actgate/internal/mcpproxy/wire"
)

// statesIn counts the journal's records in each state.
func statesIn(t *testing.T, f *fixture) map[journal.State]int {
	t.Helper()
	out := map[journal.State]int{}
	for _, s := range []journal.State{journal.StateConsumed, journal.StateDispatchPending, journal.StateInvoked,
		journal.StateExecuted, journal.StateFailed, journal.StateIndeterminate} {
		recs, err := f.store.InState(context.Background(), s)
		if err != nil {
			t.Fatal(err)
		}
		if len(recs) > 0 {
			out[s] = len(recs)
		}
	}
	return out
}

// isToolsCall reports whether an upstream HTTP request carries a tools/call, leaving its body
// readable.
func isToolsCall(r *http.Request) bool {
	if r.Method != http.MethodPost {
		return false
	}
	b, _ := io.ReadAll(r.Body)
	r.Body = io.NopCloser(strings.NewReader(string(b)))
	return strings.Contains(string(b), `"method":"tools/call"`)
}

// TestInvokeOutcomes: every way one upstream attempt can end, through the real stack, judged
// by the journal the sink wrote and the upstream's own count (action-evidence-boundary
// "Classify the Effect Outcome"; sink.Invoker contract).
func TestInvokeOutcomes(t *testing.T) {
	for _, m := range modes {
		t.Run(m.name, func(t *testing.T) { invokeOutcomes(t, m.sdkOnly) })
	}
}

// invokeOutcomes is TestInvokeOutcomes through one of the two paths (sdk: the SDK sessions only).
func invokeOutcomes(t *testing.T, sdk bool) {
	release := make(chan struct{})
	t.Cleanup(func() { close(release) })
	tools := append(bankTools(),
		mcptest.Tool{Name: "ticket_refused", Handler: func(context.Context, json.RawMessage) (*mcp.CallToolResult, error) {
			return mcptest.ErrorText("queue full"), nil
		}},
		mcptest.Tool{Name: "ticket_slow", Handler: func(ctx context.Context, _ json.RawMessage) (*mcp.CallToolResult, error) {
			select {
			case <-release:
			case <-ctx.Done():
			}
			return mcptest.Text("late"), nil
		}},
		mcptest.Tool{Name: "ticket_crash", Handler: func(context.Context, json.RawMessage) (*mcp.CallToolResult, error) {
			return nil, &jsonrpc.Error{Code: -32000, Message: "handler crashed half way"}
		}},
		mcptest.Tool{Name: "ticket_browser", Handler: func(context.Context, json.RawMessage) (*mcp.CallToolResult, error) {
			return nil, &jsonrpc.Error{Code: -32042, Message: "This request requires browser-based authorization.",
				Data: json.RawMessage(`{"elicitations":[{"mode":"url","url":"https://example.com/auth","message":"Open it","elicitationId":"e-1"}]}`)}
		}},
	)
	var mode atomic.Value // what the upstream's HTTP layer does to the next tools/call
	mode.Store("")
	intercept := func(w http.ResponseWriter, r *http.Request) bool {
		m := mode.Load().(string)
		if m == "" || !isToolsCall(r) {
			return false
		}
		switch m {
		case "401":
			http.Error(w, "bad credential", http.StatusUnauthorized)
		case "503":
			http.Error(w, "overloaded", http.StatusServiceUnavailable)
		case "drop":
			// The request arrived; the connection dies before any answer.
			hj, ok := w.(http.Hijacker)
			if !ok {
				t.Error("no hijacker")
				return true
			}
			conn, _, err := hj.Hijack()
			if err == nil {
				_ = conn.Close()
			}
		}
		return true
	}
	f := newFixture(t, fixtureOpts{tools: tools, upstream: mcptest.Options{Intercept: intercept},
		configure: func(c *Config) { c.CallTimeout = 300 * time.Millisecond; c.sdkOnly = sdk }})
	cs := f.agent()

	cases := []struct {
		name       string
		tool, mode string
		state      journal.State // recorded outcome
		ran        int           // the upstream's handler ran
		isError    bool          // the agent's result is an error
		code       ef.EFCode     // refusal code, if the gate refused
		rpc        int64         // the upstream's JSON-RPC error the agent gets instead of a result
		data       string        // and its data, as the upstream wrote it
	}{
		{"executed", "ticket_create", "", journal.StateExecuted, 1, false, "", 0, ""},
		{"upstream isError result", "ticket_refused", "", journal.StateFailed, 1, true, "", 0, ""},
		{"HTTP 401 before execution", "ticket_create", "401", journal.StateFailed, 0, true, "", 0, ""},
		{"unknown tool at the upstream (invalid params)", "ticket_ghost", "", journal.StateFailed, 0, true, "", wire.CodeInvalidParams, ""},
		{"URL elicitation required (-32042) before execution", "ticket_browser", "", journal.StateFailed, 1, true, "", wire.CodeURLElicitationRequired,
			`{"elicitations":[{"mode":"url","url":"https://example.com/auth","message":"Open it","elicitationId":"e-1"}]}`},
		{"JSON-RPC server error from the handler", "ticket_crash", "", journal.StateIndeterminate, 1, true, ef.EFIndeterminate, 0, ""},
		{"HTTP 503", "ticket_create", "503", journal.StateIndeterminate, 0, true, ef.EFIndeterminate, 0, ""},
		{"connection lost after sending", "ticket_create", "drop", journal.StateIndeterminate, 0, true, ef.EFIndeterminate, 0, ""},
		{"timeout after sending", "ticket_slow", "", journal.StateIndeterminate, 1, true, ef.EFIndeterminate, 0, ""},
	}
	for i, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			before := statesIn(t, f)
			ranBefore := f.up.Count(tc.tool)
			mode.Store(tc.mode)
			defer mode.Store("")
			// Distinct arguments per case: a retry of an INDETERMINATE action is refused.
			res, err := cs.CallTool(context.Background(), &mcp.CallToolParams{Name: tc.tool, Arguments: json.RawMessage(fmt.Sprintf(`{"case":%d}`, i))})
			if tc.rpc != 0 {
				// The upstream's refusal passed through as it wrote it (not the gate's EF result).
				var we *jsonrpc.Error
				if !errors.As(err, &we) || we.Code != tc.rpc || (tc.data != "" && string(we.Data) != tc.data) {
					t.Fatalf("tools/call %s: got %v (%+v), want the upstream's JSON-RPC error %d with data %s", tc.tool, err, res, tc.rpc, tc.data)
				}
				res = &mcp.CallToolResult{IsError: true}
			} else if err != nil {
				t.Fatalf("tools/call %s: %v", tc.tool, err)
			}
			after := statesIn(t, f)
			if after[tc.state] != before[tc.state]+1 {
				t.Errorf("journal %v → %v, want one more %s", before, after, tc.state)
			}
			if n := f.up.Count(tc.tool) - ranBefore; n != tc.ran {
				t.Errorf("upstream ran %s %d times, want %d", tc.tool, n, tc.ran)
			}
			if res.IsError != tc.isError || efCode(res) != string(tc.code) {
				t.Errorf("agent result isError=%v code=%q, want %v %q: %s", res.IsError, efCode(res), tc.isError, tc.code, text(res))
			}
			if tc.code == ef.EFIndeterminate && !strings.Contains(text(res), `"invoked":true`) {
				// Dispatched, outcome unknown: the error object says the tool was invoked.
				t.Errorf("INDETERMINATE refusal of a dispatched call does not say invoked: %s", text(res))
			}
		})
	}

	t.Run("retry of an INDETERMINATE action is not sent", func(t *testing.T) {
		n := f.up.Count("ticket_slow")
		idx := -1
		for i, tc := range cases {
			if tc.tool == "ticket_slow" {
				idx = i
			}
		}
		res := call(t, cs, "ticket_slow", fmt.Sprintf(`{"case":%d}`, idx), nil)
		if efCode(res) != string(ef.EFIndeterminate) || f.up.Count("ticket_slow") != n {
			t.Fatalf("retry: %s (upstream count %d → %d)", mustJSON(t, res), n, f.up.Count("ticket_slow"))
		}
	})
}

// TestUpstreamUnreachable: a call that cannot reach the upstream was not sent: FAILED, and
// the agent is told so; the next call, with the upstream back, runs on a new upstream session.
func TestUpstreamUnreachable(t *testing.T) {
	f := newFixture(t, fixtureOpts{})
	cs := f.agent() // the upstream session exists
	addr := strings.TrimSuffix(strings.TrimPrefix(f.up.URL, "http://"), "/mcp")
	if err := f.up.Close(); err != nil {
		t.Fatal(err)
	}
	res := call(t, cs, "ticket_create", `{"title":"a"}`, nil)
	if !res.IsError || !strings.Contains(text(res), "not sent") {
		t.Fatalf("result %s", mustJSON(t, res))
	}
	if st := statesIn(t, f); st[journal.StateFailed] != 1 || st[journal.StateIndeterminate] != 0 {
		t.Fatalf("journal %v, want one FAILED (not sent)", st)
	}
	// The upstream comes back on the same address.
	up2, err := mcptest.Start(bankTools(), mcptest.Options{Addr: addr})
	if err != nil {
		t.Skipf("could not rebind %s: %v", addr, err)
	}
	t.Cleanup(func() { _ = up2.Close() })
	res = call(t, cs, "ticket_create", `{"title":"b"}`, nil)
	if res.IsError || up2.Count("ticket_create") != 1 {
		t.Fatalf("after the upstream returned: %s (count %d)", mustJSON(t, res), up2.Count("ticket_create"))
	}
}
