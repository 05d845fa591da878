package stateless

import (
	"bytes"
	"context"
	"encoding/json"
	"strings"

	"github.com/actgate/actgate/internal/mcpproxy/wire"
)

// WithResultType returns a result object with resultType "complete" added when it has none:
// results of a stateful upstream and the gate's own answers, as 2026-07-28 writes them. A
// result that is not an object is returned unchanged.
func WithResultType(raw json.RawMessage) json.RawMessage {
	body := bytes.TrimSpace(raw)
	if len(body) < 2 || body[0] != '{' {
		return raw
	}
	// One struct member, matched case-sensitively as a map key is: the decoder reads the whole
	// object but keeps none of the others.
	var probe struct {
		ResultType json.RawMessage `json:"resultType"`
	}
	if wire.Unmarshal(body, &probe) != nil || len(probe.ResultType) > 0 {
		return raw
	}
	out := make([]byte, 0, len(body)+32)
	out = append(out, body[:len(body)-1]...) // without the closing brace
	return append(appendMember(out, !emptyObject(body), `"resultType":"`+wire.ResultTypeComplete+`"`), '}')
}

// emptyObject reports whether body, a JSON object without surrounding space, has no member.
func emptyObject(body []byte) bool {
	return len(bytes.TrimSpace(body[1:len(body)-1])) == 0
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

// WithLogLevel returns ctx carrying the log level a 2026-07-28 request asked for in
// _meta["io.modelcontextprotocol/logLevel"] ("" when it asked for none), for the exchange with a
// stateful upstream, whose session-wide level (logging/setLevel) the revision replaced with
// the request's own.
func WithLogLevel(ctx context.Context, sr *Request) context.Context {
	var level string
	if raw, ok := sr.Meta()[wire.MetaLogLevel]; ok {
		_ = json.Unmarshal(raw, &level)
	}
	return context.WithValue(ctx, logLevelKey{}, level)
}

// LogAllowed reports whether an upstream's notifications/message with params goes to the agent:
// on the exchange of a request that asked for a level (WithLogLevel), a message at that level or
// more severe; on one that asked for none, no message (2026-07-28 sends log messages only to a
// request that asks). Outside such an exchange every message goes (the upstream filters).
func LogAllowed(ctx context.Context, params json.RawMessage) bool {
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

// WithCacheHints returns a stateful upstream's result of a cacheable request with the caching
// hints 2026-07-28 requires, where it has none: ttlMs 0 (a 2025 server makes no freshness
// promise, so the result is stale at once) and cacheScope "private" (the result was answered
// on the agent's own upstream session). The result's own members stay as written (the hints
// are appended); a result that is not an object is returned unchanged.
func WithCacheHints(method string, raw json.RawMessage) json.RawMessage {
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

// ResultTypeOf is a result's resultType ("" when absent or not a string).
func ResultTypeOf(raw json.RawMessage) string {
	var r struct {
		ResultType string `json:"resultType"`
	}
	_ = json.Unmarshal(raw, &r)
	return r.ResultType
}
