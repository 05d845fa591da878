package mcpproxy

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/actgate/actgate/internal/journal"
	"github.com/actgate/actgate/internal/mcpproxy/eventlog"
	"github.com/actgate/actgate/internal/mcpproxy/mcptest"
	"github.com/actgate/actgate/internal/mcpproxy/wire"
)

// newRawSession1125 is newRawSession at 2025-11-25, the first revision whose servers prime
// their answer streams with an event id (streamable HTTP, resumability and redelivery).
func newRawSession1125(t *testing.T, endpoint string) *rawSession {
	t.Helper()
	r := &rawSession{t: t, endpoint: endpoint, next: 1}
	_, hdr := r.post(`{"jsonrpc":"2.0","id":0,"method":"initialize","params":{"protocolVersion":"2025-11-25","capabilities":{},"clientInfo":{"name":"raw","version":"1"}}}`)
	r.session = hdr.Get("Mcp-Session-Id")
	if r.session == "" {
		t.Fatal("initialize: no session id")
	}
	r.version = "2025-11-25"
	r.post(`{"jsonrpc":"2.0","method":"notifications/initialized"}`)
	return r
}

// parseEvents splits an event-stream body into its events (those with an id or data).
func parseEvents(body string) []sseEvent {
	var out []sseEvent
	for _, block := range strings.Split(body, "\n\n") {
		var ev sseEvent
		for _, line := range strings.Split(block, "\n") {
			if line == "" {
				continue
			}
			ev.lines = append(ev.lines, line)
			if v, ok := strings.CutPrefix(line, "id: "); ok {
				ev.id = v
			}
			if v, ok := strings.CutPrefix(line, "data: "); ok {
				ev.data = v
			}
		}
		if ev.id != "" || ev.data != "" {
			out = append(out, ev)
		}
	}
	return out
}

// lastEventIDs records the Last-Event-ID of each GET an upstream gets, then lets it through.
type lastEventIDs struct {
	mu  sync.Mutex
	ids []string
}

func (l *lastEventIDs) intercept(_ http.ResponseWriter, r *http.Request) bool {
	if r.Method == http.MethodGet && r.Header.Get("Last-Event-ID") != "" {
		l.mu.Lock()
		l.ids = append(l.ids, r.Header.Get("Last-Event-ID"))
		l.mu.Unlock()
	}
	return false
}

// answerEmpty records a resuming GET as intercept does and answers it with an empty event
// stream (the upstream has nothing more for it); it reports whether r was one.
func (l *lastEventIDs) answerEmpty(w http.ResponseWriter, r *http.Request) bool {
	if r.Method != http.MethodGet || r.Header.Get("Last-Event-ID") == "" {
		return false
	}
	l.intercept(w, r)
	w.Header().Set("Content-Type", "text/event-stream")
	return true
}

func (l *lastEventIDs) get() []string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return append([]string(nil), l.ids...)
}

// sdkTicketTool adds ticket_create to the fixture's Go SDK server, answering with run, and
// returns how many times it ran.
func sdkTicketTool(f *fixture, run func(context.Context, *mcp.CallToolRequest) *mcp.CallToolResult) *atomic.Int64 {
	ran := &atomic.Int64{}
	f.up.MCP().AddTool(&mcp.Tool{Name: "ticket_create", InputSchema: json.RawMessage(`{"type":"object"}`)},
		func(ctx context.Context, req *mcp.CallToolRequest) (*mcp.CallToolResult, error) {
			ran.Add(1)
			return run(ctx, req), nil
		})
	return ran
}

