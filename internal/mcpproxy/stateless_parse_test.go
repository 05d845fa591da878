package mcpproxy

import (
	"context"
	"encoding/json"
	"net/http"
	"strings"
	"testing"

	"github.com/actgate/actgate/internal/mcpproxy/wire"
)

func hdr2026(kv ...string) http.Header {
	h := http.Header{}
	for i := 0; i+1 < len(kv); i += 2 {
		h.Add(kv[i], kv[i+1])
	}
	return h
}

const meta2026 = `"_meta":{"io.modelcontextprotocol/protocolVersion":"2026-07-28","io.modelcontextprotocol/clientCapabilities":{}}`

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
		{"name header too long", hdr2026("Mcp-Protocol-Version", "2026-07-28", "Mcp-Method", "tools/call", "Mcp-Name", strings.Repeat("t", maxHeaderValue+1)), `{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"t",` + meta2026 + `}}`, wire.CodeHeaderMismatch},
		{"no name in body", ok, `{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{` + meta2026 + `}}`, wire.CodeInvalidParams},
		{"name not a string", ok, `{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":1,` + meta2026 + `}}`, wire.CodeInvalidParams},
		{"no client capabilities", ok, `{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"t","_meta":{"io.modelcontextprotocol/protocolVersion":"2026-07-28"}}}`, wire.CodeInvalidParams},
		{"client capabilities not an object", ok, `{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"t","_meta":{"io.modelcontextprotocol/protocolVersion":"2026-07-28","io.modelcontextprotocol/clientCapabilities":[]}}}`, wire.CodeInvalidParams},
		{"client capabilities null", ok, `{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"t","_meta":{"io.modelcontextprotocol/protocolVersion":"2026-07-28","io.modelcontextprotocol/clientCapabilities":null}}}`, wire.CodeInvalidParams},
		{"resources/read uri differs", hdr2026("Mcp-Protocol-Version", "2026-07-28", "Mcp-Method", "resources/read", "Mcp-Name", "file:///a"), `{"jsonrpc":"2.0","id":1,"method":"resources/read","params":{"uri":"file:///b",` + meta2026 + `}}`, wire.CodeHeaderMismatch},
	} {
		t.Run(tc.name, func(t *testing.T) {
			sr, err := parseStateless(tc.h, []byte(tc.body))
			if err == nil {
				t.Fatalf("accepted: %+v", sr)
			}
			if err.err.Code != tc.code || err.status != http.StatusBadRequest {
				t.Fatalf("code %d HTTP %d (%s), want %d", err.err.Code, err.status, err.err.Message, tc.code)
			}
			if err.err.Code == wire.CodeHeaderMismatch {
				var data map[string]string
				if json.Unmarshal(err.err.Data, &data) != nil || data[MetaEFCode] != "EF_MCP_HEADER_MISMATCH" {
					t.Fatalf("header refusal without its EF code: %s", err.err.Data)
				}
			}
		})
	}
	// The agreeing forms are accepted: as written, and base64-encoded.
	for _, h := range []http.Header{ok, hdr2026("Mcp-Protocol-Version", "2026-07-28", "Mcp-Method", "tools/call", "Mcp-Name", "=?base64?dA==?=")} {
		sr, err := parseStateless(h, []byte(`{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"t",`+meta2026+`}}`))
		if err != nil || sr.name != "t" || sr.version != "2026-07-28" {
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
		{hdr2026("Mcp-Protocol-Version", "2025-11-25"), body, false},
		{hdr2026("Mcp-Session-Id", "s", "Mcp-Protocol-Version", "2026-07-28"), body, false},
		{http.Header{}, body, true},
		{http.Header{}, []byte(`{"jsonrpc":"2.0","id":1,"method":"tools/list"}`), false},
		{http.Header{}, []byte(`not json`), false},
	} {
		if got := isStatelessRequest(tc.h, tc.body); got != tc.want {
			t.Errorf("isStatelessRequest(%v, %s) = %v", tc.h, tc.body, got)
		}
	}
}

func TestContinuationScope(t *testing.T) {
	s := statelessScope("bank", "a")
	if continuationScope(s, nil, nil) != s {
		t.Fatal("a first round is not in the agent's scope")
	}
	c1 := continuationScope(s, json.RawMessage(`"st1"`), json.RawMessage(`{"x":1}`))
	c2 := continuationScope(s, json.RawMessage(`"st1"`), json.RawMessage(`{"x":2}`))
	if c1 == s || c1 == c2 || c1 != continuationScope(s, json.RawMessage(`"st1"`), json.RawMessage(`{"x":1}`)) {
		t.Fatalf("continuation scopes: %s %s", c1, c2)
	}
}

