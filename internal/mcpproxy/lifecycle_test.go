package mcpproxy

import (
	"net/http"
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
