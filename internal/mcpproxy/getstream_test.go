package mcpproxy

import (
	"bufio"
	"context"
	"encoding/json"
	"io"
	"net/http"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/actgate/actgate/internal/mcpproxy/mcptest"
	"github.com/actgate/actgate/internal/mcpproxy/wire"
)

// sseEvent is one event of a stream as read off the wire: its lines, as written.
type sseEvent struct {
	id, data string
	lines    []string
}

// getStream opens the agent's GET stream on r's session (with Last-Event-ID when last is not
// empty) and returns its events as they come; cancel closes it.
func (r *rawSession) getStream(last string) (events <-chan sseEvent, status int, cancel func()) {
	r.t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, r.endpoint, nil)
	if err != nil {
		r.t.Fatal(err)
	}
	req.Header.Set("Accept", "text/event-stream")
	req.Header.Set("Mcp-Session-Id", r.session)
	req.Header.Set("Mcp-Protocol-Version", r.version)
	if last != "" {
		req.Header.Set("Last-Event-ID", last)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		cancel()
		r.t.Fatal(err)
	}
	ch := make(chan sseEvent, 64)
	go func() {
		defer close(ch)
		defer resp.Body.Close()
		sc := bufio.NewScanner(resp.Body)
		sc.Buffer(make([]byte, 0, 64<<10), 1<<20)
		var ev sseEvent
		for sc.Scan() {
			line := sc.Text()
			if line != "" {
				ev.lines = append(ev.lines, line)
				if v, ok := strings.CutPrefix(line, "id: "); ok {
					ev.id = v
				}
				if v, ok := strings.CutPrefix(line, "data: "); ok {
					ev.data = v
				}
				continue
			}
			ch <- ev
			ev = sseEvent{}
		}
	}()
	r.t.Cleanup(cancel)
	return ch, resp.StatusCode, cancel
}

// nextEvent returns the next event with data or an id, failing the test after a while.
func nextEvent(t *testing.T, events <-chan sseEvent) sseEvent {
	t.Helper()
	timeout := time.After(5 * time.Second)
	for {
		select {
		case ev, ok := <-events:
			if !ok {
				t.Fatal("the GET stream ended")
			}
			if ev.id != "" || ev.data != "" {
				return ev
			}
		case <-timeout:
			t.Fatal("no event on the GET stream")
		}
	}
}

// TestGETStreamTaskStatus: a notifications/tasks/status the upstream sends on its GET stream
// (not a method of the SDK's types) reaches the agent as the upstream wrote it, after the
// upstream's priming event with its id and retry field.
func TestGETStreamTaskStatus(t *testing.T) {
	f := newTaskFixture(t)
	f.up.StatusStream()
	rs, _ := f.session()
	events, status, closeGET := rs.getStream("")
	defer closeGET()
	if status != http.StatusOK {
		t.Fatalf("GET: HTTP %d", status)
	}
	prime := nextEvent(t, events)
	if prime.id != "ts-0" || strings.Join(prime.lines, "\n") != "id: ts-0\nretry: 1000\ndata: " {
		t.Fatalf("priming event: %q; want the upstream's as written", prime.lines)
	}
	created := rs.request("7", "tools/call", `{"name":"ticket_task","arguments":{"title":"x"},"task":{"ttl":60000}}`)
	var cr struct {
		Result struct {
			Task struct {
				TaskID string `json:"taskId"`
			} `json:"task"`
		} `json:"result"`
	}
	if err := json.Unmarshal(created, &cr); err != nil || cr.Result.Task.TaskID == "" {
		t.Fatalf("task-augmented call: %s", created)
	}
	f.up.Finish(cr.Result.Task.TaskID, "completed", `{"content":[{"type":"text","text":"done"}]}`)
	ev := nextEvent(t, events)
	want := `{"jsonrpc":"2.0","method":"notifications/tasks/status","params":{"taskId":"` + cr.Result.Task.TaskID +
		`","status":"completed","createdAt":"2026-12-01T16:00:00Z","lastUpdatedAt":"2026-12-01T16:00:01Z","ttl":60000}}`
	if ev.id != "ts-1" || ev.data != want {
		t.Fatalf("task status: id %q data %s; want id ts-1 and %s", ev.id, ev.data, want)
	}
}

