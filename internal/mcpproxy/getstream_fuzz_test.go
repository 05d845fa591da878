package mcpproxy

import (
	"bytes"
	"context"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/actgate/actgate/internal/mcpproxy/getrelay"
	"github.com/modelcontextprotocol/go-sdk/jsonrpc"
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
	rig := newFuzzRig(f, nil, 2*time.Second)
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
	b := rig.proxy.bridgeByID(resp.Header.Get("Mcp-Session-Id"))
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
				if id, ok := bytes.CutPrefix(line, []byte("id: ")); ok && bytes.HasPrefix(id, []byte(gateEventPrefix)) && !bytes.HasPrefix(id, []byte(gateEventPrefix+"u:")) {
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