// TestAnswerStreamCarriesUpstreamIDs: in front of the Go SDK's server with an event store, a
// tools/call's answer stream carries the upstream's events with the upstream's ids as written
// (its priming event, its log message, the response under the agent's id); the agent's GET
// with the priming event's id is relayed to the upstream with that id, and the agent gets what
// the upstream replays: the same events, the same ids, the response under the agent's id. The
// replayed response settles nothing: the tool ran once, the journal holds one EXECUTED, and
// the same call again is answered from the journal.
func TestAnswerStreamCarriesUpstreamIDs(t *testing.T) {
	gets := &lastEventIDs{}
	tools := bankTools()[:1] // get_balance only: ticket_create is the SDK tool below
	f := newFixture(t, fixtureOpts{tools: tools, upstream: mcptest.Options{Intercept: gets.intercept, EventStore: true}})
	ran := sdkTicketTool(f, func(ctx context.Context, req *mcp.CallToolRequest) *mcp.CallToolResult {
		_ = req.Session.Log(ctx, &mcp.LoggingMessageParams{Level: "info", Data: "working"})
		return mcptest.Text("ticket 7")
	})
	s := newRawSession1125(t, f.endpoint())
	s.post(`{"jsonrpc":"2.0","id":1,"method":"logging/setLevel","params":{"level":"debug"}}`)

	call := `{"jsonrpc":"2.0","id":%d,"method":"tools/call","params":{"name":"ticket_create","arguments":{"t":"x"}}}`
	status, ct, body := agentExchange(t, s, http.MethodPost, fmt.Sprintf(call, 5), nil)
	evs := parseEvents(body)
	if status != http.StatusOK || ct != "text/event-stream" || len(evs) != 3 {
		t.Fatalf("the POST's answer: HTTP %d %s\n%s\nwant three events (priming, log message, response)", status, ct, body)
	}
	for i, ev := range evs {
		if strings.HasPrefix(ev.id, eventlog.Prefix) || !strings.Contains(ev.id, "_") {
			t.Errorf("event %d: id %q, want the upstream's ({stream}_{n})", i, ev.id)
		}
	}
	if evs[0].data != "" || !strings.Contains(evs[1].data, `"working"`) ||
		evs[2].data != `{"jsonrpc":"2.0","id":5,"result":{"content":[{"type":"text","text":"ticket 7"}]}}` {
		t.Fatalf("the POST's events:\n%s", body)
	}

	status, ct, body = agentExchange(t, s, http.MethodGet, "", map[string]string{"Last-Event-ID": evs[0].id})
	replay := parseEvents(body)
	if status != http.StatusOK || ct != "text/event-stream" || len(replay) != 2 {
		t.Fatalf("the resuming GET: HTTP %d %s\n%s\nwant the upstream's two events after %s", status, ct, body, evs[0].id)
	}
	for i, ev := range replay {
		if ev.id != evs[i+1].id || ev.data != evs[i+1].data {
			t.Errorf("replayed event %d: id %q data %s; want the POST's event: id %q data %s", i, ev.id, ev.data, evs[i+1].id, evs[i+1].data)
		}
	}
	if got := gets.get(); len(got) != 1 || got[0] != evs[0].id {
		t.Errorf("the upstream's resuming GETs: %q, want one with Last-Event-ID %q", got, evs[0].id)
	}
	if got := statesIn(t, f); got[journal.StateExecuted] != 1 || len(got) != 1 {
		t.Errorf("journal: %v, want one EXECUTED and nothing else", got)
	}
	_, _, body = agentExchange(t, s, http.MethodPost, fmt.Sprintf(call, 6), nil)
	if body != `{"jsonrpc":"2.0","id":6,"result":{"content":[{"type":"text","text":"ticket 7"}]}}` {
		t.Errorf("the same call again: %s, want the recorded result", body)
	}
	if n := ran.Load(); n != 1 {
		t.Errorf("the upstream ran the tool %d times, want 1", n)
	}
}

// TestAnswerStreamOwnIDsFromLog: what the gate writes itself on an answer stream gets an id of
// the gate's own, which no upstream id can be, and a resumption after it, or after an
// upstream id before it, is answered from the gate's log, not relayed: the upstream closes a
// tools/call's stream after its priming event and refuses the resumption, so the answer is the
// gate's (EF_INDETERMINATE, the call's outcome unknown), which the upstream never had.
func TestAnswerStreamOwnIDsFromLog(t *testing.T) {
	up := &pollingUpstream{method: wire.MethodCallTool, failResume: true}
	f := newFixture(t, fixtureOpts{upstream: mcptest.Options{Intercept: up.intercept, EventStore: true}})
	s := newRawSession(t, f.endpoint())
	_, _, body := agentExchange(t, s, http.MethodPost, `{"jsonrpc":"2.0","id":9,"method":"tools/call","params":{"name":"ticket_create","arguments":{}}}`, nil)
	if body != "id: up-1\nretry: 80\ndata: \n\n" {
		t.Fatalf("the POST's answer:\n%s\nwant the upstream's priming event", body)
	}
	deadline := time.Now().Add(5 * time.Second)
	for statesIn(t, f)[journal.StateIndeterminate] != 1 {
		if time.Now().After(deadline) {
			t.Fatalf("journal: %v, want one INDETERMINATE", statesIn(t, f))
		}
		time.Sleep(20 * time.Millisecond)
	}
	_, _, body = agentExchange(t, s, http.MethodGet, "", map[string]string{"Last-Event-ID": "up-1"})
	evs := parseEvents(body)
	if len(evs) != 1 || !strings.HasPrefix(evs[0].id, eventlog.Prefix+"g") || !strings.Contains(evs[0].data, `"id":9,`) ||
		!strings.Contains(evs[0].data, "EF_INDETERMINATE") {
		t.Fatalf("the resuming GET:\n%s\nwant the gate's answer with an id of the gate's own", body)
	}
	if _, _, own := eventlog.ParseID(evs[0].id); !own {
		t.Errorf("the gate's answer's id %q is not one eventlog.ParseID reads as the gate's", evs[0].id)
	}
	status, _, body := agentExchange(t, s, http.MethodGet, "", map[string]string{"Last-Event-ID": evs[0].id})
	if status != http.StatusOK || body != "" {
		t.Errorf("a resumption after the gate's answer: HTTP %d %q, want an empty, ended stream", status, body)
	}
	up.mu.Lock()
	defer up.mu.Unlock()
	if up.posts != 1 || len(up.resumes) != 1 {
		t.Errorf("upstream: %d tools/call POSTs and resuming GETs %q; want 1 and the gate's alone", up.posts, up.resumes)
	}
}

