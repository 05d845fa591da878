package mcpproxy

import (
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/actgate/actgate/internal/journal"
	"github.com/actgate/actgate/internal/mcpproxy/mcptest"
)

// wireMsg is one message the upstream received, as the gate sent it.
type wireMsg struct {
	HTTP   string          // the HTTP method
	Method string          // the JSON-RPC method ("" for a response or no body)
	ID     json.RawMessage // absent for a notification
	Params json.RawMessage
	Header http.Header
}

// wire records every HTTP request the upstream receives (before the SDK's server answers it).
type wireTap struct {
	mu   sync.Mutex
	msgs []wireMsg
}

func (m wireMsg) String() string { return m.HTTP + " " + m.Method + " " + string(m.ID) }

func (wr *wireTap) intercept(_ http.ResponseWriter, r *http.Request) bool {
	m := wireMsg{HTTP: r.Method, Header: r.Header.Clone()}
	if r.Body != nil {
		body, _ := io.ReadAll(r.Body)
		r.Body = io.NopCloser(strings.NewReader(string(body)))
		_ = json.Unmarshal(body, &m)
	}
	wr.mu.Lock()
	wr.msgs = append(wr.msgs, m)
	wr.mu.Unlock()
	return false
}

func (wr *wireTap) all() []wireMsg {
	wr.mu.Lock()
	defer wr.mu.Unlock()
	return append([]wireMsg(nil), wr.msgs...)
}

// posts are the messages from index before on that were POSTed: what the gate sent the
// upstream, leaving out the GET of its own standalone stream, which it opens on its own time.
func (wr *wireTap) posts(before int) []wireMsg {
	var out []wireMsg
	for _, m := range wr.all()[before:] {
		if m.HTTP == http.MethodPost {
			out = append(out, m)
		}
	}
	return out
}

func (wr *wireTap) len() int {
	wr.mu.Lock()
	defer wr.mu.Unlock()
	return len(wr.msgs)
}

// rawRequest sends one HTTP request to the gate with the given Host (when set) and headers,
// and returns the status and body.
func rawRequest(t *testing.T, method, endpoint, host, body string, hdr map[string]string) (int, string) {
	t.Helper()
	var rd io.Reader
	if body != "" {
		rd = strings.NewReader(body)
	}
	req, err := http.NewRequest(method, endpoint, rd)
	if err != nil {
		t.Fatal(err)
	}
	if host != "" {
		req.Host = host
	}
	req.Header.Set("Accept", "application/json, text/event-stream")
	if body != "" {
		req.Header.Set("Content-Type", "application/json")
	}
	for k, v := range hdr {
		req.Header.Set(k, v)
	}
	// Bounded: a request the gate serves as an event stream would not end.
	resp, err := (&http.Client{Timeout: 3 * time.Second}).Do(req)
	if err != nil {
		return 0, err.Error()
	}
	defer resp.Body.Close()
	raw, err := io.ReadAll(resp.Body)
	if err != nil {
		return resp.StatusCode, string(raw) + ": " + err.Error()
	}
	return resp.StatusCode, string(raw)
}

