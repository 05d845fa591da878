package stateless

import (
	"bytes"
	"crypto/sha256"
	"encoding/base64"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"net/http"
	"strconv"
	"strings"

	"github.com/modelcontextprotocol/go-sdk/jsonrpc"

	"github.com/actgate/actgate/internal/ef"
	"github.com/actgate/actgate/internal/mcpproxy/wire"
)

// Versions are the sessionless protocol versions the gate speaks toward the agent.
var Versions = []string{wire.VersionStandardHeaders}

// Request is one agent request of MCP 2026-07-28 whose headers agree with its body.
type Request struct {
	Req     *jsonrpc.Request
	Version string
	// name is the body's params.name (tools/call, prompts/get) or params.uri (resources/read),
	// which Mcp-Name repeats; "" for other methods.
	Name string
	// params are the request's params members as written (nil when absent).
	Params map[string]json.RawMessage
	// meta is params._meta's members as Parse read them (nil when Parse did not build the
	// request): the revision's per-request members are read on every exchange, once parsed.
	meta map[string]json.RawMessage
}

// Meta returns params._meta's members: those Parse read, or for a request built otherwise
// params._meta parsed now (nil when absent or not an object). The map is shared: callers
// never modify it.
func (r *Request) Meta() map[string]json.RawMessage {
	if r.meta != nil {
		return r.meta
	}
	var meta map[string]json.RawMessage
	if raw, ok := r.Params["_meta"]; ok && json.Unmarshal(raw, &meta) != nil {
		return nil
	}
	return meta
}

// Error is the refusal of a request that is not a well-formed 2026-07-28 request:
// the HTTP status and the JSON-RPC error it is answered with, before anything is decided.
type Error struct {
	Status int
	Err    *jsonrpc.Error
}

// HeaderMismatch is the refusal of a request whose standard headers disagree with its body
// (HTTP 400, -32020, EF_MCP_HEADER_MISMATCH).
func HeaderMismatch(format string, args ...any) *Error {
	data, _ := json.Marshal(map[string]string{wire.MetaEFCode: string(ef.EFMCPHeaderMismatch)})
	return &Error{Status: http.StatusBadRequest, Err: &jsonrpc.Error{
		Code: wire.CodeHeaderMismatch, Message: "actgate: " + fmt.Sprintf(format, args...), Data: data}}
}

// Invalid is the refusal of a malformed request: HTTP 400 with the JSON-RPC code given.
func Invalid(code int64, msg string) *Error {
	return &Error{Status: http.StatusBadRequest, Err: &jsonrpc.Error{Code: code, Message: "actgate: " + msg}}
}

// MaxHeaderValue bounds the Mcp-Method and Mcp-Name values compared (a longer one cannot
// match any body the gate accepts: names are bounded far below it).
const MaxHeaderValue = 4096

// IsRequest reports whether a POST is addressed to the sessionless revision: it has no
// Mcp-Session-Id, and its Mcp-Protocol-Version or, without one, its body's
// _meta["io.modelcontextprotocol/protocolVersion"] is 2026-07-28 or later. Such a request is
// the stateless path's to answer or refuse (Parse); any other is the session path's.
func IsRequest(h http.Header, body []byte) bool {
	if len(h.Values(wire.HeaderSessionID)) > 0 {
		return false
	}
	if h.Get(wire.HeaderProtocolVersion) >= wire.VersionStandardHeaders {
		return true
	}
	// Without the header, or with an older revision's: the body decides. A body of the
	// sessionless revision under an older header is one of its requests whose header disagrees,
	// which Parse refuses with the revision's error (-32020), not the older revision's.
	var probe struct {
		Params struct {
			Meta map[string]json.RawMessage `json:"_meta"`
		} `json:"params"`
	}
	if json.Unmarshal(body, &probe) != nil {
		return false
	}
	var v string
	if raw, ok := probe.Params.Meta[wire.MetaProtocolVersion]; !ok || json.Unmarshal(raw, &v) != nil {
		return false
	}
	return v >= wire.VersionStandardHeaders
}