// TestAnswerStreamGateNamespace: an upstream event id in the gate's namespace is given to the
// agent as actgate:u:{id}, and the agent's resumption with it reaches the upstream with the
// upstream's id.
func TestAnswerStreamGateNamespace(t *testing.T) {
	gets := &lastEventIDs{}
	intercept := func(w http.ResponseWriter, r *http.Request) bool {
		if gets.answerEmpty(w, r) {
			return true
		}
		_, method, id := rpcBody(r)
		if method != "resources/read" {
			return false
		}
		w.Header().Set("Content-Type", "text/event-stream")
		fmt.Fprintf(w, "id: actgate:g1-0\ndata: {\"jsonrpc\":\"2.0\",\"id\":%s,\"result\":{\"contents\":[]}}\n\n", id)
		return true
	}
	f := newFixture(t, fixtureOpts{upstream: mcptest.Options{Intercept: intercept}})
	s := newRawSession(t, f.endpoint())
	_, _, body := agentExchange(t, s, http.MethodPost, `{"jsonrpc":"2.0","id":"r","method":"resources/read","params":{"uri":"x:y"}}`, nil)
	evs := parseEvents(body)
	if len(evs) != 1 || evs[0].id != "actgate:u:actgate:g1-0" {
		t.Fatalf("the answer:\n%s\nwant the upstream's id as actgate:u:actgate:g1-0", body)
	}
	agentExchange(t, s, http.MethodGet, "", map[string]string{"Last-Event-ID": evs[0].id})
	if resumed := gets.get(); len(resumed) != 1 || resumed[0] != "actgate:g1-0" {
		t.Errorf("the upstream's resuming GETs: %q, want one with its own id actgate:g1-0", resumed)
	}
}

// TestLastEventIDBadInput: a Last-Event-ID the gate cannot carry is refused with
// EF_EVENT_ID_INVALID before anything is resumed or relayed; one at the bound is the
// upstream's to judge.
func TestLastEventIDBadInput(t *testing.T) {
	gets := &lastEventIDs{}
	f := newFixture(t, fixtureOpts{upstream: mcptest.Options{Intercept: gets.intercept, EventStore: true}})
	s := newRawSession(t, f.endpoint())
	for _, tc := range []struct {
		name, id string
		status   int
	}{
		{"too long", strings.Repeat("x", wire.MaxEventID+1), http.StatusBadRequest},
		{"the gate's form, too long", "actgate:g1-" + strings.Repeat("1", wire.MaxEventID), http.StatusBadRequest},
		{"the gate's own of no stream", "actgate:g4-0", http.StatusNotFound},
	} {
		t.Run(tc.name, func(t *testing.T) {
			status, _, body := agentExchange(t, s, http.MethodGet, "", map[string]string{"Last-Event-ID": tc.id})
			if status != tc.status {
				t.Fatalf("HTTP %d %q, want %d", status, body, tc.status)
			}
			if tc.status == http.StatusBadRequest && !strings.Contains(body, "EF_EVENT_ID_INVALID") {
				t.Errorf("body %q, want EF_EVENT_ID_INVALID", body)
			}
		})
	}
	if got := gets.get(); len(got) != 0 {
		t.Errorf("the upstream got resuming GETs %q, want none", got)
	}
	// At the bound: relayed (the upstream, which has no such stream, answers it).
	agentExchange(t, s, http.MethodGet, "", map[string]string{"Last-Event-ID": strings.Repeat("x", wire.MaxEventID)})
	if got := gets.get(); len(got) != 1 {
		t.Errorf("an id of %d bytes: the upstream got %d resuming GETs, want 1", wire.MaxEventID, len(got))
	}
}

