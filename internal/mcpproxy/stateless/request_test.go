package stateless

import (
	"context"
	"encoding/json"
	"net/http"
	"strings"
	"testing"

	"github.com/actgate/actgate/internal/mcpproxy/wire"
)

// TestToolHeaders: the x-mcp-header declarations of an inputSchema's properties, at any depth
// up to maxHeaderDepth; a declaration the gate cannot hold (not a string, not a header name,
// the same header twice) leaves the tool unknown.
func TestToolHeaders(t *testing.T) {
	deep := `{"type":"string","x-mcp-header":"Deep"}`
	for i := 0; i < maxHeaderDepth; i++ {
		deep = `{"type":"object","properties":{"p":` + deep + `}}`
	}
	for _, tc := range []struct {
		name, props string
		want        map[string]string // canonical header → dotted path; nil: not ok
	}{
		{"none", `{"a":{"type":"string"}}`, map[string]string{}},
		{"top level", `{"a":{"x-mcp-header":"To"}}`, map[string]string{"Mcp-Param-To": "a"}},
		{"nested", `{"r":{"properties":{"q":{"x-mcp-header":"queue"}}}}`, map[string]string{"Mcp-Param-Queue": "r.q"}},
		{"null declaration", `{"a":{"x-mcp-header":null}}`, map[string]string{}},
		{"too deep is not read", `{"d":` + deep + `}`, map[string]string{}},
		{"not a string", `{"a":{"x-mcp-header":7}}`, nil},
		{"empty", `{"a":{"x-mcp-header":""}}`, nil},
		{"not a header name", `{"a":{"x-mcp-header":"To: x"}}`, nil},
		{"control byte", `{"a":{"x-mcp-header":"T\u0000o"}}`, nil},
		{"twice", `{"a":{"x-mcp-header":"To"},"b":{"x-mcp-header":"to"}}`, nil},
		{"twice nested", `{"a":{"x-mcp-header":"To"},"b":{"properties":{"c":{"x-mcp-header":"TO"}}}}`, nil},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var props SchemaProps
			if err := json.Unmarshal([]byte(tc.props), &props); err != nil {
				t.Fatal(err)
			}
			got, ok := ToolHeaders(props)
			if ok != (tc.want != nil) {
				t.Fatalf("ToolHeaders(%s) ok = %v, want %v (%v)", tc.props, ok, tc.want != nil, got)
			}
			if len(got) != len(tc.want) {
				t.Fatalf("ToolHeaders(%s) = %v, want %v", tc.props, got, tc.want)
			}
			for k, path := range got {
				if tc.want[k] != strings.Join(path, ".") {
					t.Fatalf("ToolHeaders(%s) = %v, want %v", tc.props, got, tc.want)
				}
			}
		})
	}

}

// meta2026 is a 2026-07-28 request's _meta (its version and capabilities).
const meta2026 = `"_meta":{"io.modelcontextprotocol/protocolVersion":"2026-07-28","io.modelcontextprotocol/clientCapabilities":{}}`

func hdr2026(kv ...string) http.Header {
	h := http.Header{}
	for i := 0; i+1 < len(kv); i += 2 {
		h.Add(kv[i], kv[i+1])
	}
	return h
}

