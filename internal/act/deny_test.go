package act

import (
	"bytes"
	"encoding/json"
	"flag"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/actgate/actgate/internal/ef"
)

var update = flag.Bool("update", false, "rewrite golden files under testdata/deny")

func TestDenyGolden(t *testing.T) {
	scope := Denial{Code: ef.EFScopeMismatch, Message: "Live arguments are not the authorized digest."}
	timeout := Denial{Code: ef.EF060}
	cases := []struct {
		file string
		run  func() ([]byte, error)
	}{
		{"anthropic_tool_result.json", func() ([]byte, error) { return AnthropicToolResult("toolu_01A", scope) }},
		{"openai_chat_tool_message.json", func() ([]byte, error) { return OpenAIChatToolMessage("call_8f3", scope) }},
		{"responses_function_call_output.json", func() ([]byte, error) { return ResponsesFunctionCallOutput("call_8f3", scope) }},
		{"mcp_call_tool_result.json", func() ([]byte, error) { return MCPCallToolResult(scope) }},
		{"mcp_response_numeric_id.json", func() ([]byte, error) { return MCPErrorResponse("4", scope) }},
		{"mcp_response_string_id.json", func() ([]byte, error) { return MCPErrorResponse(`"req-7"`, timeout) }},
		{"anthropic_timeout_retryable.json", func() ([]byte, error) { return AnthropicToolResult("toolu_01A", timeout) }},
	}
	for _, tc := range cases {
		t.Run(tc.file, func(t *testing.T) {
			got, err := tc.run()
			if err != nil {
				t.Fatal(err)
			}
			var pretty bytes.Buffer
			if err := json.Indent(&pretty, got, "", "  "); err != nil {
				t.Fatal(err)
			}
			pretty.WriteByte('\n')
			path := filepath.Join("testdata", "deny", tc.file)
			if *update {
				if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
					t.Fatal(err)
				}
				if err := os.WriteFile(path, pretty.Bytes(), 0o644); err != nil {
					t.Fatal(err)
				}
			}
			want, err := os.ReadFile(path)
			if err != nil {
				t.Fatalf("golden missing (run with -update): %v", err)
			}
			if !bytes.Equal(pretty.Bytes(), want) {
				t.Fatalf("%s differs from golden:\n%s\nwant:\n%s", tc.file, pretty.Bytes(), want)
			}
		})
	}
	t.Run("no stale goldens", func(t *testing.T) {
		entries, err := os.ReadDir(filepath.Join("testdata", "deny"))
		if err != nil {
			t.Fatal(err)
		}
		known := map[string]bool{}
		for _, tc := range cases {
			known[tc.file] = true
		}
		for _, e := range entries {
			if !known[e.Name()] {
				t.Errorf("stale golden %s", e.Name())
			}
		}
	})
}

// errorObjectOf digs the §17 error object out of each vendor shape, as a host or the model
// would read it.
func errorObjectOf(t *testing.T, vendor Vendor, out []byte) ErrorBody {
	t.Helper()
	var text string
	switch vendor {
	case VendorAnthropic:
		var r struct {
			Type      string `json:"type"`
			ToolUseID string `json:"tool_use_id"`
			IsError   bool   `json:"is_error"`
			Content   []struct {
				Type, Text string
			} `json:"content"`
		}
		if err := json.Unmarshal(out, &r); err != nil || r.Type != "tool_result" || !r.IsError || len(r.Content) != 1 {
			t.Fatalf("not an error tool_result: %s", out)
		}
		text = r.Content[0].Text
	case VendorOpenAIChat:
		var r struct{ Role, Content string }
		if err := json.Unmarshal(out, &r); err != nil || r.Role != "tool" {
			t.Fatalf("not a tool message: %s", out)
		}
		text = r.Content
	case VendorOpenAIResponses:
		var r struct{ Type, Output string }
		if err := json.Unmarshal(out, &r); err != nil || r.Type != "function_call_output" {
			t.Fatalf("not a function_call_output: %s", out)
		}
		text = r.Output
	case VendorMCP:
		var r struct {
			Result struct {
				IsError bool `json:"isError"`
				Content []struct {
					Type, Text string
				} `json:"content"`
			} `json:"result"`
		}
		if err := json.Unmarshal(out, &r); err != nil || !r.Result.IsError || len(r.Result.Content) != 1 {
			t.Fatalf("not an isError result: %s", out)
		}
		text = r.Result.Content[0].Text
	}
	var o ErrorObject
	dec := json.NewDecoder(strings.NewReader(text))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&o); err != nil {
		t.Fatalf("error object not machine-readable: %v: %s", err, text)
	}
	return o.Error
}

