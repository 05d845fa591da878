package mcpproxy

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/base64"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"net/http"
	"strconv"
	"strings"
	"time"

	"github.com/modelcontextprotocol/go-sdk/jsonrpc"

	"github.com/actgate/actgate/internal/ef"
	"github.com/actgate/actgate/internal/mcpproxy/wire"
)

// statelessVersions are the sessionless protocol versions the gate speaks toward the agent.
var statelessVersions = []string{wire.VersionStandardHeaders}

// statelessRequest is one agent request of MCP 2026-07-28 whose headers agree with its body.
type statelessRequest struct {
	req     *jsonrpc.Request
	version string
	// name is the body's params.name (tools/call, prompts/get) or params.uri (resources/read),
	// which Mcp-Name repeats; "" for other methods.
	name string
	// params are the request's params members as written (nil when absent).
	params map[string]json.RawMessage
}

// statelessError is the refusal of a request that is not a well-formed 2026-07-28 request:
// the HTTP status and the JSON-RPC error it is answered with, before anything is decided.
type statelessError struct {
	status int
	err    *jsonrpc.Error
}

func headerMismatch(format string, args ...any) *statelessError {
	data, _ := json.Marshal(map[string]string{MetaEFCode: string(ef.EFMCPHeaderMismatch)})
	return &statelessError{status: http.StatusBadRequest, err: &jsonrpc.Error{
		Code: wire.CodeHeaderMismatch, Message: "actgate: " + fmt.Sprintf(format, args...), Data: data}}
}

func invalidStateless(code int64, msg string) *statelessError {
	return &statelessError{status: http.StatusBadRequest, err: &jsonrpc.Error{Code: code, Message: "actgate: " + msg}}
}

// maxHeaderValue bounds the Mcp-Method and Mcp-Name values compared (a longer one cannot
// match any body the gate accepts: names are bounded far below it).
const maxHeaderValue = 4096