// TestParseStatelessBadInput: every malformed or disagreeing 2026-07-28 request is refused
// with its code, never accepted and never a panic.
func TestParseStatelessBadInput(t *testing.T) {
	ok := hdr2026("Mcp-Protocol-Version", "2026-07-28", "Mcp-Method", "tools/call", "Mcp-Name", "t")
	for _, tc := range []struct {
		name string
		h    http.Header
		body string
		code int64
	}{
		{"not JSON-RPC", ok, `[1,2]`, wire.CodeParseError},
		{"a response", ok, `{"jsonrpc":"2.0","id":1,"result":{}}`, wire.CodeInvalidRequest},
		{"params an array", ok, `{"jsonrpc":"2.0","id":1,"method":"tools/call","params":[1]}`, wire.CodeInvalidParams},
		{"_meta not an object", ok, `{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"t","_meta":3}}`, wire.CodeInvalidParams},
		{"no meta version", ok, `{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"t"}}`, wire.CodeInvalidParams},
		{"meta version not a string", ok, `{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"t","_meta":{"io.modelcontextprotocol/protocolVersion":7}}}`, wire.CodeInvalidParams},
		{"no version header", hdr2026("Mcp-Method", "tools/call", "Mcp-Name", "t"), `{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"t",` + meta2026 + `}}`, wire.CodeHeaderMismatch},
		{"two version headers", hdr2026("Mcp-Protocol-Version", "2026-07-28", "Mcp-Protocol-Version", "2026-07-28", "Mcp-Method", "tools/call", "Mcp-Name", "t"), `{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"t",` + meta2026 + `}}`, wire.CodeHeaderMismatch},
		{"version header differs from meta", hdr2026("Mcp-Protocol-Version", "2027-01-01", "Mcp-Method", "tools/call", "Mcp-Name", "t"), `{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"t",` + meta2026 + `}}`, wire.CodeHeaderMismatch},
		{"unknown version", hdr2026("Mcp-Protocol-Version", "2027-01-01", "Mcp-Method", "tools/call", "Mcp-Name", "t"), `{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"t","_meta":{"io.modelcontextprotocol/protocolVersion":"2027-01-01"}}}`, wire.CodeUnsupportedProtocolVersion},
		{"no method header", hdr2026("Mcp-Protocol-Version", "2026-07-28", "Mcp-Name", "t"), `{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"t",` + meta2026 + `}}`, wire.CodeHeaderMismatch},
		{"method header differs", hdr2026("Mcp-Protocol-Version", "2026-07-28", "Mcp-Method", "tools/list", "Mcp-Name", "t"), `{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"t",` + meta2026 + `}}`, wire.CodeHeaderMismatch},
		{"two method headers", hdr2026("Mcp-Protocol-Version", "2026-07-28", "Mcp-Method", "tools/call", "Mcp-Method", "tools/call", "Mcp-Name", "t"), `{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"t",` + meta2026 + `}}`, wire.CodeHeaderMismatch},
		{"no name header", hdr2026("Mcp-Protocol-Version", "2026-07-28", "Mcp-Method", "tools/call"), `{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"t",` + meta2026 + `}}`, wire.CodeHeaderMismatch},
		{"name header differs", hdr2026("Mcp-Protocol-Version", "2026-07-28", "Mcp-Method", "tools/call", "Mcp-Name", "u"), `{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"t",` + meta2026 + `}}`, wire.CodeHeaderMismatch},
		{"name header case differs", hdr2026("Mcp-Protocol-Version", "2026-07-28", "Mcp-Method", "tools/call", "Mcp-Name", "T"), `{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"t",` + meta2026 + `}}`, wire.CodeHeaderMismatch},
		{"name header bad base64", hdr2026("Mcp-Protocol-Version", "2026-07-28", "Mcp-Method", "tools/call", "Mcp-Name", "=?base64?!!?="), `{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"t",` + meta2026 + `}}`, wire.CodeHeaderMismatch},
		{"name header too long", hdr2026("Mcp-Protocol-Version", "2026-07-28", "Mcp-Method", "tools/call", "Mcp-Name", strings.Repeat("t", MaxHeaderValue+1)), `{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"t",` + meta2026 + `}}`, wire.CodeHeaderMismatch},
		{"no name in body", ok, `{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{` + meta2026 + `}}`, wire.CodeInvalidParams},
		{"name not a string", ok, `{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":1,` + meta2026 + `}}`, wire.CodeInvalidParams},
		{"no client capabilities", ok, `{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"t","_meta":{"io.modelcontextprotocol/protocolVersion":"2026-07-28"}}}`, wire.CodeInvalidParams},
		{"client capabilities not an object", ok, `{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"t","_meta":{"io.modelcontextprotocol/protocolVersion":"2026-07-28","io.modelcontextprotocol/clientCapabilities":[]}}}`, wire.CodeInvalidParams},
		{"client capabilities null", ok, `{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"t","_meta":{"io.modelcontextprotocol/protocolVersion":"2026-07-28","io.modelcontextprotocol/clientCapabilities":null}}}`, wire.CodeInvalidParams},
		{"resources/read uri differs", hdr2026("Mcp-Protocol-Version", "2026-07-28", "Mcp-Method", "resources/read", "Mcp-Name", "file:///a"), `{"jsonrpc":"2.0","id":1,"method":"resources/read","params":{"uri":"file:///b",` + meta2026 + `}}`, wire.CodeHeaderMismatch},
	} {
		t.Run(tc.name, func(t *testing.T) {
			sr, err := Parse(tc.h, []byte(tc.body))
			if err == nil {
				t.Fatalf("accepted: %+v", sr)
			}
			if err.Err.Code != tc.code || err.Status != http.StatusBadRequest {
				t.Fatalf("code %d HTTP %d (%s), want %d", err.Err.Code, err.Status, err.Err.Message, tc.code)
			}
			if err.Err.Code == wire.CodeHeaderMismatch {
				var data map[string]string
				if json.Unmarshal(err.Err.Data, &data) != nil || data[wire.MetaEFCode] != "EF_MCP_HEADER_MISMATCH" {
					t.Fatalf("header refusal without its EF code: %s", err.Err.Data)
				}
			}
		})
	}
	// The agreeing forms are accepted: as written, and base64-encoded.
	for _, h := range []http.Header{ok, hdr2026("Mcp-Protocol-Version", "2026-07-28", "Mcp-Method", "tools/call", "Mcp-Name", "=?base64?dA==?=")} {
		sr, err := Parse(h, []byte(`{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"t",`+meta2026+`}}`))
		if err != nil || sr.Name != "t" || sr.Version != "2026-07-28" {
			t.Fatalf("refused an agreeing request: %+v %+v", sr, err)
		}
	}
}

