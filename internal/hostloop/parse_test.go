package hostloop

import (
	"errors"
	"net/url"
	"strings"
	"testing"
)

// TestParseEnforceRequest: the body of /v1/enforce is one strict JSON object; every bad input
// is a RequestError naming the field, never a request.
func TestParseEnforceRequest(t *testing.T) {
	for _, tc := range []struct {
		name, body, field string
	}{
		{"ok", `{"vendor":"anthropic","block":{"type":"tool_use"},"server":"payments","session":"s-1","provenance":"user"}`, ""},
		{"not JSON", `{`, "$"},
		{"empty", ``, "$"},
		{"array", `[]`, "$"},
		{"unknown member", `{"vendor":"anthropic","block":{},"allow":true}`, "$"},
		{"duplicate member", `{"vendor":"anthropic","vendor":"openai","block":{}}`, "$"},
		{"member case", `{"Vendor":"anthropic","block":{}}`, "$"},
		{"trailing data", `{"vendor":"anthropic","block":{}} {}`, "$"},
		{"not UTF-8", "{\"vendor\":\"anthropic\",\"block\":{},\"session\":\"\xff\"}", "$"},
		{"wrong type", `{"vendor":1,"block":{}}`, "$"},
		{"no vendor", `{"block":{}}`, "vendor"},
		{"unknown vendor", `{"vendor":"gemini","block":{}}`, "vendor"},
		{"no block", `{"vendor":"anthropic"}`, "block"},
		{"null block", `{"vendor":"anthropic","block":null}`, "block"},
		{"server not a label", `{"vendor":"anthropic","block":{},"server":"Pay ments"}`, "server"},
		{"server too long", `{"vendor":"anthropic","block":{},"server":"` + strings.Repeat("a", 64) + `"}`, "server"},
		{"session too long", `{"vendor":"anthropic","block":{},"session":"` + strings.Repeat("a", 257) + `"}`, "session"},
		{"session control char", `{"vendor":"anthropic","block":{},"session":"a\u0000b"}`, "session"},
		{"provenance", `{"vendor":"anthropic","block":{},"provenance":"admin"}`, "provenance"},
		{"too large", `{"vendor":"anthropic","block":"` + strings.Repeat("a", MaxHostBodyBytes) + `"}`, "$"},
		{"ok destination", `{"vendor":"anthropic","block":{},"destination":"https://payments.example/mcp"}`, ""},
		{"destination not a URL", `{"vendor":"anthropic","block":{},"destination":"payments"}`, "destination"},
		{"destination wrong type", `{"vendor":"anthropic","block":{},"destination":["https://a.example"]}`, "$"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := ParseEnforceRequest([]byte(tc.body))
			checkField(t, err, tc.field)
		})
	}
}

// TestParseDestination: a host's live destination is an absolute http or https URL naming one
// host; every spelling a parser could read as another host, or that is not a URL, is refused.
func TestParseDestination(t *testing.T) {
	for _, tc := range []struct {
		name, dest string
		ok         bool
	}{
		{"MCP server URL", "https://payments.example/mcp", true},
		{"origin", "https://pay.example", true},
		{"page URL with query and fragment", "https://pay.example/checkout?step=2#pay", true},
		{"port", "http://127.0.0.1:8931/mcp", true},
		{"IPv6 literal", "http://[::1]:8931/mcp", true},
		{"upper-case host", "https://Pay.Example/", true},
		{"relative", "/mcp", false},
		{"scheme-relative", "//pay.example/mcp", false},
		{"bare host", "pay.example", false},
		{"server name", "payments", false},
		{"other scheme", "ftp://pay.example/", false},
		{"mcp scheme", "mcp://pay.example/", false},
		{"upper-case scheme", "HTTPS://pay.example/", true},
		{"javascript", "javascript:alert(1)", false},
		{"opaque", "https:pay.example", false},
		{"no host", "https:///mcp", false},
		{"userinfo", "https://payments.example@evil.example/mcp", false},
		{"empty userinfo", "https://@evil.example/mcp", false},
		{"user and password", "https://u:p@pay.example/", false},
		{"backslash", "https://evil.example\\@pay.example/", false},
		{"space", "https://pay.example/a b", false},
		{"tab", "https://pay.example/\tx", false},
		{"newline", "https://pay.example/\nx", false},
		{"NUL", "https://pay.example/\x00", false},
		{"non-ASCII host", "https://pаy.example/", false},
		{"percent in host", "https://pay%2eexample/", false},
		{"underscore host", "https://pay_example/", false},
		{"port zero", "https://pay.example:0/", false},
		{"port too large", "https://pay.example:65536/", false},
		{"port not digits", "https://pay.example:https/", false},
		{"empty port", "https://pay.example:/", false},
		{"zone in IPv6", "http://[fe80::1%25eth0]:80/", false},
		{"IPv4 in brackets", "http://[127.0.0.1]/", false},
		{"too long", "https://pay.example/" + strings.Repeat("a", MaxDestinationBytes), false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			err := ParseDestination(tc.dest)
			if tc.ok {
				checkField(t, err, "")
				return
			}
			checkField(t, err, "destination")
		})
	}
}

