package mcpproxy

import (
	"net/http"
	"strings"
	"sync"
	"testing"

	"github.com/actgate/actgate/internal/mcpproxy/mcptest"
)

// TestSessionDELETERelayed: the agent's DELETE reaches the upstream session and is answered
// with the upstream's status. A 200 ends the gate's session too (a later request on it is 404);
// a 405 (a server that does not let clients end sessions) leaves both open, as direct.
func TestSessionDELETERelayed(t *testing.T) {
	for _, tc := range []struct {
		name     string
		status   int
		thenPOST int
	}{{"ended", http.StatusOK, http.StatusNotFound}, {"refused", http.StatusMethodNotAllowed, http.StatusOK}} {
		t.Run(tc.name, func(t *testing.T) {
			var mu sync.Mutex
			var deletes []string
			intercept := func(w http.ResponseWriter, r *http.Request) bool {
				if r.Method != http.MethodDelete {
					return false
				}
				mu.Lock()
				deletes = append(deletes, r.Header.Get("Mcp-Session-Id"))
				mu.Unlock()
				w.WriteHeader(tc.status)
				return true
			}
			f := newFixture(t, fixtureOpts{upstream: mcptest.Options{Intercept: intercept}})
			s := newRawSession(t, f.endpoint())
			s.request("1", "ping", "{}") // the upstream session is open
			status, _, _ := agentExchange(t, s, http.MethodDelete, "", nil)
			if status != tc.status {
				t.Errorf("DELETE: HTTP %d, want the upstream's %d", status, tc.status)
			}
			mu.Lock()
			n := len(deletes)
			mu.Unlock()
			if n < 1 || deletes[0] == "" {
				t.Fatalf("the upstream saw %d DELETEs (%q), want the agent's", n, deletes)
			}
			status, _, _ = agentExchange(t, s, http.MethodPost, `{"jsonrpc":"2.0","id":2,"method":"ping","params":{}}`, nil)
			if status != tc.thenPOST {
				t.Errorf("a request after the DELETE: HTTP %d, want %d", status, tc.thenPOST)
			}
		})
	}
}

// TestInitializeFollowsUpstreamFraming: the agent's initialize is answered on an event stream
// when the upstream answered the gate's initialize on one, in application/json when it
// answered in JSON; the answer is the same initialize result either way.
func TestInitializeFollowsUpstreamFraming(t *testing.T) {
	const init = `{"jsonrpc":"2.0","id":0,"method":"initialize","params":{"protocolVersion":"2025-06-18","capabilities":{},"clientInfo":{"name":"raw","version":"1"}}}`
	for _, tc := range []struct {
		name string
		json bool
		want string
	}{{"stream", false, "text/event-stream"}, {"json", true, "application/json"}} {
		t.Run(tc.name, func(t *testing.T) {
			f := newFixture(t, fixtureOpts{upstream: mcptest.Options{JSONResponse: tc.json}})
			s := &rawSession{t: t, endpoint: f.endpoint()}
			status, ct, body := agentExchange(t, s, http.MethodPost, init, nil)
			if status != http.StatusOK || ct != tc.want || !strings.Contains(body, `"protocolVersion":"2025-06-18"`) || !strings.Contains(body, `"serverInfo"`) {
				t.Fatalf("initialize: HTTP %d %s\n%s", status, ct, body)
			}
			if tc.json && strings.Contains(body, "event:") {
				t.Errorf("a JSON answer with SSE framing: %s", body)
			}
			if !tc.json && (!strings.HasPrefix(body, "event: message\ndata: {") || strings.Contains(body, "id: ")) {
				t.Errorf("the event stream (the upstream's events have no ids, so neither do the gate's): %q", body)
			}
		})
	}
}