// TestGETStreamUpstreamRequests: a request the upstream puts to the agent on its GET stream
// (roots/list, outside any request) reaches the agent on the agent's GET stream under an id
// of the gate's own, and the agent's POSTed response is the upstream's answer; a ping there is
// answered by the gate (the agent declared nothing it needs) and not written to the agent.
func TestGETStreamUpstreamRequests(t *testing.T) {
	f := newFixture(t, fixtureOpts{})
	rs := &rawSession{t: t, endpoint: f.endpoint(), next: 1}
	_, hdr := rs.post(`{"jsonrpc":"2.0","id":0,"method":"initialize","params":{"protocolVersion":"2025-11-25","capabilities":{"roots":{"listChanged":true}},"clientInfo":{"name":"raw","version":"1"}}}`)
	rs.session, rs.version = hdr.Get("Mcp-Session-Id"), "2025-11-25"
	rs.post(`{"jsonrpc":"2.0","method":"notifications/initialized"}`)
	events, status, closeGET := rs.getStream("")
	defer closeGET()
	if status != http.StatusOK {
		t.Fatalf("GET: HTTP %d", status)
	}
	var up *mcp.ServerSession
	for ss := range f.up.MCP().Sessions() {
		up = ss
	}
	if up == nil {
		t.Fatal("no upstream session")
	}
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	if err := up.Ping(ctx, nil); err != nil {
		t.Fatalf("upstream ping on its GET stream: %v", err)
	}
	type answer struct {
		res *mcp.ListRootsResult
		err error
	}
	done := make(chan answer, 1)
	go func() {
		res, err := up.ListRoots(ctx, nil)
		done <- answer{res, err}
	}()
	ev := nextEvent(t, events)
	var req struct {
		ID     any    `json:"id"`
		Method string `json:"method"`
	}
	if err := json.Unmarshal([]byte(ev.data), &req); err != nil || req.Method != wire.MethodListRoots {
		t.Fatalf("the agent's GET stream: %s; want the upstream's roots/list (the ping is the gate's to answer)", ev.data)
	}
	id, ok := req.ID.(string)
	if !ok || !strings.HasPrefix(id, "actgate-s-") {
		t.Fatalf("roots/list id %v: want an id of the gate's own", req.ID)
	}
	rs.postStatus(t, `{"jsonrpc":"2.0","id":"`+id+`","result":{"roots":[{"uri":"file:///walk/x","name":"x"}]}}`, http.StatusAccepted)
	a := <-done
	if a.err != nil || len(a.res.Roots) != 1 || a.res.Roots[0].URI != "file:///walk/x" {
		t.Fatalf("the upstream's roots/list answer: %+v, %v; want the agent's root", a.res, a.err)
	}
}