// Every deny from a mapped call carries the EF code machine-readably, says invoked=false, is
// retryable only for EF_060 (§23), and carries nothing of the call's arguments (§28, §29).
func TestDenyForEveryVendor(t *testing.T) {
	secret := "attacker@ex.com"
	mcpMC := mcpCtx(t)
	calls := []struct {
		vendor Vendor
		c      func() (*Candidate, error)
	}{
		{VendorAnthropic, func() (*Candidate, error) {
			return MapAnthropicToolUse([]byte(`{"type":"tool_use","id":"toolu_01A","name":"email_send","input":{"to":"`+secret+`"}}`), testCtx(t))
		}},
		{VendorOpenAIChat, func() (*Candidate, error) {
			return MapOpenAIToolCall([]byte(`{"id":"call_8f3","type":"function","function":{"name":"email_send","arguments":"{\"to\":\"`+secret+`\"}"}}`), testCtx(t))
		}},
		{VendorOpenAIResponses, func() (*Candidate, error) {
			return MapResponsesFunctionCall([]byte(`{"type":"function_call","call_id":"call_8f3","name":"email_send","arguments":"{\"to\":\"`+secret+`\"}"}`), testCtx(t))
		}},
		{VendorMCP, func() (*Candidate, error) {
			return MapMCPToolsCall([]byte(`{"jsonrpc":"2.0","id":"x-1","method":"tools/call","params":{"name":"email_send","arguments":{"to":"`+secret+`"}}}`), mcpMC)
		}},
	}
	for _, call := range calls {
		c, err := call.c()
		if err != nil {
			t.Fatal(err)
		}
		for _, info := range ef.All() {
			t.Run(string(call.vendor)+"/"+string(info.Code), func(t *testing.T) {
				out, err := DenyResult(c.Vendor, c.VendorID, Denial{Code: info.Code})
				if err != nil {
					t.Fatal(err)
				}
				if bytes.Contains(out, []byte(secret)) || bytes.Contains(out, []byte("attacker")) {
					t.Fatal("deny carries the call's arguments")
				}
				if !bytes.Contains(out, []byte(c.VendorID)) && call.vendor != VendorMCP {
					t.Fatal("deny not addressed to the call")
				}
				body := errorObjectOf(t, call.vendor, out)
				if body.Code != info.Code || body.Invoked || body.Retryable != (info.Code == ef.EF060) || body.Message != info.Description {
					t.Fatalf("error body %+v", body)
				}
			})
		}
	}
}

func TestDenyMessageSanitized(t *testing.T) {
	long := strings.Repeat("é", 300)
	for _, tc := range []struct {
		name, in, want string
	}{
		{"empty uses the description", "", ef.EF002.Description()},
		{"control characters become spaces", "line1\nline2\x00\u200dend", "line1 line2 end"},
		{"only whitespace", " \t\n", ef.EF002.Description()},
		{"bounded", long, strings.Repeat("é", MaxDenyMessageBytes/2)},
		{"invalid utf-8", "ok\xffok", "ok ok"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			o, err := Denial{Code: ef.EF002, Message: tc.in}.Object()
			if err != nil {
				t.Fatal(err)
			}
			if o.Error.Message != tc.want {
				t.Fatalf("message %q, want %q", o.Error.Message, tc.want)
			}
			if len(o.Error.Message) > MaxDenyMessageBytes {
				t.Fatal("message over the bound")
			}
		})
	}
}

func TestDenyRefusals(t *testing.T) {
	ok := Denial{Code: ef.EF002}
	for _, tc := range []struct {
		name string
		run  func() ([]byte, error)
		want error
	}{
		{"unknown code", func() ([]byte, error) { return AnthropicToolResult("toolu_1", Denial{Code: "EF_MADE_UP"}) }, ErrUnknownEFCode},
		{"empty code", func() ([]byte, error) { return OpenAIChatToolMessage("call_1", Denial{}) }, ErrUnknownEFCode},
		{"empty tool_use id", func() ([]byte, error) { return AnthropicToolResult("", ok) }, ErrVendorID},
		{"id with newline", func() ([]byte, error) { return OpenAIChatToolMessage("a\nb", ok) }, ErrVendorID},
		{"long id", func() ([]byte, error) { return ResponsesFunctionCallOutput(strings.Repeat("a", 300), ok) }, ErrVendorID},
		{"mcp id not json", func() ([]byte, error) { return MCPErrorResponse("4x", ok) }, ErrVendorID},
		{"mcp id null", func() ([]byte, error) { return MCPErrorResponse("null", ok) }, ErrVendorID},
		{"mcp id object", func() ([]byte, error) { return MCPErrorResponse("{}", ok) }, ErrVendorID},
		{"mcp id empty", func() ([]byte, error) { return MCPErrorResponse("", ok) }, ErrVendorID},
	} {
		t.Run(tc.name, func(t *testing.T) {
			out, err := tc.run()
			if out != nil || err != tc.want {
				t.Fatalf("got %s, %v; want %v", out, err, tc.want)
			}
		})
	}
	if _, err := DenyResult("smoke-signals", "x", ok); err == nil {
		t.Fatal("unknown vendor accepted")
	}
}

// A refused mapping becomes EF_ACT_INVALID without any of the error's text.
func TestDenialForMappingError(t *testing.T) {
	items, err := MapOpenAIToolCalls([]byte(`[{"id":"call_1","type":"function","function":{"name":"email_send","arguments":"{\"to\":\"attacker@ex.com\""}}]`), testCtx(t))
	if err != nil {
		t.Fatal(err)
	}
	d := DenialFor(items[0].Err)
	out, err := DenyResult(VendorOpenAIChat, items[0].VendorID, d)
	if err != nil {
		t.Fatal(err)
	}
	body := errorObjectOf(t, VendorOpenAIChat, out)
	if body.Code != ef.EFActInvalid || bytes.Contains(out, []byte("attacker")) {
		t.Fatalf("deny %s", out)
	}
}
