//go:build unix

package faults

import (
	"encoding/json"
	"errors"
	"fmt"
	"net"
	"net/http"
	"sync/atomic"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/jsonrpc"
	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/actgate/actgate/internal/ef"
	"github.com/actgate/actgate/internal/journal"
	"github.com/actgate/actgate/internal/sink"
)

// faulty answers each tools/call of the protected tool itself, counting it (the upstream's own
// count: the request reached it), with one of the faults below; other requests (initialize,
// tools/list, notifications) reach the real MCP server.
type faulty struct {
	calls  atomic.Int32
	answer func(w http.ResponseWriter, id json.RawMessage)
}

func (f *faulty) intercept(w http.ResponseWriter, r *http.Request) bool {
	isCall, body := toolsCallBody(r)
	if !isCall {
		return false
	}
	var m struct {
		ID     json.RawMessage `json:"id"`
		Params struct {
			Name string `json:"name"`
		} `json:"params"`
	}
	if err := json.Unmarshal(body, &m); err != nil || m.Params.Name != protectedTool {
		return false
	}
	f.calls.Add(1)
	f.answer(w, m.ID)
	return true
}

// jsonAnswer writes a 200 application/json body.
func jsonAnswer(body string) func(http.ResponseWriter, json.RawMessage) {
	return func(w http.ResponseWriter, id json.RawMessage) {
		w.Header().Set("Content-Type", "application/json")
		_, _ = fmt.Fprintf(w, body, id)
	}
}

// resetMidResponse starts an SSE response carrying half a JSON-RPC message and then resets the
// connection (SO_LINGER 0: RST, not FIN).
func resetMidResponse(w http.ResponseWriter, id json.RawMessage) {
	conn, buf, err := http.NewResponseController(w).Hijack()
	if err != nil {
		panic(err)
	}
	_, _ = buf.WriteString("HTTP/1.1 200 OK\r\nContent-Type: text/event-stream\r\nCache-Control: no-cache\r\n\r\n" +
		`event: message` + "\n" + `data: {"jsonrpc":"2.0","id":` + string(id) + `,"result":{"content":[{"type":"te`)
	_ = buf.Flush()
	if tc, ok := conn.(*net.TCPConn); ok {
		_ = tc.SetLinger(0)
	}
	_ = conn.Close()
}