// Parse reads one 2026-07-28 request: a single JSON-RPC request or notification with
// absent or object params, whose _meta names the protocol version that Mcp-Protocol-Version
// names (one the gate speaks), whose Mcp-Method is its method and, for tools/call, prompts/get
// and resources/read, whose Mcp-Name is its params.name (params.uri; a task request's
// params.taskId). Each header must appear
// once. A missing or disagreeing header is refused with wire.CodeHeaderMismatch and
// EF_MCP_HEADER_MISMATCH: the gate decides on the body, and a server that routes on the headers
// would otherwise run something else (a confused deputy).
func Parse(h http.Header, body []byte) (*Request, *Error) {
	msg, err := wire.DecodeMessage(body)
	if err != nil {
		return nil, Invalid(wire.CodeParseError, "the body is not a JSON-RPC message")
	}
	req, ok := msg.(*jsonrpc.Request)
	if !ok {
		// 2026-07-28 has no server-to-client requests, so there is nothing for a response to
		// answer.
		return nil, Invalid(wire.CodeInvalidRequest, "a JSON-RPC response has no request to answer on MCP 2026-07-28")
	}
	out := &Request{Req: req}
	if p := bytes.TrimSpace(req.Params); len(p) > 0 && !bytes.Equal(p, []byte("null")) {
		if p[0] != '{' || json.Unmarshal(p, &out.Params) != nil {
			return nil, Invalid(wire.CodeInvalidParams, "params must be an object")
		}
	}
	var meta map[string]json.RawMessage
	if raw, ok := out.Params["_meta"]; ok && json.Unmarshal(raw, &meta) != nil {
		return nil, Invalid(wire.CodeInvalidParams, "params._meta must be an object")
	}
	versions := h.Values(wire.HeaderProtocolVersion)
	if len(versions) != 1 {
		return nil, HeaderMismatch("exactly one %s header is required on MCP 2026-07-28", wire.HeaderProtocolVersion)
	}
	var metaVersion string
	if raw, ok := meta[wire.MetaProtocolVersion]; ok && json.Unmarshal(raw, &metaVersion) != nil {
		return nil, Invalid(wire.CodeInvalidParams, "params._meta protocolVersion must be a string")
	}
	if req.IsCall() && metaVersion == "" {
		return nil, Invalid(wire.CodeInvalidParams, fmt.Sprintf("params._meta[%q] is required", wire.MetaProtocolVersion))
	}
	if metaVersion != "" && metaVersion != versions[0] {
		return nil, HeaderMismatch("%s does not match params._meta's protocol version", wire.HeaderProtocolVersion)
	}
	out.Version = versions[0]
	out.meta = meta
	if !Speaks(out.Version) {
		data, _ := json.Marshal(map[string]any{"supported": Versions, "requested": wire.Clip(out.Version, 64)})
		return nil, &Error{Status: http.StatusBadRequest, Err: &jsonrpc.Error{Code: wire.CodeUnsupportedProtocolVersion,
			Message: "actgate: unsupported protocol version", Data: data}}
	}
	// A request's client capabilities are part of its envelope (SEP-2575): without them the
	// request is malformed, whichever server answers it.
	if raw, ok := meta[wire.MetaClientCapabilities]; req.IsCall() && (!ok || !IsJSONObject(raw)) {
		return nil, Invalid(wire.CodeInvalidParams, fmt.Sprintf("params._meta[%q] must be an object", wire.MetaClientCapabilities))
	}
	if err := checkSingle(h, wire.HeaderMethod, req.Method); err != nil {
		return nil, err
	}
	if member := NameMember(req.Method); member != "" {
		var name string
		if raw, ok := out.Params[member]; !ok || json.Unmarshal(raw, &name) != nil || name == "" {
			return nil, Invalid(wire.CodeInvalidParams, fmt.Sprintf("%s: params.%s must be a non-empty string", req.Method, member))
		}
		if err := checkSingle(h, wire.HeaderName, name); err != nil {
			return nil, err
		}
		out.Name = name
	}
	return out, nil
}

// IsJSONObject reports whether raw is a JSON object.
func IsJSONObject(raw json.RawMessage) bool {
	raw = bytes.TrimSpace(raw)
	return len(raw) > 0 && raw[0] == '{'
}

// Speaks reports whether v is a sessionless version the gate speaks.
func Speaks(v string) bool {
	for _, s := range Versions {
		if v == s {
			return true
		}
	}
	return false
}

// NameMember is the params member Mcp-Name repeats for method, or "": tools/call and
// prompts/get name theirs, resources/read its uri (SEP-2243), and the tasks extension's
// tasks/get, tasks/update and tasks/cancel their task (SEP-2663, Streamable HTTP binding).
func NameMember(method string) string {
	switch method {
	case wire.MethodCallTool, wire.MethodGetPrompt:
		return "name"
	case wire.MethodReadResource:
		return "uri"
	case wire.MethodTasksGet, wire.MethodTasksUpdate, wire.MethodTasksCancel:
		return "taskId"
	}
	return ""
}

// checkSingle requires header to appear once with the value want, as written or in the
// =?base64?…?= form MCP uses for values that are not plain printable ASCII.
func checkSingle(h http.Header, header, want string) *Error {
	vs := h.Values(header)
	switch {
	case len(vs) == 0:
		return HeaderMismatch("the %s header is required on MCP 2026-07-28", header)
	case len(vs) > 1:
		return HeaderMismatch("the %s header appears %d times", header, len(vs))
	case len(vs[0]) > MaxHeaderValue:
		return HeaderMismatch("the %s header is longer than %d bytes", header, MaxHeaderValue)
	}
	got, ok := DecodeHeader(vs[0])
	if !ok || got != want {
		return HeaderMismatch("the %s header does not match the request body", header)
	}
	return nil
}

