package agent2026

import (
	"encoding/json"
	"net/http"
	"strings"
	"testing"

	"github.com/actgate/actgate/internal/mcpproxy/stateless"
	"github.com/actgate/actgate/internal/mcpproxy/wire"
)

// FuzzToolHeaders: any tools/list result and any Mcp-Param headers: learning never panics, and
// a call is accepted only when each of its Mcp-Param headers is declared and copies its
// argument.
func FuzzToolHeaders(f *testing.F) {
	f.Add(`{"tools":[{"name":"t","inputSchema":{"properties":{"a":{"x-mcp-header":"To"}}}}]}`, "To", "bob", `{"a":"bob"}`)
	f.Add(`{"tools":[{"name":"t","inputSchema":{"properties":{"r":{"properties":{"q":{"x-mcp-header":"Q"}}}}}}]}`, "Q", "=?base64?b3Bz?=", `{"r":{"q":"ops"}}`)
	f.Add(`{"tools":[{"name":"t","inputSchema":{}}]}`, "X", "1", `{"x":1}`)
	f.Add(`{"tools":[{"name":"t","inputSchema":{"properties":{"a":{"x-mcp-header":"To"}}}}]}`, "To", "mallory", `{"a":"bob","b":"mallory"}`)
	f.Fuzz(func(t *testing.T, list, header, value, args string) {
		p := &Handler{}
		p.learnParamHeaders(json.RawMessage(list))
		if len(p.sl.paramHeaders) > maxLearntTools {
			t.Fatalf("learnt %d tools", len(p.sl.paramHeaders))
		}
		if !stateless.ValidHeaderName(header) {
			return
		}
		h := http.Header{}
		h.Set(wire.HeaderParamPrefix+header, value)
		sr := &stateless.Request{Name: "t", Params: map[string]json.RawMessage{"arguments": json.RawMessage(args)}}
		if perr := p.checkDeclaredParams(h, sr); perr != nil {
			if perr.Err.Code != wire.CodeHeaderMismatch || perr.Status != http.StatusBadRequest {
				t.Fatalf("refusal %d/%d", perr.Status, perr.Err.Code)
			}
			return
		}
		m, known := p.sl.paramHeaders["t"]
		k := http.CanonicalHeaderKey(wire.HeaderParamPrefix + header)
		path, declared := m[k]
		if !known || !declared {
			t.Fatalf("accepted %s for a tool that does not declare it (%v)", k, m)
		}
		var a map[string]json.RawMessage
		_ = json.Unmarshal([]byte(args), &a)
		want, ok := stateless.HeaderForm(stateless.LookupPath(a, path))
		dec, valid := stateless.DecodeHeader(strings.TrimSpace(value))
		if !ok || !valid || !want[dec] {
			t.Fatalf("accepted %s: %q for arguments %s", k, value, args)
		}
	})
}
