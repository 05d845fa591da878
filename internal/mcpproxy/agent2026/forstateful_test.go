package agent2026

import (
	"encoding/json"
	"testing"
)

// TestForStateful checks what a stateful upstream is sent: the revision's per-request _meta
// members and (unless kept) the round members are removed however their names are written,
// everything else stays, and params without them are passed through as written.
func TestForStateful(t *testing.T) {
	for _, tc := range []struct {
		name, in  string
		keepRound bool
		want      string
	}{
		{"nothing to remove: as written", `{"name":"t", "arguments":{"b":1,"a":2}}`, false, `{"name":"t", "arguments":{"b":1,"a":2}}`},
		{"revision meta removed", `{"name":"t","_meta":{"io.modelcontextprotocol/protocolVersion":"2026-07-28","k":1}}`, false, `{"_meta":{"k":1},"name":"t"}`},
		{"meta left empty is dropped", `{"name":"t","_meta":{"io.modelcontextprotocol/clientCapabilities":{}}}`, false, `{"name":"t"}`},
		{"escaped slash", `{"_meta":{"io.modelcontextprotocol\/logLevel":"info"}}`, false, `{}`},
		{"unicode escape", `{"_meta":{"\u0069o.modelcontextprotocol/logLevel":"info"},"x":1}`, false, `{"x":1}`},
		{"round members removed", `{"name":"t","requestState":"s","inputResponses":{}}`, false, `{"name":"t"}`},
		{"round members escaped", `{"name":"t","request\u0053tate":"s"}`, false, `{"name":"t"}`},
		{"round members kept for tasks/update", `{"taskId":"1","inputResponses":{}}`, true, `{"taskId":"1","inputResponses":{}}`},
		{"a name only in a value: unchanged", `{"arguments":{"q":"requestState modelcontextprotocol"}}`, false, `{"arguments":{"q":"requestState modelcontextprotocol"}}`},
		{"meta not an object: kept", `{"_meta":"io.modelcontextprotocol/x","requestState":1}`, false, `{"_meta":"io.modelcontextprotocol/x"}`},
		{"not an object", `["io.modelcontextprotocol/x"]`, false, `["io.modelcontextprotocol/x"]`},
		{"not JSON", `{"io.modelcontextprotocol/`, false, `{"io.modelcontextprotocol/`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got := string(forStateful(json.RawMessage(tc.in), tc.keepRound))
			if got != tc.want {
				t.Errorf("forStateful(%s, %v) = %s, want %s", tc.in, tc.keepRound, got, tc.want)
			}
		})
	}
}

// FuzzForStateful checks forStateful never panics, returns JSON for JSON, and leaves no
// member it removes at the top level or in _meta.
func FuzzForStateful(f *testing.F) {
	for _, s := range []string{`{}`, `{"_meta":{"io.modelcontextprotocol/a":1}}`, `{"requestState":"x","_meta":{}}`, `{"\u0072equestState":1}`} {
		f.Add([]byte(s), false)
	}
	f.Fuzz(func(t *testing.T, in []byte, keepRound bool) {
		out := forStateful(in, keepRound)
		if !json.Valid(in) {
			return
		}
		if !json.Valid(out) {
			t.Fatalf("forStateful(%s) = %s, not JSON", in, out)
		}
		var m map[string]json.RawMessage
		if json.Unmarshal(out, &m) != nil {
			return
		}
		if _, ok := m["requestState"]; ok && !keepRound {
			t.Fatalf("forStateful(%s) kept requestState: %s", in, out)
		}
		var meta map[string]json.RawMessage
		if json.Unmarshal(m["_meta"], &meta) == nil {
			for k := range meta {
				if len(k) >= len(revisionMetaPrefix) && k[:len(revisionMetaPrefix)] == revisionMetaPrefix {
					t.Fatalf("forStateful(%s) kept %s: %s", in, k, out)
				}
			}
		}
	})
}