func TestIsStatelessRequest(t *testing.T) {
	body := []byte(`{"jsonrpc":"2.0","id":1,"method":"tools/list","params":{` + meta2026 + `}}`)
	for _, tc := range []struct {
		h    http.Header
		body []byte
		want bool
	}{
		{hdr2026("Mcp-Protocol-Version", "2026-07-28"), nil, true},
		// A 2026-07-28 body under an older revision's header: the sessionless revision's request
		// with a disagreeing header, for Parse to refuse with -32020.
		{hdr2026("Mcp-Protocol-Version", "2025-11-25"), body, true},
		{hdr2026("Mcp-Protocol-Version", "2025-11-25"), []byte(`{"jsonrpc":"2.0","id":1,"method":"tools/list"}`), false},
		{hdr2026("Mcp-Session-Id", "s", "Mcp-Protocol-Version", "2026-07-28"), body, false},
		{http.Header{}, body, true},
		{http.Header{}, []byte(`{"jsonrpc":"2.0","id":1,"method":"tools/list"}`), false},
		{http.Header{}, []byte(`not json`), false},
	} {
		if got := IsRequest(tc.h, tc.body); got != tc.want {
			t.Errorf("IsRequest(%v, %s) = %v", tc.h, tc.body, got)
		}
	}
}

func TestContinuationScope(t *testing.T) {
	s := Scope("bank", "a")
	if ContinuationScope(s, nil, nil) != s {
		t.Fatal("a first round is not in the agent's scope")
	}
	c1 := ContinuationScope(s, json.RawMessage(`"st1"`), json.RawMessage(`{"x":1}`))
	c2 := ContinuationScope(s, json.RawMessage(`"st1"`), json.RawMessage(`{"x":2}`))
	if c1 == s || c1 == c2 || c1 != ContinuationScope(s, json.RawMessage(`"st1"`), json.RawMessage(`{"x":1}`)) {
		t.Fatalf("continuation scopes: %s %s", c1, c2)
	}
}

// TestWithCacheHints: a stateful upstream's cacheable result gets the hints 2026-07-28 requires
// where it has none, its own members kept as written; hints it has are its own; other results
// and results that are not objects are unchanged.
func TestWithCacheHints(t *testing.T) {
	for _, tc := range []struct{ method, in, want string }{
		{"tools/list", `{"tools":[{"name":"a<b>"}]}`, `{"tools":[{"name":"a<b>"}],"ttlMs":0,"cacheScope":"private"}`},
		{"resources/read", ` {} `, `{"ttlMs":0,"cacheScope":"private"}`},
		{"prompts/list", `{"prompts":[],"ttlMs":5000}`, `{"prompts":[],"ttlMs":5000,"cacheScope":"private"}`},
		{"resources/list", `{"resources":[],"ttlMs":5,"cacheScope":"public"}`, `{"resources":[],"ttlMs":5,"cacheScope":"public"}`},
		{"server/discover", `{"supportedVersions":["2026-07-28"]}`, `{"supportedVersions":["2026-07-28"],"ttlMs":0,"cacheScope":"private"}`},
		{"tools/call", `{"content":[]}`, `{"content":[]}`},
		{"tools/list", `[1]`, `[1]`},
		{"tools/list", `null`, `null`},
		{"tools/list", `{"tools":`, `{"tools":`},
	} {
		got := string(WithCacheHints(tc.method, json.RawMessage(tc.in)))
		if got != tc.want {
			t.Errorf("%s %s: got %s, want %s", tc.method, tc.in, got, tc.want)
		}
		if json.Valid([]byte(tc.in)) && !json.Valid([]byte(got)) {
			t.Errorf("%s %s: not JSON: %s", tc.method, tc.in, got)
		}
	}
}