// postStatus POSTs one message and checks the HTTP status of the answer.
func (r *rawSession) postStatus(t *testing.T, body string, want int) {
	t.Helper()
	req, err := http.NewRequest(http.MethodPost, r.endpoint, strings.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Accept", "application/json, text/event-stream")
	req.Header.Set("Mcp-Session-Id", r.session)
	req.Header.Set("Mcp-Protocol-Version", r.version)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	_ = resp.Body.Close()
	if resp.StatusCode != want {
		t.Fatalf("POST %s: HTTP %d, want %d", body, resp.StatusCode, want)
	}
}

// TestGETStreamReplayedRequest: a request of the upstream's GET stream the agent did not answer
// before its GET broke is replayed by the upstream on the resumed GET and put to the agent
// again under the same id of the gate's: the agent's one answer is the upstream's.
func TestGETStreamReplayedRequest(t *testing.T) {
	f := newFixture(t, fixtureOpts{upstream: mcptest.Options{EventStore: true}})
	rs := &rawSession{t: t, endpoint: f.endpoint(), next: 1}
	_, hdr := rs.post(`{"jsonrpc":"2.0","id":0,"method":"initialize","params":{"protocolVersion":"2025-11-25","capabilities":{"roots":{}},"clientInfo":{"name":"raw","version":"1"}}}`)
	rs.session, rs.version = hdr.Get("Mcp-Session-Id"), "2025-11-25"
	rs.post(`{"jsonrpc":"2.0","method":"notifications/initialized"}`)
	events, _, closeGET := rs.getStream("")
	var up *mcp.ServerSession
	for ss := range f.up.MCP().Sessions() {
		up = ss
	}
	f.up.MCP().AddTool(&mcp.Tool{Name: "added", InputSchema: map[string]any{"type": "object"}}, func(context.Context, *mcp.CallToolRequest) (*mcp.CallToolResult, error) {
		return mcptest.Text("ok"), nil
	})
	if ev := nextEvent(t, events); ev.id != "_0" {
		t.Fatalf("first event %q, want _0", ev.id)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	done := make(chan error, 1)
	go func() {
		res, err := up.ListRoots(ctx, nil)
		if err == nil && (len(res.Roots) != 1 || res.Roots[0].Name != "once") {
			err = errUnexpected(res)
		}
		done <- err
	}()
	first := nextEvent(t, events)
	closeGET() // gone before answering
	time.Sleep(100 * time.Millisecond)
	events, _, closeGET = rs.getStream("_0")
	defer closeGET()
	again := nextEvent(t, events)
	if first.id != "_1" || again.id != "_1" || first.data != again.data || !strings.Contains(first.data, `"id":"actgate-s-`) {
		t.Fatalf("the request and its replay: %q %s / %q %s; want the upstream's _1 twice under one id of the gate's", first.id, first.data, again.id, again.data)
	}
	var req struct {
		ID string `json:"id"`
	}
	_ = json.Unmarshal([]byte(again.data), &req)
	rs.postStatus(t, `{"jsonrpc":"2.0","id":"`+req.ID+`","result":{"roots":[{"uri":"file:///once","name":"once"}]}}`, http.StatusAccepted)
	if err := <-done; err != nil {
		t.Fatalf("the upstream's roots/list: %v", err)
	}
}

type unexpectedResult struct{ res *mcp.ListRootsResult }

func (u unexpectedResult) Error() string {
	b, _ := json.Marshal(u.res)
	return "unexpected result " + string(b)
}

func errUnexpected(res *mcp.ListRootsResult) error { return unexpectedResult{res} }

// TestGETStreamRefusals: a GET the SDK's handler refuses for its headers is refused the same
// through the relay and the answer streams' resumption: a Host that is not loopback on the
// loopback listener (DNS rebinding: 403, with or without Last-Event-ID) and an unknown session
// id (404); none gets a stream.
func TestGETStreamRefusals(t *testing.T) {
	f := newFixture(t, fixtureOpts{})
	rs := newRawSession(t, f.endpoint())
	for _, tc := range []struct {
		name, host, session, last string
		want                      int
	}{
		{"rebinding", "attacker.example", rs.session, "", http.StatusForbidden},
		{"rebinding, resuming an answer stream", "attacker.example", rs.session, "actgate:g1-0", http.StatusForbidden},
		{"rebinding, resuming the GET stream", "attacker.example", rs.session, "actgate:0:", http.StatusForbidden},
		{"unknown session", "", "no-such-session", "", http.StatusNotFound},
	} {
		t.Run(tc.name, func(t *testing.T) {
			req, err := http.NewRequest(http.MethodGet, f.endpoint(), nil)
			if err != nil {
				t.Fatal(err)
			}
			if tc.host != "" {
				req.Host = tc.host
			}
			req.Header.Set("Accept", "text/event-stream")
			req.Header.Set("Mcp-Session-Id", tc.session)
			req.Header.Set("Mcp-Protocol-Version", rs.version)
			if tc.last != "" {
				req.Header.Set("Last-Event-ID", tc.last)
			}
			resp, err := http.DefaultClient.Do(req)
			if err != nil {
				t.Fatal(err)
			}
			_ = resp.Body.Close()
			if resp.StatusCode != tc.want || strings.HasPrefix(resp.Header.Get("Content-Type"), "text/event-stream") {
				t.Fatalf("GET: HTTP %d %s; want %d", resp.StatusCode, resp.Header.Get("Content-Type"), tc.want)
			}
		})
	}
}

// TestGETStreamRequestDuringFirstCall: a request the upstream makes during the agent's first
// tools/call but outside it (the TypeScript SDK server's server.request in a tool handler,
// which goes to the upstream's GET stream, dropped when none is connected) reaches the agent
// on its GET stream, although the upstream answers GETs slowly and the agent's tools/call
// reaches the gate before the agent's GET: the gate holds the agent's requests (not its
// initialize) until its own upstream GET is connected.
func TestGETStreamRequestDuringFirstCall(t *testing.T) {
	var up *mcptest.Server
	tools := []mcptest.Tool{{Name: "get_balance", Annotations: &mcp.ToolAnnotations{ReadOnlyHint: true},
		Handler: func(context.Context, json.RawMessage) (*mcp.CallToolResult, error) {
			var ss *mcp.ServerSession
			for s := range up.MCP().Sessions() {
				ss = s
			}
			// Not the call's context: the request is not the call's, so it goes to the GET stream.
			ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
			defer cancel()
			res, err := ss.ListRoots(ctx, nil)
			if err != nil {
				return mcptest.ErrorText("roots/list: " + err.Error()), nil
			}
			if len(res.Roots) != 1 {
				return mcptest.ErrorText("roots/list: no root"), nil
			}
			return mcptest.Text("root " + res.Roots[0].URI), nil
		}}}
	slowGET := func(_ http.ResponseWriter, r *http.Request) bool {
		if r.Method == http.MethodGet {
			time.Sleep(300 * time.Millisecond)
		}
		return false
	}
	f := newFixture(t, fixtureOpts{tools: tools, upstream: mcptest.Options{Intercept: slowGET}})
	up = f.up
	rs := &rawSession{t: t, endpoint: f.endpoint(), next: 1}
	_, hdr := rs.post(`{"jsonrpc":"2.0","id":0,"method":"initialize","params":{"protocolVersion":"2025-11-25","capabilities":{"roots":{}},"clientInfo":{"name":"raw","version":"1"}}}`)
	rs.session, rs.version = hdr.Get("Mcp-Session-Id"), "2025-11-25"
	rs.post(`{"jsonrpc":"2.0","method":"notifications/initialized"}`)

	type answer struct {
		body string
		err  error
	}
	done := make(chan answer, 1)
	go func() {
		req, err := http.NewRequest(http.MethodPost, rs.endpoint, strings.NewReader(`{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"get_balance","arguments":{}}}`))
		if err != nil {
			done <- answer{err: err}
			return
		}
		req.Header.Set("Content-Type", "application/json")
		req.Header.Set("Accept", "application/json, text/event-stream")
		req.Header.Set("Mcp-Session-Id", rs.session)
		req.Header.Set("Mcp-Protocol-Version", rs.version)
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			done <- answer{err: err}
			return
		}
		defer resp.Body.Close()
		b, err := io.ReadAll(resp.Body)
		done <- answer{string(b), err}
	}()
	// The agent's GET after its tools/call has reached the upstream.
	deadline := time.Now().Add(5 * time.Second)
	for len(f.up.Calls()) == 0 && time.Now().Before(deadline) {
		time.Sleep(5 * time.Millisecond)
	}
	events, status, closeGET := rs.getStream("")
	defer closeGET()
	if status != http.StatusOK {
		t.Fatalf("GET: HTTP %d", status)
	}
	ev := nextEvent(t, events)
	var req struct {
		ID     string `json:"id"`
		Method string `json:"method"`
	}
	if err := json.Unmarshal([]byte(ev.data), &req); err != nil || req.Method != wire.MethodListRoots || !strings.HasPrefix(req.ID, "actgate-s-") {
		t.Fatalf("the agent's GET stream: %s; want the upstream's roots/list under an id of the gate's", ev.data)
	}
	rs.postStatus(t, `{"jsonrpc":"2.0","id":"`+req.ID+`","result":{"roots":[{"uri":"file:///first","name":"first"}]}}`, http.StatusAccepted)
	a := <-done
	if a.err != nil || !strings.Contains(a.body, "root file:///first") || strings.Contains(a.body, `"isError":true`) {
		t.Fatalf("tools/call: %s, %v; want the upstream's result with the agent's root", a.body, a.err)
	}
}

// TestGETWithoutSession: a GET without Mcp-Session-Id, in any revision the agent names (none,
// 2025-11-25, 2026-07-28, which has no standalone stream at all), with or without
// Last-Event-ID or an Accept naming event streams, is answered as the transport asks of a
// server that offers no stream to it (MCP streamable HTTP, "Listening for messages from the
// server"): HTTP 405 with Allow naming the methods the endpoint serves and a JSON-RPC error
// body, no stream; a rebound Host is still refused first (403).
func TestGETWithoutSession(t *testing.T) {
	f := newFixture(t, fixtureOpts{})
	for _, tc := range []struct {
		name, version, accept, last, host string
		want                              int
	}{
		{"no version", "", "text/event-stream", "", "", http.StatusMethodNotAllowed},
		{"2025-11-25", "2025-11-25", "text/event-stream", "", "", http.StatusMethodNotAllowed},
		{"2026-07-28", "2026-07-28", "text/event-stream", "", "", http.StatusMethodNotAllowed},
		{"resuming", "2025-11-25", "text/event-stream", "actgate:0:", "", http.StatusMethodNotAllowed},
		{"no event-stream accepted", "2025-11-25", "application/json", "", "", http.StatusMethodNotAllowed},
		{"rebinding", "2025-11-25", "text/event-stream", "", "attacker.example", http.StatusForbidden},
	} {
		t.Run(tc.name, func(t *testing.T) {
			req, err := http.NewRequest(http.MethodGet, f.endpoint(), nil)
			if err != nil {
				t.Fatal(err)
			}
			if tc.host != "" {
				req.Host = tc.host
			}
			req.Header.Set("Accept", tc.accept)
			if tc.version != "" {
				req.Header.Set("Mcp-Protocol-Version", tc.version)
			}
			if tc.last != "" {
				req.Header.Set("Last-Event-ID", tc.last)
			}
			resp, err := http.DefaultClient.Do(req)
			if err != nil {
				t.Fatal(err)
			}
			body, _ := io.ReadAll(resp.Body)
			_ = resp.Body.Close()
			if resp.StatusCode != tc.want || strings.HasPrefix(resp.Header.Get("Content-Type"), "text/event-stream") {
				t.Fatalf("GET: HTTP %d %s %s; want %d", resp.StatusCode, resp.Header.Get("Content-Type"), body, tc.want)
			}
			if tc.want != http.StatusMethodNotAllowed {
				return
			}
			allow := strings.Split(strings.ReplaceAll(resp.Header.Get("Allow"), " ", ""), ",")
			slices.Sort(allow)
			if !slices.Equal(allow, []string{"DELETE", "GET", "POST"}) {
				t.Fatalf("Allow: %q, want GET, POST, DELETE", resp.Header.Get("Allow"))
			}
			var m struct {
				JSONRPC string `json:"jsonrpc"`
				Error   *struct {
					Code    int    `json:"code"`
					Message string `json:"message"`
				} `json:"error"`
			}
			if err := json.Unmarshal(body, &m); err != nil || m.JSONRPC != "2.0" || m.Error == nil || !strings.Contains(m.Error.Message, "Mcp-Session-Id") {
				t.Fatalf("405 body %s: want a JSON-RPC error naming the session header (%v)", body, err)
			}
		})
	}
}
