package stateless

import (
	"bytes"
	"encoding/json"
	"net/http"
	"strings"

	"github.com/actgate/actgate/internal/mcpproxy/wire"
)

const maxToolHeaders = 64

const maxHeaderDepth = 8

// SchemaProps are an inputSchema's properties as x-mcp-header declarations are read from them.
type SchemaProps map[string]struct {
	Header     json.RawMessage `json:"x-mcp-header"`
	Properties SchemaProps     `json:"properties"`
}

// ToolHeaders reads the Mcp-Param headers a tool's inputSchema declares (SEP-2243: each
// property's x-mcp-header, at any depth of nested properties): canonical header → the
// argument's path. ok is false for a declaration the gate cannot hold (not a non-empty string
// naming a valid header field, the same header twice, deeper than maxHeaderDepth, more than
// maxToolHeaders): such a tool stays unknown.
func ToolHeaders(props SchemaProps) (map[string][]string, bool) {
	out := map[string][]string{}
	var walk func(props SchemaProps, prefix []string) bool
	walk = func(props SchemaProps, prefix []string) bool {
		for name, prop := range props {
			path := append(append([]string(nil), prefix...), name)
			if raw := bytes.TrimSpace(prop.Header); len(raw) > 0 && !bytes.Equal(raw, []byte("null")) {
				var h string
				if json.Unmarshal(raw, &h) != nil || !ValidHeaderName(h) {
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

// ValidHeaderName reports whether h is an HTTP field name (RFC 9110 token) of at most 200 bytes.
func ValidHeaderName(h string) bool {
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

// ParamHeaderNames are the Mcp-Param-* headers of a request, canonical.
func ParamHeaderNames(h http.Header) []string {
	var out []string
	for k := range h {
		if ck := http.CanonicalHeaderKey(k); strings.HasPrefix(ck, wire.HeaderParamPrefix) {
			out = append(out, ck)
		}
	}
	return out
}

// LookupPath is the argument at path in args (nested objects), nil when absent.
func LookupPath(args map[string]json.RawMessage, path []string) json.RawMessage {
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

// HeaderForm are the ways an Mcp-Param header writes the argument raw (a string as is, a
// number as written or in its shortest form, a boolean as true/false); ok is false for an
// absent, null or structured argument, which no header copies.
func HeaderForm(raw json.RawMessage) (map[string]bool, bool) {
	raw = bytes.TrimSpace(raw)
	if len(raw) == 0 || raw[0] == '{' || raw[0] == '[' || bytes.Equal(raw, []byte("null")) {
		return nil, false
	}
	out := ArgumentValues(raw)
	return out, len(out) > 0
}
