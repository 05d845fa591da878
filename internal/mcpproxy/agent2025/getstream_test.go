package agent2025

import (
	"bytes"
	"context"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/actgate/actgate/internal/mcpproxy/eventlog"
	"github.com/actgate/actgate/internal/mcpproxy/getrelay"
	"github.com/actgate/actgate/internal/mcpproxy/mcptest"
	"github.com/actgate/actgate/internal/mcpproxy/wire"
	"github.com/modelcontextprotocol/go-sdk/jsonrpc"
	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// TestResumePoint: the agent's Last-Event-ID on the GET stream, read as the gate's own id, an
// escaped upstream id, or an upstream id; anything else is the upstream's to judge.
func TestResumePoint(t *testing.T) {
	b := &bridge{ownSent: 4}
	for _, tc := range []struct {
		last string
		own  int
		up   string
	}{
		{"", 4, ""},
		{"_3", 4, "_3"},
		{"ts-1", 4, "ts-1"},
		{"actgate:2:_1", 2, "_1"},
		{"actgate:0:", 0, ""},
		{"actgate:7:a:b:c", 7, "a:b:c"},
		{"actgate:u:actgate:9:x", 4, "actgate:9:x"},
		{"actgate:u:", 4, ""},
		{"actgate:-1:x", 4, "actgate:-1:x"},
		{"actgate:+1:x", 4, "actgate:+1:x"},
		{"actgate:1x:y", 4, "actgate:1x:y"},
		{"actgate:99999999999999999999:y", 4, "actgate:99999999999999999999:y"},
		{"actgate:", 4, "actgate:"},
		{"actgate:5", 4, "actgate:5"},
		{"g1-2", 4, "g1-2"},
	} {
		t.Run(tc.last, func(t *testing.T) {
			own, up := b.resumePoint(tc.last)
			if own != tc.own || up != tc.up {
				t.Errorf("resumePoint(%q) = %d, %q; want %d, %q", tc.last, own, up, tc.own, tc.up)
			}
		})
	}
}

// TestGETStreamRelaysUpstream: the agent's GET stream is the upstream's, relayed: the
// upstream's events with its own event ids (the Go SDK server's "_N", from its event store)
// and data as written; a GET with Last-Event-ID resumes the upstream's stream (what it sent
// while the agent was away is replayed by the upstream); the gate's own messages come in
// between with ids of the gate's own, which resume too.
func TestGETStreamRelaysUpstream(t *testing.T) {
	f := newFixture(t, mcptest.Options{EventStore: true})
	rs := newRawSession(t, f.endpoint, "2025-06-18")
	events, status, closeGET := rs.getStream("")
	if status != http.StatusOK {
		t.Fatalf("GET: HTTP %d", status)
	}
	addTool := func(name string) {
		f.up.MCP().AddTool(&mcp.Tool{Name: name, InputSchema: map[string]any{"type": "object"}}, func(context.Context, *mcp.CallToolRequest) (*mcp.CallToolResult, error) {
			return mcptest.Text("ok"), nil
		})
	}
	const changed = `{"jsonrpc":"2.0","method":"notifications/tools/list_changed","params":{}}`
	addTool("added_one")
	ev := nextEvent(t, events)
	if ev.id != "_0" || ev.data != changed {
		t.Fatalf("first event: id %q data %s; want the upstream's id _0 and its notification as written", ev.id, ev.data)
	}

	// A message of the gate's own session, merged with an id of the gate's own that names the
	// upstream event before it.
	b := f.h.bridgeByID(rs.session)
	b.notify(context.Background(), wire.NotifyPromptsChanged, nil)
	own := nextEvent(t, events)
	if own.id != "actgate:0:_0" || !strings.Contains(own.data, wire.NotifyPromptsChanged) {
		t.Fatalf("the gate's own event: id %q data %s; want id actgate:0:_0", own.id, own.data)
	}

	// Away: the upstream keeps what it sends; the resumed GET gets it from the upstream.
	closeGET()
	time.Sleep(100 * time.Millisecond)
	addTool("added_two")
	time.Sleep(200 * time.Millisecond)
	events, status, closeGET = rs.getStream("_0")
	if status != http.StatusOK {
		t.Fatalf("GET with Last-Event-ID: HTTP %d", status)
	}
	ev = nextEvent(t, events)
	if ev.id != "_1" || ev.data != changed {
		t.Fatalf("resumed: id %q data %s; want the upstream's replay of _1", ev.id, ev.data)
	}
	closeGET()
	time.Sleep(100 * time.Millisecond)

	// Resuming from the gate's own id: the upstream after _0 again, the gate's own after 0.
	b.notify(context.Background(), wire.NotifyResourcesChanged, nil)
	events, _, closeGET = rs.getStream("actgate:0:_0")
	defer closeGET()
	got := map[string]string{}
	for range 2 {
		ev := nextEvent(t, events)
		got[ev.id] = ev.data
	}
	if got["_1"] != changed {
		t.Errorf("resumed from the gate's id: upstream event _1 missing: %v", got)
	}
	if d, ok := got["actgate:1:_0"]; !ok || !strings.Contains(d, wire.NotifyResourcesChanged) {
		if d, ok = got["actgate:1:_1"]; !ok || !strings.Contains(d, wire.NotifyResourcesChanged) {
			t.Errorf("resumed from the gate's id: the gate's own event 1 missing: %v", got)
		}
	}
}

// TestGETStreamEarly: what the upstream sends outside any request right after the session
// starts, before the agent's GET reaches it, is on the agent's first GET stream: the gate's
// upstream GET was open since the session started (the upstream keeps no event store here, so
// a message for an unconnected GET stream would be dropped).
func TestGETStreamEarly(t *testing.T) {
	f := newFixture(t, mcptest.Options{})
	rs := newRawSession(t, f.endpoint, "2025-06-18")
	// Give the gate's upstream GET time to connect (what a direct client's GET would have).
	deadline := time.Now().Add(time.Second)
	for b := f.h.bridgeByID(rs.session); time.Now().Before(deadline); time.Sleep(10 * time.Millisecond) {
		b.mu.Lock()
		e := b.early
		b.mu.Unlock()
		if e != nil {
			<-e.ready
			break
		}
	}
	f.up.MCP().AddTool(&mcp.Tool{Name: "early", InputSchema: map[string]any{"type": "object"}}, func(context.Context, *mcp.CallToolRequest) (*mcp.CallToolResult, error) {
		return mcptest.Text("ok"), nil
	})
	time.Sleep(100 * time.Millisecond)
	events, status, closeGET := rs.getStream("")
	defer closeGET()
	if status != http.StatusOK {
		t.Fatalf("GET: HTTP %d", status)
	}
	if ev := nextEvent(t, events); ev.data != `{"jsonrpc":"2.0","method":"notifications/tools/list_changed","params":{}}` {
		t.Fatalf("first event: %s; want the upstream's list_changed sent before the agent's GET", ev.data)
	}
}

// FuzzGETRelay feeds arbitrary bytes as the upstream's GET stream to the relay: it never
// panics, what it writes is whole events, no response reaches the agent, and an event id in
// the gate's namespace is never written as the upstream sent it.
func FuzzGETRelay(f *testing.F) {
	for _, seed := range []string{
		"",
		": ok\n\n",
		"id: ts-0\nretry: 1000\ndata: \n\n",
		"event: message\nid: _0\ndata: {\"jsonrpc\":\"2.0\",\"method\":\"notifications/tools/list_changed\",\"params\":{}}\n\n",
		"id: actgate:1:x\ndata: {\"jsonrpc\":\"2.0\",\"method\":\"notifications/message\",\"params\":{}}\n\n",
		"data: {\"jsonrpc\":\"2.0\",\"id\":1,\"result\":{}}\n\n",
		"data: {\"jsonrpc\":\"2.0\",\"id\":3,\"method\":\"ping\"}\n\n",
		"data: {\"jsonrpc\":\"2.0\",\"id\":4,\"method\":\"roots/list\"}\n\n",
		"data: {\"jsonrpc\":\"2.0\",\"method\":\"notifications/tasks/status\",\"params\":{\"taskId\":\"t\",\"status\":\"working\"}}\r\n\r\n",
		"data: not json\ndata: {\n\nid\nid: \x00\n\n",
		"data: {}\n\n",
	} {
		f.Add([]byte(seed))
	}
	rig := newFixture(f, mcptest.Options{})
	req, err := http.NewRequest(http.MethodPost, rig.endpoint, strings.NewReader(`{"jsonrpc":"2.0","id":0,"method":"initialize","params":{"protocolVersion":"2025-11-25","capabilities":{"roots":{}},"clientInfo":{"name":"fuzz","version":"1"}}}`))
	if err != nil {
		f.Fatal(err)
	}
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Accept", "application/json, text/event-stream")
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		f.Fatal(err)
	}
	_ = resp.Body.Close()
	b := rig.h.bridgeByID(resp.Header.Get("Mcp-Session-Id"))
	if b == nil {
		f.Fatal("no session")
	}
	cs, err := b.upstream(context.Background())
	if err != nil {
		f.Fatal(err)
	}
	version, _ := directVersion(cs)
	f.Fuzz(func(t *testing.T, in []byte) {
		w := httptest.NewRecorder()
		g := getrelay.New(w, getSession{b}, "")
		g.Relay(context.Background(), cs.ID(), version, bytes.NewReader(in))
		out := w.Body.Bytes()
		if len(out) > 0 && !bytes.HasSuffix(out, []byte("\n\n")) {
			t.Fatalf("the relay wrote a partial event: %q", out)
		}
		for ev := range bytes.SplitSeq(bytes.TrimSuffix(out, []byte("\n\n")), []byte("\n\n")) {
			for line := range bytes.SplitSeq(ev, []byte("\n")) {
				if id, ok := bytes.CutPrefix(line, []byte("id: ")); ok && bytes.HasPrefix(id, []byte(eventlog.Prefix)) && !bytes.HasPrefix(id, []byte(eventlog.Prefix+"u:")) {
					t.Fatalf("an upstream id in the gate's namespace was written as sent: %q", line)
				}
				if data, ok := bytes.CutPrefix(line, []byte("data: ")); ok {
					if msg, err := jsonrpc.DecodeMessage(data); err == nil {
						if _, isResp := msg.(*jsonrpc.Response); isResp {
							t.Fatalf("a response on the GET stream reached the agent: %q", data)
						}
					}
				}
			}
		}
	})
}
