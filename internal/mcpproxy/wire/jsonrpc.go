package wire

import (
	"bytes"
	"encoding/json"
	"errors"
	"slices"
	"unicode/utf8"

	"github.com/modelcontextprotocol/go-sdk/jsonrpc"
	sjson "github.com/segmentio/encoding/json"
)

// IsObject reports whether raw is a JSON object (as far as its first byte says; the decoder
// checks the rest).
func IsObject(raw json.RawMessage) bool {
	raw = bytes.TrimLeft(raw, " \t\r\n")
	return len(raw) > 0 && raw[0] == '{'
}

// MarshalNoEscape encodes v as the SDK encodes results: encoding/json without HTML escaping.
func MarshalNoEscape(v any) (json.RawMessage, error) {
	var buf bytes.Buffer
	enc := json.NewEncoder(&buf)
	enc.SetEscapeHTML(false)
	if err := enc.Encode(v); err != nil {
		return nil, err
	}
	return bytes.TrimSuffix(buf.Bytes(), []byte("\n")), nil
}

// EncodeObject writes members as one JSON object, names in sorted order and each value as
// written, without the reflection and re-validation of encoding/json: each value must be one
// valid JSON value (as json.Unmarshal into a json.RawMessage, or MarshalNoEscape, give), which
// the caller guarantees. Names are escaped as JSON requires; invalid UTF-8 in a name is written
// as U+FFFD, as encoding/json does.
func EncodeObject(members map[string]json.RawMessage) json.RawMessage {
	names := make([]string, 0, len(members))
	size := 2
	for k, v := range members {
		names = append(names, k)
		size += len(k) + len(v) + 4
	}
	slices.Sort(names)
	out := make([]byte, 0, size)
	out = append(out, '{')
	for i, k := range names {
		if i > 0 {
			out = append(out, ',')
		}
		out = appendJSONString(out, k)
		out = append(out, ':')
		out = append(out, bytes.TrimSpace(members[k])...)
	}
	return append(out, '}')
}

// appendJSONString appends s as a JSON string: quotes, backslashes and control characters
// escaped, invalid UTF-8 replaced by U+FFFD, everything else as written (no HTML escaping).
func appendJSONString(out []byte, s string) []byte {
	const hex = "0123456789abcdef"
	out = append(out, '"')
	for i := 0; i < len(s); {
		c := s[i]
		if c < utf8.RuneSelf {
			switch {
			case c == '"' || c == '\\':
				out = append(out, '\\', c)
			case c == '\n':
				out = append(out, '\\', 'n')
			case c == '\r':
				out = append(out, '\\', 'r')
			case c == '\t':
				out = append(out, '\\', 't')
			case c < 0x20:
				out = append(out, '\\', 'u', '0', '0', hex[c>>4], hex[c&0xf])
			default:
				out = append(out, c)
			}
			i++
			continue
		}
		r, n := utf8.DecodeRuneInString(s[i:])
		if r == utf8.RuneError && n == 1 {
			out = append(out, "\ufffd"...)
		} else {
			out = append(out, s[i:i+n]...)
		}
		i += n
	}
	return append(out, '"')
}

// MCP method names the proxy routes on.
const (
	MethodInitialize            = "initialize"
	MethodPing                  = "ping"
	MethodListTools             = "tools/list"
	MethodCallTool              = "tools/call"
	MethodListResources         = "resources/list"
	MethodListResourceTemplates = "resources/templates/list"
	MethodReadResource          = "resources/read"
	MethodSubscribe             = "resources/subscribe"
	MethodUnsubscribe           = "resources/unsubscribe"
	MethodListPrompts           = "prompts/list"
	MethodGetPrompt             = "prompts/get"
	MethodComplete              = "completion/complete"
	MethodSetLevel              = "logging/setLevel"
	MethodListRoots             = "roots/list"
	MethodElicit                = "elicitation/create"
	MethodDiscover              = "server/discover"

	NotifyProgress            = "notifications/progress"
	NotifyMessage             = "notifications/message"
	NotifyToolsChanged        = "notifications/tools/list_changed"
	NotifyPromptsChanged      = "notifications/prompts/list_changed"
	NotifyResourcesChanged    = "notifications/resources/list_changed"
	NotifyResourceUpdated     = "notifications/resources/updated"
	NotifyElicitationComplete = "notifications/elicitation/complete"
	NotifyRootsChanged        = "notifications/roots/list_changed"
)

// JSON-RPC error codes (JSON-RPC 2.0 §5.1) the proxy uses or classifies on.
const (
	CodeParseError     = -32700
	CodeInvalidRequest = -32600
	CodeMethodNotFound = -32601
	CodeInvalidParams  = -32602
	CodeInternalError  = -32603
	// CodeURLElicitationRequired is MCP's URLElicitationRequiredError (2025-11-25): the
	// request cannot proceed until the user completes the URL elicitations in its data.
	CodeURLElicitationRequired = -32042
)

// MCP 2026-07-28 subscriptions: the listen request, its acknowledgement and the _meta member
// naming a notification's subscription.
const (
	MethodListen       = "subscriptions/listen"
	NotifyListenAck    = "notifications/subscriptions/acknowledged"
	MetaSubscriptionID = "io.modelcontextprotocol/subscriptionId"
)

// NotifyInitialized is the client's notification that ends initialization.
const NotifyInitialized = "notifications/initialized"