// CheckParamHeaders requires each Mcp-Param-* header of a tools/call (SEP-2243: a copy of one
// argument, for servers that route on it) to name a value the call's arguments carry: the gate
// decides on the arguments, so a header must be a copy of something it decided on, never a
// second value the server might act on. A header that does not decode, or whose value is none
// of the arguments' strings, numbers or booleans, is refused as a header mismatch. Which
// argument each header copies (the tool's x-mcp-header) is checkDeclaredParams's.
func CheckParamHeaders(h http.Header, sr *Request) *Error {
	var values map[string]bool
	for k, vs := range h {
		if !strings.HasPrefix(k, wire.HeaderParamPrefix) {
			continue
		}
		if values == nil {
			values = ArgumentValues(sr.Params["arguments"])
		}
		for _, v := range vs {
			if len(v) > MaxHeaderValue {
				return HeaderMismatch("the %s header is too long", wire.Clip(k, 64))
			}
			dec, ok := DecodeHeader(strings.TrimSpace(v))
			if !ok {
				return HeaderMismatch("the %s header is not valid base64", wire.Clip(k, 64))
			}
			if !values[dec] {
				return HeaderMismatch("the %s header names no value of the call's arguments", wire.Clip(k, 64))
			}
		}
	}
	return nil
}

// ArgumentValues are the strings, numbers (as written and in their shortest form) and booleans
// anywhere in a call's arguments, as an Mcp-Param header writes them.
func ArgumentValues(raw json.RawMessage) map[string]bool {
	out := map[string]bool{}
	dec := json.NewDecoder(bytes.NewReader(raw))
	dec.UseNumber()
	var doc any
	if dec.Decode(&doc) != nil {
		return out
	}
	var walk func(v any)
	walk = func(v any) {
		switch v := v.(type) {
		case map[string]any:
			for _, e := range v {
				walk(e)
			}
		case []any:
			for _, e := range v {
				walk(e)
			}
		case string:
			out[v] = true
		case json.Number:
			out[v.String()] = true
			if f, err := v.Float64(); err == nil {
				out[strconv.FormatFloat(f, 'f', -1, 64)] = true
			}
		case bool:
			out[strconv.FormatBool(v)] = true
		}
	}
	walk(doc)
	return out
}

// DecodeHeader decodes the =?base64?…?= form of an MCP header value; other values are as
// written. ok is false for that form with invalid base64.
func DecodeHeader(v string) (string, bool) {
	if enc, ok := strings.CutPrefix(v, "=?base64?"); ok {
		if enc, ok = strings.CutSuffix(enc, "?="); ok {
			raw, err := base64.StdEncoding.DecodeString(enc)
			return string(raw), err == nil
		}
	}
	return v, true
}

// Scope is the sink session of an agent's 2026-07-28 calls to a server: derived from
// the authenticated agent and the server only, never from anything the request carries, so
// that no value an agent sends names another agent's acts, recorded results or binding-moment
// resolutions.
func Scope(server, agent string) string {
	h := sha256.New()
	h.Write([]byte("actgate mcp 2026-07-28 scope\x00"))
	h.Write([]byte(server))
	h.Write([]byte{0})
	h.Write([]byte(agent))
	return "stateless-" + hex.EncodeToString(h.Sum(nil)[:16])
}

// ContinuationScope is the sink session of an input-required continuation (a tools/call with
// requestState or inputResponses): the agent's scope narrowed by a digest of what continues, so
// that the first round's grant never authorises it and a retry of the same continuation is
// answered from its own record.
func ContinuationScope(scope string, requestState, inputResponses json.RawMessage) string {
	if len(requestState) == 0 && len(inputResponses) == 0 {
		return scope
	}
	h := sha256.New()
	h.Write([]byte(scope))
	h.Write([]byte{0})
	h.Write(requestState)
	h.Write([]byte{0})
	h.Write(inputResponses)
	return scope + "." + hex.EncodeToString(h.Sum(nil)[:16])
}

// Removed are the requests MCP 2026-07-28 removed (SEP-2575): the session handshake,
// ping, and the per-session logging level and resource subscriptions. A stateful upstream still
// answers them on the session the gate holds for the agent, so the gate refuses them itself,
// as a 2026-07-28 server does (HTTP 404, -32601), instead of relaying them.
var Removed = map[string]bool{
	wire.MethodInitialize: true, wire.MethodPing: true, wire.MethodSetLevel: true, wire.MethodSubscribe: true, wire.MethodUnsubscribe: true,
}

// MethodNotFound is the 2026-07-28 answer to a request of a method the server does not have.
func MethodNotFound(method string) *Error {
	return &Error{Status: http.StatusNotFound, Err: &jsonrpc.Error{Code: wire.CodeMethodNotFound,
		Message: "actgate: method not found on MCP 2026-07-28: " + wire.Clip(method, 100)}}
}

// ErrorStatus is the HTTP status a 2026-07-28 server answers a JSON-RPC error with,
// for a stateful upstream's error (which came in an HTTP 2xx): 404 for -32601, 400 for a
// missing client capability (-32021); other errors keep the upstream's status.
func ErrorStatus(code int64, status int) int {
	switch code {
	case wire.CodeMethodNotFound:
		return http.StatusNotFound
	case wire.CodeMissingClientCapability:
		return http.StatusBadRequest
	}
	return status
}
