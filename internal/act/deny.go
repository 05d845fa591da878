package act

import (
	"encoding/json"
	"errors"
	"strings"
	"unicode"
	"unicode/utf8"

	"github.com/actgate/actgate/internal/ef"
	"github.com/actgate/actgate/internal/jcs"
)

// MaxDenyMessageBytes bounds the model-visible message of a deny.
const MaxDenyMessageBytes = 200

// Denial is what a deny tells the agent: an EF code (tool-use-binding §23: copied into the
// vendor payload as a machine-readable string) and a short message.
//
// The message is shown to the model, so it MUST NOT carry other users' data (§28) nor the
// call's arguments (§29): pass a fixed sentence, or leave it empty to use the code's
// description. The renderers below strip control and format characters and cut it to
// MaxDenyMessageBytes, but cannot tell data from prose.
type Denial struct {
	Code    ef.EFCode
	Message string
}

// ErrorObject is the host error object of tool-use-binding §17:
//
//	{"error":{"code":"EF_SCOPE_MISMATCH","message":"...","retryable":false,"invoked":false}}
type ErrorObject struct {
	Error ErrorBody `json:"error"`
}

// ErrorBody is the inside of ErrorObject. Invoked is always false: a deny is rendered only for
// a call that was not invoked (§27.4). Retryable is the code's own bit: true only for EF_060
// (§23).
type ErrorBody struct {
	Code      ef.EFCode `json:"code"`
	Message   string    `json:"message"`
	Retryable bool      `json:"retryable"`
	Invoked   bool      `json:"invoked"`
}

// ErrUnknownEFCode is returned when a Denial's code is not one of package ef's.
var ErrUnknownEFCode = errors.New("act: deny with an EF code package ef does not know")

// ErrVendorID is returned when the id to answer is not a usable vendor id.
var ErrVendorID = errors.New("act: deny for an unusable vendor id")

// DenialFor turns a mapping refusal into the Denial the agent sees: EF_ACT_INVALID with the
// code's fixed description. The error's own text is never used: it is for logs, and the model
// learns only that the call could not become an act.
func DenialFor(err error) Denial {
	return Denial{Code: ef.EFActInvalid}
}

// Object returns the §17 error object for d.
func (d Denial) Object() (ErrorObject, error) {
	if !d.Code.Known() {
		return ErrorObject{}, ErrUnknownEFCode
	}
	return ErrorObject{Error: ErrorBody{
		Code:      d.Code,
		Message:   sanitizeMessage(d.Message, d.Code.Description()),
		Retryable: d.Code.Retryable(),
		Invoked:   false,
	}}, nil
}

// text is the error object as JSON text, for vendor fields that carry a string.
func (d Denial) text() (string, error) {
	o, err := d.Object()
	if err != nil {
		return "", err
	}
	b, err := json.Marshal(o)
	if err != nil {
		return "", err
	}
	return string(b), nil
}

// AnthropicToolResult renders the deny as the tool_result content block the host appends for
// tool_use block toolUseID (tool-use-binding §6: "the host MUST append a tool_result for that id
// whose content is an error object"):
//
//	{"type":"tool_result","tool_use_id":"toolu_01A","is_error":true,"content":[{"type":"text","text":"{\"error\":{...}}"}]}
func AnthropicToolResult(toolUseID string, d Denial) ([]byte, error) {
	if checkToken("tool_use_id", toolUseID, MaxIDBytes) != nil {
		return nil, ErrVendorID
	}
	t, err := d.text()
	if err != nil {
		return nil, err
	}
	return json.Marshal(struct {
		Type      string      `json:"type"`
		ToolUseID string      `json:"tool_use_id"`
		IsError   bool        `json:"is_error"`
		Content   []textBlock `json:"content"`
	}{"tool_result", toolUseID, true, []textBlock{{"text", t}}})
}

type textBlock struct {
	Type string `json:"type"`
	Text string `json:"text"`
}