// TestDNSRebindingEveryRequest: on the gate's loopback listener, a request whose Host or Origin
// is not loopback is refused with HTTP 403 and EF_HOST_REFUSED before anything reads it — every
// request of every revision: a 2025 initialize, a session's tools/call, GET and DELETE, a
// 2026-07-28 server/discover, tools/call and notification. The upstream receives nothing, the
// journal records nothing; the same requests with loopback Host and Origin are served.
func TestDNSRebindingEveryRequest(t *testing.T) {
	const meta = `"_meta":{"io.modelcontextprotocol/protocolVersion":"2026-07-28","io.modelcontextprotocol/clientCapabilities":{}}`
	for _, up := range []struct {
		name string
		opts mcptest.Options
	}{
		{"stateful upstream", mcptest.Options{}},
		{"stateless upstream", mcptest.Options{Stateless: true, JSONResponse: true}},
	} {
		t.Run(up.name, func(t *testing.T) {
			var wr wireTap
			up.opts.Intercept = wr.intercept
			f := newFixture(t, fixtureOpts{upstream: up.opts})
			rs := newRawSession(t, f.endpoint()) // a session opened as it should be
			// The gate opens the session's upstream GET stream on its own (bridge.startEarlyGET),
			// toward a stateless upstream too (which refuses it); it is let in before the rows
			// count what the upstream receives.
			for i := 0; i < 100; i++ {
				if strings.Contains(fmt.Sprint(wr.all()), "GET") {
					break
				}
				time.Sleep(10 * time.Millisecond)
			}
			loop := f.server.Listener.Addr().String()
			s2025 := map[string]string{"Mcp-Session-Id": rs.session, "Mcp-Protocol-Version": rs.version}
			h2026 := func(method, name string) map[string]string {
				h := map[string]string{"Mcp-Protocol-Version": "2026-07-28", "Mcp-Method": method}
				if name != "" {
					h["Mcp-Name"] = name
				}
				return h
			}
			reqs := []struct {
				name, method, body string
				hdr                map[string]string
			}{
				{"2025 initialize", http.MethodPost, `{"jsonrpc":"2.0","id":0,"method":"initialize","params":{"protocolVersion":"2025-11-25","capabilities":{},"clientInfo":{"name":"x","version":"1"}}}`,
					map[string]string{}},
				{"2025 session tools/call", http.MethodPost, `{"jsonrpc":"2.0","id":5,"method":"tools/call","params":{"name":"ticket_create","arguments":{"title":"rebound"}}}`, s2025},
				{"2025 session tools/list", http.MethodPost, `{"jsonrpc":"2.0","id":6,"method":"tools/list","params":{}}`, s2025},
				{"2025 session GET", http.MethodGet, "", s2025},
				{"2025 session DELETE", http.MethodDelete, "", s2025},
				{"2026 server/discover", http.MethodPost, `{"jsonrpc":"2.0","id":1,"method":"server/discover","params":{` + meta + `}}`, h2026("server/discover", "")},
				{"2026 tools/call", http.MethodPost, `{"jsonrpc":"2.0","id":2,"method":"tools/call","params":{"name":"ticket_create","arguments":{"title":"rebound"},` + meta + `}}`, h2026("tools/call", "ticket_create")},
				{"2026 tools/list", http.MethodPost, `{"jsonrpc":"2.0","id":3,"method":"tools/list","params":{` + meta + `}}`, h2026("tools/list", "")},
				{"2026 notification", http.MethodPost, `{"jsonrpc":"2.0","method":"notifications/cancelled","params":{"requestId":2,` + meta + `}}`, h2026("notifications/cancelled", "")},
			}
			for _, bad := range []struct{ name, host, origin string }{
				{"Host", "evil.example.com", ""},
				{"Host with port", "evil.example.com:" + strings.Split(loop, ":")[1], ""},
				{"Origin", "", "http://evil.example.com"},
				{"null Origin", "", "null"},
				{"Origin of another scheme", "", "file://localhost"},
			} {
				for _, rq := range reqs {
					t.Run(bad.name+"/"+rq.name, func(t *testing.T) {
						hdr := map[string]string{}
						for k, v := range rq.hdr {
							hdr[k] = v
						}
						if bad.origin != "" {
							hdr["Origin"] = bad.origin
						}
						before := wr.len()
						status, body := rawRequest(t, rq.method, f.endpoint(), bad.host, rq.body, hdr)
						var got struct{ Code string }
						_ = json.Unmarshal([]byte(body), &got)
						if status != http.StatusForbidden || got.Code != "EF_HOST_REFUSED" {
							t.Errorf("HTTP %d %s, want 403 EF_HOST_REFUSED", status, body)
						}
						if n := wr.len() - before; n != 0 {
							t.Errorf("the upstream received %d requests: %v", n, wr.all()[before:])
						}
					})
				}
			}
			if n := f.up.Count(""); n != 0 {
				t.Fatalf("the upstream ran %d tools", n)
			}
			if st := statesIn(t, f); len(st) != 0 {
				t.Fatalf("journal states %v, want none", st)
			}
			// The same requests with loopback names are served (the session's DELETE last).
			for _, good := range []struct{ host, origin string }{{"", ""}, {"localhost:" + strings.Split(loop, ":")[1], "http://localhost:6274"}, {"", "http://127.0.0.1"}} {
				hdr := map[string]string{"Origin": good.origin}
				if good.origin == "" {
					hdr = map[string]string{}
				}
				for k, v := range h2026("tools/list", "") {
					hdr[k] = v
				}
				status, body := rawRequest(t, http.MethodPost, f.endpoint(), good.host, `{"jsonrpc":"2.0","id":3,"method":"tools/list","params":{`+meta+`}}`, hdr)
				if status != http.StatusOK || !strings.Contains(body, "ticket_create") {
					t.Errorf("loopback Host %q Origin %q: HTTP %d %s", good.host, good.origin, status, body)
				}
			}
			status, body := rawRequest(t, http.MethodPost, f.endpoint(), "", reqs[6].body, reqs[6].hdr)
			if status != http.StatusOK || f.up.Count("ticket_create") != 1 {
				t.Fatalf("a loopback tools/call: HTTP %d %s; the upstream ran it %d times", status, body, f.up.Count("ticket_create"))
			}
			if st := statesIn(t, f); st[journal.StateExecuted] != 1 {
				t.Fatalf("journal states %v, want one EXECUTED act", st)
			}
		})
	}
}

// TestOlderHeaderOnA2026Body: a POST without a session whose body is a 2026-07-28 request
// (params._meta names the revision) but whose Mcp-Protocol-Version names 2025-11-25 is refused
// with the sessionless revision's error — HTTP 400, -32020, EF_MCP_HEADER_MISMATCH — not the
// older revision's "session required"; nothing reaches the upstream or the journal.
func TestOlderHeaderOnA2026Body(t *testing.T) {
	const meta = `"_meta":{"io.modelcontextprotocol/protocolVersion":"2026-07-28","io.modelcontextprotocol/clientCapabilities":{}}`
	f := newFixture(t, fixtureOpts{})
	for _, rq := range []struct{ name, method, body string }{
		{"tools/call", "tools/call", `{"jsonrpc":"2.0","id":2,"method":"tools/call","params":{"name":"ticket_create","arguments":{"title":"x"},` + meta + `}}`},
		{"tools/list", "tools/list", `{"jsonrpc":"2.0","id":3,"method":"tools/list","params":{` + meta + `}}`},
	} {
		t.Run(rq.name, func(t *testing.T) {
			status, body := rawRequest(t, http.MethodPost, f.endpoint(), "", rq.body,
				map[string]string{"Mcp-Protocol-Version": "2025-11-25", "Mcp-Method": rq.method})
			var got struct {
				Error struct {
					Code int
					Data map[string]string
				}
			}
			_ = json.Unmarshal([]byte(body), &got)
			if status != http.StatusBadRequest || got.Error.Code != -32020 || got.Error.Data["actgate.io/ef-code"] != "EF_MCP_HEADER_MISMATCH" {
				t.Fatalf("HTTP %d %s, want 400 -32020 EF_MCP_HEADER_MISMATCH", status, body)
			}
		})
	}
	if n := f.up.Count(""); n != 0 {
		t.Fatalf("the upstream ran %d calls", n)
	}
	if st := statesIn(t, f); len(st) != 0 {
		t.Fatalf("the journal holds %v", st)
	}
}