// TestParseCompleteRequest: the body of /v1/complete.
func TestParseCompleteRequest(t *testing.T) {
	for _, tc := range []struct {
		name, body, field string
	}{
		{"ok", `{"operation_id":"op-1","outcome":"executed","result":{"ok":true}}`, ""},
		{"ok failed without result", `{"operation_id":"op-1","outcome":"failed"}`, ""},
		{"no operation", `{"outcome":"executed"}`, "operation_id"},
		{"operation control char", `{"operation_id":"op\n1","outcome":"executed"}`, "operation_id"},
		{"operation too long", `{"operation_id":"` + strings.Repeat("o", 4096) + `","outcome":"executed"}`, "operation_id"},
		{"bad outcome", `{"operation_id":"op","outcome":"done"}`, "outcome"},
		{"outcome case", `{"operation_id":"op","outcome":"EXECUTED"}`, "outcome"},
		{"unknown member", `{"operation_id":"op","outcome":"executed","state":"EXECUTED"}`, "$"},
		{"result not JSON", `{"operation_id":"op","outcome":"executed","result":}`, "$"},
		{"null", `null`, "operation_id"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := ParseCompleteRequest([]byte(tc.body))
			checkField(t, err, tc.field)
		})
	}
}

func checkField(t *testing.T, err error, field string) {
	t.Helper()
	if field == "" {
		if err != nil {
			t.Fatalf("refused: %v", err)
		}
		return
	}
	var re *RequestError
	if !errors.As(err, &re) || re.Field != field {
		t.Fatalf("error %v, want a RequestError on %s", err, field)
	}
}

func FuzzParseEnforceRequest(f *testing.F) {
	for _, s := range []string{
		`{"vendor":"anthropic","block":{"type":"tool_use","id":"toolu_1","name":"x","input":{}}}`,
		`{"vendor":"openai","block":{},"server":"payments","session":"s","provenance":"user"}`,
		`{"vendor":"openai-responses","block":[]}`,
		`{"vendor":"anthropic","vendor":"openai","block":{}}`,
		`{"vendor":"anthropic","block":null}`,
		`{"vendor":"anthropic","block":{},"destination":"https://payments.example/mcp"}`,
		`{"vendor":"anthropic","block":{},"destination":"https://a.example@b.example/"}`,
		`{"vendor":"anthropic","block":{},"destination":"http://[::1]:99999/"}`,
		`{`, ``, `[]`, `null`, `{"vendor":"\ud800","block":{}}`,
	} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, b []byte) {
		r, err := ParseEnforceRequest(b)
		if err != nil {
			var re *RequestError
			if !errors.As(err, &re) {
				t.Fatalf("error %v is not a RequestError", err)
			}
			return
		}
		switch r.Vendor {
		case HostAnthropic, HostOpenAI, HostOpenAIResponses:
		default:
			t.Fatalf("accepted vendor %q", r.Vendor)
		}
		if len(r.Block) == 0 {
			t.Fatal("accepted without a block")
		}
		if r.Destination != "" {
			// An accepted destination names exactly one http(s) host and no user.
			u, err := url.Parse(r.Destination)
			if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Hostname() == "" || u.User != nil || len(r.Destination) > MaxDestinationBytes {
				t.Fatalf("accepted destination %q", r.Destination)
			}
		}
	})
}

func FuzzParseCompleteRequest(f *testing.F) {
	for _, s := range []string{
		`{"operation_id":"op-1","outcome":"executed","result":{"ok":true}}`,
		`{"operation_id":"op-1","outcome":"indeterminate"}`,
		`{"operation_id":"","outcome":"failed"}`,
		`{"operation_id":"op","operation_id":"op2","outcome":"failed"}`,
		`{`, `null`,
	} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, b []byte) {
		r, err := ParseCompleteRequest(b)
		if err != nil {
			return
		}
		if r.OperationID == "" || (r.Outcome != HostExecuted && r.Outcome != HostFailed && r.Outcome != HostIndeterminate) {
			t.Fatalf("accepted %+v", r)
		}
	})
}