// NotifyCancelled is the JSON-RPC cancellation notification (MCP basic/utilities/cancellation).
const NotifyCancelled = "notifications/cancelled"

// CodeTooManyRequests is the JSON-RPC error of a request beyond maxRelayed (an implementation
// defined server error, JSON-RPC 2.0 §5.1).
const CodeTooManyRequests = -32000

// MaxCancelReason bounds the reason of a cancellation relayed upstream.
const MaxCancelReason = 1024

// ParseCancelled reads the params of an agent's notifications/cancelled: the id of the
// request it cancels (a string or an integer, as JSON-RPC ids are) and its optional reason,
// clipped to MaxCancelReason bytes. ok is false for params that are not an object with such an
// id (the SDK's handler then sees the notification, and ignores it).
func ParseCancelled(params json.RawMessage) (id jsonrpc.ID, reason string, ok bool) {
	var p struct {
		RequestID json.RawMessage `json:"requestId"`
		Reason    string          `json:"reason"`
	}
	if err := json.Unmarshal(params, &p); err != nil || len(p.RequestID) == 0 {
		return jsonrpc.ID{}, "", false
	}
	var raw any // as the SDK decodes an id: a string, or a number (float64)
	if json.Unmarshal(p.RequestID, &raw) != nil {
		return jsonrpc.ID{}, "", false
	}
	switch raw.(type) {
	case string, float64:
	default:
		return jsonrpc.ID{}, "", false
	}
	id, err := jsonrpc.MakeID(raw)
	if err != nil || !id.IsValid() {
		return jsonrpc.ID{}, "", false
	}
	return id, Clip(p.Reason, MaxCancelReason), true
}

// TextBlock is an MCP text content block.
type TextBlock struct {
	Type string `json:"type"`
	Text string `json:"text"`
}

// MCP 2026-07-28 (SEP-2575, SEP-2243) request headers and per-request _meta members the
// stateless path reads (docs/architecture.md "MCP 2026-07-28 (stateless)").
const (
	MetaProtocolVersion    = "io.modelcontextprotocol/protocolVersion"
	MetaClientCapabilities = "io.modelcontextprotocol/clientCapabilities"
	MetaLogLevel           = "io.modelcontextprotocol/logLevel"
	MetaServerInfo         = "io.modelcontextprotocol/serverInfo"

	// CodeHeaderMismatch is MCP's error for standard headers that disagree with the body.
	CodeHeaderMismatch = -32020
	// CodeUnsupportedProtocolVersion is MCP's error for a per-request version the server does
	// not speak; its data lists the supported ones.
	CodeUnsupportedProtocolVersion = -32022
	// CodeMissingClientCapability is MCP's error for a request the server cannot process without
	// a client capability the request did not declare: the server did not run it.
	CodeMissingClientCapability = -32021

	// ResultTypeComplete and ResultTypeInputRequired are the 2026-07-28 resultType values.
	ResultTypeComplete      = "complete"
	ResultTypeInputRequired = "input_required"
)

// ResultTypeTask is the 2026-07-28 resultType of a task-augmented answer.
const ResultTypeTask = "task"

// MCP tasks methods (2025-11-25 basic/utilities/tasks; tasks/update is the 2026-07-28 tasks
// extension's).
const (
	MethodTasksGet    = "tasks/get"
	MethodTasksResult = "tasks/result"
	MethodTasksCancel = "tasks/cancel"
	MethodTasksList   = "tasks/list"
	MethodTasksUpdate = "tasks/update" // 2026-07-28's tasks extension: a task's inputResponses
	NotifyTaskStatus  = "notifications/tasks/status"
)

// ErrorResult is a CallToolResult of one text block with isError set.
func ErrorResult(text string) json.RawMessage { return TextResult(text, true) }

// TextResult is a CallToolResult of one text block.
func TextResult(text string, isError bool) json.RawMessage {
	raw, _ := json.Marshal(struct {
		Content []TextBlock `json:"content"`
		IsError bool        `json:"isError"`
	}{[]TextBlock{{Type: "text", Text: text}}, isError})
	return raw
}

// Clip cuts s to at most n bytes on a rune boundary.
func Clip(s string, n int) string {
	if len(s) <= n {
		return s
	}
	for n > 0 && !utf8.RuneStart(s[n]) {
		n--
	}
	return s[:n]
}

// CodeUnsupportedMethod is the SDK client's answer to a request it has no handler for
// (sampling without a sampling handler).
const CodeUnsupportedMethod = -31001

// Unmarshal decodes as the SDK does (its internal/json: case-sensitive member names).
func Unmarshal(data []byte, v any) error {
	if len(data) == 0 {
		return errors.New("empty JSON")
	}
	_, err := sjson.Parse(data, v, sjson.DontMatchCaseInsensitiveStructFields)
	return err
}

// MetaEFCode carries the EF code of a refused call in a result's _meta (tool-use-binding §23:
// copied into the vendor payload as a machine-readable string); mcpproxy.MetaEFCode.
const MetaEFCode = "actgate.io/ef-code"

// JSONOrEmpty is v encoded as the SDK encodes results, or {} when it cannot be.
func JSONOrEmpty(v any) json.RawMessage {
	raw, err := MarshalNoEscape(v)
	if err != nil {
		return json.RawMessage("{}")
	}
	return bytes.TrimSpace(raw)
}