// OpenAIChatToolMessage renders the deny as the Chat Completions tool message answering
// tool_calls[].id toolCallID (tool-use-binding §15 append_tool_output(call.id,
// error_payload(decision))):
//
//	{"role":"tool","tool_call_id":"call_8f3","content":"{\"error\":{...}}"}
func OpenAIChatToolMessage(toolCallID string, d Denial) ([]byte, error) {
	if checkToken("tool_call_id", toolCallID, MaxIDBytes) != nil {
		return nil, ErrVendorID
	}
	t, err := d.text()
	if err != nil {
		return nil, err
	}
	return json.Marshal(struct {
		Role       string `json:"role"`
		ToolCallID string `json:"tool_call_id"`
		Content    string `json:"content"`
	}{"tool", toolCallID, t})
}

// ResponsesFunctionCallOutput renders the deny as the Responses API input item answering
// function_call call_id callID:
//
//	{"type":"function_call_output","call_id":"call_8f3","output":"{\"error\":{...}}"}
func ResponsesFunctionCallOutput(callID string, d Denial) ([]byte, error) {
	if checkToken("call_id", callID, MaxIDBytes) != nil {
		return nil, ErrVendorID
	}
	t, err := d.text()
	if err != nil {
		return nil, err
	}
	return json.Marshal(struct {
		Type   string `json:"type"`
		CallID string `json:"call_id"`
		Output string `json:"output"`
	}{"function_call_output", callID, t})
}

// MCPCallToolResult renders the deny as an MCP CallToolResult with isError true and the error
// object as its text content (tool-use-binding §8: "Returning an MCP error to the model is
// required so the loop does not treat silence as success"). It is a tool-level error result,
// not a JSON-RPC error, so the model sees it. The bytes unmarshal into the go-sdk's
// mcp.CallToolResult; this package does not import the SDK.
//
//	{"content":[{"type":"text","text":"{\"error\":{...}}"}],"isError":true}
func MCPCallToolResult(d Denial) ([]byte, error) {
	r, err := mcpResult(d)
	if err != nil {
		return nil, err
	}
	return json.Marshal(r)
}

type mcpToolResult struct {
	Content []textBlock `json:"content"`
	IsError bool        `json:"isError"`
}

func mcpResult(d Denial) (*mcpToolResult, error) {
	t, err := d.text()
	if err != nil {
		return nil, err
	}
	return &mcpToolResult{Content: []textBlock{{"text", t}}, IsError: true}, nil
}

// MCPErrorResponse renders the deny as the JSON-RPC response to the tools/call request whose
// id has JSON text requestID (Candidate.VendorID of an MCP act):
//
//	{"jsonrpc":"2.0","id":4,"result":{"content":[{"type":"text","text":"{\"error\":{...}}"}],"isError":true}}
func MCPErrorResponse(requestID string, d Denial) ([]byte, error) {
	id, err := jcs.Canonicalize([]byte(requestID), jcs.Full)
	if err != nil || len(id) > MaxIDBytes || (id[0] != '"' && id[0] != '-' && (id[0] < '0' || id[0] > '9')) {
		return nil, ErrVendorID
	}
	r, err := mcpResult(d)
	if err != nil {
		return nil, err
	}
	return json.Marshal(struct {
		JSONRPC string          `json:"jsonrpc"`
		ID      json.RawMessage `json:"id"`
		Result  *mcpToolResult  `json:"result"`
	}{"2.0", id, r})
}

// DenyResult renders the deny in the shape of the vendor the call came from, addressed to
// vendorID: what a sink returns for an Item or Candidate it refuses.
func DenyResult(vendor Vendor, vendorID string, d Denial) ([]byte, error) {
	switch vendor {
	case VendorAnthropic:
		return AnthropicToolResult(vendorID, d)
	case VendorOpenAIChat:
		return OpenAIChatToolMessage(vendorID, d)
	case VendorOpenAIResponses:
		return ResponsesFunctionCallOutput(vendorID, d)
	case VendorMCP:
		return MCPErrorResponse(vendorID, d)
	}
	return nil, errors.New("act: deny for an unknown vendor")
}

// sanitizeMessage keeps the message one line of visible text within MaxDenyMessageBytes,
// falling back to the code's description.
func sanitizeMessage(msg, fallback string) string {
	var b strings.Builder
	for _, r := range msg {
		if r == utf8.RuneError || !unicode.IsGraphic(r) {
			r = ' '
		}
		if b.Len()+utf8.RuneLen(r) > MaxDenyMessageBytes {
			break
		}
		b.WriteRune(r)
	}
	s := strings.Join(strings.Fields(b.String()), " ")
	if s == "" {
		return fallback
	}
	return s
}
