package agent2025

import (
	"bytes"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"testing"

	"github.com/actgate/actgate/internal/mcpproxy/wire"
)

// FuzzRefuseSessionless: no body panics; a body is refused only when it is one JSON-RPC request
// other than initialize and server/discover without a per-request protocolVersion, and then
// with HTTP 400.
func FuzzRefuseSessionless(f *testing.F) {
	for _, s := range []string{`{"jsonrpc":"2.0","id":1,"method":"tools/list"}`, `{"jsonrpc":"2.0","id":1,"method":"initialize","params":{}}`,
		`{"jsonrpc":"2.0","method":"notifications/initialized"}`, `{"jsonrpc":"2.0","id":1,"method":"x","params":{"_meta":{"protocolVersion":"2026-07-28"}}}`,
		`{"jsonrpc":"2.0","id":1,"result":{}}`, `[]`, `{"jsonrpc":"2.0","id":1,"method":"x","params":[1]}`} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, body []byte) {
		w := httptest.NewRecorder()
		r := httptest.NewRequest(http.MethodPost, "/mcp/bank", bytes.NewReader(body))
		if !refuseSessionless(w, r, body) {
			if w.Code != http.StatusOK || w.Body.Len() != 0 {
				t.Fatalf("not refused, but wrote %d %q", w.Code, w.Body.String())
			}
			return
		}
		if w.Code != http.StatusBadRequest {
			t.Fatalf("refused with HTTP %d", w.Code)
		}
		var m struct {
			Method string `json:"method"`
		}
		if json.Unmarshal(body, &m) != nil || m.Method == wire.MethodInitialize || m.Method == wire.MethodDiscover {
			t.Fatalf("refused %q", body)
		}
	})
}