// TestCheckParamHeaders: an Mcp-Param-* header of a tools/call must copy a value of the call's
// arguments (as written or base64-encoded); one that does not decode, is too long or names a
// value the arguments do not carry is a header mismatch, so nothing the gate did not decide on
// reaches the server.
func TestCheckParamHeaders(t *testing.T) {
	sr := &Request{Params: map[string]json.RawMessage{
		"arguments": json.RawMessage(`{"region":"us-west","n":42,"f":1.50,"ok":true,"nested":{"tags":["a b"]}}`),
	}}
	for _, tc := range []struct {
		name string
		h    http.Header
		ok   bool
	}{
		{"none", hdr2026(), true},
		{"a string", hdr2026("Mcp-Param-Region", "us-west"), true},
		{"with spaces around", hdr2026("Mcp-Param-Region", "  us-west "), true},
		{"base64", hdr2026("Mcp-Param-Region", "=?base64?dXMtd2VzdA==?="), true},
		{"a number", hdr2026("Mcp-Param-N", "42"), true},
		{"a number in its shortest form", hdr2026("Mcp-Param-F", "1.5"), true},
		{"a number as written", hdr2026("Mcp-Param-F", "1.50"), true},
		{"a boolean", hdr2026("Mcp-Param-Ok", "true"), true},
		{"a nested value", hdr2026("Mcp-Param-Tag", "a b"), true},
		{"another value", hdr2026("Mcp-Param-Region", "eu-central"), false},
		{"case differs", hdr2026("Mcp-Param-Region", "US-WEST"), false},
		{"one of two differs", hdr2026("Mcp-Param-Region", "us-west", "Mcp-Param-Other", "x"), false},
		{"bad base64", hdr2026("Mcp-Param-Region", "=?base64?!!?="), false},
		{"too long", hdr2026("Mcp-Param-Region", strings.Repeat("u", MaxHeaderValue+1)), false},
	} {
		err := CheckParamHeaders(tc.h, sr)
		if (err == nil) != tc.ok {
			t.Errorf("%s: %+v, want ok=%v", tc.name, err, tc.ok)
			continue
		}
		if err != nil && (err.Status != http.StatusBadRequest || err.Err.Code != wire.CodeHeaderMismatch) {
			t.Errorf("%s: HTTP %d code %d, want 400 and %d", tc.name, err.Status, err.Err.Code, wire.CodeHeaderMismatch)
		}
	}
	// Arguments that are not JSON carry no value a header could copy.
	if CheckParamHeaders(hdr2026("Mcp-Param-X", "x"), &Request{Params: map[string]json.RawMessage{"arguments": json.RawMessage(`{`)}}) == nil {
		t.Error("a header was accepted for arguments that do not parse")
	}
}

// TestLogAllowed: on a 2026-07-28 exchange with a stateful upstream a log message goes to the
// agent only when the request asked for a level and the message is at least that severe; a
// message whose level is unknown, or that does not parse, does not go.
func TestLogAllowed(t *testing.T) {
	req := func(level string) *Request {
		meta := `{"io.modelcontextprotocol/protocolVersion":"2026-07-28"`
		if level != "" {
			meta += `,"io.modelcontextprotocol/logLevel":"` + level + `"`
		}
		return &Request{Params: map[string]json.RawMessage{"_meta": json.RawMessage(meta + "}")}}
	}
	for _, tc := range []struct {
		asked, msg string
		want       bool
	}{
		{"", `{"level":"emergency","data":"x"}`, false},
		{"debug", `{"level":"debug","data":"x"}`, true},
		{"warning", `{"level":"info","data":"x"}`, false},
		{"warning", `{"level":"error","data":"x"}`, true},
		{"bogus", `{"level":"error","data":"x"}`, false},
		{"debug", `{"level":"loud","data":"x"}`, false},
		{"debug", `[1]`, false},
	} {
		if got := LogAllowed(WithLogLevel(context.Background(), req(tc.asked)), json.RawMessage(tc.msg)); got != tc.want {
			t.Errorf("asked %q, message %s: %v, want %v", tc.asked, tc.msg, got, tc.want)
		}
	}
	if !LogAllowed(context.Background(), json.RawMessage(`{"level":"debug"}`)) {
		t.Error("a message outside a 2026-07-28 exchange with a stateful upstream was dropped")
	}
}