// TestUpstreamFaults: the upstream of a protected tool hangs, resets the connection in the
// middle of its response, or answers with malformed JSON-RPC. The call was dispatched (the
// authority is spent and DISPATCH_PENDING journaled), so the question is only what the
// outcome is: INDETERMINATE whenever the upstream may have acted without saying so, FAILED
// only on its authoritative refusal (action-evidence-boundary "Classify the Effect Outcome";
// internal/mcpproxy doc). An INDETERMINATE call is never re-invoked by a retry, in any session,
// until reconciled (tool-use-binding §23 EF_INDETERMINATE).
func TestUpstreamFaults(t *testing.T) {
	for _, tc := range []struct {
		name string
		// hold makes the real tool block past the call timeout; answer intercepts instead.
		hold   bool
		answer func(http.ResponseWriter, json.RawMessage)
		state  journal.State
		reason journal.Reason
		// rpc: the upstream's JSON-RPC refusal the agent gets instead of a result, as the
		// upstream wrote it (docs/api.md "MCP through the gate").
		rpc int64
	}{
		{name: "hangs past CallTimeout", hold: true, state: journal.StateIndeterminate, reason: sink.ReasonUpstreamUnknown},
		{name: "resets mid-response", answer: resetMidResponse, state: journal.StateIndeterminate, reason: sink.ReasonUpstreamUnknown},
		{name: "answers non-JSON", answer: jsonAnswer(`this is not JSON-RPC %s`), state: journal.StateIndeterminate, reason: sink.ReasonUpstreamUnknown},
		{name: "answers a result of the wrong shape", answer: jsonAnswer(`{"jsonrpc":"2.0","id":%s,"result":42}`),
			state: journal.StateIndeterminate, reason: sink.ReasonUpstreamUnknown},
		{name: "answers HTTP 500", answer: func(w http.ResponseWriter, _ json.RawMessage) {
			http.Error(w, "upstream exploded", http.StatusInternalServerError)
		}, state: journal.StateIndeterminate, reason: sink.ReasonUpstreamUnknown},
		{name: "answers a JSON-RPC internal error", answer: jsonAnswer(`{"jsonrpc":"2.0","id":%s,"error":{"code":-32603,"message":"boom"}}`),
			state: journal.StateIndeterminate, reason: sink.ReasonUpstreamUnknown},
		// Invalid params is the upstream's refusal before execution: authoritative, FAILED.
		{name: "refuses with JSON-RPC invalid params", answer: jsonAnswer(`{"jsonrpc":"2.0","id":%s,"error":{"code":-32602,"message":"no such field"}}`),
			state: journal.StateFailed, reason: sink.ReasonUpstreamFailed, rpc: -32602},
	} {
		t.Run(tc.name, func(t *testing.T) {
			f := &faulty{answer: tc.answer}
			var intercept func(http.ResponseWriter, *http.Request) bool
			if tc.answer != nil {
				intercept = f.intercept
			}
			u := startUpstream(t, tc.hold, intercept)
			count := func() int { return u.Count(protectedTool) + int(f.calls.Load()) }
			g := newStandalone(t, u.URL, time.Second) // the smallest CallTimeout the config accepts
			p := g.start(t)

			start := time.Now()
			r, err := callTool(agent(t, p.endpoint()), protectedTool, ticketArgs, 30*time.Second)
			took := time.Since(start)
			if count() != 1 {
				t.Fatalf("upstream count %d after the call, want 1", count())
			}
			if tc.rpc != 0 {
				var we *jsonrpc.Error
				if !errors.As(err, &we) || we.Code != tc.rpc {
					t.Fatalf("want the upstream's JSON-RPC error %d passed through, got %v %s", tc.rpc, err, js(r))
				}
				r = &mcp.CallToolResult{IsError: true}
			} else if err != nil {
				t.Fatalf("tools/call %s: %v", protectedTool, err)
			}
			if !r.IsError {
				t.Fatalf("a faulty upstream's answer passed as success: %s", js(r))
			}
			switch tc.state {
			case journal.StateIndeterminate:
				if efCode(r) != string(ef.EFIndeterminate) || metaState(r) != string(journal.StateIndeterminate) {
					t.Fatalf("want EF_INDETERMINATE, state INDETERMINATE: %s", js(r))
				}
				// Never re-invoked: not in a new session, not after the gate restarts.
				if rr := mustCall(t, agent(t, p.endpoint()), protectedTool, ticketArgs); efCode(rr) != string(ef.EFIndeterminate) {
					t.Fatalf("retry in a new session: %s", js(rr))
				}
				p.stop(t)
				p = g.start(t)
				if rr := mustCall(t, agent(t, p.endpoint()), protectedTool, ticketArgs); efCode(rr) != string(ef.EFIndeterminate) {
					t.Fatalf("retry after a restart: %s", js(rr))
				}
				if count() != 1 {
					t.Fatalf("a retry reached the upstream: count %d", count())
				}
			case journal.StateFailed:
				if efCode(r) != "" {
					t.Errorf("the upstream's own refusal carries an EF code: %s", js(r))
				}
			}
			if tc.hold && (took < time.Second || took > 15*time.Second) {
				t.Errorf("the hanging call took %v: CallTimeout is 1s", took)
			}
			p.stop(t)

			w := g.readWorld(t)
			recs := w.all()
			if len(recs) != 1 || recs[0].State != tc.state || recs[0].Reason != tc.reason {
				t.Fatalf("journal: %s, want one %s record with reason %s", js(recs), tc.state, tc.reason)
			}
			g.verifyReceipts(t)
		})
	}
}