// isStatelessRequest reports whether a POST is addressed to the sessionless revision: it has no
// Mcp-Session-Id, and its Mcp-Protocol-Version or, without one, its body's
// _meta["io.modelcontextprotocol/protocolVersion"] is 2026-07-28 or later. Such a request is
// the stateless path's to answer or refuse (parseStateless); any other is the session path's.
func isStatelessRequest(h http.Header, body []byte) bool {
	if len(h.Values(wire.HeaderSessionID)) > 0 {
		return false
	}
	if v := h.Get(wire.HeaderProtocolVersion); v != "" {
		return v >= wire.VersionStandardHeaders
	}
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

// parseStateless reads one 2026-07-28 request: a single JSON-RPC request or notification with
// absent or object params, whose _meta names the protocol version that Mcp-Protocol-Version
// names (one the gate speaks), whose Mcp-Method is its method and, for tools/call, prompts/get
// and resources/read, whose Mcp-Name is its params.name (params.uri; a task request's
// params.taskId). Each header must appear
// once. A missing or disagreeing header is refused with wire.CodeHeaderMismatch and
// EF_MCP_HEADER_MISMATCH: the gate decides on the body, and a server that routes on the headers
// would otherwise run something else (a confused deputy).
func parseStateless(h http.Header, body []byte) (*statelessRequest, *statelessError) {
	msg, err := jsonrpc.DecodeMessage(body)
	if err != nil {
		return nil, invalidStateless(wire.CodeParseError, "the body is not a JSON-RPC message")
	}
	req, ok := msg.(*jsonrpc.Request)
	if !ok {
		// 2026-07-28 has no server-to-client requests, so there is nothing for a response to
		// answer.
		return nil, invalidStateless(wire.CodeInvalidRequest, "a JSON-RPC response has no request to answer on MCP 2026-07-28")
	}
	out := &statelessRequest{req: req}
	if p := bytes.TrimSpace(req.Params); len(p) > 0 && !bytes.Equal(p, []byte("null")) {
		if p[0] != '{' || json.Unmarshal(p, &out.params) != nil {
			return nil, invalidStateless(wire.CodeInvalidParams, "params must be an object")
		}
	}
	var meta map[string]json.RawMessage
	if raw, ok := out.params["_meta"]; ok && json.Unmarshal(raw, &meta) != nil {
		return nil, invalidStateless(wire.CodeInvalidParams, "params._meta must be an object")
	}
	versions := h.Values(wire.HeaderProtocolVersion)
	if len(versions) != 1 {
		return nil, headerMismatch("exactly one %s header is required on MCP 2026-07-28", wire.HeaderProtocolVersion)
	}
	var metaVersion string
	if raw, ok := meta[wire.MetaProtocolVersion]; ok && json.Unmarshal(raw, &metaVersion) != nil {
		return nil, invalidStateless(wire.CodeInvalidParams, "params._meta protocolVersion must be a string")
	}
	if req.IsCall() && metaVersion == "" {
		return nil, invalidStateless(wire.CodeInvalidParams, fmt.Sprintf("params._meta[%q] is required", wire.MetaProtocolVersion))
	}
	if metaVersion != "" && metaVersion != versions[0] {
		return nil, headerMismatch("%s does not match params._meta's protocol version", wire.HeaderProtocolVersion)
	}
	out.version = versions[0]
	if !speaksStateless(out.version) {
		data, _ := json.Marshal(map[string]any{"supported": statelessVersions, "requested": wire.Clip(out.version, 64)})
		return nil, &statelessError{status: http.StatusBadRequest, err: &jsonrpc.Error{Code: wire.CodeUnsupportedProtocolVersion,
			Message: "actgate: unsupported protocol version", Data: data}}
	}
	// A request's client capabilities are part of its envelope (SEP-2575): without them the
	// request is malformed, whichever server answers it.
	if raw, ok := meta[wire.MetaClientCapabilities]; req.IsCall() && (!ok || !isJSONObject(raw)) {
		return nil, invalidStateless(wire.CodeInvalidParams, fmt.Sprintf("params._meta[%q] must be an object", wire.MetaClientCapabilities))
	}
	if err := checkSingle(h, wire.HeaderMethod, req.Method); err != nil {
		return nil, err
	}
	if member := nameMember(req.Method); member != "" {
		var name string
		if raw, ok := out.params[member]; !ok || json.Unmarshal(raw, &name) != nil || name == "" {
			return nil, invalidStateless(wire.CodeInvalidParams, fmt.Sprintf("%s: params.%s must be a non-empty string", req.Method, member))
		}
		if err := checkSingle(h, wire.HeaderName, name); err != nil {
			return nil, err
		}
		out.name = name
	}
	return out, nil
}

// isJSONObject reports whether raw is a JSON object.
func isJSONObject(raw json.RawMessage) bool {
	raw = bytes.TrimSpace(raw)
	return len(raw) > 0 && raw[0] == '{'
}

// speaksStateless reports whether v is a sessionless version the gate speaks.
func speaksStateless(v string) bool {
	for _, s := range statelessVersions {
		if v == s {
			return true
		}
	}
	return false
}

// nameMember is the params member Mcp-Name repeats for method, or "": tools/call and
// prompts/get name theirs, resources/read its uri (SEP-2243), and the tasks extension's
// tasks/get, tasks/update and tasks/cancel their task (SEP-2663, Streamable HTTP binding).
func nameMember(method string) string {
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
func checkSingle(h http.Header, header, want string) *statelessError {
	vs := h.Values(header)
	switch {
	case len(vs) == 0:
		return headerMismatch("the %s header is required on MCP 2026-07-28", header)
	case len(vs) > 1:
		return headerMismatch("the %s header appears %d times", header, len(vs))
	case len(vs[0]) > maxHeaderValue:
		return headerMismatch("the %s header is longer than %d bytes", header, maxHeaderValue)
	}
	got, ok := decodeHeader(vs[0])
	if !ok || got != want {
		return headerMismatch("the %s header does not match the request body", header)
	}
	return nil
}

// checkParamHeaders requires each Mcp-Param-* header of a tools/call (SEP-2243: a copy of one
// argument, for servers that route on it) to name a value the call's arguments carry: the gate
// decides on the arguments, so a header must be a copy of something it decided on, never a
// second value the server might act on. A header that does not decode, or whose value is none
// of the arguments' strings, numbers or booleans, is refused as a header mismatch. Which
// argument each header copies (the tool's x-mcp-header) is checkDeclaredParams's.
func checkParamHeaders(h http.Header, sr *statelessRequest) *statelessError {
	var values map[string]bool
	for k, vs := range h {
		if !strings.HasPrefix(k, wire.HeaderParamPrefix) {
			continue
		}
		if values == nil {
			values = argumentValues(sr.params["arguments"])
		}
		for _, v := range vs {
			if len(v) > maxHeaderValue {
				return headerMismatch("the %s header is too long", wire.Clip(k, 64))
			}
			dec, ok := decodeHeader(strings.TrimSpace(v))
			if !ok {
				return headerMismatch("the %s header is not valid base64", wire.Clip(k, 64))
			}
			if !values[dec] {
				return headerMismatch("the %s header names no value of the call's arguments", wire.Clip(k, 64))
			}
		}
	}
	return nil
}

// argumentValues are the strings, numbers (as written and in their shortest form) and booleans
// anywhere in a call's arguments, as an Mcp-Param header writes them.
func argumentValues(raw json.RawMessage) map[string]bool {
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

// decodeHeader decodes the =?base64?…?= form of an MCP header value; other values are as
// written. ok is false for that form with invalid base64.
func decodeHeader(v string) (string, bool) {
	if enc, ok := strings.CutPrefix(v, "=?base64?"); ok {
		if enc, ok = strings.CutSuffix(enc, "?="); ok {
			raw, err := base64.StdEncoding.DecodeString(enc)
			return string(raw), err == nil
		}
	}
	return v, true
}

// statelessScope is the sink session of an agent's 2026-07-28 calls to a server: derived from
// the authenticated agent and the server only, never from anything the request carries, so
// that no value an agent sends names another agent's acts, recorded results or binding-moment
// resolutions.
func statelessScope(server, agent string) string {
	h := sha256.New()
	h.Write([]byte("actgate mcp 2026-07-28 scope\x00"))
	h.Write([]byte(server))
	h.Write([]byte{0})
	h.Write([]byte(agent))
	return "stateless-" + hex.EncodeToString(h.Sum(nil)[:16])
}

// continuationScope is the sink session of an input-required continuation (a tools/call with
// requestState or inputResponses): the agent's scope narrowed by a digest of what continues, so
// that the first round's grant never authorises it and a retry of the same continuation is
// answered from its own record.
func continuationScope(scope string, requestState, inputResponses json.RawMessage) string {
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

// withResultType returns a result object with resultType "complete" added when it has none:
// results of a stateful upstream and the gate's own answers, as 2026-07-28 writes them. A
// result that is not an object is returned unchanged.
func withResultType(raw json.RawMessage) json.RawMessage {
	var m map[string]json.RawMessage
	if json.Unmarshal(raw, &m) != nil || m == nil {
		return raw
	}
	if _, ok := m["resultType"]; ok {
		return raw
	}
	m["resultType"] = json.RawMessage(`"` + wire.ResultTypeComplete + `"`)
	out, err := wire.MarshalNoEscape(m)
	if err != nil {
		return raw
	}
	return out
}

// removedStateless are the requests MCP 2026-07-28 removed (SEP-2575): the session handshake,
// ping, and the per-session logging level and resource subscriptions. A stateful upstream still
// answers them on the session the gate holds for the agent, so the gate refuses them itself,
// as a 2026-07-28 server does (HTTP 404, -32601), instead of relaying them.
var removedStateless = map[string]bool{
	wire.MethodInitialize: true, wire.MethodPing: true, wire.MethodSetLevel: true, wire.MethodSubscribe: true, wire.MethodUnsubscribe: true,
}

// methodNotFound is the 2026-07-28 answer to a request of a method the server does not have.
func methodNotFound(method string) *statelessError {
	return &statelessError{status: http.StatusNotFound, err: &jsonrpc.Error{Code: wire.CodeMethodNotFound,
		Message: "actgate: method not found on MCP 2026-07-28: " + wire.Clip(method, 100)}}
}

// statelessErrorStatus is the HTTP status a 2026-07-28 server answers a JSON-RPC error with,
// for a stateful upstream's error (which came in an HTTP 2xx): 404 for -32601, 400 for a
// missing client capability (-32021); other errors keep the upstream's status.
func statelessErrorStatus(code int64, status int) int {
	switch code {
	case wire.CodeMethodNotFound:
		return http.StatusNotFound
	case wire.CodeMissingClientCapability:
		return http.StatusBadRequest
	}
	return status
}

// logLevels are MCP's log levels, each to its rank (least severe first).
var logLevels = func() map[string]int {
	m := map[string]int{}
	for i, l := range strings.Fields("debug info notice warning error critical alert emergency") {
		m[l] = i
	}
	return m
}()

type logLevelKey struct{}

// withLogLevel returns ctx carrying the log level a 2026-07-28 request asked for in
// _meta["io.modelcontextprotocol/logLevel"] ("" when it asked for none), for the exchange with a
// stateful upstream, whose session-wide level (logging/setLevel) the revision replaced with
// the request's own.
func withLogLevel(ctx context.Context, sr *statelessRequest) context.Context {
	var meta map[string]json.RawMessage
	var level string
	if json.Unmarshal(sr.params["_meta"], &meta) == nil {
		_ = json.Unmarshal(meta[wire.MetaLogLevel], &level)
	}
	return context.WithValue(ctx, logLevelKey{}, level)
}

// logAllowed reports whether an upstream's notifications/message with params goes to the agent:
// on the exchange of a request that asked for a level (withLogLevel), a message at that level or
// more severe; on one that asked for none, no message (2026-07-28 sends log messages only to a
// request that asks). Outside such an exchange every message goes (the upstream filters).
func logAllowed(ctx context.Context, params json.RawMessage) bool {
	want, ok := ctx.Value(logLevelKey{}).(string)
	if !ok {
		return true
	}
	floor, known := logLevels[want]
	if !known {
		return false
	}
	var m struct {
		Level string `json:"level"`
	}
	if json.Unmarshal(params, &m) != nil {
		return false
	}
	got, known := logLevels[m.Level]
	return known && got >= floor
}

// cacheable are the requests whose 2026-07-28 results carry caching hints (SEP-2549: ttlMs and
// cacheScope are required members of their results, server/discover's included).
var cacheable = map[string]bool{
	wire.MethodListTools: true, wire.MethodListPrompts: true, wire.MethodListResources: true, wire.MethodListResourceTemplates: true, wire.MethodReadResource: true,
	wire.MethodDiscover: true,
}

// withCacheHints returns a stateful upstream's result of a cacheable request with the caching
// hints 2026-07-28 requires, where it has none: ttlMs 0 (a 2025 server makes no freshness
// promise, so the result is stale at once) and cacheScope "private" (the result was answered
// on the agent's own upstream session). The result's own members stay as written (the hints
// are appended); a result that is not an object is returned unchanged.
func withCacheHints(method string, raw json.RawMessage) json.RawMessage {
	if !cacheable[method] {
		return raw
	}
	var m map[string]json.RawMessage
	if json.Unmarshal(raw, &m) != nil || m == nil {
		return raw
	}
	_, ttl := m["ttlMs"]
	_, scope := m["cacheScope"]
	if ttl && scope {
		return raw
	}
	body := bytes.TrimSpace(raw)
	out := make([]byte, 0, len(body)+40)
	out = append(out, body[:len(body)-1]...) // without the closing brace
	sep := len(m) > 0
	if !ttl {
		out = appendMember(out, sep, `"ttlMs":0`)
		sep = true
	}
	if !scope {
		out = appendMember(out, sep, `"cacheScope":"private"`)
	}
	return append(out, '}')
}

func appendMember(out []byte, sep bool, member string) []byte {
	if sep {
		out = append(out, ',')
	}
	return append(out, member...)
}

// resultTypeOf is a result's resultType ("" when absent or not a string).
func resultTypeOf(raw json.RawMessage) string {
	var r struct {
		ResultType string `json:"resultType"`
	}
	_ = json.Unmarshal(raw, &r)
	return r.ResultType
}

// maxLearntTools bounds the tools whose x-mcp-header mappings the proxy keeps;
// maxToolHeaders the headers one tool may declare, and maxHeaderDepth how deep in the
// inputSchema's properties a declaration is read. A tool beyond a bound is not known: a call
// of it that carries Mcp-Param headers is refused.
const (
	maxLearntTools  = 4096
	maxToolHeaders  = 64
	maxHeaderDepth  = 8
	maxLearnPages   = 16
	minLearnSpacing = time.Second

	// memberMeta is the params member of a request's metadata.
	memberMeta = "_meta"
)

// schemaProps are an inputSchema's properties as x-mcp-header declarations are read from them.
type schemaProps map[string]struct {
	Header     json.RawMessage `json:"x-mcp-header"`
	Properties schemaProps     `json:"properties"`
}

// toolHeaders reads the Mcp-Param headers a tool's inputSchema declares (SEP-2243: each
// property's x-mcp-header, at any depth of nested properties): canonical header → the
// argument's path. ok is false for a declaration the gate cannot hold (not a non-empty string
// naming a valid header field, the same header twice, deeper than maxHeaderDepth, more than
// maxToolHeaders): such a tool stays unknown.
func toolHeaders(props schemaProps) (map[string][]string, bool) {
	out := map[string][]string{}
	var walk func(props schemaProps, prefix []string) bool
	walk = func(props schemaProps, prefix []string) bool {
		for name, prop := range props {
			path := append(append([]string(nil), prefix...), name)
			if raw := bytes.TrimSpace(prop.Header); len(raw) > 0 && !bytes.Equal(raw, []byte("null")) {
				var h string
				if json.Unmarshal(raw, &h) != nil || !validHeaderName(h) {
					return false
				}
				k := http.CanonicalHeaderKey(wire.HeaderParamPrefix + h)
				if _, dup := out[k]; dup || len(out) >= maxToolHeaders {
					return false
				}
				out[k] = path
			}
			// Deeper properties are not read: a header declared there is not known, and refused.
			if len(prop.Properties) > 0 && len(path) < maxHeaderDepth && !walk(prop.Properties, path) {
				return false
			}
		}
		return true
	}
	if !walk(props, nil) {
		return nil, false
	}
	return out, true
}

// validHeaderName reports whether h is an HTTP field name (RFC 9110 token) of at most 200 bytes.
func validHeaderName(h string) bool {
	if h == "" || len(h) > 200 {
		return false
	}
	for i := 0; i < len(h); i++ {
		c := h[i]
		if c <= ' ' || c >= 0x7f || strings.IndexByte(`"(),/:;<=>?@[\]{}`, c) >= 0 {
			return false
		}
	}
	return true
}

// learnParamHeaders records, from an upstream's tools/list result, which argument each tool's
// Mcp-Param-* headers copy (toolHeaders). A tool listed is known from then on, with the headers
// it declares (none included); pages add to what is known; a tool listed again is replaced;
// one whose declarations the gate cannot hold is forgotten.
func (p *Proxy) learnParamHeaders(result json.RawMessage) {
	var list struct {
		Tools []struct {
			Name        string `json:"name"`
			InputSchema struct {
				Properties schemaProps `json:"properties"`
			} `json:"inputSchema"`
		} `json:"tools"`
	}
	if json.Unmarshal(result, &list) != nil {
		return
	}
	p.sl.mu.Lock()
	defer p.sl.mu.Unlock()
	for _, t := range list.Tools {
		if t.Name == "" {
			continue
		}
		m, ok := toolHeaders(t.InputSchema.Properties)
		_, known := p.sl.paramHeaders[t.Name]
		if !ok {
			delete(p.sl.paramHeaders, t.Name)
			continue
		}
		if !known && len(p.sl.paramHeaders) >= maxLearntTools {
			continue
		}
		if p.sl.paramHeaders == nil {
			p.sl.paramHeaders = map[string]map[string][]string{}
		}
		p.sl.paramHeaders[t.Name] = m
	}
}

// paramHeaderNames are the Mcp-Param-* headers of a request, canonical.
func paramHeaderNames(h http.Header) []string {
	var out []string
	for k := range h {
		if ck := http.CanonicalHeaderKey(k); strings.HasPrefix(ck, wire.HeaderParamPrefix) {
			out = append(out, ck)
		}
	}
	return out
}

// paramsUnmapped reports whether a tools/call carries an Mcp-Param header the proxy cannot tie
// to an argument: its tool is not known, or does not declare that header.
func (p *Proxy) paramsUnmapped(h http.Header, sr *statelessRequest) bool {
	names := paramHeaderNames(h)
	if len(names) == 0 {
		return false
	}
	_, err := p.declaredParams(sr.name, names)
	return err != nil
}

// declaredParams is the x-mcp-header mapping the proxy learnt for tool (nil when it does not
// know the tool), and the refusal of the first of the request's Mcp-Param headers (names) it
// cannot tie to an argument: any, of a tool it does not know; one the tool does not declare.
func (p *Proxy) declaredParams(tool string, names []string) (map[string][]string, *statelessError) {
	p.sl.mu.Lock()
	m, known := p.sl.paramHeaders[tool]
	p.sl.mu.Unlock()
	if !known && len(names) > 0 {
		return nil, headerMismatch("the gate does not know which arguments the Mcp-Param headers of tool %q copy (its tools/list does not declare it)", wire.Clip(tool, 64))
	}
	for _, k := range names {
		if _, ok := m[k]; !ok {
			return m, headerMismatch("the %s header is not one the tool declares (x-mcp-header)", wire.Clip(k, 64))
		}
	}
	return m, nil
}

// learnTools lists the upstream's tools (every page, at most maxLearnPages) to learn their
// x-mcp-header declarations, for a tools/call whose Mcp-Param headers the proxy cannot tie to
// an argument yet (a fresh gate, or a tool whose list changed): the check needs the tool's
// declaration before anything is forwarded. One listing at a time, at most one per
// minLearnSpacing; on the agent's upstream session of a stateful upstream (the capabilities its
// request declares). A listing that fails leaves the tool unknown, and the call is refused.
func (p *Proxy) learnTools(mode upstreamMode, agent string, sr *statelessRequest) {
	p.sl.learn.Lock()
	defer p.sl.learn.Unlock()
	if !p.sl.learnedAt.IsZero() && time.Since(p.sl.learnedAt) < minLearnSpacing {
		return
	}
	p.sl.learnedAt = time.Now()
	var meta map[string]json.RawMessage
	_ = json.Unmarshal(sr.params[memberMeta], &meta)
	own := map[string]json.RawMessage{}
	for _, k := range []string{wire.MetaProtocolVersion, wire.MetaClientCapabilities} {
		if v, ok := meta[k]; ok {
			own[k] = v
		}
	}
	// Not the agent's request: nothing of the listing goes to the agent's answer stream (a
	// context of its own), and it is bounded by ConnectTimeout.
	lctx, cancel := context.WithTimeout(context.Background(), p.cfg.ConnectTimeout)
	defer cancel()
	cursor := ""
	for page := 0; page < maxLearnPages; page++ {
		params := map[string]any{memberMeta: own}
		if cursor != "" {
			params["cursor"] = cursor
		}
		raw, err := wire.MarshalNoEscape(params)
		if err != nil {
			return
		}
		lr := &statelessRequest{req: &jsonrpc.Request{Method: wire.MethodListTools, Params: raw}, version: sr.version,
			params: map[string]json.RawMessage{memberMeta: jsonOrEmpty(own)}}
		resp, _, err := p.statelessSend(lctx, mode, agent, statelessHeaders(http.Header{}, lr, false), lr, raw, true)
		if err != nil || resp == nil || resp.Error != nil {
			p.log.Info("Upstream tools/list for the tools' Mcp-Param headers failed; the call's headers are refused")
			return
		}
		p.learnParamHeaders(resp.Result)
		var next struct {
			NextCursor string `json:"nextCursor"`
		}
		if json.Unmarshal(resp.Result, &next) != nil || next.NextCursor == "" {
			return
		}
		cursor = next.NextCursor
	}
}

// checkDeclaredParams ties each Mcp-Param-* header of a tools/call to the argument it copies
// (the tool's x-mcp-header declarations, learnt from the upstream's tools/list, learnTools):
// a header of a tool the proxy does not know, or one the tool does not declare, is refused (the
// gate cannot say what it copies); each declared argument the call carries (a string, number
// or boolean) must come with its header, once, copying exactly that argument; and no declared
// header may come without its argument. The gate decides on the arguments, and a server or
// intermediary that routes on a header must see the same value. A 2025 upstream never sees the
// headers; the check is the same for both revisions.
func (p *Proxy) checkDeclaredParams(h http.Header, sr *statelessRequest) *statelessError {
	m, err := p.declaredParams(sr.name, paramHeaderNames(h))
	if err != nil || m == nil {
		return err
	}
	var args map[string]json.RawMessage
	_ = json.Unmarshal(sr.params["arguments"], &args)
	for header, path := range m {
		vs := h.Values(header)
		arg := strings.Join(path, ".")
		want, ok := headerForm(lookupPath(args, path))
		switch {
		case !ok && len(vs) == 0:
			continue
		case !ok:
			return headerMismatch("the %s header copies no argument of the call", wire.Clip(header, 64))
		case len(vs) != 1:
			return headerMismatch("the %s header must appear once with the call's %q argument", wire.Clip(header, 64), wire.Clip(arg, 64))
		}
		got, valid := decodeHeader(strings.TrimSpace(vs[0]))
		if !valid || !want[got] {
			return headerMismatch("the %s header does not match the call's %q argument", wire.Clip(header, 64), wire.Clip(arg, 64))
		}
	}
	return nil
}

// lookupPath is the argument at path in args (nested objects), nil when absent.
func lookupPath(args map[string]json.RawMessage, path []string) json.RawMessage {
	if len(path) == 0 {
		return nil
	}
	cur := args[path[0]]
	for _, part := range path[1:] {
		var obj map[string]json.RawMessage
		if json.Unmarshal(cur, &obj) != nil {
			return nil
		}
		cur = obj[part]
	}
	return cur
}

// headerForm are the ways an Mcp-Param header writes the argument raw (a string as is, a
// number as written or in its shortest form, a boolean as true/false); ok is false for an
// absent, null or structured argument, which no header copies.
func headerForm(raw json.RawMessage) (map[string]bool, bool) {
	raw = bytes.TrimSpace(raw)
	if len(raw) == 0 || raw[0] == '{' || raw[0] == '[' || bytes.Equal(raw, []byte("null")) {
		return nil, false
	}
	out := argumentValues(raw)
	return out, len(out) > 0
}