// FuzzParseStateless: no header set and body makes the parser panic, and whatever it accepts
// agrees with its headers.
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
		got := string(withCacheHints(tc.method, json.RawMessage(tc.in)))
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
	sr := &statelessRequest{params: map[string]json.RawMessage{
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
		{"too long", hdr2026("Mcp-Param-Region", strings.Repeat("u", maxHeaderValue+1)), false},
	} {
		err := checkParamHeaders(tc.h, sr)
		if (err == nil) != tc.ok {
			t.Errorf("%s: %+v, want ok=%v", tc.name, err, tc.ok)
			continue
		}
		if err != nil && (err.status != http.StatusBadRequest || err.err.Code != wire.CodeHeaderMismatch) {
			t.Errorf("%s: HTTP %d code %d, want 400 and %d", tc.name, err.status, err.err.Code, wire.CodeHeaderMismatch)
		}
	}
	// Arguments that are not JSON carry no value a header could copy.
	if checkParamHeaders(hdr2026("Mcp-Param-X", "x"), &statelessRequest{params: map[string]json.RawMessage{"arguments": json.RawMessage(`{`)}}) == nil {
		t.Error("a header was accepted for arguments that do not parse")
	}
}

var fuzzKey = []byte("0123456789abcdef0123456789abcdef")

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
		_ = isStatelessRequest(h, []byte(body))
		sr, err := parseStateless(h, []byte(body))
		if err != nil {
			if err.err == nil || err.status != http.StatusBadRequest {
				t.Fatalf("refusal without an error: %+v", err)
			}
			return
		}
		if sr.req.Method != method {
			t.Fatalf("accepted method %q under Mcp-Method %q", sr.req.Method, method)
		}
		// The same header value as an Mcp-Param header: accepted only when the arguments
		// carry it.
		ph := hdr2026("Mcp-Param-X", name)
		if perr := checkParamHeaders(ph, sr); perr == nil {
			if dec, ok := decodeHeader(strings.TrimSpace(name)); !ok || !argumentValues(sr.params["arguments"])[dec] {
				t.Fatalf("accepted Mcp-Param-X %q for arguments %s", name, sr.params["arguments"])
			}
		} else if perr.err.Code != wire.CodeHeaderMismatch {
			t.Fatalf("Mcp-Param refusal with code %d", perr.err.Code)
		}
		// The continuation members and the learnt x-mcp-header mapping of tool "t" (its
		// "r" argument in Mcp-Param-X): refused or accepted, never a panic.
		if c, err := parseState(fuzzKey, sr.params["requestState"]); err == nil && c.Call == "" {
			t.Fatalf("accepted a requestState naming no call")
		}
		if m, err := parseInputResponses(sr.params["inputResponses"]); err == nil && len(m) > maxInputRequests {
			t.Fatalf("accepted %d inputResponses", len(m))
		}
		lp := &Proxy{}
		lp.sl.paramHeaders = map[string]map[string][]string{"t": {"Mcp-Param-X": {"r"}}}
		if perr := lp.checkDeclaredParams(ph, sr); perr != nil && perr.err.Code != wire.CodeHeaderMismatch {
			t.Fatalf("declared Mcp-Param refusal with code %d", perr.err.Code)
		}
		if nameMember(sr.req.Method) != "" {
			if dec, _ := decodeHeader(name); dec != sr.name {
				t.Fatalf("accepted name %q under Mcp-Name %q", sr.name, name)
			}
		}
	})
}

// TestLogAllowed: on a 2026-07-28 exchange with a stateful upstream a log message goes to the
// agent only when the request asked for a level and the message is at least that severe; a
// message whose level is unknown, or that does not parse, does not go.
func TestLogAllowed(t *testing.T) {
	req := func(level string) *statelessRequest {
		meta := `{"io.modelcontextprotocol/protocolVersion":"2026-07-28"`
		if level != "" {
			meta += `,"io.modelcontextprotocol/logLevel":"` + level + `"`
		}
		return &statelessRequest{params: map[string]json.RawMessage{"_meta": json.RawMessage(meta + "}")}}
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
		if got := logAllowed(withLogLevel(context.Background(), req(tc.asked)), json.RawMessage(tc.msg)); got != tc.want {
			t.Errorf("asked %q, message %s: %v, want %v", tc.asked, tc.msg, got, tc.want)
		}
	}
	if !logAllowed(context.Background(), json.RawMessage(`{"level":"debug"}`)) {
		t.Error("a message outside a 2026-07-28 exchange with a stateful upstream was dropped")
	}
}
