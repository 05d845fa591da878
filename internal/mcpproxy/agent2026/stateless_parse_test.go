package agent2026

import (
	"encoding/json"
	"net/http"
	"strings"
	"testing"

	"github.com/actgate/actgate/internal/mcpproxy/rounds"
	"github.com/actgate/actgate/internal/mcpproxy/stateless"
	"github.com/actgate/actgate/internal/mcpproxy/wire"
)

const meta2026 = `"_meta":{"io.modelcontextprotocol/protocolVersion":"2026-07-28","io.modelcontextprotocol/clientCapabilities":{}}`

var fuzzKey = []byte("0123456789abcdef0123456789abcdef")

// TestLearnParamHeadersBadLists: a tools/list result the gate cannot read teaches nothing; one
// with a declaration the gate cannot hold forgets the tool (the parse of a declaration:
// stateless.TestToolHeaders).
func TestLearnParamHeadersBadLists(t *testing.T) {
	p := &Handler{}
	for _, bad := range []string{``, `[]`, `{"tools":7}`, `{"tools":[{"name":"t","inputSchema":{"properties":[]}}]}`, `{"tools":[{"name":"","inputSchema":{}}]}`} {
		p.learnParamHeaders(json.RawMessage(bad))
	}
	if len(p.sl.paramHeaders) != 0 {
		t.Fatalf("learnt %v from results that list no readable tool", p.sl.paramHeaders)
	}
	p.learnParamHeaders(json.RawMessage(`{"tools":[{"name":"t","inputSchema":{"properties":{"a":{"x-mcp-header":"To"}}}}]}`))
	p.learnParamHeaders(json.RawMessage(`{"tools":[{"name":"t","inputSchema":{"properties":{"a":{"x-mcp-header":7}}}}]}`))
	if _, known := p.sl.paramHeaders["t"]; known {
		t.Fatal("a tool listed again with a declaration the gate cannot hold is still known")
	}
}

// FuzzParseStateless: no header set and body makes the parser panic, and whatever it accepts
// agrees with its headers.
func FuzzParseStateless(f *testing.F) {
	f.Add("tools/call", "t", `{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"t",`+meta2026+`}}`)
	f.Add("resources/read", "file:///a", `{"jsonrpc":"2.0","id":"x","method":"resources/read","params":{"uri":"file:///a",`+meta2026+`}}`)
	f.Add("tools/list", "", `{"jsonrpc":"2.0","id":2,"method":"tools/list","params":{`+meta2026+`}}`)
	f.Add("tools/call", "us", `{"jsonrpc":"2.0","id":3,"method":"tools/call","params":{"name":"us","arguments":{"r":"us","n":[1e2,true]},`+meta2026+`}}`)
	f.Add("notifications/cancelled", "", `{"jsonrpc":"2.0","method":"notifications/cancelled","params":{"requestId":1}}`)
	f.Add("tools/call", "t", `{"jsonrpc":"2.0","id":4,"method":"tools/call","params":{"name":"t","arguments":{"r":"x"},"requestState":"ag1.e30.AAAA","inputResponses":{"r1-1":{}},`+meta2026+`}}`)
	f.Fuzz(func(t *testing.T, method, name, body string) {
		h := hdr2026("Mcp-Protocol-Version", "2026-07-28", "Mcp-Method", method)
		if name != "" {
			h.Set("Mcp-Name", name)
		}
		_ = stateless.IsRequest(h, []byte(body))
		sr, err := stateless.Parse(h, []byte(body))
		if err != nil {
			if err.Err == nil || err.Status != http.StatusBadRequest {
				t.Fatalf("refusal without an error: %+v", err)
			}
			return
		}
		if sr.Req.Method != method {
			t.Fatalf("accepted method %q under Mcp-Method %q", sr.Req.Method, method)
		}
		// The same header value as an Mcp-Param header: accepted only when the arguments
		// carry it.
		ph := hdr2026("Mcp-Param-X", name)
		if perr := stateless.CheckParamHeaders(ph, sr); perr == nil {
			if dec, ok := stateless.DecodeHeader(strings.TrimSpace(name)); !ok || !stateless.ArgumentValues(sr.Params["arguments"])[dec] {
				t.Fatalf("accepted Mcp-Param-X %q for arguments %s", name, sr.Params["arguments"])
			}
		} else if perr.Err.Code != wire.CodeHeaderMismatch {
			t.Fatalf("Mcp-Param refusal with code %d", perr.Err.Code)
		}
		// The continuation members and the learnt x-mcp-header mapping of tool "t" (its
		// "r" argument in Mcp-Param-X): refused or accepted, never a panic.
		if c, err := rounds.Parse(fuzzKey, sr.Params["requestState"]); err == nil && c.Call == "" {
			t.Fatalf("accepted a requestState naming no call")
		}
		if m, err := rounds.ParseInputResponses(sr.Params["inputResponses"]); err == nil && len(m) > rounds.MaxInputRequests {
			t.Fatalf("accepted %d inputResponses", len(m))
		}
		lp := &Handler{}
		lp.sl.paramHeaders = map[string]map[string][]string{"t": {"Mcp-Param-X": {"r"}}}
		if perr := lp.checkDeclaredParams(ph, sr); perr != nil && perr.Err.Code != wire.CodeHeaderMismatch {
			t.Fatalf("declared Mcp-Param refusal with code %d", perr.Err.Code)
		}
		if stateless.NameMember(sr.Req.Method) != "" {
			if dec, _ := stateless.DecodeHeader(name); dec != sr.Name {
				t.Fatalf("accepted name %q under Mcp-Name %q", sr.Name, name)
			}
		}
	})
}

func hdr2026(kv ...string) http.Header {
	h := http.Header{}
	for i := 0; i+1 < len(kv); i += 2 {
		h.Add(kv[i], kv[i+1])
	}
	return h
}
