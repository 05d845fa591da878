package hostloop

import (
	"errors"
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
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := ParseEnforceRequest([]byte(tc.body))
			checkField(t, err, tc.field)
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