// TestAnswerStreamChangedAnswerFromLog: the gate's tools/list answer is not the upstream's
// bytes (the gate's additions), so on an upstream stream with ids it gets an id of the gate's
// own, and a resumption after the upstream's priming event is answered from the gate's log,
// additions included, not by the upstream's replay of its own list.
func TestAnswerStreamChangedAnswerFromLog(t *testing.T) {
	gets := &lastEventIDs{}
	intercept := func(w http.ResponseWriter, r *http.Request) bool {
		if gets.answerEmpty(w, r) {
			return true
		}
		_, method, id := rpcBody(r)
		if method != wire.MethodListTools {
			return false
		}
		w.Header().Set("Content-Type", "text/event-stream")
		fmt.Fprintf(w, "id: up-1\ndata: \n\nid: up-2\ndata: {\"jsonrpc\":\"2.0\",\"id\":%s,\"result\":{\"tools\":[{\"name\":\"get_balance\",\"inputSchema\":{\"type\":\"object\"}}]}}\n\n", id)
		return true
	}
	f := newFixture(t, fixtureOpts{upstream: mcptest.Options{Intercept: intercept}})
	s := newRawSession(t, f.endpoint())
	_, _, body := agentExchange(t, s, http.MethodPost, `{"jsonrpc":"2.0","id":"l","method":"tools/list","params":{}}`, nil)
	evs := parseEvents(body)
	if len(evs) != 2 || evs[0].id != "up-1" || !strings.HasPrefix(evs[1].id, eventlog.Prefix+"g") || !strings.Contains(evs[1].data, "request_binding_moment") {
		t.Fatalf("the answer:\n%s\nwant the upstream's priming event, then the gate's list under an id of the gate's", body)
	}
	_, _, body = agentExchange(t, s, http.MethodGet, "", map[string]string{"Last-Event-ID": "up-1"})
	if replay := parseEvents(body); len(replay) != 1 || replay[0].id != evs[1].id || replay[0].data != evs[1].data {
		t.Fatalf("the resuming GET:\n%s\nwant the gate's list from its log", body)
	}
	if got := gets.get(); len(got) != 0 {
		t.Errorf("the upstream got resuming GETs %q, want none", got)
	}
}

// TestSDKServerClosedStream: the Go SDK's server with an event store, whose tool closes its
// answer stream before the response (streamable HTTP polling, CloseSSEStream). The agent's answer is the
// upstream's priming event and nothing else; its resumption with that id while the gate holds
// the upstream's resumed stream gets the response from the gate's log under the upstream's
// id; a later resumption with the same id, once the gate has read the response, is relayed to
// the upstream, which replays the response from its event store: the same id and bytes. The
// tool ran once and the journal holds one EXECUTED.
func TestSDKServerClosedStream(t *testing.T) {
	gets := &lastEventIDs{}
	f := newFixture(t, fixtureOpts{tools: bankTools()[:1], upstream: mcptest.Options{Intercept: gets.intercept, EventStore: true}})
	ran := sdkTicketTool(f, func(_ context.Context, req *mcp.CallToolRequest) *mcp.CallToolResult {
		req.Extra.CloseSSEStream(mcp.CloseSSEStreamArgs{RetryAfter: 2 * time.Second})
		time.Sleep(300 * time.Millisecond)
		return mcptest.Text("ticket 8")
	})
	s := newRawSession1125(t, f.endpoint())
	_, ct, body := agentExchange(t, s, http.MethodPost, `{"jsonrpc":"2.0","id":3,"method":"tools/call","params":{"name":"ticket_create","arguments":{}}}`, nil)
	evs := parseEvents(body)
	if ct != "text/event-stream" || len(evs) != 1 || evs[0].data != "" || strings.HasPrefix(evs[0].id, eventlog.Prefix) {
		t.Fatalf("the POST's answer: %s\n%s\nwant the upstream's priming event alone", ct, body)
	}
	want := `{"jsonrpc":"2.0","id":3,"result":{"content":[{"type":"text","text":"ticket 8"}]}}`
	_, _, body = agentExchange(t, s, http.MethodGet, "", map[string]string{"Last-Event-ID": evs[0].id})
	live := parseEvents(body)
	if len(live) != 1 || live[0].data != want || strings.HasPrefix(live[0].id, eventlog.Prefix) {
		t.Fatalf("the resumption while the gate reads:\n%s\nwant the response under the upstream's id", body)
	}
	_, _, body = agentExchange(t, s, http.MethodGet, "", map[string]string{"Last-Event-ID": evs[0].id})
	replay := parseEvents(body)
	if len(replay) != 1 || replay[0].id != live[0].id || replay[0].data != want {
		t.Fatalf("the resumption after the response:\n%s\nwant the upstream's replay, id %s", body, live[0].id)
	}
	if got := gets.get(); len(got) != 2 || got[0] != evs[0].id || got[1] != evs[0].id {
		t.Errorf("the upstream's resuming GETs: %q, want two with %q (the gate's, then the agent's relayed)", got, evs[0].id)
	}
	if got := statesIn(t, f); got[journal.StateExecuted] != 1 || len(got) != 1 {
		t.Errorf("journal: %v, want one EXECUTED and nothing else", got)
	}
	if n := ran.Load(); n != 1 {
		t.Errorf("the upstream ran the tool %d times, want 1", n)
	}
}
